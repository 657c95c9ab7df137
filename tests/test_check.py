"""`gymsmith check`: passes on ops, code and web, fails readably on a nondeterministic environment and a gameable checker."""

import subprocess
import sys

from gymsmith.audit import check_family, check_history
from gymsmith.store import TrajectoryStore


def check_from_the_command_line(family: str, size: int, db) -> None:
    """`gymsmith check FAMILY` in a fresh process; it must exit 0 with no failed check."""
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "check", family, "--size", str(size), "--store", str(db)],
                         capture_output=True, text=True, timeout=900, env={"PATH": "/usr/bin:/bin", "COLUMNS": "250"})
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 failed" in out.stdout and "FAIL" not in out.stdout


def test_check_passes_on_ops_from_the_command_line(tmp_path):
    db = tmp_path / "c.db"
    check_from_the_command_line("ops", 30, db)
    history = check_history(TrajectoryStore(db), "ops")
    assert len(history) >= 10 and all(h["passed"] for h in history)
    assert {"oracle accepted on every task", "same seeded rollout twice is identical",
            "reset restores the pristine state", "greedy reward falls with difficulty"} <= {h["name"] for h in history}


def test_check_passes_on_code_from_the_command_line(tmp_path):
    """The code family's regression suite in real sandboxes: oracle, null, random, every exploit, the ladder,
    determinism, reset. On one task (was three): this proves the command and its checks end to end; every agent
    on many tasks is test_code_agents.py's work (32 tasks for the oracle, 5 for each exploit)."""
    db = tmp_path / "c.db"
    check_from_the_command_line("code", 1, db)
    names = {h["name"] for h in check_history(TrajectoryStore(db), "code")}
    assert {"oracle accepted on every task", "exploit:patch_runner never accepted, never above null", "same seeded rollout twice is identical",
            "reset restores the pristine state"} <= names
    fingerprint = TrajectoryStore(db).fingerprint(TrajectoryStore(db).rollout_rows()[0]["fingerprint"])
    assert "pytest" in fingerprint["environment"]["sandbox_packages"] and "bubblewrap" in fingerprint["environment"]["bwrap"]


def test_check_passes_on_web_from_the_command_line(tmp_path):
    """The web family's regression suite in real Chromium: oracle, null, random, every exploit, the ladder,
    determinism, reset. On one task (was two; each agent's rollout is a real browser session): this proves the
    command and its checks end to end; every agent on every goal kind is test_web_agents.py's work."""
    db = tmp_path / "c.db"
    check_from_the_command_line("web", 1, db)
    names = {h["name"] for h in check_history(TrajectoryStore(db), "web")}
    assert {"oracle accepted on every task", "exploit:skip_confirmation never accepted, never above null", "exploit:over_broad never accepted, never above null",
            "same seeded rollout twice is identical", "reset restores the pristine state"} <= names
    fingerprint = TrajectoryStore(db).fingerprint(TrajectoryStore(db).rollout_rows()[0]["fingerprint"])
    assert "Chromium" in fingerprint["environment"]["chromium"]


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


def test_drift_is_reported_against_the_last_check(tmp_path, monkeypatch):
    """A second check on a changed environment (here: a faked package version) warns with the difference."""
    import gymsmith.audit.check as check_module
    from gymsmith.registry.fingerprint import environment_fingerprint

    store = TrajectoryStore(tmp_path / "d.db")
    first = {o.name: o for o in check_family("ops", store=store, size=6, determinism_tasks=1)}
    assert first["environment unchanged since the last check"].detail.startswith("first check")
    same = {o.name: o for o in check_family("ops", store=store, size=6, determinism_tasks=1)}
    assert same["environment unchanged since the last check"].passed
    real = environment_fingerprint("ops")
    changed = {**real, "packages": {**real["packages"], "pydantic": "0.0.1"}, "digest": "drifted0000000000"}
    monkeypatch.setattr(check_module, "environment_fingerprint", lambda family: changed)
    drift = {o.name: o for o in check_family("ops", store=store, size=6, determinism_tasks=1)}
    outcome = drift["environment unchanged since the last check"]
    assert not outcome.passed and outcome.warning and outcome.status.value == "warn"
    drift_rows = [h for h in check_history(store, "ops") if h["name"] == "environment unchanged since the last check"]
    assert [h["status"] for h in drift_rows] == ["warn", "pass", "pass"]  # newest first; a warning is no failure
    assert f"packages.pydantic: {real['packages']['pydantic']} -> 0.0.1" in outcome.detail
    rows = store.rollout_rows()
    assert rows and all(r["fingerprint"] == real["digest"] for r in rows)  # every rollout records what it ran on
    assert store.fingerprint(real["digest"])["family_source"] == real["family_source"]


