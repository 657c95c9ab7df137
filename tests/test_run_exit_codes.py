"""`gymsmith run` exits non-zero when a rollout ended in an infrastructure error (issue 20, item 2).

A real run against a model endpoint nobody listens on (127.0.0.1:9): the model agent's rollout is an
infrastructure error after its retries (~16 s), the null agent's is fine. Before, the run exited 0."""

from __future__ import annotations

import subprocess
import sys


def _gymsmith(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymsmith.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_a_run_with_an_infrastructure_error_exits_1_and_says_why(tmp_path):
    db = str(tmp_path / "s.db")
    common = ["run", "ops", "--count", "1", "--agents", "model,null", "--model-url", "http://127.0.0.1:9/v1",
              "--model-name", "x", "--store", db, "--run-id", "dead"]
    out = _gymsmith(*common, cwd=tmp_path)
    assert out.returncode == 1, out.stderr[-2000:]
    text = " ".join(out.stderr.split())
    assert "1 of 2 rollouts of run dead ended in an infrastructure error" in text and "ConnectError" in text
    assert "--tolerate-errors" in text
    # the same run again (it resumes: nothing left to run) with the flag: a warning, exit 0
    out = _gymsmith(*common, "--tolerate-errors", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warning:" in out.stderr and "1 of 2 rollouts" in " ".join(out.stderr.split())


def test_a_clean_run_exits_0(tmp_path):
    out = _gymsmith("run", "ops", "--count", "2", "--agents", "null", "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "infrastructure error" not in out.stderr
