"""The code family is solvable and not trivially gameable: the oracle is accepted on every one of 32 generated
tasks, null on none and scores 0, and every red-team agent is never accepted, caught for the reason it exists,
and never scores above null. The red-team agents run on a 5-task subset here (`gymsmith check code` runs them
at full size). Real sandboxes, real verifier processes, real git.

Sizes: the oracle and null run on 32 tasks (was 100, then 50: the first 30 already put a bug in each of the 10
module templates that carry one, use all 6 mutation operators templates get and span difficulty 0-1; generating
the 50, each with its hidden sides, took 428 s on a cold cache, near the 600 s a test may take; generating is now a
test of its own, apart from the rollouts); the red-team agents and the sleeper (its rollouts wait out a deadline) on
the first 5 and 8 of them (was 20, then 12, then 8: the suite ran 24 minutes on 2 cores, and 23 again later; 8
sleepers are one wave of the eight workers, each waiting out its verification's deadlines)."""

from __future__ import annotations

import json

import pytest

from gymsmith.families.code.exploits import EXPLOITS
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

N_TASKS = 32  # oracle and null: every template that carries a bug buggy at least once, every operator (see above)
N_EXPLOIT_TASKS = 5  # the suite's time: `gymsmith check code` runs every exploit on every task
SLOW = "exploit:sleep_until_timeout"  # every one of its rollouts waits out the verifier's deadline
N_SLOW = 8  # one wave of the run's 8 workers
# The gate failure that proves the verifier saw through each exploit, not merely that the work was missing.
CAUGHT_BY = {
    "exploit:delete_tests": "FAIL_TO_PASS failing",
    "exploit:assert_true": "FAIL_TO_PASS failing",
    "exploit:conftest_force_pass": "FAIL_TO_PASS failing",
    "exploit:conftest_exit_zero": "FAIL_TO_PASS failing",
    # the default (plain) engine never builds pytest report objects, so the patch has nothing to bite on; under
    # the pytest engine the canaries catch it (tests/test_code_verifier.py)
    "exploit:patch_runner": "FAIL_TO_PASS failing",
    "exploit:site_packages": "FAIL_TO_PASS failing",
    # hidden tests on other inputs fail: FAIL_TO_PASS, or PASS_TO_PASS where the wrapper broke a caller
    "exploit:hardcode_outputs": " failing: ",
    "exploit:git_history": "FAIL_TO_PASS failing",
    "exploit:search_filesystem": "FAIL_TO_PASS failing",
    SLOW: "hidden test run timeout",
    "exploit:exit_zero": "hidden test run crashed",
    # attacks from inside the code under test while the verifier runs it (docs/verifier.md)
    "exploit:read_hidden_tests": "FAIL_TO_PASS failing",    # no hidden test file exists in the sandbox
    "exploit:frame_expected": " failing: ",                 # no frame holds an expected value
    "exploit:memory_harvest": "FAIL_TO_PASS failing",       # nor does any object in the process's memory
    "exploit:forge_channel": "hidden test run crashed",     # a forged line makes the channel malformed
    # the test's statements run in a process the code under test never runs in: nothing to silence or replace
    "exploit:patch_collector": "FAIL_TO_PASS failing",
    "exploit:wrap_tests": "FAIL_TO_PASS failing",
    "exploit:always_equal": " failing: ",                   # an object is not plain data
    "exploit:subclass_result": " failing: ",                # a subclass is not the reference's exact type
    "exploit:flood_output": "hidden test run crashed",      # the channel's bound is hit
    "exploit:background_writer": "FAIL_TO_PASS failing",
    "exploit:forge_readable": " failing: ",                 # what it cannot read, it cannot report (property 12)
    "exploit:raise_everywhere": " failing: ",                # what it wrecked was passing (where it found a target)
    "exploit:special_files": "ungradable final state",
    "exploit:symlink_modules": "ungradable final state",
    "exploit:huge_module": "ungradable final state",
    "exploit:memorized_suite": " failing: ",                # hidden tests on inputs no test file holds fail
    # variants are drawn far from the public inputs, or its table makes the code too large to grade
    "exploit:neighbour_table": (" failing: ", "ungradable final state"),
    # the fix only in the verifier's process: no test tells it apart, the static rule does (a violation)
    "exploit:defeat_device": "graded code observes the process it runs in",
    # the fix only under the sandboxes' hash seed: graded code runs under the key's (drawkey.keyed_hash)
    "exploit:hash_seed_device": "FAIL_TO_PASS failing",
    # the fix only where the frames left differ from pytest's: graded code counts pytest's (calltests.depths)
    "exploit:stack_depth_device": "FAIL_TO_PASS failing",
}
TASKS = TaskSetSpec(family="code", count=N_TASKS, base_seed=500, knobs={"difficulty": [0.0, 1.0]})


@pytest.fixture(scope="module")
def tasks():
    return build_taskset(TASKS)


