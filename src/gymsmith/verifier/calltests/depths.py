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

A call's count depends on where the test makes it: inside a comprehension, a generator expression or a lambda it
is one fewer than written directly in the test, and through `len()` or an operator the interpreter counts the C
call too. A seventy-sixth attacker's device ran the fix only where a call counted what a direct call counts under
pytest, so a call made in a comprehension ran the bug under pytest and the fix in the verifier (accepted on 19 of
19 tasks). So the driver sends each request's depth in its test (`rpc.Link.request`, `server.remaining_reader`),
the package process serves it at that depth with a shift of the operation's own (`rpc.PackagePolicy`), and the
shifts are measured here for every operation a proxy forwards (`OPS`: the same operations under pytest and in the
package process); the measurement checks itself on the same operations in other contexts.
"""

from __future__ import annotations

import json
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
                group_timeout_s: float = ..., graded: bool = ..., depth_shift: dict[str, Any] | None = ...) -> Any: ...

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
# Every way a test reaches graded code through the driver (each `rpc` operation a proxy forwards), recorded with the
# frames left in the graded method it reaches; then the same in contexts a test puts calls in (a comprehension, a
# generator expression, a lambda, an asserted expression), which the driver must report as pytest has them.
OPS_MODULE = "gs_depth_ops"
OPS = f'''from {PROBE_MODULE} import left

SEEN = []
WHERE = ["stmt"]


def note(name, value=None):
    SEEN.append([WHERE[0], name, left()])
    return value


def seen():
    return SEEN


def where(label):
    WHERE[0] = label


def f():
    return note("call")


class It:
    def __next__(self):
        return note("next", 1)


class P:
    def __getattr__(self, name):
        return note("getattr", 1)

    def __setattr__(self, name, value):
        note("setattr")

    def __delattr__(self, name):
        note("delattr")

    def __call__(self):
        return note("call_instance")

    def __setitem__(self, key, value):
        note("setitem")

    def __delitem__(self, key):
        note("delitem")

    def __getitem__(self, key):
        return note("getitem", 1)

    def __contains__(self, item):
        return note("contains", True)

    def __format__(self, spec):
        return note("format", "")

    def __round__(self, digits=None):
        return note("round", 1)

    def __exit__(self, kind, exc, tb):
        return note("exit", False)

    def __instancecheck__(self, obj):
        return note("instancecheck", False)

    def __subclasscheck__(self, cls):
        return note("subclasscheck", False)


def _unary(op, value):
    def method(self):
        return note(op, self if value is SELF else value())
    return method


SELF = object()  # what neg, pos, abs, invert and enter return
for _op, _value in (("iter", It), ("next", lambda: 1), ("len", lambda: 1), ("bool", lambda: True),
                    ("hash", lambda: 1), ("repr", lambda: "p"), ("str", lambda: "p"), ("bytes", lambda: b""),
                    ("index", lambda: 1), ("int", lambda: 1), ("float", lambda: 1.0), ("complex", lambda: 1j),
                    ("reversed", lambda: iter(())), ("dir", list), ("trunc", lambda: 1), ("floor", lambda: 1),
                    ("ceil", lambda: 1), ("enter", SELF), ("neg", SELF), ("pos", SELF), ("abs", SELF), ("invert", SELF)):
    setattr(P, "__" + _op + "__", _unary(_op, _value))


def _binary(op):
    def method(self, other):
        return note(op, self)
    return method


for _op in ("add", "sub", "mul", "matmul", "truediv", "floordiv", "mod", "pow", "lshift", "rshift", "and", "or",
            "xor", "divmod"):
    setattr(P, "__" + _op + "__", _binary(_op))
    setattr(P, "__r" + _op + "__", _binary("r" + _op))
    if _op != "divmod":
        setattr(P, "__i" + _op + "__", _binary("i" + _op))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(P, "__" + _op + "__", _binary(_op))


def make():
    return object.__new__(P)
'''
OPS_STATEMENTS = """    p = make()
    f()
    p()
    p.missing
    p.x = 1
    del p.x
    p[0] = 1
    del p[0]
    p[0]
    1 in p
    format(p, "")
    round(p)
    with p:
        pass
    isinstance(1, p)
    issubclass(int, p)
    iter(p)
    next(p)
    len(p)
    bool(p)
    hash(p)
    repr(p)
    str(p)
    bytes(p)
    operator.index(p)
    int(p)
    float(p)
    complex(p)
    reversed(p)
    dir(p)
    math.trunc(p)
    math.floor(p)
    math.ceil(p)
    -p
    +p
    abs(p)
    ~p
    p + 1
    p - 1
    p * 1
    p @ 1
    p / 1
    p // 1
    p % 1
    p ** 1
    p << 1
    p >> 1
    p & 1
    p | 1
    p ^ 1
    divmod(p, 1)
    1 + p
    1 - p
    1 * p
    1 @ p
    1 / p
    1 // p
    1 % p
    1 ** p
    1 << p
    1 >> p
    1 & p
    1 | p
    1 ^ p
    divmod(1, p)
    q = make()
    q += 1
    q -= 1
    q *= 1
    q @= 1
    q /= 1
    q //= 1
    q %= 1
    q **= 1
    q <<= 1
    q >>= 1
    q &= 1
    q |= 1
    q ^= 1
    p == 1
    p != 1
    p < 1
    p <= 1
    p > 1
    p >= 1
    where("comp")
    [f() for _ in range(1)]
    [len(p) for _ in range(1)]
    [p[0] for _ in range(1)]
    [p == 1 for _ in range(1)]
    where("genexp")
    list(f() for _ in range(1))
    list(p + 1 for _ in range(1))
    where("lambda")
    (lambda: f())()
    (lambda: len(p))()
    (lambda: p.missing)()
    where("nested")
    [[f() for _ in range(1)] for _ in range(1)]
    where("assert")
    assert f() != 2
    assert len(p) != 2
    assert p[0] != 2
