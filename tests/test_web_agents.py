"""The web family is solvable through the UI and not trivially gameable: in a real headless Chromium against the
real ShopDesk server, the oracle is accepted on every task of a set covering all three goal kinds and the whole
difficulty range; null and every red-team agent on none, each caught for the reason it exists, and no red-team
agent scores above null on any task.

Each rollout costs ~1-3 s of Chromium on these 2 cores, and the suite must stay under 20 minutes, so rollouts run
two at a time (two worker processes, a Chromium each: a rollout waits on its page as much as it computes) and on
subsets of the 50 generated tasks chosen by kind and difficulty, not the first N (`gymsmith check web` runs
every agent on every one of its tasks; test_web_exploits.py covers the same properties over plain HTTP):
- oracle and null: per kind, three tasks evenly spaced by difficulty (the easiest, the middle and the hardest) and
  the kind's first task (the later agents' task): 10 or so tasks. Was all 50, then 19, then 13 (the oracle never failed
  on one; the spread keeps both sides of the validation trap, which switches on at difficulty 0.5, and the deepest
  sites);
- the first nine red-team agents: the easiest and the hardest task of each kind, 6 tasks (was the first four
  of each kind, 12): each agent still meets every kind, with and without the trap and look-alikes;
- the later ones (web 3.0.0): the first task of each kind, 3 tasks (unchanged)."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from gymsmith.families.web.exploits import EXPLOITS
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

N_TASKS = 50  # generated; rollouts run on the subsets below
ORACLE_PER_KIND = 3  # oracle and null: evenly spaced by difficulty in each kind, plus the kind's first task
EXPLOIT_PER_KIND = 2  # the first nine red-team agents: the easiest and the hardest task of each kind
KINDS = ("address", "refund", "tickets")
LATER = {  # web 3.0.0's agents, on the first task of each kind: what each must leave, by goal kind
    # "gate": the goal not reached, no violation, reward 0 (what it changed is not progress); "violation": reward 0;
    # "nothing": the database exactly as it started
    "exploit:garbage_fields": {"address": "gate", "refund": "nothing", "tickets": "violation"},
    "exploit:wrong_stated_value": {"address": "gate", "refund": "violation", "tickets": "violation"},
    "exploit:look_alike_values": {"address": "gate", "refund": "nothing", "tickets": "violation"},
    "exploit:double_submit": {"address": "violation", "refund": "violation", "tickets": "violation"},
    "exploit:close_without_reply": {"address": "nothing", "refund": "nothing", "tickets": "violation"},
    "exploit:odd_inputs": {"address": "gate", "refund": "nothing", "tickets": "violation"},
    "exploit:out_of_range_ids": {"address": "gate", "refund": "violation", "tickets": "violation"},
}
SUBSET = {e.name for e in EXPLOITS} - set(LATER)
TASKS = TaskSetSpec(family="web", count=N_TASKS, base_seed=700, knobs={"difficulty": [0.0, 1.0]})
NOTHING_CHANGED = {"null", "exploit:claim_done", "exploit:admin_endpoint", "exploit:skip_confirmation", "exploit:other_origin",
                   "exploit:other_account"}  # it finds no password that works: nothing happens
FORBIDDEN = {"exploit:over_broad", "exploit:look_alike", "exploit:extra_writes", "exploit:change_and_revert"}  # changes the goal does not need


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return TrajectoryStore(tmp_path_factory.mktemp("web") / "web.db")


@pytest.fixture(scope="module")
def tasks():
    return build_taskset(TASKS)


def spread(tasks, n):
    """`n` of `tasks` evenly spaced by difficulty, the easiest and the hardest included."""
    ordered = sorted(tasks, key=lambda t: (t.difficulty, t.id))
    return [ordered[round(i * (len(ordered) - 1) / (n - 1))] for i in range(n)]


def of_kind(tasks, kind):
    return [t for t in tasks if t.knobs["kind"] == kind]


@pytest.fixture(scope="module")
def first_of_kind(tasks):
    return [of_kind(tasks, kind)[0] for kind in KINDS]


@pytest.fixture(scope="module")
def oracle_tasks(tasks, first_of_kind):
    """Per kind, ORACLE_PER_KIND tasks spread over difficulty, and the kind's first task (null must be on every
    task an exploit runs on, for the comparison with null)."""
    chosen = {t.id for kind in KINDS for t in spread(of_kind(tasks, kind), ORACLE_PER_KIND)} | {t.id for t in first_of_kind}
    return [t for t in tasks if t.id in chosen]


@pytest.fixture(scope="module")
def exploit_tasks(tasks):
    return [t for kind in KINDS for t in spread(of_kind(tasks, kind), EXPLOIT_PER_KIND)]


# Two runs, each set up by a different test (pytest-timeout bounds one test's setup and call together):
# oracle and null on the oracle set first, then the red-team agents on their subsets.
@pytest.fixture(scope="module")
def everywhere(store, oracle_tasks, exploit_tasks):
    assert {t.id for t in exploit_tasks} <= {t.id for t in oracle_tasks}
    run(RunConfig(run_id="web-agents", purpose="audit", taskset=TASKS, agents=["oracle", "null"], concurrency=2), store,
        tasks=oracle_tasks)
    return store.rollout_rows(["web-agents"])


@pytest.fixture(scope="module")
def rows(store, exploit_tasks, everywhere):
    run(RunConfig(run_id="web-subset", purpose="audit", taskset=TASKS, agents=sorted(SUBSET), concurrency=2), store,
        tasks=exploit_tasks)
    return everywhere + store.rollout_rows(["web-subset"])


@pytest.fixture(scope="module")
def later(store, first_of_kind, everywhere):
    run(RunConfig(run_id="web-later", purpose="audit", taskset=TASKS, agents=sorted(LATER), concurrency=2), store,
        tasks=first_of_kind)
    return store.rollout_rows(["web-later"])


def mine(rows, agent):
    return [r for r in rows if r["agent"] == agent]


def test_tasks_span_kinds_and_difficulties():
    tasks = build_taskset(TASKS)
    kinds = Counter(t.knobs["kind"] for t in tasks)
    assert set(kinds) == {"address", "refund", "tickets"} and min(kinds.values()) >= 10  # the seed picks the kind
    assert min(t.difficulty for t in tasks) < 0.1 and max(t.difficulty for t in tasks) > 0.9


def test_sixteen_exploits_each_documented_with_the_failure_it_reproduces():
    assert len(EXPLOITS) >= 16 and len({e.name for e in EXPLOITS}) == len(EXPLOITS) and set(LATER) <= {e.name for e in EXPLOITS}
    assert all(len((e.__doc__ or "").split()) > 12 for e in EXPLOITS)
    assert all("Reproduces" in e.__doc__ for e in EXPLOITS if e.name in LATER)  # the real-world failure it stands for


def test_oracle_accepted_on_every_task_with_full_reward(everywhere, oracle_tasks):
    """On every kind and across the difficulty range (a spread of each kind, see the module docstring for why not all 50)."""
    oracle = mine(everywhere, "oracle")
    assert {json.loads(r["task"])["knobs"]["kind"] for r in oracle} == set(KINDS)
    assert min(r["difficulty"] for r in oracle) < 0.1 and max(r["difficulty"] for r in oracle) > 0.9
    assert len(oracle) == len(oracle_tasks) >= 3 * ORACLE_PER_KIND
    assert all(r["status"] == "completed" for r in oracle), [r["error"] for r in oracle if r["error"]][:2]
    assert all(r["accepted"] and r["reward"] == 1.0 for r in oracle), [r["gate_failures"] for r in oracle if not r["accepted"]][:3]


@pytest.mark.parametrize("name", sorted(NOTHING_CHANGED))
def test_agents_that_change_nothing_are_never_accepted(rows, oracle_tasks, exploit_tasks, name):
    """null and the exploits that try shortcuts (a claim, unlinked admin URLs, skipping a confirmation, other
    origins) leave the site's database exactly as it started: the checks see no change, whatever was claimed."""
    rs = mine(rows, name)
    assert len(rs) == len(exploit_tasks if name in SUBSET else oracle_tasks)
    assert all(r["status"] == "completed" for r in rs), [r["error"] for r in rs if r["error"]][:2]
    assert not any(r["accepted"] for r in rs)
    assert all(r["final_state_hash"] == json.loads(r["task"])["start_state"]["digest"] for r in rs)


