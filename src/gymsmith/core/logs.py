"""Diagnostics: every module logs through `logging.getLogger(__name__)` and the library prints nothing itself.

What is logged is what an operator watching a long run wants to know as it happens and that the store does not
already say plainly: a verifier or worker process that died and was replaced, a verification that failed, a
model call retried, a plug-in skipped. The command line sets the level (`gymsmith --log-level`, else
$GYMSMITH_LOG_LEVEL, else WARNING) and writes to stderr; a program that imports gymsmith configures `logging`
as it likes (the "gymsmith" logger).
"""

from __future__ import annotations

import logging
import os
import sys

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
ENV = "GYMSMITH_LOG_LEVEL"


def configure(level: str | None = None) -> str:
    """Send the "gymsmith" logger's records at `level` and above to stderr, one line each. Returns the level.

    Raises ValueError naming the input and the levels expected."""
    given = level if level is not None else os.environ.get(ENV)
    name = (given or "WARNING").strip().upper()
    if name not in LEVELS:
        source = "--log-level" if level is not None else f"${ENV}"
        raise ValueError(f"{source} {given!r}: expected one of {', '.join(LEVELS)} (any case)")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("gymsmith")
    root.handlers[:] = [handler]
    root.setLevel(name)
    root.propagate = False
    return name
