"""Endpoint errors that help (issue 17 item 4): a malformed --model-url, a dead endpoint and an unknown model name
are refused before the run with one line and exit 2; each error rollout's reason is shown after the run; and
`gymsmith run --retry-errors RUN_ID` runs the stored infrastructure errors again, replacing them, duplicating and
losing nothing.

The endpoints are real: a scripted OpenAI-compatible server on loopback (`ScriptedChatServer`) started by the
test, and a port on which nothing listens. The command runs as `python -m gymsmith.cli`, as a user runs it."""

from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys

import pytest

from gymsmith.agents.endpoint import EndpointCheckError, check_endpoint, validate_base_url
from gymsmith.agents.scripted_server import ScriptedChatServer, WitnessPolicy
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec, build_taskset


def _gymsmith(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gymsmith.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})


def _dead_port() -> int:
    with socket.socket() as s:  # bound then closed: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _one_error_line(out: subprocess.CompletedProcess) -> str:
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error:"), out.stderr[-2000:]
    assert "Traceback" not in out.stderr and out.stdout == ""
    return lines[0]


@pytest.mark.parametrize("url, expected", [
    ("localhost:8000/v1", "has scheme 'localhost'; expected http:// or https://"),
    ("ftp://127.0.0.1/v1", "has scheme 'ftp'; expected http:// or https://"),
    ("http:///v1", "has no host"),
    ("http://127.0.0.1:99999/v1", "Port out of range"),
    ("127.0.0.1:8000", "expected http:// or https://"),
    ("http://127.0.0.1:8000/v1?x=1", "has a query or fragment"),
])
def test_malformed_urls_are_refused_naming_the_url(url, expected):
    with pytest.raises(ValueError, match=expected.replace("?", r"\?").replace("(", r"\(")):
        validate_base_url(url)
    assert validate_base_url("http://127.0.0.1:8000/v1/") == "http://127.0.0.1:8000/v1"


def test_bad_url_dead_endpoint_and_unknown_model_exit_2_with_one_line_and_store_nothing(tmp_path):
    db = tmp_path / "s.db"
    base = ["run", "ops", "--count", "1", "--agents", "model,null", "--store", str(db), "--run-id", "r"]
    line = _one_error_line(_gymsmith(*base, "--model-url", "htp://127.0.0.1:8000/v1", "--model-name", "m", cwd=tmp_path))
    assert "--model-url" in line and "'htp'" in line
    line = _one_error_line(_gymsmith(*base, "--model-url", f"http://127.0.0.1:{_dead_port()}/v1", "--model-name", "m",
                                     cwd=tmp_path))
    assert "cannot reach the model endpoint" in line and "Connection refused" in line
    with ScriptedChatServer(WitnessPolicy({}), models=("qwen-7b", "llama-8b")) as server:
        line = _one_error_line(_gymsmith(*base, "--model-url", server.base_url, "--model-name", "qwen-8b",
                                         cwd=tmp_path))
        assert server.requests == 1  # the one model list: no chat completion, no retry
    assert "model 'qwen-8b' is not served at" in line and "it serves: qwen-7b, llama-8b" in line
    if db.exists():  # nothing was run or stored
        with sqlite3.connect(db) as c:
            assert c.execute("SELECT count(*) FROM rollouts").fetchone()[0] == 0


def test_check_endpoint_falls_back_to_a_chat_completion_without_a_models_route():
    with ScriptedChatServer(WitnessPolicy({})) as server:
        root = server.base_url.removesuffix("/v1")  # GET /models is 404 there; POST .../chat/completions answers
        assert check_endpoint(server.base_url, "scripted") == ["scripted"]
        assert check_endpoint(root, "scripted") == []
        with pytest.raises(EndpointCheckError, match="model 'nope' is not served at .*does not exist"):
            check_endpoint(root, "nope")


def test_error_reasons_are_shown_and_retry_errors_replaces_them(tmp_path):
    """A run whose model calls all fail (HTTP 500) stores its model rollouts as errors and names why; the endpoint
    fixed, --retry-errors runs exactly those again: each is replaced by a scored rollout, the null agent's rollouts
    are untouched, and no key is stored twice."""
    spec = TaskSetSpec(family="ops", count=2, split="train", base_seed=3)
    tasks = build_taskset(spec)
    plans = {t.goal: generate_world(t.seed, t.knobs).witness for t in tasks}
    db = str(tmp_path / "s.db")
    with ScriptedChatServer(WitnessPolicy(plans), fault_rate=1.0, faults=("http_500",)) as server:
        out = _gymsmith("run", "ops", "--count", "2", "--base-seed", "3", "--agents", "model,null", "--model-url",
                        server.base_url, "--model-name", "scripted", "--store", db, "--run-id", "flaky",
                        "--concurrency", "1", cwd=tmp_path)
        assert out.returncode == 1, out.stderr[-3000:]
        text = " ".join(out.stderr.split())
        assert "2 of 4 rollouts of run flaky ended in an infrastructure error" in text
        assert "2 x " in text and "no usable reply after 5 attempts: HTTP 500" in text  # the count and the reason
        assert "gymsmith run --retry-errors flaky" in text
        with sqlite3.connect(db) as c:
            before = {tuple(r[:3]): r[3:] for r in c.execute(
                "SELECT task_id, agent, seed, status, started_at, rollout_id FROM rollouts")}
        assert sorted(s for s, *_ in before.values()) == ["completed", "completed", "error", "error"]

        server.fault_rate = 0.0  # the endpoint is fixed
        out = _gymsmith("run", "--retry-errors", "flaky", "--store", db, cwd=tmp_path)
        assert out.returncode == 0, out.stderr[-3000:]
        assert "running again 2 rollout(s) stored as infrastructure errors" in " ".join(out.stdout.split())
    with sqlite3.connect(db) as c:
        after = {tuple(r[:3]): r[3:] for r in c.execute(
            "SELECT task_id, agent, seed, status, started_at, rollout_id FROM rollouts")}
        steps_of_errors = c.execute("SELECT count(*) FROM steps WHERE rollout_id IN (SELECT rollout_id FROM rollouts "
                                    "WHERE status = 'error')").fetchone()[0]
    assert set(after) == set(before) and len(after) == 4  # the same keys: nothing lost, nothing duplicated
    for key, (status, started, rid) in after.items():
        if key[1] == "null":
            assert (status, started, rid) == before[key]  # untouched
        else:
            assert status == "completed" and started > before[key][1] and rid == before[key][2]  # replaced in place
    assert steps_of_errors == 0
    out = _gymsmith("run", "--retry-errors", "flaky", "--store", db, cwd=tmp_path)
    assert out.returncode == 0 and "nothing to retry" in out.stdout
    line = _one_error_line(_gymsmith("run", "--retry-errors", "flaky", "--store", db, "--agents", "null", cwd=tmp_path))
    assert "drop --agents" in line
