"""Shared arithmetic of the reward ladder's partial oracles (`oracle@K`): how many sub-goals K% is."""

from __future__ import annotations

LEVELS = (0, 25, 50, 75, 100)  # the ladder's rungs, in percent of the oracle's sub-goals


def units_done(fraction: float, n: int) -> int:
    """How many of `n` sub-goals a partial oracle at `fraction` does: the nearest whole number, half up."""
    return max(0, min(n, int(fraction * n + 0.5)))
