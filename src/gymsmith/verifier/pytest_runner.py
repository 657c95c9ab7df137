"""Running a test suite on untrusted code, in a sandbox, with per-test outcomes.

Two ways, which must agree test for test (tests/test_code_verifier.py checks it on 200 tasks):
- `WarmPytest`: a long-lived sandboxed server that has pytest imported and forks once per run
  (`pytest_server.py`). Costs a fork, not an interpreter start and pytest's imports.
- `fresh_pytest`: a new `python -m pytest` per run in a new sandbox, reporting through JUnit XML. The
  baseline, and the reference the warm path is checked against.

A run takes the files of a job (`{relative path: bytes}`); they are written into a private directory
that is mounted read-only into the sandbox and removed afterwards. Infrastructure failures raise
`VerifierError`; what the code under test does (fail, hang, crash the runner) is a `TestRun`.
"""

from __future__ import annotations

import ast
import atexit
import enum
import itertools
import json
import os
import queue
import shutil
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, Field

from gymsmith.core.errors import VerifierError
from gymsmith.sandbox.base import Limits, SandboxError
from gymsmith.sandbox.bwrap import BwrapSandbox

SERVER = Path(__file__).with_name("pytest_server.py")
JOBS = "/jobs"
RUNNER_LIMITS = Limits(memory_mb=1024, pids=128, cpu_s=60, file_size_mb=16, tmp_mb=32, timeout_s=60)
PYTEST_INI = "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"
BASE_ARGS = ("-q", "-p", "no:cacheprovider", "-o", "console_output_style=classic")
# Plugins a generated task's tests never use (its templates use plain asserts and no fixtures); leaving
# them out, and tracebacks nobody reads, cuts a warm run from ~60 ms to ~30 ms. Repositories brought by users keep every plugin.
LEAN_ARGS = ("--tb=no", "--assert=plain") + tuple(x for p in ("unraisableexception", "threadexception", "faulthandler", "doctest", "pastebin",
                              "legacypath", "recwarn", "logging", "stepwise", "setuponly", "setupplan", "debugging",
                              "warnings") for x in ("-p", f"no:{p}"))


class TestOutcome(str, enum.Enum):
    __test__ = False  # not a test class, whatever pytest's naming rules say
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"      # setup or collection failed
    SKIPPED = "skipped"
    MISSING = "missing"  # expected but never reported (the run timed out or crashed first)


class RunStatus(str, enum.Enum):
    COMPLETED = "completed"
    TIMEOUT = "timeout"   # the deadline ended the run; unreported tests are MISSING
    CRASHED = "crashed"   # the test process died without reporting (the code under test killed it)


class TestRun(BaseModel):
    __test__ = False
    status: RunStatus
    outcomes: dict[str, TestOutcome] = Field(description="Per node id, e.g. 'tests/test_lru.py::test_evicts'.")
    duration_s: float

    def outcome(self, nodeid: str) -> TestOutcome:
        return self.outcomes.get(nodeid, TestOutcome.MISSING)


class _Jobs:
    """A private host directory of job folders, mounted read-only at /jobs inside the runner's sandbox."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="gymsmith-jobs-"))
        os.chmod(self.root, 0o755)
        self.ids = itertools.count(1)

    def write(self, files: Mapping[str, bytes | str]) -> tuple[int, Path]:
        n = next(self.ids)
        d = self.root / str(n)
        for rel, data in {"pytest.ini": PYTEST_INI, **files}.items():
            if os.path.isabs(rel) or ".." in Path(rel).parts:
                raise ValueError(f"job file path {rel!r} must be relative and stay inside the job")
            p = d / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.encode() if isinstance(data, str) else data)
        return n, d

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


XUNIT_HOOKS = {"setup_module", "teardown_module", "setup_function", "teardown_function", "setup", "teardown",
               "setUpModule", "tearDownModule", "pytestmark", "pytest_plugins"}


def is_plain_test_module(source: str) -> bool:
    """True if pytest would treat the file as a list of argument-free functions and nothing more.

    Plain: only imports, assignments, docstrings and undecorated functions at top level; every function
    whose name starts with "test" takes no arguments; no classes, no xunit hooks, no `pytestmark`.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and (t.id in XUNIT_HOOKS or t.id.startswith("test")) for t in targets):
                return False
            continue
        if isinstance(node, ast.FunctionDef) and not node.decorator_list and node.name not in XUNIT_HOOKS:
            a = node.args
            if node.name.startswith("test") and (a.args or a.posonlyargs or a.kwonlyargs or a.vararg or a.kwarg):
                return False
            continue
        return False
    return True


