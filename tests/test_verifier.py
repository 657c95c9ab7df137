"""The verifier service: a separate process; crashes, hangs and exceptions are errors, never a reward of 0."""

import os
import subprocess
import sys

import pytest

from gymsmith.core import RolloutStatus, Split, VerifierError
from gymsmith.registry import get_family
from gymsmith.runner import run_rollout
from gymsmith.verifier import VerifierService


def _rollout(family, task, verifier):
    return run_rollout(env=family.make_env(), agent=family.agents()["null"](), task=task, split=Split.TRAIN, seed=0,
                       run_id="v", verifier=verifier, policy="shaped_gated", max_steps=5, time_limit_s=30)


def test_checks_run_in_another_process(plugin_env):
    fam = get_family("plugfam")
    with VerifierService(env=plugin_env) as v:
        t = _rollout(fam, fam.generate(1, mode="ok"), v)
        assert t.status is RolloutStatus.COMPLETED and t.reward.accepted and t.reward.value == 1.0
        pids = v.pids()
        assert len(pids) == 1 and pids[0] != os.getpid()


def test_start_brings_the_workers_up_before_the_first_verification(plugin_env):
    fam = get_family("plugfam")
    with VerifierService(workers=2, env=plugin_env) as v:
        assert v.pids() == []  # lazy by default
        started = v.start().pids()
        assert len(started) == 2 and os.getpid() not in started
        assert v.start().pids() == started  # idempotent: no extra processes
        t = _rollout(fam, fam.generate(1, mode="ok"), v)
        assert t.reward.value == 1.0 and v.pids() == started  # the verification used a started worker


@pytest.mark.parametrize("mode, message", [
    ("crash", "verifier process died (exit code 3)"),
    ("hang", "verifier timed out after 2 s"),
    ("raise", "checks raised: RuntimeError: checks exploded"),
])
def test_verifier_failures_are_recorded_as_errors(plugin_env, mode, message):
    fam = get_family("plugfam")
    with VerifierService(env=plugin_env, timeout_s=2) as v:
        t = _rollout(fam, fam.generate(1, mode=mode), v)
        assert t.status is RolloutStatus.ERROR
        assert t.reward is None  # not a reward of 0
        assert message in t.error
        # the service recovers: the next verification gets a fresh worker
        ok = _rollout(fam, fam.generate(2, mode="ok"), v)
        assert ok.status is RolloutStatus.COMPLETED and ok.reward.value == 1.0


def test_a_state_whose_verification_spends_the_verifiers_cpu_is_the_agents_failure(plugin_env):
    """A final state that keeps the checks computing (here: a loop; in the wild, a pattern that backtracks over a
    long comment, a hundred-and-twenty-third attacker's) ran the verifier into its wall limit: an infrastructure
    error, which has no reward and is retried or dropped, so the agent escaped its score. Once the worker has spent
    the service's CPU budget on the state, the state is the agent's failure: a rejected reward of 0, ungradable. A
    worker that waits without computing (hang) is still the machine's problem, and the pool goes on."""
    import time

    fam = get_family("plugfam")
    with VerifierService(env=plugin_env, timeout_s=30, cpu_budget_s=1.5) as v:
        began = time.monotonic()
        t = _rollout(fam, fam.generate(1, mode="spin"), v)
        assert t.status is RolloutStatus.COMPLETED and t.reward is not None, t.error
        assert t.reward.value == 0.0 and not t.reward.accepted and "verifier's own CPU" in (t.reward.ungradable or "")
        assert time.monotonic() - began < 25  # caught by its CPU, well before the wall limit
        ok = _rollout(fam, fam.generate(2, mode="ok"), v)  # its worker was replaced
        assert ok.reward.value == 1.0
    with VerifierService(env=plugin_env, timeout_s=3, cpu_budget_s=1.5) as v:
        t = _rollout(fam, fam.generate(1, mode="hang"), v)
        assert t.status is RolloutStatus.ERROR and t.reward is None and "timed out" in t.error


def test_missing_final_state_and_bad_policy(ops, tmp_path):
    from gymsmith.envs import FinalState

    with VerifierService() as v:
        with pytest.raises(VerifierError, match="does not exist"):
            v.verify(ops.generate(1), FinalState(kind="sqlite", path=str(tmp_path / "nope"), digest="x"))
        with pytest.raises(ValueError, match="unknown reward policy"):
            v.verify(ops.generate(1), FinalState(kind="sqlite", path=str(tmp_path), digest="x"), policy="generous")


