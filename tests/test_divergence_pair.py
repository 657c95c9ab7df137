"""Train vs held-out in one run (issue 16, item 5): `gymsmith run --with-heldout` and `gymsmith eval --pair` put both
splits in one run id; `gymsmith audit divergence` measures one family and one agent at a time and says plainly when
it cannot measure; the report plots the gap and leaves privileged agents out of the reward-hacking ranking."""

import json
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from gymsmith.audit.divergence import MixedRowsError, Status, divergence, divergence_groups, exit_code, plot_svg
from gymsmith.audit.hacking import hacking_audit, is_privileged
from gymsmith.cli import app
from gymsmith.core import SplitPolicyError
from gymsmith.registry import TaskSetSpec, build_taskset, split_of
from gymsmith.report.full import write_report
from gymsmith.runner import RunConfig, check_split_policy, run
from gymsmith.runner.local import check_given_tasks
from gymsmith.store import TrajectoryStore

ENV = {"PATH": "/usr/bin:/bin", "COLUMNS": "200"}


def cli(*args):
    """The CLI in this process (fast); the README path below runs it as a real subprocess."""
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200"})


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A store with: `pair`, made as the README shows (a real subprocess); `trainonly`, a training run of greedy
    and oracle without held-out tasks; `check-ops-1`, a run like the ones `gymsmith check` makes (purpose audit)."""
    path = tmp_path_factory.mktemp("pair") / "p.db"
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "run", "ops", "--count", "6", "--with-heldout", "6",
                          "--agents", "greedy", "--run-id", "pair", "--concurrency", "1", "--store", str(path)],
                         capture_output=True, text=True, env=ENV, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    store = TrajectoryStore(path)
    run(RunConfig(run_id="trainonly", taskset=TaskSetSpec(family="ops", count=8, base_seed=3), agents=["greedy", "oracle"],
                  concurrency=1), store, collect=False)
    run(RunConfig(run_id="check-ops-1", purpose="audit", taskset=TaskSetSpec(family="ops", count=6, split="all", base_seed=5),
                  agents=["greedy"], concurrency=1), store, collect=False)
    return path


def test_with_heldout_runs_real_heldout_tasks_of_the_same_task_set(db):
    rows = TrajectoryStore(db).rollout_rows(["pair"])
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "heldout"]
    assert len(train) == 6 and len(held) == 6
    assert {r["agent"] for r in rows} == {"greedy"} and {r["family"] for r in rows} == {"ops"}
    assert all(split_of(r["task_id"]).value == r["split"] for r in rows)  # the stored split is the task's real split
    assert not {r["task_id"] for r in train} & {r["task_id"] for r in held}
    # exactly the held-out tasks of the same task set (family, knobs, base seed) that `gymsmith eval` would run
    expected = build_taskset(TaskSetSpec(family="ops", count=6, split="heldout"))
    assert sorted(r["task_id"] for r in held) == sorted(t.id for t in expected)


def test_readme_path_prints_a_divergence_line_with_both_splits(db):
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "audit", "divergence", "--run", "pair", "--store", str(db)],
                         capture_output=True, text=True, env=ENV, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("one_period: ops / greedy, pair:"))
    m = re.search(r"train ([\d.]+) \(n=6\), held-out ([\d.]+) \(n=6\), gap ([-+][\d.]+) \(95% CI ([-+][\d.]+)\.\.([-+][\d.]+)\)", line)
    assert m, line
    rows = TrajectoryStore(db).rollout_rows(["pair"])
    mean = lambda split: sum(r["reward"] for r in rows if r["split"] == split) / 6  # noqa: E731
    train, held, gap, low, high = map(float, m.groups())
    assert abs(train - mean("train")) < 6e-4 and abs(held - mean("heldout")) < 6e-4
    assert abs(gap - (mean("train") - mean("heldout"))) < 1.2e-3 and low <= gap <= high
    assert "ok:" not in out.stdout  # one period: a gap, but no trend to call ok


def test_json_carries_the_status_and_check_runs_are_left_out(db):
    out = cli("audit", "divergence", "--store", db, "--json", "--agent", "greedy")
    body = json.loads(out.stdout)
    [report] = body["reports"]
    assert report["status"] == "one_period" and report["family"] == "ops" and report["agent"] == "greedy"
    assert [p["label"] for p in report["periods"]] == ["pair", "trainonly"]  # not check-ops-1
    assert body["left_out_check_runs"] == ["check-ops-1"]
    assert out.exit_code == 0
    asked = json.loads(cli("audit", "divergence", "--store", db, "--json", "--agent", "greedy", "--include-checks").stdout)
    assert "check-ops-1" in [p["label"] for p in asked["reports"][0]["periods"]]


def test_one_split_only_is_insufficient_never_ok(db):
    out = cli("audit", "divergence", "--store", db, "--run", "trainonly")
    assert out.exit_code == 3, out.stdout
    assert "insufficient: ops / greedy: only train rollouts (8)" in out.stdout
    assert "insufficient: ops / oracle" in out.stdout
    assert not re.search(r"^ok", out.stdout, re.M)
    report = divergence(TrajectoryStore(db).rollout_rows(["trainonly"]), agent="greedy")
    assert report.status is Status.INSUFFICIENT and not report.alarm and "--with-heldout" in report.reason
    assert exit_code([report]) == 3
    nothing = divergence_groups([], family="web")
    assert nothing[0].status is Status.INSUFFICIENT and "no rollouts of family 'web'" in nothing[0].reason


def test_mixed_families_are_refused_or_measured_apart():
    def rows(family, agent, fingerprint, heldout_shift=0.0):
        return [dict(run_id=f"r-{family}", started_at=1_700_000_000 + i, split=split, family=family, agent=agent,
                     fingerprint=fingerprint, reward=0.5 + (heldout_shift if split == "heldout" else 0) + (i % 3) / 10,
                     accepted=False) for i in range(12) for split in ("train", "heldout")]

    mixed = rows("ops", "greedy", "aaa") + rows("code", "greedy", "bbb", -0.2)
    with pytest.raises(MixedRowsError, match=r"mix families \['code', 'ops'\].*--family"):
        divergence(mixed)
    code, ops = divergence_groups(mixed)
    assert (code.family, ops.family) == ("code", "ops")
    assert code.measured[0].gap == pytest.approx(0.2) and ops.measured[0].gap == pytest.approx(0.0)
    # different families always have different fingerprints: that is no drift
    assert code.drift_warning is None and ops.drift_warning is None
    assert divergence(mixed, family="ops").family == "ops"
    drifted = rows("ops", "greedy", "aaa") + [dict(r, run_id="r2", fingerprint="ccc", started_at=r["started_at"] + 100)
                                              for r in rows("ops", "greedy", "aaa")]
    assert "ops rollouts ran on 2 different environment fingerprints" in divergence(drifted).drift_warning
    with pytest.raises(MixedRowsError, match="agents"):
        divergence(rows("ops", "greedy", "a") + rows("ops", "oracle", "a"))


def test_eval_pair_adds_heldout_to_an_existing_run_and_refuses_a_mismatch(tmp_path):
    db = tmp_path / "e.db"
    store = TrajectoryStore(db)
    run(RunConfig(run_id="t", taskset=TaskSetSpec(family="ops", count=3, base_seed=9, knobs={"difficulty": [0.0, 0.4]}),
                  agents=["greedy"], concurrency=1), store, collect=False)
    assert cli("eval", "ops", "--pair", "t", "--count", "3", "--concurrency", "1", "--store", db).exit_code == 0
    rows = store.rollout_rows(["t"])
    held = [r for r in rows if r["split"] == "heldout"]
    assert len(held) == 3 and len(rows) == 6 and {r["agent"] for r in rows} == {"greedy"}
    expected = build_taskset(TaskSetSpec(family="ops", count=3, split="heldout", base_seed=9, knobs={"difficulty": [0.0, 0.4]}))
    assert sorted(r["task_id"] for r in held) == sorted(t.id for t in expected)  # the run's own knobs and base seed
    for args, message in ((("eval", "ops", "--pair", "nope"), "--pair 'nope': no such run"),
                          (("eval", "code", "--pair", "t"), "ran family 'ops', not 'code'"),
                          (("eval", "ops", "--pair", "t", "--agents", "oracle"), "drop --agents")):
        out = cli(*args, "--store", db)
        assert out.exit_code == 2 and message in out.output, out.output
    assert len(store.rollout_rows(["t"])) == 6  # nothing ran


def test_heldout_tasks_enter_a_training_run_only_as_its_paired_sample():
    spec = TaskSetSpec(family="ops", count=3, base_seed=4)
    held = build_taskset(spec.model_copy(update={"split": "heldout"}))
    config = RunConfig(run_id="x", taskset=spec, agents=["greedy"])
    with pytest.raises(SplitPolicyError, match="outside its paired held-out sample"):
        check_given_tasks(config, build_taskset(spec) + held)
    check_given_tasks(config.model_copy(update={"paired_heldout": 3}), build_taskset(spec) + held)
    with pytest.raises(SplitPolicyError, match="pairs a training run"):
        check_split_policy(RunConfig(run_id="e", purpose="eval", taskset=spec.model_copy(update={"split": "heldout"}),
                                     agents=["greedy"], paired_heldout=2))


def test_plot_has_axes_legend_interval_and_threshold_or_says_not_enough_data(db):
    rows = TrajectoryStore(db).rollout_rows(["pair"])
    svg = plot_svg(divergence(rows, threshold=0.15))
    for text in ("mean reward", "gap (train − held-out)", ">0.25<", ">0.75<", ">1<", ">pair<", "train", "held-out",
                 "gap 95% CI", "alarm threshold 0.15", 'class="threshold"', 'class="ci-bar"', "ONE_PERIOD"):
        assert text in svg, text
    assert "not enough data" not in svg
    empty = plot_svg(divergence([r for r in rows if r["split"] == "train"]))
    assert "not enough data" in empty and "only train rollouts" in empty


def test_report_plots_the_gap_and_leaves_privileged_agents_out_of_the_hacking_ranking(db, tmp_path):
    store = TrajectoryStore(db)
    everyone = hacking_audit(store, ["trainonly"], top_share=0.5)
    assert any(f.agent == "oracle" and f.privileged for f in everyone)  # the oracle shows the tells by construction
    suspicious = hacking_audit(store, ["trainonly"], top_share=0.5, exclude_privileged=True)
    assert all(f.agent != "oracle" and not f.privileged for f in suspicious)
    assert is_privileged("oracle@50", "ops") and not is_privileged("exploit:skip_checks", "ops")
    page = write_report(store, ["pair", "trainonly"], tmp_path / "r.html").read_text()
    flags = page.split('<section id="flags">')[1].split("</section>")[0]
    assert "Privileged agents are left out of this ranking" in flags and "Left out here: oracle." in flags
    assert "<td>oracle</td>" not in flags
    divergence_html = page.split('<section id="divergence">')[1].split("</section>")[0]
    assert divergence_html.count('<svg class="divergence"') == 2  # ops / greedy and ops / oracle, each on its own
    assert 'data-status="one_period"' in divergence_html and 'data-status="insufficient"' in divergence_html
    assert "not enough data" in divergence_html and 'class="threshold"' in divergence_html
    assert 'data-status="ok"' not in divergence_html