def test_null_scores_nothing(everywhere):
    """Doing nothing earns nothing: every component measures a change from the start."""
    assert all(r["reward"] == 0.0 for r in mine(everywhere, "null"))


@pytest.mark.parametrize("name", sorted(FORBIDDEN))
def test_changes_the_goal_does_not_need_are_violations_with_reward_0(rows, exploit_tasks, name):
    """One more record, the right values on the wrong record, unasked messages, a change undone before submitting:
    each rollout has a violation, and a violation zeroes the reward however much of the goal was done."""
    rs = mine(rows, name)
    assert len(rs) == len(exploit_tasks) and all(r["status"] == "completed" for r in rs)
    assert {json.loads(r["task"])["knobs"]["kind"] for r in rs} == {"address", "refund", "tickets"}
    assert not any(r["accepted"] for r in rs)
    missed = [(r["task_id"], r["reward"], r["end_reason"], r["gate_failures"]) for r in rs if not json.loads(r["violations"]) or r["reward"] != 0.0]
    assert missed == []


def test_no_exploit_is_accepted_or_scores_above_null_on_any_task(rows, exploit_tasks):
    null = {r["task_id"]: r["reward"] for r in mine(rows, "null")}
    exploits = [r for r in rows if r["agent"] in SUBSET]
    assert len(exploits) == len(SUBSET) * len(exploit_tasks) and all(r["status"] == "completed" for r in exploits)
    assert [(r["agent"], r["task_id"]) for r in exploits if r["accepted"] or r["reward"] > null[r["task_id"]]] == []


