"""A sequence told as what it shares with the one before it: a model agent's requests repeat each other.

Turn k's request (its messages, its prompt token ids) is mostly turn k-1's request followed by its reply. Until the
conversation passes the agent's context limit, that is a common prefix. After, the agent drops the oldest turns
after the task message, so the request is the old prefix (system and task), a note, then a run of the previous
context (the turns it kept, up to the end of the last request, or of the last reply), then what is new. Kept
whole, each such turn would hold the whole window again: a rollout's memory and its stored rows would grow with
turns x window. `splice` finds the prefix and that run, so a turn holds only what is new; `unsplice` rebuilds the
sequence exactly:

    new == context[:kept] + tail[:at] + context[copy_from:copy_from + copied] + tail[at:]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple


WORK = 4  # items compared per item of the sequences, at most


class Splice(NamedTuple):
    """`new` as `kept` leading items of the context, then `tail`, with the context's `copied` items from
    `copy_from` inserted at `at` in it (all 0 when nothing is copied)."""

    kept: int
    copy_from: int
    copied: int
    at: int
    tail: list[Any]


def splice(context: Sequence[Any], new: Sequence[Any], *, ends: Iterable[int] | None = None, min_run: int = 1) -> Splice:
    """`new` told against `context`: its common prefix, and the longest run after it that equals a run of `context`
    ending at one of `ends` (default: the context's end), used when at least `min_run` long. Linear in the lengths:
    the runs compared item by item are bounded in all (WORK per item), past which the longest found so far is used
    (a conversation of one repeated token would otherwise cost its length squared: what a policy writes reaches
    here)."""
    kept = 0
    for a, b in zip(context, new):
        if a != b:
            break
        kept += 1
    best, best_end, best_source = 0, 0, 0
    budget = WORK * (len(context) + len(new))
    sources = {len(context)} if ends is None else set(ends)
    for source in sorted(e for e in sources if 0 < e <= len(context)):
        last = context[source - 1]
        for end in range(len(new), kept, -1):  # candidate ends of the run in `new`, right to left
            if end - kept <= best:  # a run ending further left cannot be longer
                break
            if new[end - 1] != last:
                continue
            m, limit = 1, min(end - kept, source, budget)
            while m < limit and new[end - 1 - m] == context[source - 1 - m]:  # a wrong candidate stops within a few
                m += 1
            budget -= m
            if m > best:
                best, best_end, best_source = m, end, source
            if budget <= 0:
                break
    if best < min_run:
        return Splice(kept, 0, 0, 0, list(new[kept:]))
    start = best_end - best
    return Splice(kept, best_source - best, best, start - kept, list(new[kept:start]) + list(new[best_end:]))


def unsplice(context: Sequence[Any], kept: int, copy_from: int, copied: int, at: int, tail: Sequence[Any]) -> list[Any]:
    """The sequence `splice` told (its fields, in order) against the same `context`."""
    return [*context[:kept], *tail[:at], *context[copy_from:copy_from + copied], *tail[at:]]
