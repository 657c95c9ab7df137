"""Shared fixtures. Everything here uses the real parts: real verifier processes, real SQLite files."""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from gymsmith.registry import get_family, reload_families

PLUGIN_FAMILY = '''
"""A third-party family installed through the gymsmith.families entry point (test plug-in).

Its checks misbehave on purpose, selected by the `mode` knob: ok, crash, hang, raise, flaky.
"""
import os
from gymsmith.agents.base import NullAgent
from gymsmith.core.types import Observation, StartStateRef, TaskSpec, ToolSpec
from gymsmith.envs.base import FinalState, ToolEnvironment
from gymsmith.registry.family import DIFFICULTY, Knob, KnobKind, resolve_knobs

SUBMIT = ToolSpec(name="submit", description="Finish.", parameters={"type": "object", "properties": {}})

class Env(ToolEnvironment):
    def _reset(self, task, seed):
        return Observation(text=task.goal)
    def _call(self, name, arguments):
        return Observation(text="submitted")
    def state_hash(self):
        return "x"
    def final_state(self, directory):
        directory.mkdir(parents=True, exist_ok=True)
        p = directory / "final.txt"
        p.write_text("done")
        return FinalState(kind="text", path=str(p), digest="x")
    def close(self):
        pass

class PluginFamily:
    name = "plugfam"
    version = "0.1"
    checks_module = "plugfam_checks"
    knobs = (DIFFICULTY, Knob(name="mode", kind=KnobKind.CHOICE, choices=("ok", "crash", "hang", "raise", "flaky"), default="ok",
                              description="how the checks behave"))
    def generate(self, seed, **knobs):
        k = resolve_knobs(self.knobs, knobs, lambda d: {})
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=k, goal="submit",
                        start_state=StartStateRef(kind="none", digest="x"), tools=(SUBMIT,))
    def make_env(self):
        return Env()
    def agents(self):
        return {"null": NullAgent, "crash": CrashingAgent}


class CrashingAgent(NullAgent):
    """Kills the process it runs in (a worker dying mid-rollout). Only ever run inside a Ray actor."""
    name = "crash"
    def act(self, observation):
        os._exit(9)
'''

PLUGIN_CHECKS = '''
import os, time
from gymsmith.core.types import RewardComponent
from gymsmith.verifier.protocol import CheckResult

def verify(task, final_state):
    mode = task.knobs["mode"]
    if mode == "crash":
        os._exit(3)
    if mode == "hang":
        time.sleep(600)
    if mode == "raise":
        raise RuntimeError("checks exploded")
    if mode == "flaky":  # crash the first time for each task, then work (a marker file per task)
        marker = os.path.join(os.environ["PLUGFAM_MARKERS"], task.id)
        if not os.path.exists(marker):
            open(marker, "w").close()
            os._exit(4)
    print("noise on stdout must not break the protocol")
    return CheckResult(components={"done": RewardComponent(value=1.0, weight=1.0)})
'''


@pytest.fixture(scope="session")
def plugin_path(tmp_path_factory) -> Path:
    """A directory on sys.path holding a plug-in family installed as a distribution with an entry point."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "plugfam.py").write_text(PLUGIN_FAMILY)
    (root / "plugfam_checks.py").write_text(PLUGIN_CHECKS)
    info = root / "plugfam-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugfam\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [gymsmith.families]
        plugfam = plugfam:PluginFamily
        """))
    sys.path.insert(0, str(root))
    reload_families()
    yield root
    sys.path.remove(str(root))
    reload_families()


@pytest.fixture
def plugin_env(plugin_path) -> dict[str, str]:
    """Environment for a verifier process that must see the plug-in too."""
    return {"PYTHONPATH": os.pathsep.join([str(plugin_path), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="session")
def ops():
    return get_family("ops")


def _as_postgres_user(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root; CI runs as root, so the server runs as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="session")
def postgres_url(tmp_path_factory):
    """A real PostgreSQL server in a temporary directory, on a free loopback port, for this test session."""
    import glob
    import shutil
    import socket
    import subprocess

    bindir = next((os.path.dirname(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)), None)
    initdb = shutil.which("initdb") or (bindir and os.path.join(bindir, "initdb"))
    if not initdb:
        pytest.fail("PostgreSQL server binaries not found; `make setup` installs the Debian package postgresql")
    pg_ctl = os.path.join(os.path.dirname(os.path.realpath(initdb)), "pg_ctl")
    root = tmp_path_factory.mktemp("pg")
    data = root / "data"
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        os.chmod(root, 0o755)
        for parent in root.parents:  # the server user must be able to reach its directory
            if str(parent).startswith(tempfile_root()):
                os.chmod(parent, os.stat(parent).st_mode | 0o711)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    subprocess.run(_as_postgres_user([initdb, "-D", str(data), "-U", "gymsmith", "--auth=trust", "-E", "UTF8"]),
                   check=True, capture_output=True)
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off"
    subprocess.run(_as_postgres_user([pg_ctl, "-D", str(data), "-o", opts, "-l", str(root / "log"), "-w", "start"]),
                   check=True, capture_output=True)
    try:
        yield f"postgresql://gymsmith@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(_as_postgres_user([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]), capture_output=True)


def tempfile_root() -> str:
    import tempfile

    return tempfile.gettempdir()
