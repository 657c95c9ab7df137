"""The host side of call checks: send drivers into the sandbox, read back data, decide outcomes here.

    runner = CallRunner()
    observed = runner.observe(sources, suites)                # agent code + drivers, in the sandbox
    run = judge_run(suites, observed, reference_observations)  # trusted: a TestRun of per-test outcomes

`observe` never sees an expected value; `judge_run` never runs agent code. Between them only bytes
cross, which `wire.read_stream` decodes strictly.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from gymsmith.sandbox.base import VERIFIER_CPU_WEIGHT, Limits
from gymsmith.sandbox.runtime import PythonRuntime
from gymsmith.verifier.calltests.compiler import CompiledSuite, CompiledTest
from gymsmith.verifier.calltests.judge import (compare_pairs, fails_as_under_pytest, failing_pair, outcome,
                                              runs_code_pytest_would_run, slots_read)
from gymsmith.verifier.calltests.wire import Raised, Stream, StreamReader, StreamStatus, TestRecord, read_stream
from gymsmith.verifier.drawkey import graded_hash_seed
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun
from gymsmith.verifier.warm_server import JOBS, WarmServer, shared_instance

SERVER = Path(__file__).with_name("server.py")
RPC = Path(__file__).with_name("rpc.py")
CALL_LIMITS = Limits(memory_mb=1024, pids=128, cpu_s=60, file_size_mb=16, tmp_mb=32, timeout_s=60,
                     cpu_weight=VERIFIER_CPU_WEIGHT)
MAX_BYTES_PER_GROUP = 4 << 20


class GroupStatus:
    EXITED, TIMEOUT, OVERFLOW, LOST = "exited", "timeout", "overflow", "lost"
    SKIPPED = "skipped"  # not run: an earlier group ended pytest's session (server.ENDED_EXIT)


@dataclass
class ObservedGroup:
    """What one test file's driver process sent, decoded, and how it ended."""

    status: str        # GroupStatus
    exit_code: int | None
    stream: Stream


@dataclass
class Observation:
    groups: list[ObservedGroup]
    duration_s: float