def test_an_exploit_that_crashes_or_beats_null_fails_the_check():
    """A red-team agent that crashes is scored 0 as the agent's failure; the check must not read that as a pass.
    One that is never accepted but earns more than null on a task is a hack that pays: a failure too."""
    from gymsmith.audit.check import _acceptance_checks

    def row(agent, task, reward, end="submitted"):
        return {"agent": agent, "task_id": task, "reward": reward, "accepted": False, "status": "completed", "end_reason": end}

    rows = {"oracle": [dict(row("oracle", t, 1.0), accepted=True) for t in "ab"], "null": [row("null", t, 0.1) for t in "ab"],
            "random": [row("random", t, 0.0) for t in "ab"],
            "exploit:crashes": [row("exploit:crashes", t, 0.0, "agent_failure") for t in "ab"],
            "exploit:pays": [row("exploit:pays", "a", 0.1), row("exploit:pays", "b", 0.2)],
            "exploit:fine": [row("exploit:fine", t, 0.0) for t in "ab"]}
    out = {o.name: o for o in _acceptance_checks("fam", rows, ["exploit:crashes", "exploit:pays", "exploit:fine"])}
    assert not out["exploit:crashes never accepted, never above null"].passed
    assert "the agent itself failed on 2" in out["exploit:crashes never accepted, never above null"].detail
    assert not out["exploit:pays never accepted, never above null"].passed
    assert out["exploit:fine never accepted, never above null"].passed


def test_check_history_from_before_schema_9_tells_warnings_from_failures(tmp_path):
    """Rows stored before check_results.status (schema 9) kept only `passed`: reopening the store adds the column,
    and the history calls a failed drift check a warning (the only warning then) and anything else failed."""
    import sqlite3

    path = tmp_path / "old.db"
    TrajectoryStore(path).engine.dispose()
    with sqlite3.connect(path) as conn:  # the table as schema 8 had it
        conn.execute("ALTER TABLE check_results DROP COLUMN status")
        conn.execute("DROP TABLE alembic_version")  # stores of schema 8 were made before the store used Alembic
        conn.executemany("INSERT INTO check_results (check_id, name, family, family_version, created_at, run_id, passed, "
                         "detail) VALUES ('c1', ?, 'ops', '3.1.0', 1.0, 'c1', ?, '')",
                         [("environment unchanged since the last check", 0), ("null never accepted", 0),
                          ("oracle accepted on every task", 1)])
    history = {h["name"]: h["status"] for h in check_history(TrajectoryStore(path), "ops")}
    assert history == {"environment unchanged since the last check": "warn", "null never accepted": "fail",
                       "oracle accepted on every task": "pass"}


def _seed_of_a_long_random_rollout(verifier, steps: int) -> int:
    """The first episode seed from 7 at which the random agent on ops task 1 takes `steps` steps (it may submit at
    once: which seeds do depends on the task's tools and id, which a family version changes)."""
    from gymsmith.core.types import Split
    from gymsmith.registry import get_family
    from gymsmith.runner.rollout import run_rollout
    from gymsmith.verifier.policies import DEFAULT_POLICY

    family = get_family("ops")
    for seed in range(7, 200):
        run = run_rollout(env=family.make_env(), agent=family.agents()["random"](), task=family.generate(1),
                          split=Split.TRAIN, seed=seed, run_id="t", verifier=verifier, policy=DEFAULT_POLICY,
                          max_steps=steps, time_limit_s=120)
        if len(run.steps) == steps:
            return seed
    raise AssertionError(f"no episode seed in 7..199 gives the random agent {steps} steps")


