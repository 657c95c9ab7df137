"""Getting a package's source: its sdist from the package index (pip download), or a local checkout;
then its layout: the import root, the package's own .py files, its data files and its test files.

Refuses (RepoError, one line) a package with native extensions (C, C++, Cython, Rust, Fortran sources or
`ext_modules` in setup.py) and one without test files.
"""

from __future__ import annotations

import email.parser
import hashlib
import io
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from gymsmith.repos.manifest import RepoError

NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".pyx", ".pxd", ".rs", ".f", ".f90")
MAX_SDIST_BYTES = 50 << 20
BUILD_MODULES = {"setup", "conftest", "noxfile", "tasks", "fabfile", "version", "versioneer", "_version", "docs"}
MAX_DATA_FILE_BYTES = 256 << 10  # a package data file (a VERSION, a word list) kept as text beside the sources
MAX_DATA_BYTES = 4 << 20
SKIP_DIRS = {"docs", "doc", "examples", "benchmarks", "bench", "build", "dist", ".git", ".tox", "__pycache__"}


@dataclass
class Fetched:
    root: Path           # the extracted source (a temporary directory the caller removes)
    origin: str          # URL or path
    sha256: str | None
    requires: list[str]  # Requires-Dist of the package (runtime dependencies, with markers)


def fetch_sdist(name: str, version: str, into: Path) -> Fetched:
    """Download (with pip, from the configured index) and extract the sdist of `name==version` into `into`.
    Raises RepoError."""
    download = into / "download"
    done = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                           "--dest", str(download), f"{name}=={version}"], capture_output=True, text=True, timeout=600)
    archives = sorted(download.glob("*")) if download.is_dir() else []
    if done.returncode != 0 or len(archives) != 1:
        tail = (done.stderr.strip().splitlines() or ["no sdist downloaded"])[-1]
        raise RepoError(f"cannot download the source distribution of {name}=={version}: {tail}")
    data = archives[0].read_bytes()
    if len(data) > MAX_SDIST_BYTES:
        raise RepoError(f"the sdist of {name}=={version} has {len(data)} bytes; at most {MAX_SDIST_BYTES} are taken")
    _extract(data, archives[0].name, into / "x")
    root = _single_top(into / "x")
    return Fetched(root=root, origin=f"pypi:{archives[0].name}", sha256=hashlib.sha256(data).hexdigest(),
                   requires=_requires_dist(root))


def _requires_dist(root: Path) -> list[str]:
    """Requires-Dist lines of the sdist's PKG-INFO (its runtime dependencies, with markers)."""
    info = root / "PKG-INFO"
    if not info.is_file():
        return []
    message = email.parser.Parser().parsestr(info.read_text(errors="replace"), headersonly=True)
    return message.get_all("Requires-Dist") or []


def copy_local(path: Path, into: Path) -> Fetched:
    """A local checkout (or extracted sdist) copied into `into` (without .git). Raises RepoError."""
    if not path.is_dir():
        raise RepoError(f"local repository {str(path)!r} is not a directory")
    shutil.copytree(path, into / "src", ignore=shutil.ignore_patterns(".git", "__pycache__", "*.pyc", ".tox"))
    return Fetched(root=into / "src", origin=str(path.resolve()), sha256=None, requires=[])


def _extract(data: bytes, url: str, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    if url.endswith(".zip"):
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            for member in z.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise RepoError(f"the sdist {url} has an unsafe path {member!r}")
            z.extractall(into)
        return
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as t:
        t.extractall(into, filter="data")  # no links out, no devices, no absolute paths


def _single_top(into: Path) -> Path:
    entries = [p for p in into.iterdir()]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else into


def is_test_file(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py")


@dataclass
class Layout:
    import_root: str          # "" or "src"
    packages: list[str]       # top-level import names
    source_files: list[str]   # .py files of the package (relative to the import root), tests excluded
    test_files: list[str]     # test files, relative to the import root when inside it, else to the source root
    data_files: list[str] = field(default_factory=list)  # text files of the package that are not Python (read at run time)


def layout(root: Path, name: str) -> Layout:
    """Find the package in an extracted source tree. Raises RepoError for native code or no tests."""
    native = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.suffix in NATIVE_SUFFIXES and p.is_file()
                    and not set(p.relative_to(root).parts) & SKIP_DIRS)
    setup = root / "setup.py"
    if native or (setup.is_file() and "ext_modules" in setup.read_text(errors="replace")):
        what = ", ".join(native[:3]) or "ext_modules in setup.py"
        raise RepoError(f"{name} has native extensions ({what}); only pure-Python packages can be registered")
    import_root = "src" if (root / "src").is_dir() and any((root / "src").glob("*/__init__.py")) else ""
    base = root / import_root if import_root else root
    packages = sorted(p.parent.name for p in base.glob("*/__init__.py") if p.parent.name not in SKIP_DIRS
                      and p.parent.name not in ("tests", "test", "testing"))
    if not packages:  # a single-module distribution (e.g. six.py): its modules, build tooling aside
        packages = sorted(p.stem for p in base.glob("*.py") if not is_test_file(p.name) and p.stem not in BUILD_MODULES)
    if not packages:
        raise RepoError(f"no Python package found in the source of {name} (looked in {base})")
    sources, tests = [], []
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root)
        if set(rel.parts) & SKIP_DIRS:
            continue
        inside = import_root == "" or rel.parts[0] == import_root
        norm = str(rel.relative_to(import_root)) if import_root and inside else str(rel)
        if is_test_file(norm) or any(part in ("tests", "test") for part in Path(norm).parts[:-1]):
            if is_test_file(norm):
                tests.append(norm)
        elif inside and (Path(norm).parts[0] in packages or norm.removesuffix(".py") in packages):
            sources.append(norm)
    if not tests:
        raise RepoError(f"{name} ships no test files (test_*.py or *_test.py) in its source distribution; "
                        "register a checkout that has its tests with --path")
    return Layout(import_root=import_root, packages=packages, source_files=sources, test_files=tests,
                  data_files=_data_files(base, packages))


def _data_files(base: Path, packages: list[str]) -> list[str]:
    """Non-Python files inside the package's directories that its code may read (`pkgutil.get_data`, a file beside a
    module): small UTF-8 text only, up to MAX_DATA_BYTES in all; test directories and build output aside."""
    out, total = [], 0
    for package in packages:
        folder = base / package
        if not folder.is_dir():
            continue
        for p in sorted(folder.rglob("*")):
            rel = p.relative_to(base)
            if (not p.is_file() or p.suffix in (".py", ".pyc", ".pyo") or set(rel.parts) & SKIP_DIRS
                    or any(part in ("tests", "test") for part in rel.parts[:-1])):
                continue
            size = p.stat().st_size
            if size > MAX_DATA_FILE_BYTES or total + size > MAX_DATA_BYTES:
                continue
            try:
                p.read_text()
            except (OSError, UnicodeDecodeError):
                continue
            out.append(str(rel))
            total += size
    return out


def read_layout(root: Path, lay: Layout) -> dict[str, str]:
    """{path in the normalised tree: text} for the package's sources, data files and tests."""
    out = {}
    for rel in lay.source_files + lay.data_files + lay.test_files:
        src = root / lay.import_root / rel if lay.import_root and (root / lay.import_root / rel).is_file() else root / rel
        try:
            out[rel] = src.read_text()
        except (OSError, UnicodeDecodeError):
            continue
    return out