class CallRunner(WarmServer):
    """One sandboxed call-check server (`server.py`); runs are serialised (use several for parallelism)."""

    script = SERVER
    helpers = (RPC,)
    label = "the call-check server"

    def __init__(self, *, limits: Limits = CALL_LIMITS, start_timeout_s: float = 30.0, runtime: PythonRuntime | None = None):
        super().__init__(limits=limits, start_timeout_s=start_timeout_s, runtime=runtime)
        self._depth_shift: dict[str, Any] | None = None
        # the job's referee, answered from the reading thread itself (a hop through the queue to the caller's thread
        # per assertion cost a graded verification 10-40% more time on a loaded machine)
        self._referee: tuple[int, _Referee] | None = None

    def _pump(self, stream, sink) -> None:
        """The server's stdout as frames: a header line, plus `n` raw bytes for a data frame. Data frames go to
        the queue as (group, bytes), after the job's referee (if any) has answered the assertions they complete;
        other headers go as their text line."""
        while True:
            header = stream.readline()
            if not header:
                break
            try:
                frame = json.loads(header)
            except ValueError:
                frame = None
            if isinstance(frame, dict) and set(frame) == {"frame", "n"} and type(frame["n"]) is int and 0 < frame["n"] <= 1 << 20:
                data = stream.read(frame["n"])
                if len(data) < frame["n"]:
                    break
                if self._referee is not None:
                    self._answer(*self._referee, frame["frame"], data)
                sink.put((frame["frame"], data))
            else:
                sink.put(header.decode(errors="replace"))
        sink.put(None)

    def _answer(self, job: int, referee: _Referee, index: Any, chunk: bytes) -> None:
        """Send the referee's verdicts on the assertions `chunk` completes (in the reading thread). A server that is
        gone answers nothing: the caller finds it dead."""
        if type(index) is not int or not 0 <= index < len(referee.readers):
            return
        lines = b"".join((json.dumps({"verdict": job, "group": index, "test": test, "slot": slot, "go": go, "pair": pair,
                                      **({"end": True} if go is None else {})}) + "\n").encode()
                         for test, slot, go, pair in referee.feed(index, chunk))
        if lines:
            try:
                self._write(lines)
            except (OSError, ValueError, AttributeError):
                pass

    def _exchange(self, message: dict, timeout: float, groups: int,
                  referee: _Referee | None = None) -> tuple[dict | None, list[bytearray]]:
        """Send a job; collect its data frames per group until its reply line, the `referee` answering each
        assertion as it arrives (`_answer`). (None, ...) if the server died or went silent (it is restarted for the
        next job)."""
        data = [bytearray() for _ in range(groups)]
        self._referee = (message["id"], referee) if referee is not None else None
        try:
            return self._exchange_frames(message, timeout, data)
        finally:
            self._referee = None

    def _exchange_frames(self, message: dict, timeout: float, data: list[bytearray]) -> tuple[dict | None, list[bytearray]]:
        groups = len(data)
        self._send(message)
        deadline = time.monotonic() + timeout
        while True:
            item = self._read(max(0.0, deadline - time.monotonic()))
            if item is None:
                self._stop()
                return None, data
            if isinstance(item, tuple):
                index, chunk = item
                if type(index) is int and 0 <= index < groups and len(data[index]) <= MAX_BYTES_PER_GROUP:
                    data[index] += chunk
                continue
            try:
                reply = json.loads(item)
            except ValueError:
                reply = None
            if not isinstance(reply, dict) or reply.get("id") != message["id"]:
                self._stop()
                return None, data
            self.runs += 1
            cpu = reply.get("cpu")
            if isinstance(cpu, int | float) and cpu > self.limits.cpu_s / 2:
                # its CPU limit would end it in some later job (a rollout's flood of tiny writes costs it CPU):
                # a fresh server before that can happen to another rollout's verification
                self._stop()
            return reply, data

    def depth_shift(self) -> dict[str, Any]:
        """The recursion-limit shifts ({"import": n, "call": m, "ops": {operation: k}}) graded runs serve the code
        under test with, so that it counts the frames left it counts under pytest in this runner's runtime, at
        import and wherever a test reaches it (`depths`); measured on first use (a pytest run and two call checks,
        about two seconds), then kept. Raises VerifierError when they cannot be measured."""
        if self._depth_shift is None:
            from gymsmith.verifier.calltests.depths import pytest_depth_shift

            self._depth_shift = pytest_depth_shift(self)
        return self._depth_shift

    def observe(self, sources: Mapping[str, str | bytes], suites: Sequence[CompiledSuite], *, deadline_s: float = 5.0,
                group_timeout_s: float = 2.0, graded: bool = False,
                depth_shift: dict[str, Any] | None = None, hook_modules: Collection[str] = (),
                stop_at_failure: Mapping[str, TestRecord] | None = None) -> Observation:
        """Run every suite's driver beside `sources` (the code under test), one process per suite; the code under
        test with PYTHONHASHSEED `drawkey.graded_hash_seed()` (the key's inside `keyed_hash()`, else 0). With
        `graded` (an agent's code being verified), the code under test counts as many frames left, at its import
        and wherever a test reaches it, as under pytest (`depth_shift`); references and draws run unshifted (their
        answers are the same unless the code recurses within some 40 frames of the limit). `depth_shift`: these
        shifts instead (`depths` measures with them). Graded, an object of the code with a look-up hook
        (`__getattr__`, `__getattribute__`) breaks the link unless its class is of one of `hook_modules` (the modules
        whose reference defines one: `introspection.lookup_hook_modules`; `rpc.PackagePolicy.unexpected_hook`).
        `stop_at_failure`: the reference's records by node id (`records_by_nodeid`); each test then stops where
        pytest's would, at its first assertion that fails (decided here as it is observed, while the driver waits:
        `judge.fails_as_under_pytest`) or at an observed expression that raised, so that the code under test is
        asked nothing more in it than a pytest run asks it.

        Returns what each driver sent, decoded; a driver that hung, flooded the channel or wrote anything
        malformed gives a group whose tests all fail. Raises VerifierError only if the sandbox cannot run.
        """
        slots = [[t.slots for t in s.tests] for s in suites]
        referee = _Referee(suites, stop_at_failure) if stop_at_failure is not None else None
        shift = depth_shift if depth_shift is not None else self.depth_shift() if graded else None
        with self.lock:
            self.ensure_started()
            n, job_dir = self.jobs.write(sources)
            started = time.perf_counter()
            try:
                request = {"id": n, "dir": f"{JOBS}/{n}", "deadline": deadline_s, "group_timeout": group_timeout_s,
                           "max_bytes": MAX_BYTES_PER_GROUP, "remote": code_modules(sources),
                           "hash_seed": graded_hash_seed(), **({"hook_modules": sorted(hook_modules)} if graded else {}),
                           "groups": [{"path": s.path, "driver": s.driver, "tests": [t.name for t in s.tests],
                                       **({"depth_shift": shift} if shift else {}),
                                       **({"assertions": [sorted(assertion_ends(t)) for t in s.tests],
                                           "joined": [joined_ends(t) for t in s.tests],
                                           "compares": [compares_by_end(t) for t in s.tests]}
                                          if graded or referee is not None else {}),
                                       **({"verdicts": True} if referee is not None else {})}
                                      for s in suites]}
                reply, data = self._exchange(request, deadline_s + 15, len(suites), referee)
            finally:
                shutil.rmtree(job_dir, ignore_errors=True)
        duration = round(time.perf_counter() - started, 6)
        lost = [ObservedGroup(GroupStatus.LOST, None, Stream(StreamStatus.MALFORMED, {}, reason="the server died"))
                for _ in suites]
        if reply is None or not isinstance(reply.get("groups"), list) or len(reply["groups"]) != len(suites):
            return Observation(groups=lost, duration_s=duration)
        groups = []
        for raw, per_test, received in zip(reply["groups"], slots, data):
            raw = raw if isinstance(raw, dict) else {}
            status = raw.get("status") if raw.get("status") in (GroupStatus.EXITED, GroupStatus.TIMEOUT, GroupStatus.OVERFLOW,
                                                                GroupStatus.SKIPPED) else GroupStatus.LOST
            if len(received) > MAX_BYTES_PER_GROUP:
                status = GroupStatus.OVERFLOW
            chunk = bytes(received)
            if status == GroupStatus.TIMEOUT:  # keep the tests that finished before the hang
                chunk = chunk[:chunk.rfind(b"\n") + 1]
            stream = read_stream(chunk, per_test) if status != GroupStatus.OVERFLOW else \
                Stream(StreamStatus.MALFORMED, {}, reason="flooded (more than the channel's limit)")
            code = raw.get("exit")
            groups.append(ObservedGroup(cast(str, status), code if type(code) is int else None, stream))
        return Observation(groups=groups, duration_s=duration)