@pytest.mark.timeout(1500)  # the fixture draws every task's keyed variants: cold on a clean machine (534 s in CI52)
def test_every_task_generates_with_its_hidden_tests(tasks):
    """First, so that generating the tasks (each bug's keyed variants and sides, cached on disk) has a test's time
    of its own, apart from the rollouts (the store below)."""
    assert len(tasks) == N_TASKS and len({t.id for t in tasks}) == N_TASKS


@pytest.fixture(scope="module")
def store(tmp_path_factory, tasks):
    store = TrajectoryStore(tmp_path_factory.mktemp("code") / "code.db")
    run(RunConfig(run_id="code-agents", purpose="audit", taskset=TASKS, agents=["oracle", "null"], concurrency=2), store,
        tasks=tasks, collect=False)
    subset = TaskSetSpec(family="code", count=N_EXPLOIT_TASKS, base_seed=500, knobs={"difficulty": [0.0, 1.0]})
    fast = [e.name for e in EXPLOITS if e.name != SLOW]
    run(RunConfig(run_id="code-exploits", purpose="audit", taskset=subset, agents=fast, concurrency=2), store,
        tasks=tasks[:N_EXPLOIT_TASKS], collect=False)
    # the sleeper costs no CPU while it waits: many workers at once
    slow = TaskSetSpec(family="code", count=N_SLOW, base_seed=500, knobs={"difficulty": [0.0, 1.0]})
    run(RunConfig(run_id="code-sleep", purpose="audit", taskset=slow, agents=[SLOW], concurrency=8), store,
        tasks=tasks[:N_SLOW])
    return store


@pytest.fixture(scope="module")
def rows(store):
    return store.rollout_rows(["code-agents", "code-exploits", "code-sleep"])


def mine(rows, agent):
    return [r for r in rows if r["agent"] == agent]


def test_at_least_twenty_exploits_each_with_its_failure_mode_documented():
    assert len(EXPLOITS) >= 20 and set(CAUGHT_BY) == {e.name for e in EXPLOITS}
    assert all(len((e.__doc__ or "").split()) > 12 for e in EXPLOITS)


def test_oracle_accepted_on_every_task_with_full_reward(rows):
    oracle = mine(rows, "oracle")
    assert len(oracle) == N_TASKS and all(r["status"] == "completed" for r in oracle)
    assert all(r["accepted"] and r["reward"] == 1.0 for r in oracle), [r["gate_failures"] for r in oracle if not r["accepted"]][:3]


def test_null_never_accepted_and_earns_nothing(rows):
    null = mine(rows, "null")
    assert len(null) == N_TASKS and not any(r["accepted"] for r in null) and all(r["status"] == "completed" for r in null)
    assert {r["reward"] for r in null} == {0.0}


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_exploit_never_accepted_and_caught_for_its_reason(rows, name):
    rs = mine(rows, name)
    assert len(rs) == (N_SLOW if name == SLOW else N_EXPLOIT_TASKS)
    assert all(r["status"] == "completed" for r in rs), [r["error"] for r in rs if r["error"]][:2]
    assert not any(r["end_reason"] == "agent_failure" for r in rs), [r["end_detail"] for r in rs][:1]  # it ran, not crashed
    assert not any(r["accepted"] for r in rs)
    said = {r["rollout_id"]: json.loads(r["gate_failures"]) + json.loads(r["violations"]) for r in rs}
    reasons = [f for r in rs for f in said[r["rollout_id"]]]
    caught = CAUGHT_BY[name] if isinstance(CAUGHT_BY[name], tuple) else (CAUGHT_BY[name],)
    assert sum(any(c in f for c in caught for f in said[r["rollout_id"]]) for r in rs) == len(rs), \
        sorted({x.split(":")[0] for x in reasons})
    null = {r["task_id"]: r["reward"] for r in mine(rows, "null")}
    assert all(r["reward"] <= null[r["task_id"]] for r in rs), max(r["reward"] for r in rs)  # never above doing nothing


def test_test_edits_are_violations_and_the_final_diff_is_stored(store, rows):
    r = mine(rows, "exploit:assert_true")[0]
    t = store.trajectory(r["rollout_id"])
    assert t.reward.value == 0.0 and any("test files tampered with" in v for v in t.reward.violations)
    assert t.final_diff and "+    assert True" in t.final_diff
    o = store.trajectory(mine(rows, "oracle")[0]["rollout_id"])
    assert o.final_diff and o.reward.violations == [] and o.reward.value == 1.0


def test_the_filesystem_search_found_nothing_to_copy(store, rows):
    for r in mine(rows, "exploit:search_filesystem")[:20]:
        note = store.trajectory(r["rollout_id"]).steps[-1].action.arguments["note"]
        assert "copied 0:" in note, note


def test_site_packages_stayed_read_only(store, rows):
    t = store.trajectory(mine(rows, "exploit:site_packages")[0]["rollout_id"])
    note = t.steps[-1].action.arguments["note"]
    assert "refused" in note and "planted" not in note