def test_files_of(files: Mapping[str, bytes | str], tests: Sequence[str]) -> list[str]:
    """The job's files that pytest would collect from `tests` (paths or directories; python_files defaults)."""
    out = []
    for path in files:
        name = path.rsplit("/", 1)[-1]
        if not (name.startswith("test_") or name.endswith("_test.py")) or not name.endswith(".py"):
            continue
        if any(path == t or path.startswith(t.rstrip("/") + "/") for t in tests):
            out.append(path)
    return sorted(out)


def choose_engine(files: Mapping[str, bytes | str], tests: Sequence[str], engine: str) -> tuple[str, list[str]]:
    """('plain' or 'pytest', the test files). 'auto' picks plain when every test file is plain."""
    if engine not in ("auto", "plain", "pytest"):
        raise ValueError(f"engine must be 'auto', 'plain' or 'pytest', got {engine!r}")
    found = test_files_of(files, tests)
    plain = bool(found) and all("::" not in t for t in tests) and all(
        is_plain_test_module(files[f].decode() if isinstance(files[f], bytes) else files[f]) for f in found)
    if engine == "plain" and not plain:
        raise ValueError("the plain engine needs plain test modules (argument-free test functions, no fixtures, "
                         "decorators, classes or xunit hooks); use engine='pytest'")
    return ("plain" if engine != "pytest" and plain else "pytest"), found


def _args(job_dir: str, tests: Sequence[str], extra: Sequence[str] = (), conftest: bool = False) -> list[str]:
    return [*BASE_ARGS, *(() if conftest else ("--noconftest",)), "-c", f"{job_dir}/pytest.ini", "--rootdir", job_dir,
            *extra, *tests]


