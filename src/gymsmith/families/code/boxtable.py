"""The best table an attacker can fit: the reference's answers for every call of the buggy function near one the
public suite makes, appended to the buggy code. A template variant is kept only if the bug still shows with it.

Near means a *line-box*: the call has the shape of a public one (direct, or made inside another public call) and
every argument but at most one integer is within BOX_REACH of that public call's (an integer) or equal to it; the
one may be anything. A thirty-seventh attacker tabled `days_in_month` for years 1855-2076 and every month (a box)
and a thirty-eighth every integer of every public call moved alone over its whole range (lines), keeping only the
points where the bug shows, compressed: both answered variants, the first through `add_days`'s own calls to the
buggy function. A line through a string is not tabled (two to four edits reach too many strings).
"""

from __future__ import annotations

import ast
from typing import Any

BOX_REACH = 200  # an integer argument within this of the public call's, at the same place, is in the box

# the membership test, as the module under test runs it (the sandbox cannot import gymsmith)
_NEAR_SOURCE = f"""def _gs_box_leaves(value, out):
    if isinstance(value, (tuple, list)):
        out.append(("(", type(value).__name__, len(value)))
        for item in value:
            _gs_box_leaves(item, out)
    else:
        out.append(value)
    return out


def _gs_box_near(args, publics):
    mine = _gs_box_leaves(tuple(args), [])
    for public in publics:
        theirs = _gs_box_leaves(tuple(public), [])
        if len(theirs) != len(mine):
            continue
        far = 0
        for a, b in zip(mine, theirs):
            if isinstance(a, int) and not isinstance(a, bool) and isinstance(b, int) and not isinstance(b, bool):
                far += abs(a - b) > {BOX_REACH}
            elif type(a) is not type(b) or a != b:
                far = 2
                break
        if far <= 1:
            return True
    return False
"""

_namespace: dict[str, Any] = {}
exec(compile(_NEAR_SOURCE, "boxtable", "exec"), _namespace)  # our own source: the same test, on the host
near = _namespace["_gs_box_near"]


def traced_calls(reference: str, function: str, calls: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    """The argument tuples `function` is called with when the reference (our own template: run here, on the host)
    answers each public call (name, arguments), directly or from inside another function."""
    namespace: dict[str, Any] = {}
    exec(compile(reference, "reference", "exec"), namespace)
    seen: list[tuple[Any, ...]] = []
    inner = namespace.get(function)
    if not callable(inner):
        return seen

    def recording(*args: Any, **kwargs: Any) -> Any:
        if not kwargs and args not in seen:
            seen.append(args)
        return inner(*args, **kwargs)

    namespace[function] = recording
    for name, args in calls:
        if callable(namespace.get(name)):
            try:
                namespace[name](*args)
            except Exception:  # noqa: BLE001 - a public call that raises still made the calls it made
                pass
    return seen


def boxed_source(mutant: str, reference: str, function: str, publics: list[tuple[Any, ...]]) -> str | None:
    """`mutant` with the reference's `function` answering every call `near` one of `publics` (the buggy one
    answering the rest), or None if `function` is not a module-level function of both."""
    ref_fn = next((n for n in ast.parse(reference).body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if ref_fn is None or not any(isinstance(n, ast.FunctionDef) and n.name == function for n in ast.parse(mutant).body):
        return None
    ref_fn.name = f"_gs_box_reference_{function}"
    return (mutant + "\n\n\n" + ast.unparse(ref_fn) + "\n\n\n"
            + f"_gs_box_buggy_{function} = {function}\n_gs_box_publics_{function} = {publics!r}\n\n\n"
            + f"def {function}(*args, **kwargs):\n"
            + f"    if not kwargs and _gs_box_near(args, _gs_box_publics_{function}):\n"
            + f"        return _gs_box_reference_{function}(*args)\n"
            + f"    return _gs_box_buggy_{function}(*args, **kwargs)\n\n\n"
            + _NEAR_SOURCE)
