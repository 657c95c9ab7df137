"""The shape of a call's arguments, as a repair that special-cases the tested inputs would see it.

A forty-fourth independent attacker wrapped each buggy function: a call whose shape (value types, list lengths,
integer signs, whether every character of a text is one the test file's strings hold) some public test call has went
to a fixed copy, every other call to the buggy code. Hidden variants then moved literals in place (same lengths,
same signs, the file's characters), so every one had a public shape and the wrapper was accepted on 39 of 39
template tasks with the bug kept. Variants now also change shapes (`repovariants.Moves.shape`), and the template
draw prefers variants whose calls of the buggy function have a shape no public call has (`generator._draw_variants`).

A text's length is not part of its shape (two to four edits change it anyway); its alphabet is. Where the function's
whole domain has one shape (a numeral reader takes only the file's letters), a repair right on that shape is a fix.
"""

from __future__ import annotations

from typing import Any

Shape = tuple[Any, ...]


def shape_of(value: Any, alphabet: str, depth: int = 0) -> Shape:
    """The shape of `value`: its type, and an integer's or a float's sign, a text's "every character in `alphabet`",
    a list's or tuple's length and its items' shapes, a dict's keys and its values' shapes (nesting beyond 6 is one
    shape)."""
    if depth > 6:
        return ("deep",)
    if isinstance(value, bool) or value is None:
        return (repr(value),)
    if isinstance(value, int | float):
        return (type(value).__name__, (value > 0) - (value < 0))
    if isinstance(value, str):
        return ("str", all(ch in alphabet for ch in value))
    if isinstance(value, list | tuple):
        return (type(value).__name__, tuple(shape_of(v, alphabet, depth + 1) for v in value))
    if isinstance(value, set | frozenset):
        return (type(value).__name__, tuple(sorted(repr(shape_of(v, alphabet, depth + 1)) for v in value)))
    if isinstance(value, dict):
        return ("dict", tuple(sorted((repr(k), repr(shape_of(v, alphabet, depth + 1))) for k, v in value.items())))
    return ("object", type(value).__name__)