"""
OPS_HEAD = f"import math\nimport operator\n\nfrom {OPS_MODULE} import f, make, seen, where\n"
OPS_PYTEST_PROBE = OPS_HEAD + "import json\n\n\ndef test_ops():\n" + OPS_STATEMENTS + \
    '    assert False, "GSOPS " + json.dumps(seen())\n'
OPS_CALL_PROBE = OPS_HEAD + "\n\ndef test_ops():\n" + OPS_STATEMENTS + "    assert seen() == 0\n"
# pytest's report of a test that failed by the code's exception runs the code (`str` of the exception, `repr` of the
# raising frame's arguments) from pytest's own reporting frames; the package makes it at its "report" operation
# (`rpc._pytest_failure_report`), whose shift is measured apart: a graded run, where the driver asks for reports
REPORT_MODULE = "gs_depth_report"
# (a `left` of its own: the depth probe's module must first be imported where its import count is measured)
REPORT = LEFT + '''
SEEN = []


class Failure(Exception):
    def __str__(self):
        SEEN.append(left())
        return "failure"


def fail():
    raise Failure()


def seen():
    return SEEN
'''
REPORT_TESTS = f"from {REPORT_MODULE} import fail, seen\n\n\ndef test_a_failure():\n    fail()\n\n\n"
REPORT_PYTEST_PROBE = "import json\n" + REPORT_TESTS + \
    'def test_report():\n    assert False, "GSREPORT " + json.dumps(seen())\n'
REPORT_CALL_PROBE = REPORT_TESTS + "def test_report():\n    assert seen() == 0\n"
MAX_SHIFT = 500  # server.group_depth_shift's bound
PYTEST_INI = "[pytest]\npythonpath = .\n"  # as a code task's workspace has it (generator.PYTEST_INI)


def _pytest_output(runner: CallRunner) -> tuple[str, str, int]:
    """(stdout, stderr, exit code) of pytest run, as `run_tests` runs it, on both probes in a sandbox of `runner`'s
    runtime."""
    from gymsmith.sandbox.base import VERIFIER_CPU_WEIGHT, Limits
    from gymsmith.sandbox.bwrap import BwrapSandbox

    with tempfile.TemporaryDirectory(prefix="gymsmith-depth-") as tmp:
        root = Path(tmp)
        (root / f"{PROBE_MODULE}.py").write_text(PROBE)
        (root / f"{OPS_MODULE}.py").write_text(OPS)
        (root / f"{REPORT_MODULE}.py").write_text(REPORT)
        (root / "tests").mkdir()
        (root / "tests" / "test_gs_depth.py").write_text(PYTEST_PROBE)
        (root / "tests" / "test_gs_ops.py").write_text(OPS_PYTEST_PROBE)
        # first of the session: pytest's report code is then as fresh as in the package process's first report (the
        # interpreter specializes its calls once they have run a few times, one frame more left after: 949 for a
        # session's first failure by the code's exception, 950 after other failures)
        (root / "tests" / "test_gs_a_report.py").write_text(REPORT_PYTEST_PROBE)
        (root / "pytest.ini").write_text(PYTEST_INI)
        with BwrapSandbox(root, Limits(cpu_weight=VERIFIER_CPU_WEIGHT), runtime=runner.runtime) as sandbox:
            python = sandbox.runtime.interpreter
            result = sandbox.exec([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], timeout=120)
    return result.stdout, result.stderr, result.exit_code


def counts_under_pytest(runner: CallRunner) -> tuple[int, int]:
    """(frames left at import, frames left in a call from a test) of the probe run by pytest as `run_tests` runs
    it, in a sandbox of `runner`'s runtime. Raises VerifierError when pytest does not report them."""
    return _under_pytest(runner)[0]


