"""`gymsmith check`: passes on ops, fails readably on a nondeterministic environment and a gameable checker."""

import subprocess
import sys

from gymsmith.audit import check_family, check_history
from gymsmith.store import TrajectoryStore


def test_check_passes_on_ops_from_the_command_line(tmp_path):
    db = tmp_path / "c.db"
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "check", "ops", "--size", "30", "--store", str(db)],
                         capture_output=True, text=True, timeout=600, env={"PATH": "/usr/bin:/bin", "COLUMNS": "250"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout and "FAIL" not in out.stdout
    history = check_history(TrajectoryStore(db), "ops")
    assert len(history) >= 10 and all(h["passed"] for h in history)
    assert {"oracle accepted on every task", "same seeded rollout twice is identical",
            "reset restores the pristine state", "greedy reward falls with difficulty"} <= {h["name"] for h in history}


def test_check_fails_on_nondeterminism_with_a_diff(plugin_env, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", plugin_env["PYTHONPATH"])
    outcomes = {o.name: o for o in check_family("nondetfam", store=TrajectoryStore(tmp_path / "n.db"), size=4,
                                                determinism_tasks=2)}
    det = outcomes["same seeded rollout twice is identical"]
    assert not det.passed
    assert "first difference at line 0" in det.detail and "nonce" in det.detail


def test_check_fails_on_a_gameable_checker(plugin_env, tmp_path, monkeypatch):
    """plugfam's checks accept anything: null is accepted, and check must say so."""
    monkeypatch.setenv("PYTHONPATH", plugin_env["PYTHONPATH"])
    store = TrajectoryStore(tmp_path / "g.db")
    outcomes = {o.name: o for o in check_family("plugfam", store=store, size=4, determinism_tasks=1)}
    assert not outcomes["null never accepted"].passed
    assert outcomes["null never accepted"].detail.startswith("4/4 accepted")
    assert outcomes["same seeded rollout twice is identical"].passed
    assert any(not h["passed"] for h in check_history(store, "plugfam"))
