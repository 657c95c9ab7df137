"""The Ray backend on a real local Ray instance (2 CPUs): same rewards as the local runner; a worker killed
mid-run loses no rollout and duplicates none."""

import os
import signal
import threading
import time
import warnings

import pytest

from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.runner.ray_backend import RayRunner, run_on_ray
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
    assert all(r["status"] == "error" and "worker died 2 times during this rollout: Ray actor lost" in r["error"] and r["reward"] is None for r in rows)
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
from gymsmith.runner.ray_backend import RayRunner, run_on_ray
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


def _gone(pid: int, within_s: float = 30.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_a_runner_keeps_its_actors_across_runs_and_families(ray_cluster, tmp_path):
    """The same two actor processes serve an ops run, a run of another family and an ops run again, with the
    local runner's rewards; closing the runner stops them."""
    store = TrajectoryStore(tmp_path / "p.db")
    seen: list[list[int]] = []
    key = lambda t: (t.task_id, t.agent, t.seed, t.reward.value, t.final_state_hash)  # noqa: E731
    with RayRunner() as runner:
        first = runner.run(_config("p1", count=6), store, on_actor_pids=seen.append)
        other = runner.run(RunConfig(run_id="p2", taskset=TaskSetSpec(family="plugfam", count=3), agents=["null"],
                                     concurrency=2), store, on_actor_pids=seen.append)
        again = runner.run(_config("p3", count=6), store, on_actor_pids=seen.append)
        pids = runner.pids()
    assert len(first) == len(again) == 18 and len(other) == 3
    assert seen[0] == seen[1] == seen[2] == pids and len(set(pids)) == 2
    local = run(_config("p-local", count=6), store)
    assert sorted(map(key, again)) == sorted(map(key, local)) == sorted(map(key, first))
    assert all(_gone(pid) for pid in pids)


def test_a_runner_replaces_an_actor_that_died_between_runs(ray_cluster, tmp_path):
    store = TrajectoryStore(tmp_path / "d.db")
    with RayRunner() as runner:
        runner.run(_config("d1", count=4), store)
        before = runner.pids()
        os.kill(before[0], signal.SIGKILL)
        assert _gone(before[0])
        out = runner.run(_config("d2", count=4), store, collect=False)
        after = runner.pids()
    assert out == [] and len(store.rollout_rows(["d2"])) == 12
    assert all(r["status"] != "error" for r in store.rollout_rows(["d2"]))
    assert after[1] == before[1] and after[0] != before[0]


def test_a_run_waiting_for_cpus_says_so_and_goes_on_once_they_are_free(ray_cluster, tmp_path, monkeypatch):
    """Another runner holds both CPUs: the run warns that its actor is not up and why, then completes once
    the other runner closes."""
    from gymsmith.runner import ray_backend

    monkeypatch.setattr(ray_backend, "SLOW_START_S", 1.0)
    store = TrajectoryStore(tmp_path / "w.db")
    holder = RayRunner().start(2)
    holder.pids()  # both of the cluster's CPUs are taken
    threading.Timer(4.0, holder.close).start()
    config = RunConfig(run_id="wait", taskset=TaskSetSpec(family="ops", count=2, base_seed=4), agents=["oracle"],
                       concurrency=1)
    with RayRunner() as waiting:
        with pytest.warns(RuntimeWarning, match=r"1 of 1 actor\(s\) not up after 1 s; .* cluster has 0 free"):
            out = waiting.run(config, store)
    assert len(out) == 2 and all(t.reward.value == 1.0 for t in out)


class _Signalled(Exception):
    pass


def _raise_signalled(signum, frame):
    raise _Signalled(signum)


def test_a_run_waiting_on_actors_gives_way_to_signals(ray_cluster, tmp_path):
    """Ray's waits block in C, where no signal handler runs: a run waiting for actors that cannot start must
    still let a signal through (Ctrl-C, SIGTERM, a test's timeout) rather than hang its caller until the CPUs
    are free. The holder frees them after 60 s, so a run that does not give way completes and the test fails."""
    store = TrajectoryStore(tmp_path / "s.db")
    holder = RayRunner().start(2)
    holder.pids()  # both of the cluster's CPUs are taken
    release = threading.Timer(60.0, holder.close)
    release.start()
    previous = signal.signal(signal.SIGUSR1, _raise_signalled)
    poke = threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGUSR1))
    config = RunConfig(run_id="sig", taskset=TaskSetSpec(family="ops", count=2, base_seed=4), agents=["oracle"],
                       concurrency=1)
    waiting = RayRunner()
    try:
        poke.start()
        with pytest.raises(_Signalled), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # "not up after ...": not what this test is about
            waiting.run(config, store)
    finally:
        poke.cancel()
        signal.signal(signal.SIGUSR1, previous)
        release.cancel()
        holder.close()  # first: the waiting runner's actor can then start, take its close call and stop
        waiting.close()
    assert store.rollout_rows(["sig"]) == []


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_one_engine_per_actor_holds_many_rollouts_in_flight(ray_cluster, tmp_path, kind):
    """A model-agent run on Ray goes to one async engine per actor: 2 actors hold 40 rollouts in flight at once
    (the fake endpoint's barrier of 40 is passed: with a rollout at a time per actor it never would be, and every
    call would time out after 300 s), and each rollout is stored once."""
    from gymsmith.agents.fake_endpoint import FakeEndpoint
    from gymsmith.agents.model import ModelAgentConfig

    with FakeEndpoint(latency_s=0.1, calls=2, barrier=40) as endpoint:
        config = RunConfig(run_id="engine", taskset=TaskSetSpec(family="ops", count=10, base_seed=4), agents=["model"],
                           seeds=4, concurrency=2, max_in_flight=40, retries=0,
                           model=ModelAgentConfig(base_url=endpoint.base_url, model="fake", api_key_env=None,
                                                  timeout_s=300, max_retries=0))
        store = _store(kind, tmp_path, "e")
        out = run_on_ray(config, store)
        stats = endpoint.stats()
    assert stats["barrier_passed"] and stats["peak"] >= 40 and stats["requests"] == 40 * 3
    rows = store.rollout_rows(["engine"])
    assert len(rows) == len({r["rollout_id"] for r in rows}) == len(out) == 40
    assert all(r["status"] == "completed" for r in rows)
