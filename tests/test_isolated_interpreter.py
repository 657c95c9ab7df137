"""Processes gymsmith starts import nothing from the directory it was started in (issue 20, item 1).

A `random.py`, `inspect.py`, `json.py` and `sitecustomize.py` that would break any import are put in the
working directory; a verifier service started there must still score the oracle's rollout (before, every
verification of such a run was an error). The service is started in a child interpreter whose working
directory is that directory, as a user's `gymsmith run` would be."""

from __future__ import annotations

import os
import subprocess
import sys

SHADOWS = ("random", "inspect", "json", "sitecustomize")

SCRIPT = """
from gymsmith.core.types import Split
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner.rollout import run_rollout
from gymsmith.verifier.service import VerifierService

ops = get_family("ops")
task = build_taskset(TaskSetSpec(family="ops", count=1, split="all"))[0]
env = ops.make_env()
with VerifierService() as v:
    t = run_rollout(env=env, agent=ops.agents()["oracle"](), task=task, split=Split.TRAIN, seed=0, run_id="x",
                    verifier=v, policy="progress_gated", max_steps=300, time_limit_s=120)
env.close()
print("REWARD", t.reward.value if t.reward else None, t.error)
"""


def test_files_in_the_working_directory_change_nothing(tmp_path):
    for name in SHADOWS:
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('shadow {name}.py was imported')\n")
    # the driver itself runs with -P too (else it would import the shadows before gymsmith starts anything)
    out = subprocess.run([sys.executable, "-P", "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert "REWARD 1.0 None" in out.stdout, (out.stdout[-1000:], out.stderr[-2000:])
    assert "shadow" not in out.stdout + out.stderr


def _shadowed_cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`gymsmith run ...` from the installed console script, started in a directory holding the shadows plus a
    `gymsmith.py` and `sqlalchemy.py` (modules a Ray worker imports only after its start, unlike the stdlib)."""
    for name in (*SHADOWS, "gymsmith", "sqlalchemy"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('shadow {name}.py was imported')\n")
    gymsmith = os.path.join(os.path.dirname(sys.executable), "gymsmith")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"COLUMNS": "200"}
    return subprocess.run([gymsmith, "run", "ops", "--count", "1", "--store", str(tmp_path / "s.db"), *args],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)


def test_worker_processes_of_a_run_ignore_the_working_directory(tmp_path):
    """The local backend's worker processes (forked) and their verifier processes."""
    out = _shadowed_cli(tmp_path, "--agents", "oracle,null", "--concurrency", "2")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "shadow" not in out.stdout + out.stderr
    assert "100.0%" in out.stdout  # the oracle's rollout was scored and accepted


def test_ray_actors_ignore_the_working_directory(tmp_path):
    """Ray puts the driver's working directory first on its workers' sys.path unless the job has a working_dir;
    before RayRunner gave it an empty one, the actor died importing the `gymsmith.py` shadow."""
    out = _shadowed_cli(tmp_path, "--agents", "oracle", "--backend", "ray")
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert "shadow" not in out.stdout + out.stderr
    assert "100.0%" in out.stdout
