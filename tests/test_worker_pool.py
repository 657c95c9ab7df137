"""The local worker pool: workers store their own rollouts, a task's rollouts go to one worker together, and a
run need not hold its trajectories in memory; a worker that dies is replaced and costs no rollout. Real forked
workers, real verifier processes, real SQLite."""

import os
import signal
import time

import pytest

from gymsmith.registry import TaskSetSpec, build_taskset, register_family, reload_families
from gymsmith.runner import RunConfig, run
from gymsmith.runner.local import RolloutOutcome, task_chunks
from gymsmith.runner.process_pool import WorkerFailure
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


def _worker_pids() -> list[int]:
    """This process's forked children (the pool's workers share its command line; verifier processes are
    their children, not ours)."""
    me = os.getpid()
    with open(f"/proc/{me}/cmdline", "rb") as f:
        mine = f.read()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                same = f.read() == mine
        except (FileNotFoundError, ProcessLookupError):
            continue
        if ppid == me and same:
            pids.append(int(entry))
    return pids


def test_a_worker_killed_mid_run_is_replaced_and_nothing_is_lost_or_duplicated(tmp_path):
    store = TrajectoryStore(tmp_path / "k.db")
    killed, deaths, later = [], [], []

    def kill_one_after_a_few(done, total, item):
        if done >= 10 and not killed:
            killed.append(_worker_pids()[0])
            os.kill(killed[0], signal.SIGKILL)
        if done >= 60 and not later:
            later.extend(_worker_pids())

    config = RunConfig(run_id="killed", taskset=TaskSetSpec(family="ops", count=30, base_seed=21), agents=AGENTS,
                       concurrency=2, batch=3)
    out = run(config, store, progress=kill_one_after_a_few, on_worker_death=lambda *k: deaths.append(k))
    assert killed and len(deaths) == 1 and deaths[0][3] == 1  # the rollout it was running: charged once
    rows = store.rollout_rows(["killed"])
    keys = [(r["task_id"], r["agent"], r["seed"]) for r in rows]
    assert len(keys) == 90 and len(set(keys)) == 90 and len(out) == 90
    assert all(r["status"] != "error" for r in rows), [r["error"] for r in rows if r["status"] == "error"]
    assert len(later) == 2 and killed[0] not in later  # replaced: two workers again, the dead one not among them


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_a_rollout_that_kills_its_worker_twice_is_stored_once_as_an_error(plugin_path, tmp_path, monkeypatch, kind):
    """Batches of [null, crash, random] per task: null is stored before crash kills the worker; null is not
    run again, crash is charged and retried once, then recorded; random (never started) runs uncharged.
    With an in-memory store the workers cannot write: batches are single rollouts, the parent stores them."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")])))
    store = TrajectoryStore(tmp_path / "c.db" if kind == "file" else "sqlite://")
    config = RunConfig(run_id="crash", taskset=TaskSetSpec(family="plugfam", count=2), agents=["null", "crash", "random"],
                       concurrency=2, batch=3)
    deaths, died_at = [], {}
    out = run(config, store, on_worker_death=lambda *k: (deaths.append(k), died_at.setdefault(k[0], time.time())))
    rows = store.rollout_rows(["crash"])
    assert len(rows) == 6 and len({(r["task_id"], r["agent"]) for r in rows}) == 6 and len(out) == 6
    for r in rows:
        if r["agent"] == "crash":
            assert r["status"] == "error" and r["reward"] is None
            assert "worker died 2 times during this rollout: worker process" in r["error"] and "exit code 9" in r["error"]
            assert r["error_kind"] == "worker_lost"
        else:
            assert r["status"] == "completed", r["error"]
    assert {a for _, a, _, _ in deaths} == {"crash"} and sorted(n for *_, n in deaths) == [1, 1, 2, 2]
    nulls = [t for t in out if t.agent == "null"]
    assert len(nulls) == 2
    if kind == "file":  # one batch [null, crash, random] per worker: null ends before crash starts. In memory,
        # each rollout is its own batch, so null may run beside crash on the other worker and end after its death
        assert all(t.finished_at < died_at[t.task_id] for t in nulls)


def test_a_worker_that_raises_outside_a_rollout_fails_the_run_with_its_traceback(plugin_path, tmp_path):
    import plugfam

    class Broken(plugfam.PluginFamily):
        name = "brokenfam"

        def make_env(self):
            raise RuntimeError("make_env exploded")

    register_family(Broken())
    try:
        config = RunConfig(run_id="b", taskset=TaskSetSpec(family="brokenfam", count=3), agents=["null"], concurrency=2)
        with pytest.raises(WorkerFailure, match="make_env exploded"):
            run(config, TrajectoryStore(tmp_path / "b.db"))
    finally:
        reload_families()
    assert _worker_pids() == []  # stopped, not left behind
