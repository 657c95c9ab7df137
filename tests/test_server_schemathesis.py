"""schemathesis (a client nobody here wrote) against a real `gymsmith serve`, on the schema as the server
publishes it (issue 20, item 3).

The server is the installed command in its own process, serving ops on a loopback port; schemathesis runs
every default check (server errors, undocumented status codes, responses against their schema, schema-valid
bodies accepted, schema-invalid ones refused, Allow headers) in its examples, coverage, fuzzing and stateful
phases. The stateful phase follows the links the schema publishes from a new session (its id and
X-Session-Key) to step, state and close, so it drives real sessions. Bounded: 10 examples per operation and
30 s in all; idle sessions expire after 5 s, and past the session limit
a new session is refused with 429 (documented), which is not a server error."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import httpx

BIN = os.path.dirname(sys.executable)


def test_schemathesis_finds_nothing(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([os.path.join(BIN, "gymsmith"), "serve", "--port", str(port), "--family", "ops",
                               "--max-sessions", "64", "--idle-timeout", "5"], cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=open(tmp_path / "server.log", "w"))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                spec = httpx.get(f"{url}/openapi.json", timeout=5).json()
                break
            except httpx.TransportError:
                assert server.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        family = spec["components"]["schemas"]["OpsResetRequest"]["properties"]["family"]
        assert family.get("const") == "ops"  # a fuzzer can open sessions without editing the schema
        out = subprocess.run([os.path.join(BIN, "st"), "run", f"{url}/openapi.json", "--max-examples", "10",
                              "--max-time", "30", "--workers", "1", "--no-color"],
                             capture_output=True, text=True, timeout=300, cwd=tmp_path)
    finally:
        server.terminate()
        server.wait(30)
    report = out.stdout + out.stderr
    assert out.returncode == 0, report[-6000:]
    assert "API Links:    3 covered / 3 selected" in report, report[-3000:]  # sessions were stepped and closed
    assert "Server error" not in report and "failure" not in report.split("SUMMARY")[-1], report[-3000:]
    assert "Internal Server Error" not in (tmp_path / "server.log").read_text()
