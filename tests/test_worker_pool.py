"""The local worker pool: workers store their own rollouts, a task's rollouts go to one worker together, and a
run need not hold its trajectories in memory. Real forked workers, real verifier processes, real SQLite."""

import pytest

from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.runner.local import RolloutOutcome, task_chunks
from gymsmith.store import TrajectoryStore

SPEC = TaskSetSpec(family="ops", count=6, base_seed=21)
AGENTS = ["oracle", "greedy", "null"]


def _config(run_id, **kw):
    return RunConfig(run_id=run_id, taskset=SPEC, agents=AGENTS, **{"concurrency": 2, **kw})


def _key(t):
    return t.task_id, t.agent, t.seed


def test_task_chunks_keep_a_tasks_rollouts_together_in_order():
    tasks = build_taskset(SPEC)[:3]
    work = [(t, a, s) for t in tasks for a in ["x", "y", "z"] for s in range(3)]
    chunks = task_chunks(work, size=4)
    assert [len(items) for _, items in chunks] == [4, 4, 1] * 3
    flat = [(task, a, s) for task, items in chunks for a, s in items]
    assert flat == work  # every rollout exactly once, in the planned order
    with pytest.raises(ValueError, match="size"):
        task_chunks(work, size=0)


def test_workers_store_what_the_in_process_runner_stores(tmp_path):
    store = TrajectoryStore(tmp_path / "w.db")
    here = run(_config("here", concurrency=1, processes=False), store)
    pooled = run(_config("pool"), store)
    assert len(pooled) == len(here) == 18
    assert {_key(t): (t.reward.value, t.final_state_hash, len(t.steps)) for t in pooled} == \
           {_key(t): (t.reward.value, t.final_state_hash, len(t.steps)) for t in here}
    for t in pooled:  # written by the worker, identical to what it returned
        assert store.trajectory(t.rollout_id).model_dump() == t.model_dump()


@pytest.mark.parametrize("processes", [False, True])
def test_collect_false_keeps_nothing_in_memory_and_reports_outcomes(tmp_path, processes):
    store = TrajectoryStore(tmp_path / "c.db")
    seen = []
    out = run(_config("nc", processes=processes), store, collect=False,
              progress=lambda done, total, item: seen.append((done, total, item)))
    assert out == []
    assert seen[0] == (0, 18, None) and [d for d, _, _ in seen] == list(range(19))
    outcomes = [item for _, _, item in seen[1:]]
    assert all(isinstance(o, RolloutOutcome) for o in outcomes)
    rows = {r["rollout_id"]: r for r in store.rollout_rows(["nc"])}
    assert len(rows) == 18 and {o.rollout_id for o in outcomes} == set(rows)
    for o in outcomes:
        assert o.reward.value == rows[o.rollout_id]["reward"] and o.status.value == rows[o.rollout_id]["status"]


def test_an_in_memory_store_is_written_by_the_parent(tmp_path):
    """Workers cannot open an in-memory SQLite store; the parent writes what they return."""
    store = TrajectoryStore("sqlite://")
    assert store.shared_location is None
    out = run(_config("mem"), store, collect=False)
    assert out == [] and len(store.rollout_rows(["mem"])) == 18
    assert TrajectoryStore(tmp_path / "f.db").shared_location.startswith("sqlite:///")
