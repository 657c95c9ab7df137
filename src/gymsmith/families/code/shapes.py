"""The shape of a call's arguments, as a repair that special-cases the tested inputs would see it.

A forty-fourth independent attacker wrapped each buggy function: a call whose shape (value types, list lengths,
integer signs, whether every character of a text is one the test file's strings hold) some public test call has went
to a fixed copy, every other call to the buggy code. Hidden variants then moved literals in place (same lengths,
same signs, the file's characters), so every one had a public shape and the wrapper was accepted on 39 of 39
template tasks with the bug kept. Variants now also change shapes (`repovariants.Moves.shape`), and the template
draw prefers variants whose calls of the buggy function have a shape no public call has (`generator._draw_variants`).

A text's length is not part of its shape (two to four edits change it anyway); its alphabet is. Size is apart
(`size_of`): a forty-sixth attacker sent every call with numbers up to 10^6 and texts and lists a few items past
the public ones to the fix (the moves' reach, computable from gymsmith's files) and was accepted on every task; moves
now have no fixed reach, and the draw also prefers variants far larger than every public call. Where the function's
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


def size_of(value: Any, depth: int = 0) -> tuple[int, int]:
    """(largest magnitude of a number, longest text or container) in `value`, nested ones included."""
    if depth > 6 or isinstance(value, bool) or value is None:
        return 0, 0
    if isinstance(value, int | float):
        return (int(min(abs(value), 1e300)) if value == value else 0), 0
    if isinstance(value, str):
        return 0, len(value)
    items: list[Any] = []
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
    elif isinstance(value, dict):
        items = [*value.keys(), *value.values()]
    else:
        return 0, 0
    inner = [size_of(v, depth + 1) for v in items]
    return max([0, *(m for m, _ in inner)]), max([len(items), *(n for _, n in inner)])


def larger(size: tuple[int, int], public: tuple[int, int]) -> bool:
    """Whether a call of `size` is far past every public one: a number a thousand times the largest (and over 10^6),
    or a text or container more than four times the longest plus 32 (a bound a few edits past the public ones, the
    old moves' reach, is left behind)."""
    return size[0] > max(1000 * public[0], 10**6) or size[1] > 4 * public[1] + 32