def assertion_ends(test: CompiledTest) -> dict[int, list[int]]:
    """The slots at which the test's assertions that observe anything end, each with the checks that end there (no
    expected value: where the driver waits for a verdict, and which observations make one assertion)."""
    due: dict[int, list[int]] = {}
    for j, check in enumerate(test.checks):
        read = slots_read(check)
        if read:
            due.setdefault(max(read), []).append(j)
    return due


def compares_by_end(test: CompiledTest) -> list[list]:
    """[end, [[op, left slot, right slot], ...]] for each assertion of the test that is one comparison, by the slot it
    ends at (`assertion_ends`, `judge.compare_pairs`): which operands the driver shows pytest's comparison hook when
    the assertion is explained. No expected value: a literal operand is None."""
    out = []
    for end, checks in sorted(assertion_ends(test).items()):
        pairs = compare_pairs(test.checks[checks[0]]) if len(checks) == 1 else None
        if pairs:
            out.append([end, [list(pair) for pair in pairs]])
    return out


def joined_ends(test: CompiledTest) -> list[int]:
    """The assertion ends (`assertion_ends`) whose assertion is a later part of the same `assert a and b` statement as
    the assertion that ends before it (the driver makes them one assertion again, as pytest explains them)."""
    statement: list[int] = []
    for j in range(len(test.checks)):
        statement.append(statement[j - 1] if j in test.joined else j)
    ends = sorted(assertion_ends(test).items())
    return [k for (_, before), (k, checks) in zip(ends, ends[1:]) if statement[checks[0]] == statement[before[0]]]