class WarmPytest:
    """One sandboxed pytest server; runs are serialised (use several instances for parallelism).

    Raises VerifierError if the server cannot start or stops answering. If the code under test kills
    the server, that run is CRASHED and a new server is started for the next one.
    """

    def __init__(self, *, limits: Limits = RUNNER_LIMITS, start_timeout_s: float = 30.0):
        self.limits, self.start_timeout_s = limits, start_timeout_s
        self._jobs = _Jobs()
        self._lock = threading.Lock()
        self._sandbox: BwrapSandbox | None = None
        self._proc = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.runs = 0

    def _start(self) -> None:
        self._stop()
        empty = Path(tempfile.mkdtemp(prefix="gymsmith-runner-ws-"))
        try:
            self._sandbox = BwrapSandbox(empty, self.limits, extra_ro={str(self._jobs.root): JOBS,
                                                                         str(SERVER): "/run/gymsmith/pytest_server.py"})
        except SandboxError as exc:
            raise VerifierError(f"cannot start the test runner's sandbox: {exc}") from None
        self._proc = self._sandbox.spawn([self._sandbox.runtime.interpreter, "-P", "/run/gymsmith/pytest_server.py"])
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        hello = self._read(self.start_timeout_s)
        if hello is None or not json.loads(hello).get("ready"):
            self._stop()
            raise VerifierError("the warm test runner did not start (no 'ready' line)")

    @staticmethod
    def _pump(stream, sink: queue.Queue) -> None:
        for line in stream:
            sink.put(line.decode())
        sink.put(None)

    def _read(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def run(self, files: Mapping[str, bytes | str], tests: Sequence[str] = ("tests",), *, timeout: float = 30.0,
            extra_args: Sequence[str] = (), engine: str = "auto", conftest: bool = False) -> TestRun:
        """Run `tests` (paths or node ids inside the job) on `files`; per-test outcomes.

        `engine`: 'pytest' (pytest.main in the forked child), 'plain' (pytest's outcomes for plain test
        modules, much faster; ValueError if the files are not plain) or 'auto' (plain when possible).
        `conftest`: load the job's conftest.py files (only for conftests the verifier itself supplies).
        """
        if conftest and any(p.rsplit("/", 1)[-1] == "conftest.py" for p in files):
            engine = "pytest"
        chosen, test_files = choose_engine(files, tests, engine)
        with self._lock:
            if self._proc is None or self._proc.poll() is not None:
                self._start()
            n, job_dir = self._jobs.write(files)
            started = time.perf_counter()
            try:
                request = {"id": n, "dir": f"{JOBS}/{n}", "args": _args(f"{JOBS}/{n}", tests, extra_args, conftest), "timeout": timeout,
                           "engine": chosen, "files": test_files}
                try:
                    self._proc.stdin.write((json.dumps(request) + "\n").encode())
                    self._proc.stdin.flush()
                except OSError:
                    self._stop()
                    raise VerifierError("the warm test runner is gone") from None
                line = self._read(timeout + 15)
                if line is None:  # the server itself died or stopped answering: the code under test killed it
                    self._stop()
                    return TestRun(status=RunStatus.CRASHED, outcomes={}, duration_s=time.perf_counter() - started)
                reply = json.loads(line)
                self.runs += 1
                return TestRun(status=RunStatus(reply["status"]), duration_s=round(time.perf_counter() - started, 6),
                               outcomes={k: TestOutcome(v) for k, v in reply["outcomes"].items()})
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)

    def _stop(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, 9)
            except ProcessLookupError:
                pass
            self._proc.wait()
            self._proc = None
        if self._sandbox is not None:
            ws = self._sandbox.workspace
            self._sandbox.close()
            shutil.rmtree(ws, ignore_errors=True)
            self._sandbox = None

    def close(self) -> None:
        with self._lock:
            self._stop()
            self._jobs.close()

    def __enter__(self) -> "WarmPytest":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def fresh_pytest(files: Mapping[str, bytes | str], tests: Sequence[str] = ("tests",), *, timeout: float = 60.0,
                 limits: Limits = RUNNER_LIMITS, extra_args: Sequence[str] = ()) -> TestRun:
    """A new sandbox and a new `python -m pytest` for one run (the baseline); outcomes from JUnit XML."""
    jobs = _Jobs()
    try:
        n, job_dir = jobs.write(files)
        report = Path(tempfile.mkdtemp(prefix="gymsmith-junit-"))
        os.chmod(report, 0o777)
        try:
            # the sandbox's workspace is only the report's directory; the job is mounted read-only
            with BwrapSandbox(report, limits, extra_ro={str(jobs.root): JOBS}) as sb:
                started = time.perf_counter()
                result = _exec_in(sb, f"{JOBS}/{n}", tests, extra_args, timeout)
                duration = time.perf_counter() - started
            xml = report / "junit.xml"
            outcomes = _parse_junit(xml) if xml.exists() else {}
            status = (RunStatus.TIMEOUT if result.killed is not None else
                      RunStatus.COMPLETED if xml.exists() else RunStatus.CRASHED)
            return TestRun(status=status, outcomes=outcomes, duration_s=round(duration, 6))
        finally:
            shutil.rmtree(report, ignore_errors=True)
    except SandboxError as exc:
        raise VerifierError(f"fresh pytest could not run: {exc}") from None
    finally:
        jobs.close()


def _exec_in(sb: BwrapSandbox, job_dir: str, tests: Sequence[str], extra: Sequence[str], timeout: float):
    # chdir into the job: the same working directory the warm server's child uses
    return sb.exec(["/bin/sh", "-c", 'cd "$0" && exec "$@"', job_dir, sb.runtime.interpreter, "-P", "-m", "pytest",
                    *_args(job_dir, tests, extra), "--junitxml=/workspace/junit.xml"], timeout=timeout)


def _parse_junit(path: Path) -> dict[str, TestOutcome]:
    """JUnit XML -> {nodeid: outcome}; classname 'tests.test_x' + name 'test_y' -> 'tests/test_x.py::test_y'."""
    out: dict[str, TestOutcome] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        if not cls:
            continue
        nodeid = f"{cls.replace('.', '/')}.py::{name}"
        kinds = {child.tag for child in case}
        if "error" in kinds:
            outcome = TestOutcome.ERROR
        elif "failure" in kinds:
            outcome = TestOutcome.FAILED
        elif "skipped" in kinds:
            outcome = TestOutcome.SKIPPED
        else:
            outcome = TestOutcome.PASSED
        previous = out.get(nodeid)
        if previous in (None, TestOutcome.PASSED):
            out[nodeid] = outcome
    return out


_shared: tuple[int, WarmPytest] | None = None
_shared_lock = threading.Lock()


def shared_runner() -> WarmPytest:
    """This process's warm runner, started on first use and closed at exit (a forked child makes its own)."""
    global _shared
    with _shared_lock:
        if _shared is None or _shared[0] != os.getpid():
            _shared = (os.getpid(), WarmPytest())
            atexit.register(_shared[1].close)
        return _shared[1]
