"""Deciding outcomes on the trusted side, from decoded plain data only.

A test passes exactly when every row holds:

| condition                                                             | else                  |
|-----------------------------------------------------------------------|-----------------------|
| its group's stream is well formed and the test's imports worked        | failed (malformed / import error) |
| the driver finished the test (every slot observed, no uncaught error) | failed (missing / error) |
| every observed slot has the exact type structure the reference's has  | failed (type)         |
|   (`wire.signature`: int is not bool is not float, list is not tuple, no subclass, no proxy) |  |
| a slot that raised reports the builtin exception classes the reference's did | failed (raised)  |
| every check evaluates to True on the decoded values                   | failed (check)        |

Evaluation uses only builtin operations on values the verifier itself built from the stream (ints, strs,
lists...): no method of the agent's choosing can run here. `==` between observed and expected values is
Python's on plain data; `pytest.approx` compares floats with pytest's default tolerances.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from gymsmith.verifier.calltests.compiler import Approx, Check, CompiledTest, leaves
from gymsmith.verifier.calltests.wire import Opaque, Raised, TestRecord, signature


class _CheckFailed(Exception):
    pass


class _NotJudged(_CheckFailed):
    """The check fails here because this side does not decide it, where pytest would run code of the agent's (or
    decide by the interpreter's choice): whether pytest's assertion fails is not known."""


def _approx_equal(observed: Any, expected: Approx) -> bool:
    def close(a: Any, e: Any) -> bool:
        if type(a) not in (int, float) or type(e) not in (int, float):
            return False
        if math.isinf(e) or math.isinf(a):
            return a == e
        if expected.rel is None and expected.abs is not None:  # as pytest: an absolute tolerance alone is the tolerance
            tol = expected.abs
        else:
            rel = 1e-6 if expected.rel is None else expected.rel
            tol = max(rel * abs(e), 1e-12 if expected.abs is None else expected.abs)
        return abs(a - e) <= tol

    e = expected.expected
    if type(e) in (list, tuple):
        return type(observed) is type(e) and len(observed) == len(e) and all(close(a, x) for a, x in zip(observed, e))
    return close(observed, e)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(b, Approx):
        return _approx_equal(a, b)
    if isinstance(a, Approx):
        return _approx_equal(b, a)
    if isinstance(a, Opaque | Raised) or isinstance(b, Opaque | Raised):
        return False
    return bool(a == b)  # plain builtins on both sides (see module docstring)


def _undecided(value: Any, budget: list[int] | None = None) -> bool:
    """Whether `value` is or holds something only the code under test could compare (an object of its own, an
    exception): pytest would run the code's own methods there, so no comparison with it is decided here."""
    budget = budget if budget is not None else [100_000]
    budget[0] -= 1
    if budget[0] < 0 or isinstance(value, Opaque | Raised):
        return True
    t = type(value)
    if t in (list, tuple, set, frozenset):
        return any(_undecided(x, budget) for x in value)
    if t is dict:
        return any(_undecided(k, budget) or _undecided(x, budget) for k, x in value.items())
    return False