def test_agent_side_never_imports_the_hidden_checks():
    """A full ops rollout in a fresh interpreter: the checks module is loaded only in the verifier process."""
    code = (
        "import sys\n"
        "from gymsmith.registry import get_family\n"
        "from gymsmith.runner import run_rollout\n"
        "from gymsmith.core import Split\n"
        "from gymsmith.verifier import VerifierService\n"
        "f = get_family('ops'); t = f.generate(4, difficulty=0.6)\n"
        "with VerifierService() as v:\n"
        "    r = run_rollout(env=f.make_env(), agent=f.agents()['greedy'](), task=t, split=Split.TRAIN, seed=0, run_id='x',"
        " verifier=v, policy='sparse', max_steps=300, time_limit_s=60)\n"
        "assert r.reward is not None, r.error\n"
        "print(sorted(m for m in sys.modules if m.endswith('.checks')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("mode, status, attempts_noted", [("flaky", RolloutStatus.COMPLETED, False),
                                                            ("crash", RolloutStatus.ERROR, True)])
def test_runner_retries_infrastructure_errors_once(plugin_env, tmp_path, monkeypatch, mode, status, attempts_noted):
    """A verifier that crashes once is retried and the rollout completes; one that always crashes is stored
    once, as an error, with the attempts counted — never lost, never duplicated."""
    from gymsmith.registry import TaskSetSpec
    from gymsmith.runner import RunConfig, run
    from gymsmith.store import TrajectoryStore

    markers = tmp_path / "markers"
    markers.mkdir()
    monkeypatch.setenv("PYTHONPATH", plugin_env["PYTHONPATH"])
    monkeypatch.setenv("PLUGFAM_MARKERS", str(markers))
    store = TrajectoryStore(tmp_path / "r.db")
    config = RunConfig(run_id="retry", agents=["null"], concurrency=1,
                       taskset=TaskSetSpec(family="plugfam", count=3, split="train", knobs={"mode": mode}))
    out = run(config, store)
    assert [t.status for t in out] == [status] * 3
    assert all(("after 2 attempts" in (t.error or "")) is attempts_noted for t in out)
    assert len(store.rollout_rows(["retry"])) == 3


def test_prepare_warms_every_worker_and_never_changes_a_verdict(ops, tmp_path):
    """`prepare` moves a task's cold start (its pristine database, its cheapest roster) out of the first
    verification; what any verification returns must be the same with or without it, and a task that cannot be
    prepared is counted and logged, not raised."""
    from gymsmith.families.ops.oracle import OpsOracle

    class Witness(OpsOracle):  # half of the witness, then submit: a partial, dense-rewarded state
        name = "half-witness"

        def reset(self, task, observation, *, seed):
            super().reset(task, observation, seed=seed)
            self.plan = self.plan[:max(1, (len(self.plan) - 1) // 2)] + self.plan[-1:]

    tasks = [ops.generate(seed, kind=kind) for seed, kind in ((3, "staff"), (4, "fulfil"), (5, "resource"))]
    env = ops.make_env()
    rewards = {}
    for prepared in (False, True):
        with VerifierService(workers=2) as v:
            if prepared:
                assert v.prepare(tasks) == 0
            rewards[prepared] = [run_rollout(env=env, agent=agent, task=t, split=Split.TRAIN, seed=0, run_id="p",
                                             verifier=v, policy="progress_gated", max_steps=60, time_limit_s=60).reward
                                 for t in tasks for agent in (Witness(), ops.agents()["null"]())]
    env.close()
    assert [r.model_dump() for r in rewards[True]] == [r.model_dump() for r in rewards[False]]
    assert any(0 < r.value < 1 for r in rewards[True])  # the comparison covers a partial reward, not only 0 and 1
    stale = tasks[0].model_copy(update={"family_version": "0.0.1"})
    with VerifierService() as v:
        assert v.prepare([stale, tasks[1]]) == 1  # the stale one; the other is prepared
        v.prepare_later(tasks[2])
    assert v.pids() == []  # closed with a preparation queued: no worker left behind