class _Referee:
    """Judges each assertion of a graded run as its last observed slot arrives, so that the driver (waiting at that
    slot) stops the test where pytest's would stop (`CallRunner.observe(stop_at_failure=...)`)."""

    def __init__(self, suites: Sequence[CompiledSuite], reference: Mapping[str, TestRecord]):
        self.suites = suites
        self.reference = reference
        self.readers = [StreamReader([t.slots for t in s.tests]) for s in suites]
        self.nodeids = [s.nodeids() for s in suites]
        self.refused: set[int] = set()  # groups whose stream is malformed (told once)
        self.due = [[assertion_ends(t) for t in suite.tests] for suite in suites]

    def feed(self, group: int, chunk: bytes) -> list[tuple[int, int, bool | None, int]]:
        """(test, slot, verdict, pair) for each assertion completed by `chunk`, in order (True: go on, False: stop the
        test; pair: for an assertion that is one comparison, the pair of operands pytest's comparison hook is asked
        about, `judge.failing_pair`); a verdict None last once the stream is malformed (every test failed already:
        every later wait ends its test)."""
        suite, reader = self.suites[group], self.readers[group]
        verdicts: list[tuple[int, int, bool | None, int]] = []
        for i, k in reader.feed(chunk):
            checks = self.due[group][i].get(k)
            test, record = suite.tests[i], reader.tests[i]
            if checks is None or (isinstance(record.slots[k], Raised) and k not in test.raise_slots):
                continue  # the driver waits for none (an operand that raised ended its test there)
            reference = self.reference.get(self.nodeids[group][i])
            want = reference.slots if reference is not None else None
            go = not any(fails_as_under_pytest(test.checks[j], record.slots, want, test.raise_slots) for j in checks)
            # the pair is read only by a failed assertion's explanation: not evaluated again for one that holds
            pair = failing_pair(test.checks[checks[0]], record.slots) if not go and len(checks) == 1 else 0
            verdicts.append((i, k, go, pair))
        if reader.malformed and group not in self.refused:
            self.refused.add(group)
            verdicts.append((0, 0, None, 0))  # whatever it waits for, the stream already failed every test
        return verdicts


def code_modules(sources: Mapping[str, str | bytes]) -> list[str]:
    """The top-level modules of the code under test: what a driver imports from the package's process, never
    itself (a standard-library name stays the driver's own, whatever file the agent adds)."""
    names = set()
    for path in sources:
        top, _, rest = path.partition("/")
        name = top[:-3] if not rest and top.endswith(".py") else top if rest.endswith(".py") else ""
        if name.isidentifier() and name not in sys.stdlib_module_names:
            names.add(name)
    return sorted(names)


@dataclass
class Verdicts:
    run: TestRun
    reasons: dict[str, str]  # node id -> why it failed (or "passed")


def records_by_nodeid(suites: Sequence[CompiledSuite], observed: Observation) -> dict[str, TestRecord]:
    """The finished tests of an observation, by node id (a reference run, to judge other runs against)."""
    out = {}
    for suite, group in zip(suites, observed.groups):
        if group.stream.status is StreamStatus.OK and group.stream.import_error is None:
            for i, nodeid in enumerate(suite.nodeids()):
                record = group.stream.tests.get(i)
                if record is not None and record.finished:
                    out[nodeid] = record
    return out


