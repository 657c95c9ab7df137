"""Running a pytest suite on untrusted code, in a sandbox, with per-test outcomes.

For test suites that must run beside the code they test (repositories brought by users). Generated
tasks are verified with call checks instead (`verifier/calltests`), whose outcomes the code under test
cannot forge; `docs/verifier.md` says what each path guarantees.
- `WarmPytest`: a long-lived sandboxed server that has pytest imported and forks once per test
  (`pytest_server.py`). Costs a fork, not an interpreter start and pytest's imports.
- `fresh_pytest`: a new `python -m pytest` per run in a new sandbox, reporting through JUnit XML. The
  baseline, and the reference the warm paths are checked against.

A run takes the files of a job (`{relative path: bytes}`); they are written into a private directory
that is mounted read-only into the sandbox and removed afterwards. Infrastructure failures raise
`VerifierError`; what the code under test does (fail, hang, crash the runner) is a `TestRun`.
"""

from __future__ import annotations

import enum
import os
import shutil
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from gymsmith.core.errors import VerifierError
from gymsmith.sandbox import sharedfs
from gymsmith.sandbox.base import VERIFIER_CPU_WEIGHT, Limits, SandboxError
from gymsmith.sandbox.bwrap import BwrapSandbox
from gymsmith.sandbox.runtime import PythonRuntime
from gymsmith.verifier.warm_server import JOBS, JobFiles, WarmServer, shared_instance

SERVER = Path(__file__).with_name("pytest_server.py")
SERVER_GRACE_S = 15  # past a job's deadline, how long a silent server is waited for before it is ended
RUNNER_LIMITS = Limits(memory_mb=1024, pids=128, cpu_s=60, file_size_mb=16, tmp_mb=32, timeout_s=60,
                       cpu_weight=VERIFIER_CPU_WEIGHT)
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


def _args(job_dir: str, tests: Sequence[str], extra: Sequence[str] = (), conftest: bool = False,
          config: str = "pytest.ini") -> list[str]:
    return [*BASE_ARGS, *(() if conftest else ("--noconftest",)), "-c", f"{job_dir}/{config}", "--rootdir", job_dir,
            *extra, *tests]


def walk_order(tests: Sequence[str]) -> list[str]:
    """The files of node ids `tests`, once each, in the order pytest's walk of the directory they share meets them
    (each directory's entries sorted by name, files and directories alike)."""
    return sorted({t.split("::", 1)[0] for t in tests}, key=lambda path: path.split("/"))


def _reported_run(reply: Mapping[str, Any], duration_s: float) -> TestRun:
    """The run a server's reply reports, read totally: code under test can write to the report, so a status that is
    not one is a crash, and a test's outcome that is not one is a failure (never a pass, never an exception on the
    host: a hundred-and-thirty-second attacker's "bogus" outcome made the rollout an infrastructure error)."""
    status = reply.get("status")
    outcomes = reply.get("outcomes")
    known = {o.value: o for o in TestOutcome}
    return TestRun(status=RunStatus(status) if status in {s.value for s in RunStatus} else RunStatus.CRASHED,
                   duration_s=duration_s,
                   outcomes={k: known.get(v, TestOutcome.FAILED) if isinstance(v, str) else TestOutcome.FAILED
                             for k, v in (outcomes.items() if isinstance(outcomes, dict) else ()) if isinstance(k, str)})


class WarmPytest(WarmServer):
    """One sandboxed pytest server (`pytest_server.py`); runs are serialised (use several instances for parallelism).

    Raises VerifierError if the server cannot start or stops answering. If the code under test kills
    the server, that run is CRASHED and a new server is started for the next one.
    """

    script = SERVER

    def __init__(self, *, limits: Limits = RUNNER_LIMITS, start_timeout_s: float = 30.0):
        super().__init__(limits=limits, start_timeout_s=start_timeout_s)

    def run(self, files: Mapping[str, bytes | str], tests: Sequence[str] = ("tests",), *, timeout: float = 30.0,
            extra_args: Sequence[str] = (), conftest: bool = False, isolate: bool = False, config: str = "pytest.ini",
            path_first: bool = False, directories: Sequence[str] = (), hash_seed: int = 0,
            job_name: str = "job", collection_order: bool = False) -> TestRun:
        """Run `tests` (paths or node ids inside the job) on `files` with `pytest.main`; per-test outcomes.

        `conftest`: load the job's conftest.py files (only for conftests the verifier itself supplies).
        `config`: the job's file pytest reads its configuration from (a default `pytest.ini` is written when the job
        has none). `path_first`: the job's directory first on `sys.path`, as `python -m pytest` runs. `directories`:
        made in the job even when no file of `files` is in them. `hash_seed`: the PYTHONHASHSEED the tests run under
        (the server is started again when it changes; graded code runs under `drawkey.graded_hash_seed()`'s).
        `job_name`: the name of the directory the job runs in (`pid1.JOB_NAME`; another is "job").
        `isolate`: `tests` are node ids, each run in its own process forked from the server before any code
        under test is imported; a process reports for its own test only, and a crash or hang costs that test
        (and, for a hang, the rest of `timeout`).
        `collection_order`: `tests` are node ids, run in one session in the order `python -m pytest` of the suite runs
        them (their files given whole, in the order pytest's directory walk meets them; only the listed tests kept),
        not in the list's order.
        """
        with self.lock:
            self.ensure_started(hash_seed)
            n, job_dir = self.jobs.write(files, {"pytest.ini": PYTEST_INI}, directories)
            started = time.perf_counter()
            try:
                given = () if isolate else walk_order(tests) if collection_order else tests
                request = {"id": n, "dir": f"{JOBS}/{n}", "timeout": timeout, "isolate": isolate, "tests": list(tests),
                           "path_first": path_first, "name": job_name,
                           "args": _args(f"{JOBS}/{n}", given, extra_args, conftest, config)}
                if collection_order and not isolate:
                    request["keep"] = list(tests)
                reply = self.request(request, timeout + SERVER_GRACE_S)
                if reply is None:  # the server itself died or stopped answering: the code under test killed it
                    return TestRun(status=RunStatus.CRASHED, outcomes={}, duration_s=time.perf_counter() - started)
                return _reported_run(reply, round(time.perf_counter() - started, 6))
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)


def fresh_pytest(files: Mapping[str, bytes | str], tests: Sequence[str] = ("tests",), *, timeout: float = 60.0,
                 limits: Limits = RUNNER_LIMITS, extra_args: Sequence[str] = (), runtime: PythonRuntime | None = None,
                 ini: str = PYTEST_INI) -> TestRun:
    """A new sandbox and a new `python -m pytest` for one run (the baseline); outcomes from JUnit XML.

    `runtime`: the packages the sandbox sees (pytest by default); `ini`: the pytest.ini used when `files` has none."""
    jobs = JobFiles()
    try:
        n, job_dir = jobs.write(files, {"pytest.ini": ini})
        report = sharedfs.scratch("junit-")
        os.chmod(report, 0o777)
        try:
            # the sandbox's workspace is only the report's directory; the job is mounted read-only
            with BwrapSandbox(report, limits, extra_ro={str(jobs.root): JOBS}, runtime=runtime) as sb:
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


def shared_runner() -> WarmPytest:
    """This process's warm pytest runner, started on first use and closed at exit (a forked child makes its own)."""
    return shared_instance(WarmPytest)  # type: ignore[return-value]
