"""The Ray backend on a real local Ray instance (2 CPUs): same rewards as the local runner; a worker killed
mid-run loses no rollout and duplicates none."""

import os
import signal
import threading
import time

import pytest

from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.runner.ray_backend import run_on_ray
from gymsmith.store import TrajectoryStore

import ray  # noqa: E402 - the ray extra is installed by make setup


@pytest.fixture(scope="module")
def ray_cluster(plugin_path):
    # the local cluster's workers inherit this environment, so they can import the test plug-in family
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")]))
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _config(run_id, count=12):
    return RunConfig(run_id=run_id, taskset=TaskSetSpec(family="ops", count=count, base_seed=4),
                     agents=["oracle", "greedy", "random"], concurrency=2)


def _store(kind, tmp_path, name):
    """"file": the actors write into it themselves; "memory": they cannot reach it, the driver writes."""
    return TrajectoryStore(tmp_path / f"{name}.db" if kind == "file" else "sqlite://")


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_same_rewards_as_the_local_runner(ray_cluster, tmp_path, kind):
    store = _store(kind, tmp_path, "r")
    local = run(_config("local"), store)
    remote = run_on_ray(_config("ray"), store)
    key = lambda t: (t.task_id, t.agent, t.seed)  # noqa: E731
    assert len(remote) == len(local) == 36
    assert {key(t): (t.reward.value, t.final_state_hash) for t in remote} == \
           {key(t): (t.reward.value, t.final_state_hash) for t in local}
    assert len(store.rollout_rows(["ray"])) == 36


def test_killed_worker_loses_and_duplicates_nothing(ray_cluster, tmp_path):
    store = TrajectoryStore(tmp_path / "k.db")
    pids: list[int] = []
    killed = threading.Event()

    def kill_one_after_a_few(done, total, trajectory):
        if done >= 10 and not killed.is_set():
            killed.set()
            os.kill(pids[0], signal.SIGKILL)

    deaths = []
    config = _config("killed", count=40)
    out = run_on_ray(config, store, progress=kill_one_after_a_few, on_actor_pids=pids.extend,
                     on_actor_death=lambda *k: deaths.append(k))
    assert killed.is_set()
    assert deaths and all(n == 1 for *_, n in deaths)  # the dead actor's rollouts, each retried once
    rows = store.rollout_rows(["killed"])
    keys = [(r["task_id"], r["agent"], r["seed"]) for r in rows]
    assert len(keys) == 120 and len(set(keys)) == 120
    assert len(out) == 120
    # the rollouts that were in flight on the dead actor were retried on a fresh one and completed
    assert all(r["status"] != "error" for r in rows), [r["error"] for r in rows if r["status"] == "error"]


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_a_rollout_that_kills_every_worker_is_stored_once_as_an_error(ray_cluster, tmp_path, kind):
    store = _store(kind, tmp_path, "c")
    config = RunConfig(run_id="crash", taskset=TaskSetSpec(family="plugfam", count=2), agents=["crash"], concurrency=2)
    deaths = []
    out = run_on_ray(config, store, on_actor_death=lambda *k: deaths.append(k))
    rows = store.rollout_rows(["crash"])
    assert len(rows) == 2 and len({r["task_id"] for r in rows}) == 2
    assert all(r["status"] == "error" and "ray worker died 2 times" in r["error"] and r["reward"] is None for r in rows)
    assert sorted(n for *_, n in deaths) == [1, 1, 2, 2]  # retried once each, then recorded
    assert len(out) == 2


def test_an_actor_dying_mid_batch_keeps_what_it_stored_and_reruns_only_the_rest(ray_cluster, tmp_path):
    """Batches of [null, crash, random] per task: null is stored before crash kills the actor; null must not be
    run again, crash is charged and retried once, random (never started) runs without being charged."""
    store = TrajectoryStore(tmp_path / "b.db")
    config = RunConfig(run_id="batch", taskset=TaskSetSpec(family="plugfam", count=2), agents=["null", "crash", "random"],
                       concurrency=2, batch=3)
    deaths, died_at = [], {}
    out = run_on_ray(config, store, on_actor_death=lambda *k: (deaths.append(k), died_at.setdefault(k[0], time.time())))
    rows = store.rollout_rows(["batch"])
    assert len(rows) == 6 and len({(r["task_id"], r["agent"]) for r in rows}) == 6 and len(out) == 6
    status = {(r["task_id"], r["agent"]): r["status"] for r in rows}
    assert all(s == "error" for (_, a), s in status.items() if a == "crash")
    assert all(s == "completed" for (_, a), s in status.items() if a != "crash")
    assert {a for _, a, _, _ in deaths} == {"crash"} and sorted(n for *_, n in deaths) == [1, 1, 2, 2]
    nulls = [t for t in out if t.agent == "null"]  # the ones stored before the death, not a second run
    assert len(nulls) == 2 and all(t.finished_at < died_at[t.task_id] for t in nulls)


def test_a_refused_config_starts_no_cluster(tmp_path):
    """Split policy and unknown agents are refused before Ray is started (checked in a fresh interpreter)."""
    import subprocess
    import sys

    code = f"""
import ray
from gymsmith.core import SplitPolicyError
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig
from gymsmith.runner.ray_backend import run_on_ray
from gymsmith.store import TrajectoryStore
store = TrajectoryStore({str(tmp_path / "x.db")!r})
bad = [RunConfig(run_id="a", taskset=TaskSetSpec(family="ops", count=2, split="heldout"), agents=["oracle"]),
       RunConfig(run_id="b", taskset=TaskSetSpec(family="ops", count=2), agents=["nobody"])]
for config, error in zip(bad, (SplitPolicyError, ValueError)):
    try:
        run_on_ray(config, store)
    except error as exc:
        print(type(exc).__name__, ray.is_initialized())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["SplitPolicyError", "False", "ValueError", "False"], out.stderr[-2000:]
