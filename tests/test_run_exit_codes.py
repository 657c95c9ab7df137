"""`gymsmith run` exits non-zero when a rollout ended in an infrastructure error (issue 20, item 2).

A real run against a model endpoint that answers every chat completion with HTTP 500 (a real server on loopback;
a dead endpoint is refused before the run, see test_endpoint_errors.py): the model agent's rollout is an
infrastructure error after its retries (~16 s), the null agent's is fine. Before, the run exited 0."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from gymsmith.agents.scripted_server import ScriptedChatServer, WitnessPolicy


def _gymsmith(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymsmith.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def test_a_run_with_an_infrastructure_error_exits_1_and_says_why(tmp_path):
    db = str(tmp_path / "s.db")
    with ScriptedChatServer(WitnessPolicy({}), fault_rate=1.0, faults=("http_500",)) as server:
        common = ["run", "ops", "--count", "1", "--agents", "model,null", "--model-url", server.base_url,
                  "--model-name", "scripted", "--store", db, "--run-id", "dead"]
        out = _gymsmith(*common, cwd=tmp_path)
        assert out.returncode == 1, out.stderr[-2000:]
        text = " ".join(out.stderr.split())
        assert "1 of 2 rollouts of run dead ended in an infrastructure error" in text and "HTTP 500" in text
        assert "(no reward; model_endpoint 1)" in text  # which part failed, from the stored error_kind
        assert "--tolerate-errors" in text
        # the same run again (it resumes: nothing left to run) with the flag: a warning, exit 0
        out = _gymsmith(*common, "--tolerate-errors", cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warning:" in out.stderr and "1 of 2 rollouts" in " ".join(out.stderr.split())


def test_a_clean_run_exits_0(tmp_path):
    out = _gymsmith("run", "ops", "--count", "2", "--agents", "null", "--store", str(tmp_path / "s.db"), cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "infrastructure error" not in out.stderr


BROKEN_FAMILY = '''
from plugfam import PluginFamily

class BrokenFamily(PluginFamily):
    """The test plug-in family with checks whose process always dies: every verification is an infrastructure error."""
    name = "brokenfam"
    checks_module = "brokenfam_checks"
'''


def test_check_fails_on_infrastructure_errors_naming_the_count_and_the_first_reason(plugin_path, tmp_path):
    """`gymsmith check` on a family whose verifier process dies on every task (a real worker exiting with code 3).
    Every rollout is an infrastructure error: the check "no rollout ended in an infrastructure error" fails with
    the count and the reason; with --tolerate-errors it is a warning (the checks over rewards still fail)."""
    (tmp_path / "brokenfam.py").write_text(BROKEN_FAMILY)
    (tmp_path / "brokenfam_checks.py").write_text("import os\n\ndef verify(task, final_state):\n    os._exit(3)\n")
    info = tmp_path / "brokenfam-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenfam\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gymsmith.families]\nbrokenfam = brokenfam:BrokenFamily\n")
    env = {"COLUMNS": "200", "PATH": "/usr/bin:/bin", "PYTHONPATH": f"{tmp_path}:{plugin_path}"}
    db = str(tmp_path / "s.db")

    def check(*flags: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "check", "brokenfam", "--size", "1", "--store", db,
                              "--json", *flags], capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 1, out.stderr[-2000:]
        start = out.stdout.index("[")
        outcomes = {o["name"]: o for o in json.loads(out.stdout[start:out.stdout.rindex("]") + 1])}
        return outcomes["no rollout ended in an infrastructure error"]

    infra = check()
    assert not infra["passed"] and not infra["warning"]
    assert re.match(r"(\d+) of \1 rollouts ended in an infrastructure error \(no reward\); first: .*verifier process "
                    r"died \(exit code 3\)", infra["detail"]), infra["detail"]
    tolerated = check("--tolerate-errors")
    assert not tolerated["passed"] and tolerated["warning"]