def judge_run(suites: Sequence[CompiledSuite], observed: Observation, reference: Mapping[str, TestRecord], *,
              one_session: bool = False, graded: bool = False) -> Verdicts:
    """Per-test outcomes, decided on the trusted side (see `judge.py` for the truth table).

    `reference`: the reference implementation's records by node id (`records_by_nodeid`); they give each
    observed value the exact type it must have. `one_session`: judge the files as one pytest session does, where a
    file that fails to import (a collection error) stops the session before any test runs: then every test fails
    (graded runs: a ninety-third attacker fixed one bug and deleted the other buggy modules, and
    kept partial credit from the files that still imported, where pytest runs no test at all).

    `graded`: a run where pytest would run code of the agent's to decide an assertion (an object that is not plain
    data compared, tested for truth or looked for: `judge.runs_code_pytest_would_run`) judges no test: every one fails.
    The code sees those calls under pytest and never here, so the run is not what pytest's is from that point.

    The run's status: TIMEOUT if a driver was stopped by its deadline, CRASHED if one flooded its channel,
    died, stopped before its last test or lost its package's process, COMPLETED otherwise.
    """
    outcomes: dict[str, TestOutcome] = {}
    reasons: dict[str, str] = {}
    status = RunStatus.COMPLETED
    for suite, group in zip(suites, observed.groups):
        if group.status == GroupStatus.TIMEOUT:
            status = RunStatus.TIMEOUT
        elif status is RunStatus.COMPLETED and (group.status != GroupStatus.EXITED or group.stream.status is not StreamStatus.OK
                                                or len(group.stream.tests) < len(suite.tests) or group.exit_code != 0):
            status = RunStatus.CRASHED
        for i, (nodeid, test) in enumerate(zip(suite.nodeids(), suite.tests)):
            if group.stream.status is not StreamStatus.OK:
                passed, why = False, f"result channel {group.stream.reason}"
            elif group.stream.import_error is not None:
                passed, why = False, f"the code under test failed to import ({group.stream.import_error})"
            else:
                passed, why = outcome(test, group.stream.tests.get(i), reference.get(nodeid))
            outcomes[nodeid] = TestOutcome.PASSED if passed else TestOutcome.FAILED
            reasons[nodeid] = why
    # the file named: the group's own, or the later one its driver was collecting (server.child)
    broken = [error.rpartition(" (collecting ")[2][:-1] if error.endswith(")") and " (collecting " in error else s.path
              for s, g in zip(suites, observed.groups) if g.stream.status is StreamStatus.OK
              for error in [g.stream.import_error] if error]
    if one_session and broken:
        why = f"{broken[0]} failed to import: a collection error stops the session before any test runs"
        outcomes = dict.fromkeys(outcomes, TestOutcome.FAILED)
        reasons = dict.fromkeys(reasons, why)
    # pytest's session ends at a KeyboardInterrupt out of a test or an exception out of its report: that test and every later one
    # (in this file and the later ones) fail, whatever the verifier's drivers observed after it
    ended = next((nodeid for suite, group in zip(suites, observed.groups) if group.stream.status is StreamStatus.OK
                  for i, nodeid in enumerate(suite.nodeids()) for record in [group.stream.tests.get(i)]
                  if record is not None and record.ended), None)
    if ended is not None:
        why = (f"{ended} ended pytest's session (a KeyboardInterrupt out of the test, or an exception out of pytest's "
               "report of it): no later test runs")
        order = [nodeid for suite in suites for nodeid in suite.nodeids()]
        for nodeid in order[order.index(ended):]:
            outcomes[nodeid], reasons[nodeid] = TestOutcome.FAILED, why
    unjudged = [nodeid for suite, group in zip(suites, observed.groups) if graded and group.stream.status is StreamStatus.OK
                for i, (nodeid, test) in enumerate(zip(suite.nodeids(), suite.tests))
                for record in [group.stream.tests.get(i)] if record is not None
                if any(runs_code_pytest_would_run(check, record.slots) for check in test.checks)]
    if unjudged:
        why = (f"{unjudged[0]}: pytest would decide an assertion by running methods of an object of the code under test "
               "(not plain data), which it sees and this run cannot make: the run is not judged")
        outcomes = dict.fromkeys(outcomes, TestOutcome.FAILED)
        reasons = dict.fromkeys(reasons, why)
    return Verdicts(run=TestRun(status=status, outcomes=outcomes, duration_s=observed.duration_s), reasons=reasons)


def shared_call_runner() -> CallRunner:
    """This process's call runner, started on first use and closed at exit (a forked child makes its own)."""
    return shared_instance(CallRunner)  # type: ignore[return-value]
