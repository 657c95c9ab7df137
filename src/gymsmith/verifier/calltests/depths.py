"""How many frames graded code has left in the verifier, made equal to an ordinary pytest run's.

Code can count the frames it has left by recursing until RecursionError: pure code that no rule of the
introspection check can see. The package process serves the driver's requests from a fixed depth of its own
(public) code, so the count it gave (991 at a call against about 957 in a pytest test and 995 in `python -c`) was
a number only the verifier's process had, and a fifty-sixth attacker's device, the fix only where the count said
"verifier", was accepted on 27 of 28 template tasks. For graded runs the package process moves its recursion limit
while it serves a request (`rpc.PackagePolicy`): by one shift while it imports the code under test and by another
while it calls it, measured here so that the counts at import and in a call a test makes are those of the same
code under pytest, run in the same runtime as the code environment's `run_tests` tool runs it. A device that reads
the count then cannot tell the verifier from the agent's own test run; one that is right only under pytest is
right where it is verified, and nothing decided by running tests can tell it from code that is.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from gymsmith.core.errors import VerifierError
from gymsmith.sandbox.runtime import PythonRuntime
from gymsmith.verifier.calltests.compiler import CompiledSuite, compile_suite


class CallRunner(Protocol):
    """What is measured: a call runner (`runner.CallRunner`, which imports this module) and its runtime."""

    runtime: PythonRuntime | None

    def observe(self, sources: Mapping[str, str | bytes], suites: Sequence[CompiledSuite], *, deadline_s: float = ...,
                group_timeout_s: float = ..., graded: bool = ...) -> Any: ...

PROBE_MODULE = "gs_depth_probe"
LEFT = '''def left():
    def down(n):
        try:
            return down(n + 1)
        except RecursionError:
            return n
    return down(0)
'''  # the frames left where it is called, counted the only way pure code can
PROBE = LEFT + "\n\nAT_IMPORT = left()\n"
PYTEST_PROBE = f'''from {PROBE_MODULE} import AT_IMPORT, left


def test_depth():
    at_call = left()
    assert False, f"GSDEPTH {{AT_IMPORT}} {{at_call}}"
'''
CALL_PROBE = f'''from {PROBE_MODULE} import AT_IMPORT, left


def test_depth():
    assert AT_IMPORT == 0
    assert left() == 0
'''
MAX_SHIFT = 500  # server.group_depth_shift's bound
PYTEST_INI = "[pytest]\npythonpath = .\n"  # as a code task's workspace has it (generator.PYTEST_INI)


def counts_under_pytest(runner: CallRunner) -> tuple[int, int]:
    """(frames left at import, frames left in a call from a test) of the probe run by pytest as `run_tests` runs
    it, in a sandbox of `runner`'s runtime. Raises VerifierError when pytest does not report them."""
    from gymsmith.sandbox.bwrap import BwrapSandbox

    with tempfile.TemporaryDirectory(prefix="gymsmith-depth-") as tmp:
        root = Path(tmp)
        (root / f"{PROBE_MODULE}.py").write_text(PROBE)
        (root / "tests").mkdir()
        (root / "tests" / "test_gs_depth.py").write_text(PYTEST_PROBE)
        (root / "pytest.ini").write_text(PYTEST_INI)
        with BwrapSandbox(root, runtime=runner.runtime) as sandbox:
            python = sandbox.runtime.interpreter
            result = sandbox.exec([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], timeout=120)
    found = re.search(r"GSDEPTH (\d+) (\d+)", result.stdout)
    if found is None:
        raise VerifierError("could not measure the stack depth pytest runs tests at (for the call checks' depth "
                            f"shift): exit {result.exit_code}, output {result.stdout[-500:]!r} {result.stderr[-500:]!r}")
    return int(found.group(1)), int(found.group(2))


def counts_in_package_process(runner: CallRunner) -> tuple[int, int]:
    """(frames left at import, in a call) of the probe in `runner`'s package process, unshifted. Raises
    VerifierError when the call check does not report them."""
    suite = compile_suite(CALL_PROBE, "tests/test_gs_depth.py")
    observed = runner.observe({f"{PROBE_MODULE}.py": PROBE}, [suite], deadline_s=60, group_timeout_s=30)
    record = observed.groups[0].stream.tests.get(0)
    slots = record.slots if record is not None else []
    if len(slots) != 2 or not all(type(v) is int for v in slots):
        raise VerifierError(f"could not measure the stack depth of the call checks' package process: {slots!r}")
    return slots[0], slots[1]


def pytest_depth_shift(runner: CallRunner) -> dict[str, int]:
    """The shifts ({"import": n, "call": m}) that make graded code in `runner`'s package process count the frames
    left that it counts under pytest. Raises VerifierError when either side cannot be measured."""
    pytest_import, pytest_call = counts_under_pytest(runner)
    ours_import, ours_call = counts_in_package_process(runner)
    shift = {"import": pytest_import - ours_import, "call": pytest_call - ours_call}
    if not all(-MAX_SHIFT <= v <= MAX_SHIFT for v in shift.values()):  # the server takes none beyond
        raise VerifierError(f"the call checks' depth shift {shift} is beyond +-{MAX_SHIFT} frames: pytest counts "
                            f"{pytest_import}/{pytest_call} frames left, the package process {ours_import}/{ours_call}")
    return shift