def _compare(op: str, a: Any, b: Any) -> bool:
    """`a op b` as pytest would find it on plain values; raises _CheckFailed where it would not be decided here. A
    comparison that holds only because it was not decided must fail also under `not` (a ninety-ninth attacker:
    `not (x < c)` held when the comparison raised TypeError, which fails the test under pytest)."""
    if op in ("is", "is not"):  # identity is decided against None, True and False only (small ints, interned strs:
        # whether two equal values are one object is the interpreter's choice, not a result)
        if not any(x is None or type(x) is bool for x in (a, b)):
            raise _NotJudged("the identity of values is not judged")
        same = a is b if not isinstance(a, Approx) and not isinstance(b, Approx) else False
        return same if op == "is" else not same
    if op in ("==", "!="):
        if _undecided(a) or _undecided(b):  # an object of the code under test equals or differs by its own methods
            raise _NotJudged("an object of the code under test is not judged equal or unequal")
        equal = _equal(a, b)
        return equal if op == "==" else not equal
    if isinstance(a, Approx) or isinstance(b, Approx) or _undecided(a) or _undecided(b):
        raise _NotJudged(f"`{op}` is not judged on an object of the code under test or an approximation")
    try:
        if op in ("in", "not in"):
            inside = a in b
            return bool(inside) if op == "in" else not inside
        return bool({"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}[op](a, b))
    except TypeError:
        raise _CheckFailed(f"`{op}` raised TypeError on the observed values (a failed test under pytest)") from None


def evaluate(check: Check, slots: list[Any]) -> Any:
    """The value of a check over the decoded slots; raises _CheckFailed when it reads a slot that raised."""
    kind = check[0]
    if kind == "const":
        return check[1]
    if kind == "slot":
        value = slots[check[1]]
        if isinstance(value, Raised):
            raise _CheckFailed(f"slot {check[1]} raised {value.mro[0][1] if value.mro else '?'}")
        return value
    if kind == "not":
        return not _truth(evaluate(check[1], slots))
    if kind == "and":
        result: Any = True
        for part in check[1]:
            result = evaluate(part, slots)
            if not _truth(result):
                return result
        return result
    if kind == "or":
        result = False
        for part in check[1]:
            result = evaluate(part, slots)
            if _truth(result):
                return result
        return result
    if kind == "cmp":
        left = evaluate(check[1], slots)
        for op, right_check in check[2]:
            right = evaluate(right_check, slots)
            if not _compare(op, left, right):
                return False
            left = right
        return True
    if kind == "raised":
        value = slots[check[1]]
        if not isinstance(value, Raised) or value.taken is not True:  # an instance of the very class the test named
            return False
        return any((module == "builtins" and (m, q) == (module, name)) or (module == "" and q == name)
                   for m, q in value.mro for module, name in check[2])
    raise ValueError(f"unknown check {kind!r}")


def _builtin_bases(raised: Raised) -> frozenset[str]:
    """The builtin classes in a raised exception's reported MRO. The report comes from beside the agent's code,
    which can claim any MRO (a red-team agent claimed every builtin exception, so that every `raises(E)` held):
    the builtin part must be the reference's own, e.g. ValueError, Exception, BaseException, object. A class of
    the agent's deriving from the same builtin (an honest subclass) still matches."""
    return frozenset(q for m, q in raised.mro if m == "builtins")


def _truth(value: Any) -> bool:
    """Python's truth of a decoded value. An object of the package's has none here (pytest would call its `__bool__`
    or `__len__`, code of the agent's): a check that needs it fails, `not` included (it held for any such object, so
    `assert not bag` passed a `Bag.remove` that removed nothing: a seventy-ninth attacker)."""
    if isinstance(value, Opaque):
        raise _NotJudged("the truth of an object of the code under test is not judged")
    if isinstance(value, Raised):
        return False
    return bool(value)


def slots_read(check: Check) -> set[int]:
    """The slots a check reads."""
    return {node[1] for node in leaves(check) if node[0] in ("slot", "raised")}


def compare_pairs(check: Check) -> list[tuple[str, int | None, int | None]] | None:
    """For a check that is one comparison (`a op b op c ...`), the pairs of operands pytest's comparison hook may be
    asked about when its assertion is explained, as (op, left slot, right slot) (None: an operand the driver does not
    hold, a literal); None for any other check."""
    if check[0] != "cmp":
        return None
    operands = [check[1], *(right for _, right in check[2])]
    slot = [node[1] if node[0] == "slot" else None for node in operands]
    return [(op, slot[i], slot[i + 1]) for i, (op, _) in enumerate(check[2])]


def failing_pair(check: Check, slots: list[Any]) -> int:
    """The pair of operands of a comparison (`compare_pairs`) pytest's comparison hook is asked about when its
    assertion is explained (`_call_reprcompare`): the first pair that does not hold, else the last one."""
    if check[0] != "cmp":
        return 0
    i = 0
    try:
        left = evaluate(check[1], slots)
        for i, (op, right_check) in enumerate(check[2]):
            right = evaluate(right_check, slots)
            if not _compare(op, left, right):
                return i
            left = right
    except (_CheckFailed, ArithmeticError, ValueError, TypeError, RecursionError):
        return i
    return len(check[2]) - 1


def fails_as_under_pytest(check: Check, slots: list[Any], reference: list[Any] | None,
                          raise_slots: frozenset[int] | set[int]) -> bool:
    """Whether pytest's assertion of `check` surely fails on these observed slots, so that its test stops there (the
    driver then asks the code under test nothing more in it, as pytest would not). Only a verdict pytest shares: a
    slot outside `pytest.raises` that raised (the exception ends the test), a `pytest.raises` that did not take what
    its block raised, or a check that evaluates false (or whose comparison raises TypeError) on plain values, where
    `evaluate` applies Python's own operations to the very values pytest's assertion would, whatever their type (a
    hundred-and-sixteenth attacker's `None` where the reference gives an int went on here where pytest stopped: a
    tell; an `approx` check only on the reference's types, since its copy here follows pytest's on those). Anything
    this side does not decide as pytest would (an object of the code: `runs_code_pytest_would_run`) lets the test go
    on. `reference`: the reference's slots of the test (None: it has none, a canary)."""
    if check[0] == "raised":  # pytest.raises holds exactly when the driver found the exception an instance of E
        got = slots[check[1]]
        return not (isinstance(got, Raised) and got.taken is True)
    approximate = _holds_approx(check)
    try:
        for k in slots_read(check):
            got = slots[k]
            if isinstance(got, Raised):
                if k not in raise_slots:
                    return True
            elif approximate and k not in raise_slots and reference is not None and (
                    k >= len(reference) or signature(got) != signature(reference[k])):
                return False  # `approx` is this side's copy of pytest's, matched on the reference's types only
        return not _truth(evaluate(check, slots))
    except _NotJudged:
        return False
    except _CheckFailed:  # a slot that raised, a comparison that raised TypeError: pytest's test ends there too
        return True
    except (ArithmeticError, ValueError, TypeError, RecursionError):
        return False


def _holds_approx(check: Check) -> bool:
    return any(node[0] == "const" and isinstance(node[1], Approx) for node in leaves(check))


def _opaque_inside(value: Any) -> bool:
    """Whether an Opaque is `value` or inside it (a decoded value holds at most `wire.MAX_ITEMS` values in all)."""
    if isinstance(value, Opaque):
        return True
    t = type(value)
    if t in (list, tuple, set, frozenset):
        return any(_opaque_inside(x) for x in value)
    if t is dict:
        return any(_opaque_inside(k) or _opaque_inside(x) for k, x in value.items())
    return False


def runs_code_pytest_would_run(check: Check, slots: list[Any]) -> bool:
    """Whether pytest, deciding `check`, would run methods of an observed value this side holds no plain data of (an
    object of the code under test or of any type but plain data, in or under a slot the check reads other than by an
    identity comparison: pytest calls its `__eq__`, `__bool__`, `__contains__`, ... with the expected value, which
    never leaves this side). The code sees those calls under pytest and not here: a hundred-and-sixteenth attacker's
    device counted them on one test it gave up and was right only where none came (0.41-0.43 on 27 of 27 tasks, pytest
    earning 0). `judge_run(graded=True)` judges no test of such a run."""
    return any(node[0] == "slot" and node[1] < len(slots) and _opaque_inside(slots[node[1]])
               for node in leaves(check, identity=False))


def outcome(test: CompiledTest, record: TestRecord | None, reference: TestRecord | None) -> tuple[bool, str]:
    """(passed, why) for one test, from its record and the reference's record of the same test."""
    if record is None:
        return False, "not run (the driver stopped before it)"
    if record.error is not None:
        return False, f"the test raised {record.error}"
    if not record.finished:
        return False, "unfinished (the driver died or hung in it)"
    if reference is None or not reference.finished:
        return False, "no reference observation for this test"
    for k, (got, want) in enumerate(zip(record.slots, reference.slots)):
        if k in test.raise_slots:
            if isinstance(got, Raised) and isinstance(want, Raised) and _builtin_bases(got) != _builtin_bases(want):
                return False, (f"slot {k}: raised an exception whose builtin classes {sorted(_builtin_bases(got))[:6]} are "
                               f"not the reference's {sorted(_builtin_bases(want))}")
            continue
        if signature(got) != signature(want):
            return False, f"slot {k}: type {signature(got)[:80]} where the reference gives {signature(want)[:80]}"
    for check in test.checks:
        try:
            if not _truth(evaluate(check, record.slots)):
                return False, "a check failed"
        except _CheckFailed as exc:
            return False, str(exc)
        except (ArithmeticError, ValueError, TypeError, RecursionError) as exc:
            # values the agent's code chose that the check cannot even compare (a 4,000-digit int against
            # `approx`, an int `in` a bytes constant): the test fails, it is not the verifier's error
            return False, f"a check could not be evaluated on the observed values ({type(exc).__name__})"
    return True, "passed"
