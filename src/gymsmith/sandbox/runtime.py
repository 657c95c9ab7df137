"""The Python a sandboxed command sees: the host interpreter, read-only, with a site-packages of our choosing.

Inside a sandbox, the interpreter's own site-packages directories are covered: the first by a directory
holding only the packages a task needs (pytest and its dependencies by default), the others by empty
ones. So nothing installed on the host - gymsmith itself, the families' hidden checks, templates,
reference solutions - is importable or readable from inside.
"""

from __future__ import annotations

import compileall
import hashlib
import os
import shutil
import site
import sys
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

from pydantic import BaseModel

DEFAULT_PACKAGES = ("pytest",)  # and, found through its metadata, what it requires here


def _closure(names: tuple[str, ...]) -> list:
    """The distributions `names` need on this interpreter, following requirements whose markers hold."""
    from packaging.requirements import Requirement

    seen: dict[str, object] = {}
    todo = list(names)
    while todo:
        name = todo.pop()
        key = name.lower().replace("_", "-")
        if key in seen:
            continue
        try:
            dist = distribution(name)
        except PackageNotFoundError:
            raise RuntimeError(f"package {name!r} is needed inside the sandbox but is not installed here") from None
        seen[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return list(seen.values())


def cache_root() -> Path:
    """Where gymsmith keeps built artefacts ($GYMSMITH_CACHE, else ~/.cache/gymsmith)."""
    root = Path(os.environ.get("GYMSMITH_CACHE") or Path.home() / ".cache" / "gymsmith")
    root.mkdir(parents=True, exist_ok=True)
    return root


class PythonRuntime(BaseModel):
    """Paths a sandbox needs to give commands a Python."""

    interpreter: str   # real path of the host interpreter, e.g. /usr/bin/python3.11
    prefix: str        # its installation prefix (mounted read-only at the same path)
    site_dirs: list[str]  # its site-packages directories (covered inside the sandbox)
    packages_dir: str  # our site-packages, mounted over site_dirs[0]
    packages: dict[str, str]  # name -> version of what is in packages_dir
    digest: str        # changes when any of the above does (part of the environment fingerprint)


def layer_runtime(packages_dir: Path, packages: dict[str, str]) -> PythonRuntime:
    """The host interpreter with `packages_dir` (a read-only layer built beforehand, e.g. a registered
    repository's test dependencies beside pytest) as the only site-packages a sandbox sees."""
    base = python_runtime()
    digest = hashlib.sha256(repr((base.digest, str(packages_dir), sorted(packages.items()))).encode()).hexdigest()[:16]
    return base.model_copy(update={"packages_dir": str(packages_dir), "packages": dict(packages), "digest": digest})


@lru_cache(maxsize=8)
def python_runtime(packages: tuple[str, ...] = DEFAULT_PACKAGES) -> PythonRuntime:
    """Build (once per package set and version) the directory of packages a sandbox sees, and describe it.

    Raises RuntimeError naming a package that is not installed in this interpreter.
    """
    versions, files = {}, []
    for dist in _closure(packages):
        versions[dist.metadata["Name"]] = dist.version
        files += [(f, dist.locate_file(f)) for f in dist.files or [] if not str(f).startswith("..")]
    # "pyc": the layout, bytecode included (a layout without it is another directory)
    digest = hashlib.sha256(repr((sys.version, sorted(versions.items()), "pyc")).encode()).hexdigest()[:16]
    target = cache_root() / "runtime" / digest
    if not target.exists():
        staging = target.with_name(f"{digest}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        for rel, src in files:
            if Path(src).is_file() and "__pycache__" not in str(rel):
                dest = staging / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, dest)
        # compiled here, once: the sandbox mounts the directory read-only, so an uncompiled package is compiled at
        # every import of every server start (pytest's, about half a second each)
        compileall.compile_dir(staging, quiet=2, workers=1)
        try:
            os.rename(staging, target)  # atomic: concurrent builders race harmlessly
        except OSError:
            shutil.rmtree(staging, ignore_errors=True)
    interpreter = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    site_dirs = [d for d in dict.fromkeys(os.path.realpath(p) for p in site.getsitepackages([sys.base_prefix]))
                 if os.path.isdir(d)]
    return PythonRuntime(interpreter=interpreter, prefix=prefix, site_dirs=site_dirs, packages_dir=str(target),
                         packages=versions, digest=digest)
