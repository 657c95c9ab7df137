"""The code family is solvable and not trivially gameable: the oracle is accepted on every one of 200 generated
tasks, null and every red-team agent on none, each caught for the reason it exists. Real sandboxes, real
verifier processes, real git."""

from __future__ import annotations

import json

import pytest

from gymsmith.families.code.exploits import EXPLOITS
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

N_TASKS = 200
SLOW = "exploit:sleep_until_timeout"  # every one of its rollouts waits out the verifier's deadline
N_SLOW = 24
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
}
TASKS = TaskSetSpec(family="code", count=N_TASKS, base_seed=500, knobs={"difficulty": [0.0, 1.0]})


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = TrajectoryStore(tmp_path_factory.mktemp("code") / "code.db")
    tasks = build_taskset(TASKS)
    fast = ["oracle", "null", *[e.name for e in EXPLOITS if e.name != SLOW]]
    run(RunConfig(run_id="code-agents", purpose="audit", taskset=TASKS, agents=fast, concurrency=2), store, tasks=tasks, collect=False)
    # the sleeper costs no CPU while it waits: many workers at once
    slow = TaskSetSpec(family="code", count=N_SLOW, base_seed=500, knobs={"difficulty": [0.0, 1.0]})
    run(RunConfig(run_id="code-sleep", purpose="audit", taskset=slow, agents=[SLOW], concurrency=8), store,
        tasks=tasks[:N_SLOW])
    return store


@pytest.fixture(scope="module")
def rows(store):
    return store.rollout_rows(["code-agents", "code-sleep"])


def mine(rows, agent):
    return [r for r in rows if r["agent"] == agent]


def test_at_least_eight_exploits_each_with_its_failure_mode_documented():
    assert len(EXPLOITS) >= 8 and set(CAUGHT_BY) == {e.name for e in EXPLOITS}
    assert all(len((e.__doc__ or "").split()) > 12 for e in EXPLOITS)


def test_oracle_accepted_on_every_task_with_full_reward(rows):
    oracle = mine(rows, "oracle")
    assert len(oracle) == N_TASKS and all(r["status"] == "completed" for r in oracle)
    assert all(r["accepted"] and r["reward"] == 1.0 for r in oracle), [r["gate_failures"] for r in oracle if not r["accepted"]][:3]


def test_null_never_accepted(rows):
    null = mine(rows, "null")
    assert len(null) == N_TASKS and not any(r["accepted"] for r in null) and all(r["status"] == "completed" for r in null)


@pytest.mark.parametrize("name", sorted(CAUGHT_BY))
def test_exploit_never_accepted_and_caught_for_its_reason(rows, name):
    rs = mine(rows, name)
    assert len(rs) == (N_SLOW if name == SLOW else N_TASKS)
    assert all(r["status"] == "completed" for r in rs), [r["error"] for r in rs if r["error"]][:2]
    assert not any(r["accepted"] for r in rs)
    reasons = [f for r in rs for f in json.loads(r["gate_failures"])]
    assert sum(any(CAUGHT_BY[name] in f for f in json.loads(r["gate_failures"])) for r in rs) == len(rs), \
        sorted({x.split(":")[0] for x in reasons})
    assert max(r["reward"] for r in rs) <= 0.5


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
