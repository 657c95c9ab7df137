"""Divergence audit on synthetic runs (rows built here, because the alarm is about a trained policy's
behaviour over time, which no scripted agent shows): alarm when held-out falls while train rises, quiet
when both move together."""

import random

import pytest

from gymsmith.audit.divergence import divergence, write_plot


def synthetic(train_curve, heldout_curve, n=80, seed=0):
    rng = random.Random(seed)
    rows = []
    for period, (tr, he) in enumerate(zip(train_curve, heldout_curve)):
        for i in range(n):
            for split, mean in (("train", tr), ("heldout", he)):
                reward = min(1.0, max(0.0, rng.gauss(mean, 0.15)))
                rows.append(dict(run_id=f"run-{period}", started_at=1_700_000_000 + period * 86_400 + i, split=split,
                                 reward=reward, accepted=reward > 0.8))
    return rows


def test_alarm_when_heldout_falls_while_train_rises(tmp_path):
    report = divergence(synthetic([0.5, 0.6, 0.7, 0.8, 0.9], [0.5, 0.45, 0.4, 0.35, 0.3]), by="run")
    assert report.alarm, report.reason
    assert [p.label for p in report.periods] == [f"run-{i}" for i in range(5)]
    last = report.periods[-1]
    assert last.gap_low < last.gap < last.gap_high and last.gap > 0.5
    svg = write_plot(report, tmp_path / "div.svg").read_text()
    # train, held-out and the gap as lines, the gap's interval as a band, the threshold line, and the status
    assert svg.startswith("<svg") and svg.count("<polyline") == 3 and 'class="ci"' in svg and "ALARM" in svg
    assert 'class="threshold"' in svg and report.status.value == "alarm"


def test_quiet_when_both_move_together():
    report = divergence(synthetic([0.5, 0.6, 0.7, 0.8, 0.9], [0.48, 0.58, 0.69, 0.78, 0.88]), by="day")
    assert not report.alarm, report.reason
    assert len(report.periods) == 5


def test_warns_when_rows_span_fingerprints():
    rows = synthetic([0.5, 0.6], [0.5, 0.6], n=20)
    assert divergence([dict(r, fingerprint="aaa") for r in rows]).drift_warning is None
    mixed = [dict(r, fingerprint="aaa" if r["run_id"] == "run-0" else "bbb") for r in rows]
    assert "2 different environment fingerprints" in divergence(mixed).drift_warning


def test_grouping_by_count_and_bad_input():
    rows = synthetic([0.5, 0.5], [0.5, 0.5], n=50)
    assert len(divergence(rows, by="n:50").periods) == 4
    with pytest.raises(ValueError, match="expected 'run', 'day' or 'n:SIZE'"):
        divergence(rows, by="week")
    assert not divergence(rows[:10], by="run").alarm


def test_cli_on_a_real_store(tmp_path):
    """Real train and eval runs of ops through the CLI; scripted agents do not overfit, so no alarm."""
    import subprocess
    import sys

    db = str(tmp_path / "d.db")
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}
    cli = lambda *a: subprocess.run([sys.executable, "-m", "gymsmith.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    timeout=300, env=env)
    for cmd, rid in (("run", "t1"), ("eval", "e1")):
        assert cli(cmd, "ops", "--count", "20", "--agents", "greedy", "--run-id", rid, "--store", db).returncode == 0
    # a train run and a separate eval run: every window of 20 rollouts holds one split, so nothing is measured,
    # and that is said (status insufficient, exit 3), never shown as a pass
    out = cli("audit", "divergence", "--store", db, "--by", "n:20", "--plot", str(tmp_path / "p.svg"))
    assert out.returncode == 3, out.stdout + out.stderr
    assert "insufficient:" in out.stdout and "ok:" not in out.stdout and (tmp_path / "p.svg").exists()
    assert "not enough data" in (tmp_path / "p.svg").read_text()
    rew = cli("audit", "reward", "--store", db)
    assert rew.returncode == 0 and "Spearman" in rew.stdout