def test_a_time_limit_cuts_the_determinism_comparison_to_the_steps_both_took():
    """Where a timed-out rollout stops depends on the wall clock (a loaded machine runs fewer run_tests in the same
    120 s): the determinism check then compares the steps both rollouts took, and still catches a difference in them."""
    from gymsmith.audit.check import repeat_difference
    from gymsmith.core.types import EndReason, Split
    from gymsmith.registry import get_family
    from gymsmith.runner.rollout import run_rollout
    from gymsmith.verifier.policies import DEFAULT_POLICY
    from gymsmith.verifier.service import VerifierService

    family = get_family("ops")
    task = family.generate(1)
    with VerifierService() as verifier:
        seed = _seed_of_a_long_random_rollout(verifier, 12)
        runs = [run_rollout(env=family.make_env(), agent=family.agents()["random"](), task=task, split=Split.TRAIN, seed=seed,
                            run_id="t", verifier=verifier, policy=DEFAULT_POLICY, max_steps=12, time_limit_s=120)
                for _ in range(2)]
    assert [len(r.steps) for r in runs] == [12, 12] and repeat_difference(*runs) == (None, False)
    short = runs[1].model_copy(update={"steps": runs[1].steps[:5], "end_reason": EndReason.TIME_LIMIT})
    assert repeat_difference(runs[0], short) == (None, True)
    assert repeat_difference(runs[0], runs[1].model_copy(update={"steps": runs[1].steps[:5]}))[0]  # no time limit: differ
    bent = [*short.steps]
    bent[2] = bent[2].model_copy(update={"observation": bent[2].observation.model_copy(update={"text": "other"})})
    assert "first difference" in repeat_difference(runs[0], short.model_copy(update={"steps": bent}))[0]


def test_the_determinism_comparison_masks_clock_readings_and_nothing_else():
    """A command may print the wall clock (parse's tests print `datetime.today()` when they fail): no seed fixes it,
    so repeats are compared with such readings masked; any other difference in the same text is still caught."""
    from gymsmith.audit.check import repeat_difference
    from gymsmith.core.types import Split
    from gymsmith.registry import get_family
    from gymsmith.runner.rollout import run_rollout
    from gymsmith.verifier.policies import DEFAULT_POLICY
    from gymsmith.verifier.service import VerifierService

    family = get_family("ops")
    with VerifierService() as verifier:
        run = run_rollout(env=family.make_env(), agent=family.agents()["random"](), task=family.generate(1), split=Split.TRAIN,
                          seed=_seed_of_a_long_random_rollout(verifier, 3), run_id="t", verifier=verifier,
                          policy=DEFAULT_POLICY, max_steps=3, time_limit_s=120)

    def with_text(text):
        steps = [*run.steps]
        steps[1] = steps[1].model_copy(update={"observation": steps[1].observation.model_copy(update={"text": text})})
        return run.model_copy(update={"steps": steps})

    first = with_text("E  where datetime.datetime(2026, 12, 5, 3, 57, 35, 716948) = today(); at 2026-12-05T03:57:35.716948")
    again = with_text("E  where datetime.datetime(2026, 12, 5, 3, 57, 40, 577916) = today(); at 2026-12-05T03:57:40.1")
    assert repeat_difference(first, again) == (None, False)
    other = with_text("E  where datetime.datetime(2026, 12, 5, 3, 57, 40, 577916) = today(); at 2026-12-05T03:57:40.1 !")
    assert repeat_difference(first, other)[0]
    assert repeat_difference(with_text("date(2026, 1, 9)"), with_text("date(2026, 1, 8)"))[0]  # not a clock reading
