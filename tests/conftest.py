"""Shared fixtures. Everything here uses the real parts: real verifier processes, real SQLite files."""

from __future__ import annotations

import faulthandler
import fcntl
import os
import socket
import sys
import threading
import time as _time
from pathlib import Path

import pytest
import uvicorn

from gymsmith.core.errors import VerifierError
from gymsmith.registry import get_family, reload_families
from gymsmith.server import ServerSettings, create_app
from gymsmith.server.app import UVICORN_LIMITS
from gymsmith.verifier.service import VerifierService

# One verifier key for the whole suite (and the commands it starts), so the hidden variants a test meets, and which
# seeds make tasks, are the same on every machine; tests of the key itself set their own
os.environ.setdefault("GYMSMITH_VERIFIER_KEY", "gymsmith test suite key")

PLUGIN_FAMILY = '''
"""A third-party family installed through the gymsmith.families entry point (test plug-in).

Its checks misbehave on purpose, selected by the `mode` knob: ok, crash, hang, raise, flaky, spin.
"""
import os
from gymsmith.agents.base import NullAgent, RandomAgent
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
    knobs = (DIFFICULTY, Knob(name="mode", kind=KnobKind.CHOICE, choices=("ok", "crash", "hang", "raise", "flaky", "spin"), default="ok",
                              description="how the checks behave"))
    def generate(self, seed, **knobs):
        k = resolve_knobs(self.knobs, knobs, lambda d: {})
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=k, goal="submit",
                        start_state=StartStateRef(kind="none", digest="x"), tools=(SUBMIT,))
    def make_env(self):
        return Env()
    def agents(self):
        return {"null": NullAgent, "crash": CrashingAgent, "oracle": NullAgent, "random": RandomAgent}


class NondetEnv(Env):
    def _reset(self, task, seed):
        return Observation(text=task.goal + " nonce " + os.urandom(4).hex())  # a bug: not seeded


class NondetFamily(PluginFamily):
    """Deliberately nondeterministic (its reset observation carries fresh randomness)."""
    name = "nondetfam"
    def make_env(self):
        return NondetEnv()


class CrashingAgent(NullAgent):
    """Kills the process it runs in (a worker dying mid-rollout). Only ever run in a worker process or Ray actor."""
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
    if mode == "spin":  # a state whose checks compute without end (a pattern that backtracks, a huge parse)
        while True:
            pass
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


def write_distribution(root: Path, name: str, families: dict[str, str]) -> None:
    """Make `root` hold an installed distribution `name` (version 0.1) whose `gymsmith.families` entry points are
    `families` (entry-point name -> "module:attribute"), found by importlib.metadata once `root` is on the path."""
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[gymsmith.families]\n" + "".join(f"{k} = {v}\n" for k, v in families.items()))


@pytest.fixture(scope="session")
def plugin_path(tmp_path_factory) -> Path:
    """A directory on sys.path holding a plug-in family installed as a distribution with an entry point."""
    root = tmp_path_factory.mktemp("plugin")
    (root / "plugfam.py").write_text(PLUGIN_FAMILY)
    (root / "plugfam_checks.py").write_text(PLUGIN_CHECKS)
    write_distribution(root, "plugfam", {"plugfam": "plugfam:PluginFamily", "nondetfam": "plugfam:NondetFamily"})
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


def register_test_repos(monkeypatch, specs) -> Path:
    """Point GYMSMITH_REPOS (this process's and the verifier processes' it starts) at the suite's own repos
    directory under the cache, and register each (NAME==VERSION, local path or None) there unless it already is:
    from the package index when the path is None (the first time on a machine only: a download and three runs
    of its suite). Tests of registered packages must not rely on what a machine happens to have registered."""
    from gymsmith.families.code.repotasks import _repos, load_repo
    from gymsmith.repos import RepoError, add_repo, find_repo
    from gymsmith.sandbox.runtime import cache_root

    root = cache_root() / "test-repos"
    monkeypatch.setenv("GYMSMITH_REPOS", str(root))
    root.mkdir(parents=True, exist_ok=True)
    # the suite's workers (pytest-xdist) share the directory: one registers while the others wait, then find it
    with open(root / ".suite.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for spec, path in specs:
            try:
                find_repo(spec)
                load_repo(spec)  # compiles its call checks: one reduced by an earlier gymsmith is refused
            except RepoError:
                add_repo(spec, path=path, repos_dir=root)
                _repos.clear()
    return root


@pytest.fixture(scope="session")
def postgres_url():
    """A real PostgreSQL server in a temporary directory, on a free loopback port, for this test session."""
    from gymsmith.store.local_postgres import TemporaryPostgres

    with TemporaryPostgres() as url:
        yield url


HANG_LIMIT_S = 900  # past pytest-timeout's 600 s (pyproject): only a test its alarm could not stop gets here
_hang_report: list[int] = []  # a duplicate of the session's real stderr: a test's own stderr is captured


# The costliest modules (a module's fixtures run once, on one worker: `--dist loadfile`) start first, so the
# suite's workers finish together rather than one running the last long module alone; the rest keep their order.
COSTLIEST_FIRST = ("test_web_agents", "test_code_agents", "test_check", "test_code_task_variants", "test_code_repos",
                   "test_reward_ladder", "test_code_byo", "test_model_agent", "test_ray_backend", "test_cli")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable: within a module, its own order


def pytest_configure(config):
    _hang_report.append(os.dup(2))  # output capture is suspended while plug-ins are configured


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """A backstop behind pytest-timeout, whose alarm runs in the interpreter: a test hung where no signal handler
    runs (in C, or on a lock the handler needs) would hold the session until CI's own limit and say nothing.
    Past HANG_LIMIT_S the interpreter's fault handler writes every thread's stack to the session's stderr and
    ends the session, so CI fails within minutes and shows where it hung."""
    faulthandler.dump_traceback_later(HANG_LIMIT_S, exit=True, file=_hang_report[0])
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


def pytest_terminal_summary(terminalreporter):
    """One line for the containment suite: how many attacks were tried and how many were contained."""
    tried = contained = 0
    for outcome in ("passed", "failed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            if "test_sandbox_containment.py::test_attack" in getattr(report, "nodeid", "") and report.when == "call":
                tried += 1
                contained += outcome == "passed"
    if tried:
        terminalreporter.write_line(f"sandbox containment: {tried} attacks tried, {contained} contained")


# -- helpers shared by several test modules -----------------------------------------------------------------------
class CountingVerifier(VerifierService):
    """The real service, counting its verifications; `fail_on` makes those calls (1-based) raise VerifierError
    instead, as an infrastructure failure would."""

    def __init__(self, *, fail_on: frozenset[int] = frozenset(), **kwargs):
        super().__init__(**kwargs)
        self.calls, self.fail_on = 0, fail_on

    def verify(self, task, final_state, **kwargs):
        self.calls += 1
        if self.calls in self.fail_on:
            raise VerifierError(f"verifier down (injected, call {self.calls})")
        return super().verify(task, final_state, **kwargs)


class Running:
    """`gymsmith serve` on a free loopback port: a real uvicorn server in a thread (a context manager)."""

    def __init__(self, uvicorn_limits: bool = True, **settings):
        """uvicorn_limits: start uvicorn with the limits `gymsmith serve` gives it (UVICORN_LIMITS); without them the
        app's own bounds are the only ones. Held-out tasks are served unless `allow_heldout=False` is given: the tests
        that are not about the split take their seeds as they come."""
        settings.setdefault("allow_heldout", True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.settings = ServerSettings(port=port, **settings)
        self.app = create_app(self.settings)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host=self.settings.host, port=port, log_level="warning",
                                                    **(UVICORN_LIMITS if uvicorn_limits else {})))
        self.url = f"http://127.0.0.1:{port}"

    def __enter__(self):
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = _time.time() + 20
        while not self.server.started and _time.time() < deadline:
            _time.sleep(0.05)
        return self

    def __exit__(self, *exc):
        self.server.should_exit = True
        self.thread.join(20)
