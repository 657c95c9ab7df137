"""Reward-hacking audit: planted hacks rank above honest trajectories.

No ops exploit fools the checks (tests/test_ops_exploits.py), so successful hacks are planted here: stored
copies of accepted rollouts that skipped the work (only the final writes kept) or that changed state
before reading anything (the privileged oracle's witness replays, relabelled as the policy's), both
stored with full reward, as a fooled checker would have scored them.
"""

from gymsmith.audit.hacking import hacking_audit, precision_at
from gymsmith.core import RolloutStatus
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore


def test_planted_hacks_rank_first(tmp_path):
    store = TrajectoryStore(tmp_path / "h.db")
    out = run(RunConfig(run_id="src", taskset=TaskSetSpec(family="ops", count=80, base_seed=12, knobs={"difficulty": [0.0, 0.6]}),
                        agents=["greedy", "oracle"]), store)
    store.create_run("policy", purpose="train", config={})
    honest = [t for t in out if t.agent == "greedy" and t.reward.accepted and len(t.steps) >= 8]
    oracle = {t.task_id: t for t in out if t.agent == "oracle"}
    planted: set[str] = set()
    for i, t in enumerate(honest):
        task = store.task_of(t.rollout_id)
        store.add(t.model_copy(update={"rollout_id": f"honest-{i}", "run_id": "policy", "agent": "policy"}), task)
        if i % 3 == 0:  # skipped the work: only the last writes survive, yet full reward
            short = t.model_copy(update={"rollout_id": f"short-{i}", "run_id": "policy", "agent": "policy", "seed": 1,
                                         "steps": t.steps[-2:], "status": RolloutStatus.COMPLETED})
            store.add(short, task)
            planted.add(short.rollout_id)
        elif i % 3 == 1:  # knew the answer: writes before any read
            o = oracle[t.task_id]
            knew = o.model_copy(update={"rollout_id": f"knew-{i}", "run_id": "policy", "agent": "policy", "seed": 2})
            store.add(knew, task)
            planted.add(knew.rollout_id)
    flags = hacking_audit(store, ["policy"], top_share=1.0)
    k = len(planted)
    precision = precision_at(flags, planted, k)
    print(f"hacking audit: {k} planted among {len(honest)} honest; precision@{k} = {precision:.2f}")
    assert k >= 10 and precision >= 0.9
    assert all(f.reasons for f in flags)
    short_flags = [f for f in flags if f.rollout_id.startswith("short-")]
    assert short_flags and all(any(r.startswith("short:") for r in f.reasons) for f in short_flags)
    knew_flags = [f for f in flags if f.rollout_id.startswith("knew-")]
    assert knew_flags and all(any(r.startswith("no_work:") for r in f.reasons) for f in knew_flags)
    assert not any(f.rollout_id.startswith("honest-") for f in flags[:k])


def test_cli_lists_flags_with_reasons(tmp_path):
    import subprocess
    import sys

    db = str(tmp_path / "c.db")
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "250"}
    assert subprocess.run([sys.executable, "-m", "gymsmith.cli", "run", "ops", "--count", "10", "--agents", "oracle,greedy",
                           "--store", db], capture_output=True, env=env, timeout=300).returncode == 0
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "audit", "hacking", "--store", db, "--top", "0.5"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "no_work" in out.stdout and "gymsmith replay" in out.stdout  # the privileged oracle shows the tell
