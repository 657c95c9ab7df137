"""Which lines of a template's function its reference runs for a test: a hidden variant must take the path of the
test it was moved from.

A variant moves a failing test's literals. Moved far, an input often leaves the function's work for a corner of it:
a node name edited out of the graph makes `distance` return -1 and `neighbours` return [], a column name no header
has makes `column` blank, a width below the words' length makes `justify_line` join them. A forty-second
independent attacker answered such corners with a constant, or with that branch alone, and was accepted with the bug
kept on 17 of 161 template tasks (0.95 under two host keys). So a variant is kept only if the reference runs, inside
the buggy function and what it calls, every line the original test runs there (`covers`). A corner reached inside a
builtin (`graph.get(node, ())`) has no line of its own: the generator also drops a variant whose answer other draws
of the same batch share (`generator._draw_variants`).

The reference is our own template (trusted code, run here on the host, as `boxtable.traced_calls` does); a test's
statements are ours too (a template test with literals moved). A run is bounded by TRACE_BUDGET traced lines, and
is only asked of inputs the sandboxed reference already answered within its deadline.
"""

from __future__ import annotations

import ast
import contextlib
import sys
from collections.abc import Sequence
from types import FrameType
from typing import Any, NamedTuple

from gymsmith.families.code.shapes import Shape, shape_of, size_of

TRACE_BUDGET = 200_000  # traced lines of one test's run; past it the path is unknown (the variant is not kept)
_REFERENCE = "<gymsmith-reference>"
_TEST = "<gymsmith-test>"


class _OverBudget(Exception):
    pass


def _without_imports(source: str) -> str:
    """`source` without its import statements (the reference's names are put in place of what they import)."""
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if not isinstance(n, ast.Import | ast.ImportFrom)]
    return ast.unparse(tree)


class Trace(NamedTuple):
    """What the reference did inside `function` for a test: the lines it ran (None if the run could not be traced),
    the shapes (`shapes.shape_of`) of the arguments `function` was called with, and their largest size
    (`shapes.size_of`, over every call)."""

    lines: frozenset[int] | None
    shapes: frozenset[Shape]
    size: tuple[int, int] = (0, 0)


def reference_path(reference: str, function: str, header: str, statements: Sequence[str]) -> frozenset[int] | None:
    """The line numbers of `reference` that run inside calls of its module-level `function` (the functions it calls
    included) while `statements` (a test's, after `header`: the test file's module-level names, imports dropped) run
    against it; None if the run could not be traced (over budget, or `function` is not a module-level function)."""
    return reference_trace(reference, function, header, statements).lines


def reference_trace(reference: str, function: str, header: str, statements: Sequence[str],
                    alphabet: str = "") -> Trace:
    """`reference_path`'s lines and the shapes of `function`'s arguments at each of its calls (a text's shape asks
    whether `alphabet` holds all its characters)."""
    namespace: dict[str, Any] = {"__name__": "gymsmith_reference"}
    exec(compile(reference, _REFERENCE, "exec"), namespace)
    target = namespace.get(function)
    code = getattr(target, "__code__", None)
    if code is None:
        return Trace(None, frozenset())
    test_space: dict[str, Any] = {k: v for k, v in namespace.items() if not k.startswith("__")}
    test_space["_gymsmith_observe"] = lambda slot, thunk: thunk()
    test_space["_gymsmith_raises"] = lambda slot, *named: contextlib.suppress(Exception)  # its call runs too
    try:
        import pytest  # a test's statements may use pytest.approx

        test_space["pytest"] = pytest
    except ImportError:  # pragma: no cover - pytest is installed wherever tasks are made
        pass
    lines: set[int] = set()
    shapes: set[Shape] = set()
    size = [0, 0]
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    budget = [TRACE_BUDGET]
    depth = [0]  # calls of `function` on the stack: the lines of the reference run meanwhile are its path

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            budget[0] -= 1
            if budget[0] < 0:
                raise _OverBudget
            if depth[0] and frame.f_code.co_filename == _REFERENCE:
                lines.add(frame.f_lineno)
        elif event == "return" and frame.f_code is code:
            depth[0] -= 1
        return local

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code is code:
            depth[0] += 1
            arguments = [frame.f_locals.get(n) for n in names]
            shapes.add(tuple(shape_of(a, alphabet) for a in arguments))
            magnitude, length = size_of(arguments)
            size[0], size[1] = max(size[0], magnitude), max(size[1], length)
        return local if frame.f_code.co_filename in (_REFERENCE, _TEST) else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        exec(compile(_without_imports(header), _TEST, "exec"), test_space)
        for statement in statements:
            try:
                exec(compile(statement, _TEST, "exec"), test_space)
            except _OverBudget:
                raise
            except Exception:  # noqa: BLE001 - a statement that raises still ran the lines it ran
                pass
    except _OverBudget:
        return Trace(None, frozenset(shapes), (size[0], size[1]))
    finally:
        sys.settrace(previous)
    return Trace(frozenset(lines), frozenset(shapes), (size[0], size[1]))


def covers(variant: frozenset[int] | None, original: frozenset[int] | None) -> bool:
    """Whether a variant's path keeps the original test's: every line of the function the original runs."""
    return variant is not None and original is not None and original <= variant
