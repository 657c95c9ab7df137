"""The async rollout engine (issue 17 item 1) against a real OpenAI-compatible endpoint over real HTTP on loopback
(`agents.fake_endpoint`, its own process: no model can run here, so it plays scripted tool calls after a fixed
latency). Its barrier holds the first calls until that many wait at once, so "M rollouts in flight" is shown by
the run getting past it, not by timing anything."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

from gymsmith.agents.fake_endpoint import FakeEndpoint
from gymsmith.agents.model import ModelAgentConfig
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore


def _model(endpoint: FakeEndpoint, **over) -> ModelAgentConfig:
    return ModelAgentConfig(**{**dict(base_url=endpoint.base_url, model="fake", api_key_env=None), **over})


def test_many_rollouts_in_flight_each_stored_once(tmp_path):
    m = 96
    with FakeEndpoint(latency_s=0.2, calls=2, barrier=m) as endpoint:
        config = RunConfig(run_id="many", taskset=TaskSetSpec(family="ops", count=m // 4), agents=["model"], seeds=4,
                           model=_model(endpoint), max_in_flight=m, concurrency=1)
        assert config.uses_engine()
        store = TrajectoryStore(tmp_path / "e.db")
        out = run(config, store)
        stats = endpoint.stats()
    assert stats["barrier_passed"] and stats["peak"] >= m  # all m rollouts waited on the model at once
    assert stats["requests"] == m * 3  # 2 tool calls and submit each, none repeated
    rows = store.rollout_rows(["many"])
    assert len(rows) == len({r["rollout_id"] for r in rows}) == m
    assert {(r["task_id"], r["seed"]) for r in rows} == {(t.task_id, t.seed) for t in out}
    assert all(r["status"] == "completed" and r["reward"] is not None for r in rows)
    stored = store.trajectory(out[0].rollout_id)
    assert [s.action.tool for s in stored.steps] == ["get_status", "get_status", "submit"]
    assert all(s.agent_info["latency_ms"] >= 200 for s in stored.steps)


def test_timeouts_per_call_and_per_rollout_are_stored_with_reasons(tmp_path):
    """A reply that never arrives within the call's timeout while the endpoint answers a one-token request at once
    (the fake endpoint answers tool-less requests without its latency) is the policy's slow generation: the agent's
    failure, reward 0. A rollout cut off by its own deadline, each call in time, is an error naming the limit."""
    store = TrajectoryStore(tmp_path / "t.db")
    with FakeEndpoint(latency_s=2.0, calls=2) as endpoint:  # every reply takes longer than the call timeout
        per_call = RunConfig(run_id="call", taskset=TaskSetSpec(family="ops", count=3), agents=["model"], retries=0,
                             model=_model(endpoint, timeout_s=0.2, max_retries=1, backoff_s=0.01))
        run(per_call, store)
    with FakeEndpoint(latency_s=0.3, calls=50) as endpoint:  # each call in time, the rollout not
        per_rollout = RunConfig(run_id="rollout", taskset=TaskSetSpec(family="ops", count=3), agents=["model"],
                                retries=0, model=_model(endpoint), rollout_timeout_s=1.0)
        run(per_rollout, store)
    calls = store.rollout_rows(["call"])
    assert len(calls) == 3 and all(r["status"] == "truncated" and r["end_reason"] == "agent_failure" and
                                   r["reward"] == 0.0 for r in calls)
    # the fake endpoint answers every request without tools alike, so it is no seeded sampler (`ModelAgent._seeded`):
    # the first timeout is the conversation's at once, not retried
    assert all("ReadTimeout" in r["end_detail"] and "while it answered a one-token request" in r["end_detail"]
               and "a retry would be a fresh sample" in r["end_detail"] for r in calls)
    rollouts = store.rollout_rows(["rollout"])
    assert len(rollouts) == 3 and all(r["status"] == "error" and r["reward"] is None for r in rollouts)
    assert all(r["error"].startswith("rollout timed out: not finished after 1 s") and r["error_kind"] == "rollout_timeout"
               for r in rollouts)


def _stored(db) -> list[tuple[str, str, int, int, int]]:
    """(rollout id, status, n_steps, steps stored, reward components stored) of every stored rollout."""
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT r.rollout_id, r.status, r.n_steps, "
                            "(SELECT COUNT(*) FROM steps s WHERE s.rollout_id = r.rollout_id), "
                            "(SELECT COUNT(*) FROM reward_components c WHERE c.rollout_id = r.rollout_id) "
                            "FROM rollouts r").fetchall()


def test_ctrl_c_with_500_in_flight_then_resume_loses_and_duplicates_nothing(tmp_path):
    """`gymsmith run` in a subprocess, SIGINT mid-run (500 are in flight: the endpoint's barrier is past, and it has
    answered every rollout's first call, so none has submitted yet), then the same command again."""
    n, db = 500, tmp_path / "c.db"
    with FakeEndpoint(latency_s=0.2, calls=2, barrier=n) as endpoint:
        command = [sys.executable, "-m", "gymsmith.cli", "run", "ops", "--count", "25", "--seeds", str(n // 25),
                   "--agents", "model", "--model-url", endpoint.base_url, "--model-name", "fake", "--model-key-env", "",
                   "--max-in-flight", str(n), "--store", str(db), "--run-id", "cc"]
        env = {**os.environ, "COLUMNS": "200"}
        # Ctrl-C's default handling, whatever this process inherited: a shell runs background jobs with SIGINT
        # ignored, and so would the child be (CI run with `&` failed here with exit 0)
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:
            stats = endpoint.stats()
            if stats["barrier_passed"] and stats["requests"] >= n:
                break
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read()[-2000:]
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
        assert proc.returncode != 0
        interrupted = _stored(db)
        assert len(interrupted) < n, len(interrupted)  # stopped part-way
        assert all(status == "completed" and n_steps == steps == 3 and components > 0
                   for _, status, n_steps, steps, components in interrupted)  # nothing half-written, no error stored
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
    final = _stored(db)
    assert len(final) == len({r[0] for r in final}) == n
    assert {r[0] for r in interrupted} <= {r[0] for r in final}
    assert all(status == "completed" and n_steps == steps == 3 and components > 0
               for _, status, n_steps, steps, components in final)




def test_gymsmith_run_engine_flags(tmp_path):
    """`--engine async` runs scripted agents in the engine too (on the loop: ops steps do not block); a bad
    --engine is one line and exit 2."""
    db = str(tmp_path / "f.db")
    base = [sys.executable, "-m", "gymsmith.cli", "run", "ops", "--count", "3", "--agents", "oracle,null", "--store", db]
    env = {**os.environ, "COLUMNS": "200"}
    done = subprocess.run(base + ["--engine", "async", "--max-in-flight", "4", "--run-id", "f"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = TrajectoryStore(db).rollout_rows(["f"])
    assert sorted((r["agent"], r["status"]) for r in rows) == [("null", "completed")] * 3 + [("oracle", "completed")] * 3
    assert all(r["accepted"] == (r["agent"] == "oracle") for r in rows)
    bad = subprocess.run(base + ["--engine", "threads"], capture_output=True, text=True, timeout=300, env=env)
    assert bad.returncode == 2 and bad.stderr.strip() == "error: --engine 'threads': expected auto, async or pool"


def test_blocking_environment_steps_run_off_the_loop_side_by_side(plugin_path, tmp_path, monkeypatch):
    """A family whose steps block (`blocking_steps = True`): every reset waits at a barrier for 8 resets at once.
    On the event loop the first would hold it (the barrier breaks after 60 s: 8 infrastructure errors); on
    threads of their own all 8 pass. The plug-in family is registered again under its name, so the verifier
    process (which loads the installed plug-in) scores it as usual."""
    import threading

    import plugfam

    from gymsmith.registry import register_family, reload_families

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(plugin_path), os.environ.get("PYTHONPATH")])))
    barrier = threading.Barrier(8, timeout=60)

    class WaitingEnv(plugfam.Env):
        def _reset(self, task, seed):
            barrier.wait()
            return super()._reset(task, seed)

    class Blocking(plugfam.PluginFamily):
        blocking_steps = True

        def make_env(self):
            return WaitingEnv()

    register_family(Blocking())
    try:
        config = RunConfig(run_id="block", taskset=TaskSetSpec(family="plugfam", count=2), agents=["null"], seeds=4,
                           engine="async", max_in_flight=8)
        store = TrajectoryStore(tmp_path / "b.db")
        run(config, store)
    finally:
        reload_families()
    rows = store.rollout_rows(["block"])
    assert len(rows) == 8 and all(r["status"] == "completed" for r in rows), [r["error"] for r in rows][:2]


def test_the_default_in_flight_leaves_room_for_every_rollout_to_reach_its_records_bound(monkeypatch, caplog):
    """What one rollout may hold is bounded (`max_record_mib`); the engine's default in-flight count is sized so that
    every rollout in flight reaching it still fits in three quarters of the memory available, and an explicit count
    that could not is warned of."""
    from gymsmith.runner import async_engine

    monkeypatch.setattr(async_engine, "available_memory", lambda: 8 << 30)
    assert [async_engine.default_max_in_flight("ops", mib << 20) for mib in (1, 16, 64)] == [512, 384, 96]
    config = RunConfig(run_id="w", taskset=TaskSetSpec(family="ops", count=1), agents=["random"], max_record_mib=64)
    with caplog.at_level("WARNING", logger="gymsmith.runner.async_engine"):
        async_engine.AsyncEngine(config).close()
        assert not caplog.records
        async_engine.AsyncEngine(config, max_in_flight=200).close()
    assert "could hold 12.5 GiB, more than the 8.0 GiB available" in caplog.text
