"""Where registered repositories live and what is recorded about each (`manifest.json`).

A registered repository is a directory `<repos dir>/<name>-<version>/` holding:
- `tree/`: the package's Python source (import root at the top) and its test files, as extracted, read-only
  by convention (tasks are built from it, never written into it);
- `layer/`: the site-packages the sandboxes see for it (pytest and the package's test dependencies);
- `manifest.json`: a `RepoManifest`.

The repos dir is `--repos-dir`, else $GYMSMITH_REPOS, else `$XDG_DATA_HOME/gymsmith/repos`
(`~/.local/share/gymsmith/repos`). The verifier process finds repositories the same way.
"""

from __future__ import annotations

import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

from gymsmith.core.errors import GymsmithError

MANIFEST = "manifest.json"


class RepoError(GymsmithError, ValueError):
    """A repository cannot be registered or found; the message names it and what was expected."""


class Baseline(BaseModel):
    """The package's whole suite, run with pytest in the sandbox `runs` times."""

    runs: int
    collected: int = Field(description="Tests pytest reported (any outcome) in the first run.")
    reliable: list[str] = Field(description="Node ids that passed in every run.")
    flaky: list[str] = Field(description="Node ids that passed in some runs only (excluded everywhere).")
    failing: list[str] = Field(description="Node ids that never passed.")
    suite_seconds: list[float] = Field(description="Wall time of each whole-suite run.")


class CallSuiteRecord(BaseModel):
    """One test file as call checks: its reduced source and the tests that pass reliably on the reference."""

    path: str
    source: str = Field(description="The file reduced to what the call-check compiler accepts (see code.realtests).")
    tests: list[str] = Field(description="Test names passing on the reference in every run.")
    dropped: int = Field(description="Tests of the file the compiler could not take or that were not reliable.")


class RepoManifest(BaseModel):
    name: str
    version: str
    origin: str = Field(description="The sdist URL, or the local path it was copied from.")
    sha256: str | None = None
    packages: list[str] = Field(description="Top-level import names of the package.")
    source_files: list[str] = Field(description="The package's .py files (not tests), relative to tree/.")
    test_files: list[str] = Field(description="Test files and conftest.py, relative to tree/.")
    data_files: list[str] = Field(default_factory=list, description="The package's text files that are not Python "
                                  "(e.g. a VERSION read with pkgutil), relative to tree/; they run as registered.")
    layer_packages: dict[str, str] = Field(description="What the sandbox layer holds, name -> version.")
    baseline: Baseline
    call_suites: list[CallSuiteRecord]
    python: str

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"

    def call_tests(self) -> int:
        return sum(len(s.tests) for s in self.call_suites)


def repos_dir(given: str | Path | None = None) -> Path:
    if given:
        return Path(given)
    if os.environ.get("GYMSMITH_REPOS"):
        return Path(os.environ["GYMSMITH_REPOS"])
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "gymsmith" / "repos"


def repo_path(name: str, version: str, root: str | Path | None = None) -> Path:
    return repos_dir(root) / f"{canonical(name)}-{version}"


def canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def list_repos(root: str | Path | None = None) -> list[RepoManifest]:
    """Every registered repository (a directory with a readable manifest), sorted by spec."""
    base = repos_dir(root)
    out = []
    for d in sorted(base.glob("*/")) if base.is_dir() else []:
        if d.name.startswith("."):  # a registration being staged, or a removal under way
            continue
        try:
            out.append(_read_manifest(str(d / MANIFEST), (d / MANIFEST).stat().st_mtime_ns))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda m: m.spec)


@lru_cache(maxsize=256)
def _read_manifest(path: str, mtime_ns: int) -> RepoManifest:
    """A manifest, parsed once per version of the file (the family's knobs list the repositories often)."""
    return RepoManifest.model_validate_json(Path(path).read_text())


def find_repo(spec: str, root: str | Path | None = None) -> tuple[Path, RepoManifest]:
    """(directory, manifest) of `spec` ('NAME==VERSION', or 'NAME' if one version is registered).

    Raises RepoError naming the spec and what is registered."""
    name, _, version = spec.partition("==")
    matches = [m for m in list_repos(root) if canonical(m.name) == canonical(name) and version in ("", m.version)]
    if len(matches) != 1:
        known = ", ".join(m.spec for m in list_repos(root)) or "none"
        what = "is not registered" if not matches else "matches several versions; give NAME==VERSION"
        raise RepoError(f"repository {spec!r} {what} in {repos_dir(root)} (registered: {known}); "
                        "add one with `gymsmith repos add NAME==VERSION`")
    return repo_path(matches[0].name, matches[0].version, root), matches[0]


def remove_repo(spec: str, root: str | Path | None = None) -> RepoManifest:
    """Unregister `spec` (as `find_repo` finds it): its directory is renamed aside first, so a reader never sees a
    half-deleted repository, then deleted. Returns the removed manifest; raises RepoError if it is not registered.
    Task catalogs cached for it (under the cache root) are left: they are keyed by content and harmless."""
    path, manifest = find_repo(spec, root)
    aside = path.with_name(f".{path.name}.removing-{os.getpid()}")
    os.replace(path, aside)
    shutil.rmtree(aside, ignore_errors=True)
    return manifest


def write_manifest(directory: Path, manifest: RepoManifest) -> None:
    tmp = directory / f"{MANIFEST}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(manifest.model_dump(), indent=1))
    os.replace(tmp, directory / MANIFEST)
