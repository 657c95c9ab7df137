"""How long a bad model endpoint takes to be refused (issue 17: "a bad URL fails in under 2 s with exit 2").

Runs, as a user would, `gymsmith run ops --agents model --model-url URL --model-name m` for four bad endpoints
(a malformed scheme, a port nobody listens on, a host that does not resolve, and a live server that does not
serve the model), and as the baseline in the same run `gymsmith --help` (the command line's own start-up:
interpreter, imports). Each is run R times, alternating; prints one JSON line per bad endpoint with the median
seconds, the exit codes seen, and the ratio to the baseline's median, so a slow endpoint check stands out from a
slow machine.

Usage: python benchmarks/endpoint_errors.py [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.join(os.path.dirname(sys.executable), "gymsmith")


def _timed(args: list[str], cwd: str) -> tuple[float, int]:
    start = time.perf_counter()
    out = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    return time.perf_counter() - start, out.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    from gymsmith.agents.scripted_server import ScriptedChatServer, WitnessPolicy

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with ScriptedChatServer(WitnessPolicy({}), models=("served-model",)) as server, \
            tempfile.TemporaryDirectory() as cwd:
        cases = {"malformed scheme": "htp://127.0.0.1:8000/v1", "nothing listening": f"http://127.0.0.1:{dead}/v1",
                 "host does not resolve": "http://no-such-host.invalid/v1", "model not served": server.base_url}
        times: dict[str, list[float]] = {name: [] for name in ["baseline: gymsmith --help", *cases]}
        codes: dict[str, set[int]] = {name: set() for name in times}
        for i in range(args.repeat):
            for name in times:
                cmd = ["--help"] if name.startswith("baseline") else \
                    ["run", "ops", "--count", "2", "--agents", "model", "--model-url", cases[name], "--model-name", "m",
                     "--store", os.path.join(cwd, "s.db"), "--run-id", f"bad-{i}"]
                seconds, code = _timed(cmd, cwd)
                times[name].append(seconds)
                codes[name].add(code)
    base = statistics.median(times["baseline: gymsmith --help"])
    for name, seconds in times.items():
        print(json.dumps({"case": name, "median_s": round(statistics.median(seconds), 3), "max_s": round(max(seconds), 3),
                          "exit_codes": sorted(codes[name]), "ratio_to_baseline": round(statistics.median(seconds) / base, 2),
                          "repeat": args.repeat, "load_average": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