def _under_pytest(runner: CallRunner) -> tuple[tuple[int, int], list[list[Any]], list[int]]:
    stdout, stderr, code = _pytest_output(runner)
    found = re.search(r"GSDEPTH (\d+) (\d+)", stdout)
    ops = re.search(r"GSOPS (\[.*?\]\])", stdout)
    report = re.search(r"GSREPORT (\[[\d, ]*\])", stdout)
    if found is None or ops is None or report is None:
        raise VerifierError("could not measure the stack depth pytest runs tests at (for the call checks' depth "
                            f"shift): exit {code}, output {stdout[-500:]!r} {stderr[-500:]!r}")
    return (int(found.group(1)), int(found.group(2))), json.loads(ops.group(1)), json.loads(report.group(1))


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


def ops_in_package_process(runner: CallRunner) -> list[list[Any]]:
    """What the operations probe records in `runner`'s package process served at each request's depth with no
    shift: [context, operation, frames left] for each operation the test makes. Raises VerifierError when the call
    check does not report them."""
    suite = compile_suite(OPS_CALL_PROBE, "tests/test_gs_ops.py")
    observed = runner.observe({f"{PROBE_MODULE}.py": PROBE, f"{OPS_MODULE}.py": OPS}, [suite], deadline_s=60,
                              group_timeout_s=30, depth_shift={"import": 0, "call": 0, "ops": {}})
    record = observed.groups[0].stream.tests.get(0)
    slots = record.slots if record is not None else []
    seen = slots[-1] if slots else None
    if not isinstance(seen, list) or not seen:
        raise VerifierError(f"could not measure the stack depth of the call checks' package process: {slots!r}")
    return [list(entry) for entry in seen]


def report_in_package_process(runner: CallRunner) -> list[int]:
    """The frames left in the code's `__str__` each time the package makes pytest's report of a test that failed by
    the code's exception (a graded run, served unshifted). Raises VerifierError when the call check does not report
    them."""
    suite = compile_suite(REPORT_CALL_PROBE, "tests/test_gs_report.py")
    observed = runner.observe({f"{PROBE_MODULE}.py": PROBE, f"{REPORT_MODULE}.py": REPORT}, [suite], deadline_s=60,
                              group_timeout_s=30, graded=True, depth_shift={"import": 0, "call": 0, "ops": {}})
    record = observed.groups[0].stream.tests.get(1)
    seen = record.slots[-1] if record is not None and record.slots else None
    if not isinstance(seen, list) or not seen or not all(type(n) is int for n in seen):
        raise VerifierError(f"could not measure the stack depth of the call checks' failure reports: {seen!r}")
    return seen


def pytest_depth_shift(runner: CallRunner) -> dict[str, Any]:
    """The shifts ({"import": n, "call": m, "ops": {operation: k}}) that make graded code in `runner`'s package
    process count the frames left that it counts under pytest, at import and through every operation a test makes,
    wherever in the test it makes it. Raises VerifierError when either side cannot be measured, or when the
    operations made inside comprehensions, generator expressions, lambdas and assertions would not count what they
    count under pytest (the driver cannot read its depth in this runtime: `server.remaining_reader`)."""
    (pytest_import, _), pytest_ops, pytest_report = _under_pytest(runner)
    ours_import, _ = counts_in_package_process(runner)
    ours_ops = ops_in_package_process(runner)
    ours_report = report_in_package_process(runner)
    report = {n - m for n, m in zip(pytest_report, ours_report)}
    if len(pytest_report) != len(ours_report) or len(report) != 1:
        raise VerifierError(f"the call checks' failure reports run the code other than pytest's: frames left "
                            f"{ours_report} against {pytest_report}")
    theirs = {(where, op): n for where, op, n in pytest_ops}
    ours = {(where, op): n for where, op, n in ours_ops}
    if set(theirs) != set(ours) or len(theirs) != len(pytest_ops) or len(ours) != len(ours_ops):
        raise VerifierError(f"the call checks' package process made other operations than pytest: {sorted(ours)} "
                            f"against {sorted(theirs)}")
    by_op: dict[str, int] = {}
    for (where, op), n in theirs.items():
        if where == "stmt":
            by_op[op] = n - ours[where, op]
    if by_op.get("call") != by_op.pop("call_instance", None):
        raise VerifierError(f"calling a function and an object count different depths in the call checks: {by_op}")
    wrong = {f"{op} in {where}": (ours[where, op] + by_op[op], n) for (where, op), n in theirs.items()
             if where != "stmt" and ours[where, op] + by_op[op] != n}
    if wrong:
        raise VerifierError(f"graded code would count other frames left than under pytest (ours, pytest's): {wrong}; "
                            "the driver cannot read its depth in this runtime")
    call = by_op.pop("call")
    by_op["report"] = report.pop()
    values = [pytest_import - ours_import, call, *by_op.values()]
    shift = {"import": values[0], "call": call, "ops": {op: k for op, k in by_op.items() if k != call}}
    if not all(-MAX_SHIFT <= v <= MAX_SHIFT for v in values):  # the server takes none beyond
        raise VerifierError(f"the call checks' depth shifts {shift} are beyond +-{MAX_SHIFT} frames")
    return shift
