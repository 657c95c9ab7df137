"""The README's family example (examples/restock) is a real package: pip installs it (its entry point is how
gymsmith finds it), `gymsmith families` lists it, and `gymsmith check` passes on it. It stays small: the
family kit (`envs.sqlite_world`, `envs.toolkit`) does the rest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "restock"
GYMSMITH = Path(sys.executable).with_name("gymsmith")


def test_the_example_family_installs_and_passes_gymsmith_check(tmp_path):
    code = [line for f in sorted((EXAMPLE / "restock_family").glob("*.py")) for line in f.read_text().splitlines()
            if line.strip()]
    assert len(code) < 100, f"the example family grew to {len(code)} non-blank lines"
    target, source = tmp_path / "site", tmp_path / "restock"
    shutil.copytree(EXAMPLE, source)  # pip builds in the source tree; keep the checkout clean
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(source)],
                   check=True, capture_output=True, timeout=300)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(target), os.environ.get("PYTHONPATH")]))}
    families = subprocess.run([str(GYMSMITH), "families", "--json"], env=env, capture_output=True, text=True, timeout=120)
    listed = families.stdout if families.returncode == 0 else subprocess.run(
        [str(GYMSMITH), "families"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "restock" in listed
    check = subprocess.run([str(GYMSMITH), "check", "restock", "--size", "4", "--store", str(tmp_path / "c.db"), "--json"],
                           env=env, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]
    outcomes = json.loads(check.stdout)
    outcomes = outcomes.get("outcomes", outcomes) if isinstance(outcomes, dict) else outcomes
    names = {o["name"]: o for o in outcomes}
    assert names["oracle accepted on every task"]["passed"] and names["null never accepted"]["passed"]
    assert all(o["passed"] for o in outcomes), outcomes
