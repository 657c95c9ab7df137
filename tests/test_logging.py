"""Diagnostics through `logging` (issue 19 item 5): the command line's --log-level and $GYMSMITH_LOG_LEVEL, one
line per record on stderr, and what is logged where an operator needs it: a verifier process that died and was
replaced. Real processes throughout: the command line as a user runs it, a real verifier process killed."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from gymsmith.core import logs
from gymsmith.core.types import Split
from gymsmith.registry import get_family
from gymsmith.runner.rollout import run_rollout
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.service import VerifierService


def _gymsmith(*args: str, cwd, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymsmith.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200", **(env or {})})


@pytest.fixture
def restored():
    """configure() changes the process's "gymsmith" logger: put it back, so other tests' caplog still sees it."""
    root = logging.getLogger("gymsmith")
    saved = (list(root.handlers), root.level, root.propagate)
    yield
    root.handlers[:], root.level, root.propagate = saved


def test_levels_come_from_the_flag_then_the_environment(monkeypatch, restored):
    monkeypatch.setenv(logs.ENV, "debug")
    assert logs.configure() == "DEBUG" and logging.getLogger("gymsmith").level == logging.DEBUG
    assert logs.configure("error") == "ERROR"
    with pytest.raises(ValueError, match=r"--log-level 'loud': expected one of DEBUG, INFO, WARNING, ERROR"):
        logs.configure("loud")
    monkeypatch.setenv(logs.ENV, "loud")
    with pytest.raises(ValueError, match=r"\$GYMSMITH_LOG_LEVEL 'loud'"):
        logs.configure()


def test_the_command_line_logs_at_the_level_asked_and_refuses_a_bad_one(tmp_path):
    run = ["run", "ops", "--count", "1", "--agents", "null", "--store", str(tmp_path / "s.db")]
    quiet = _gymsmith(*run, "--run-id", "a", cwd=tmp_path)
    assert quiet.returncode == 0 and "INFO" not in quiet.stderr
    told = _gymsmith("--log-level", "info", *run, "--run-id", "b", cwd=tmp_path)
    assert told.returncode == 0 and "INFO gymsmith.runner.driver: run b: 1 rollouts to run (0 already stored)" in told.stderr
    by_env = _gymsmith(*run, "--run-id", "c", cwd=tmp_path, env={"GYMSMITH_LOG_LEVEL": "INFO"})
    assert "INFO gymsmith.runner.driver: run c" in by_env.stderr
    bad = _gymsmith("--log-level", "loud", "families", cwd=tmp_path)
    lines = bad.stderr.strip().splitlines()
    assert bad.returncode == 2 and len(lines) == 1 and "--log-level 'loud'" in lines[0] and "Traceback" not in bad.stderr


def test_a_verifier_process_that_died_is_replaced_with_a_warning(caplog):
    family = get_family("ops")
    task = family.generate(1)
    env = family.make_env()
    try:
        with VerifierService() as verifier, caplog.at_level(logging.WARNING, logger="gymsmith"):
            first = run_rollout(env=env, agent=family.agents()["oracle"](), task=task, split=Split.TRAIN, seed=0,
                                run_id="log", verifier=verifier, policy=DEFAULT_POLICY, max_steps=100, time_limit_s=120)
            [pid] = verifier.pids()
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while pid in verifier.pids() and time.monotonic() < deadline:  # the kill lands asynchronously
                time.sleep(0.05)
            second = run_rollout(env=env, agent=family.agents()["oracle"](), task=task, split=Split.TRAIN, seed=0,
                                 run_id="log", verifier=verifier, policy=DEFAULT_POLICY, max_steps=100, time_limit_s=120)
    finally:
        env.close()
    assert first.reward.accepted and second.reward.accepted
    assert any(f"verifier process {pid} ended" in r.getMessage() and r.name == "gymsmith.verifier.service"
               for r in caplog.records), [r.getMessage() for r in caplog.records]
