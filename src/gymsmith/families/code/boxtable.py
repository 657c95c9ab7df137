"""The best table an attacker can fit: the reference's answers for every call of the buggy function near the public
ones, appended to the buggy code. A template variant is kept only if the bug still shows with it (`generator`).

A thirty-seventh attacker tabled the reference's `days_in_month` for years 1855-2076 and all twelve months (2,664
entries, 8 kB, one line) and was accepted on every task whose bug was there: the variants moved `add_days`'s day
count, never its year, so every call `add_days` made to the buggy function was a tabled one. A table of every call
within BOX_REACH of a public argument, per position (a product of ranges, as such a table is), is what this module
simulates: `near` is its membership test, `boxed_source` the code with it appended.
"""

from __future__ import annotations

import ast
from typing import Any

BOX_REACH = 200  # an integer argument within this of a public one, at the same position, is in the table


def boxed_source(mutant: str, reference: str, function: str, public_args: list[tuple[Any, ...]]) -> str | None:
    """`mutant` with the reference's `function` answering every call whose arguments are `near` those of
    `public_args` at each position (the buggy one answering the rest), or None if `function` is not a module-level
    function of both."""
    ref_fn = next((n for n in ast.parse(reference).body if isinstance(n, ast.FunctionDef) and n.name == function), None)
    if ref_fn is None or not any(isinstance(n, ast.FunctionDef) and n.name == function for n in ast.parse(mutant).body):
        return None
    ref_fn.name = f"_gs_box_reference_{function}"
    width = max((len(a) for a in public_args), default=0)
    by_position = [[a[i] for a in public_args if len(a) > i] for i in range(width)]
    return (mutant + "\n\n\n" + ast.unparse(ref_fn) + "\n\n\n"
            + f"_gs_box_buggy_{function} = {function}\n_gs_box_publics_{function} = {by_position!r}\n\n\n"
            + f"def {function}(*args, **kwargs):\n"
            + f"    publics = _gs_box_publics_{function}\n"
            + "    if not kwargs and len(args) <= len(publics) and all(_gs_box_near(v, publics[i]) "
              "for i, v in enumerate(args)):\n"
            + f"        return _gs_box_reference_{function}(*args)\n"
            + f"    return _gs_box_buggy_{function}(*args, **kwargs)\n\n\n"
            + _NEAR_SOURCE)


# the box's membership test, as the module under test runs it (the sandbox cannot import gymsmith): an int within
# BOX_REACH of a public int at its position, a tuple or list element by element near a public one of its length,
# anything else equal to a public value
_NEAR_SOURCE = f"""def _gs_box_near(value, publics):
    if isinstance(value, int) and not isinstance(value, bool):
        return any(isinstance(p, int) and not isinstance(p, bool) and abs(value - p) <= {BOX_REACH} for p in publics)
    if isinstance(value, (tuple, list)):
        return any(type(p) is type(value) and len(p) == len(value) and all(_gs_box_near(v, [q]) for v, q in zip(value, p))
                   for p in publics)
    try:
        return value in publics
    except TypeError:
        return False
"""


_namespace: dict[str, Any] = {}
exec(compile(_NEAR_SOURCE, "boxtable", "exec"), _namespace)  # our own source: the same test, on the host
near = _namespace["_gs_box_near"]