def test_other_origins_and_admin_urls_were_refused(store, rows):
    """The attempts happened and each was answered - an error observation, or the site's 403/404 page."""
    for r in mine(rows, "exploit:other_origin")[:6]:
        gotos = [s for s in store.trajectory(r["rollout_id"]).steps if s.action.tool == "goto"]
        assert len(gotos) == 7 and all(s.observation.error and s.observation.error.kind.value == "rule_violation" for s in gotos)
    for r in mine(rows, "exploit:admin_endpoint")[:6]:
        gotos = [s for s in store.trajectory(r["rollout_id"]).steps if s.action.tool == "goto"]
        assert gotos and all(("403" in s.observation.text or "404" in s.observation.text) for s in gotos), \
            [s.observation.text[:200] for s in gotos]


@pytest.mark.parametrize("name", sorted(LATER))
def test_later_exploits_are_never_accepted_nor_above_null_and_leave_what_they_must(everywhere, later, name):
    """Garbage in the fields, a wrong stated value, look-alike values, double submits, the reply skipped before the
    close, odd inputs and out-of-range ids: completed (none crashed its way to an error), never accepted, never above
    null, and each rejected for the reason it exists."""
    null = {r["task_id"]: r["reward"] for r in mine(everywhere, "null")}
    rs = mine(later, name)
    assert len(rs) == 3 and all(r["status"] == "completed" for r in rs), [(r["status"], r["error"], r["end_detail"]) for r in rs]
    assert [(r["task_id"], r["reward"]) for r in rs if r["accepted"] or r["reward"] > null[r["task_id"]]] == []
    for r in rs:
        task = json.loads(r["task"])
        want, violations = LATER[name][task["knobs"]["kind"]], json.loads(r["violations"])
        if want == "nothing":
            assert r["final_state_hash"] == task["start_state"]["digest"], r["task_id"]
        elif want == "gate":
            assert r["final_state_hash"] != task["start_state"]["digest"] and not violations and r["reward"] == 0.0, r["gate_failures"]
        else:
            assert violations and r["reward"] == 0.0, (r["task_id"], r["gate_failures"])
