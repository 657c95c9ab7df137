"""The train / held-out split: a stable function of the task id, never of order."""

from __future__ import annotations

import hashlib

from gymsmith.core.types import Split

DEFAULT_HELDOUT_FRACTION = 0.2
DEFAULT_SALT = "gymsmith-split-v1"


def split_of(task_id: str, *, heldout_fraction: float = DEFAULT_HELDOUT_FRACTION, salt: str = DEFAULT_SALT) -> Split:
    """Return HELDOUT for a stable `heldout_fraction` of ids, TRAIN for the rest.

    Raises ValueError if `heldout_fraction` is outside [0, 1].
    """
    if not 0.0 <= heldout_fraction <= 1.0:
        raise ValueError(f"heldout_fraction must be in [0, 1], got {heldout_fraction!r}")
    digest = hashlib.sha256(f"{salt}:{task_id}".encode()).digest()
    u = int.from_bytes(digest[:8], "big") / 2**64
    return Split.HELDOUT if u < heldout_fraction else Split.TRAIN
