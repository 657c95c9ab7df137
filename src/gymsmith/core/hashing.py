"""Canonical JSON and content hashes: the one place ids and state digests are computed."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace, so equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def content_hash(value: Any, *, length: int = 16) -> str:
    """Hex SHA-256 of `canonical_json(value)`, truncated to `length` characters."""
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:length]
