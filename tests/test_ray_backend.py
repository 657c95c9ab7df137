"""The Ray backend on a real local Ray instance (2 CPUs): same rewards as the local runner; a worker killed
mid-run loses no rollout and duplicates none."""

import os
import signal
import threading

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


def test_same_rewards_as_the_local_runner(ray_cluster, tmp_path):
    store = TrajectoryStore(tmp_path / "r.db")
    local = run(_config("local"), store)
    remote = run_on_ray(_config("ray"), store)
    key = lambda t: (t.task_id, t.agent, t.seed)  # noqa: E731
    assert len(remote) == len(local) == 36
    assert {key(t): (t.reward.value, t.final_state_hash) for t in remote} == \
           {key(t): (t.reward.value, t.final_state_hash) for t in local}


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


def test_a_rollout_that_kills_every_worker_is_stored_once_as_an_error(ray_cluster, tmp_path):
    store = TrajectoryStore(tmp_path / "c.db")
    config = RunConfig(run_id="crash", taskset=TaskSetSpec(family="plugfam", count=2), agents=["crash"], concurrency=2)
    deaths = []
    out = run_on_ray(config, store, on_actor_death=lambda *k: deaths.append(k))
    rows = store.rollout_rows(["crash"])
    assert len(rows) == 2 and len({r["task_id"] for r in rows}) == 2
    assert all(r["status"] == "error" and "ray worker died 2 times" in r["error"] and r["reward"] is None for r in rows)
    assert sorted(n for *_, n in deaths) == [1, 1, 2, 2]  # retried once each, then recorded
    assert len(out) == 2
