"""Environment fingerprints: what a rollout ran on, so runs on drifted environments are never compared silently.

A fingerprint holds the interpreter, the versions of the packages the environment runs on, the family's
name and version, and a hash of the family's source code (generator, tools, checks: the whole family
package). A family whose environment runs elsewhere adds what runs there through `fingerprint_extra()`
(the code family: the sandbox's interpreter and packages, bubblewrap and git).
"""

from __future__ import annotations

import hashlib
import inspect
import platform
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from gymsmith.core.hashing import content_hash
from gymsmith.registry.family import Family
from gymsmith.registry.registry import get_family

PACKAGES = ("gymsmith", "pydantic", "sqlalchemy", "jsonschema", "fastjsonschema")


def _source_hash(family: Family) -> str:
    module = sys.modules[type(family).__module__]
    path = Path(inspect.getfile(module))
    root = path.parent if path.name == "__init__.py" else path
    files = sorted(root.rglob("*.py")) if root.is_dir() else [root]
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root.parent)).encode())
        h.update(f.read_bytes())
    checks = sys.modules.get(family.checks_module)
    if checks is None:  # hash the checks' source without importing them (agent side never imports checks)
        import importlib.util

        spec = importlib.util.find_spec(family.checks_module)
        if spec and spec.origin:
            h.update(Path(spec.origin).read_bytes())
    return h.hexdigest()[:20]


def _version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


@lru_cache(maxsize=64)
def environment_fingerprint(family_name: str) -> dict[str, Any]:
    """The fingerprint of `family_name` in this process, with its `digest`. Cached per process."""
    family = get_family(family_name)
    body = {"python": platform.python_version(), "implementation": platform.python_implementation(),
            "packages": {p: _version(p) for p in PACKAGES}, "family": family.name,
            "family_version": family.version, "family_source": _source_hash(family)}
    extra = getattr(family, "fingerprint_extra", None)
    if extra is not None:  # what the family's environment runs on beyond this interpreter (e.g. inside its sandbox)
        body["environment"] = extra()
    return {**body, "digest": content_hash(body, length=16)}


def fingerprint_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Human-readable differences between two fingerprints (empty if equal)."""
    out = []
    for key in sorted(set(old) | set(new)):
        if key == "digest" or old.get(key) == new.get(key):
            continue
        if isinstance(old.get(key), dict) and isinstance(new.get(key), dict):
            out += [f"{key}.{k}: {old[key].get(k)} -> {new[key].get(k)}"
                    for k in sorted(set(old[key]) | set(new[key])) if old[key].get(k) != new[key].get(k)]
        else:
            out.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    return out
