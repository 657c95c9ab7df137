"""The agent's start state on disk: the buggy repository as a fresh git repository with one commit.

Built once per distinct content into the cache (keyed by a hash of the files) and never written again:
rollouts get copy-on-write views of it. The commit has fixed author, committer and dates, so the same
files give the same commit on every machine; there is no history, no reference and no record of the
mutation for an agent to find.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import shutil
import stat
import subprocess
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gymsmith.core.hashing import content_hash
from gymsmith.sandbox.base import CACHE_DIRS
from gymsmith.sandbox.runtime import cache_root
from gymsmith.sandbox.workspace import tree_hash

GIT_ENV = {"GIT_AUTHOR_NAME": "gymsmith", "GIT_AUTHOR_EMAIL": "tasks@gymsmith.invalid",
           "GIT_COMMITTER_NAME": "gymsmith", "GIT_COMMITTER_EMAIL": "tasks@gymsmith.invalid",
           "GIT_AUTHOR_DATE": "2024-01-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2024-01-01T00:00:00+0000",
           "GIT_CONFIG_NOSYSTEM": "1", "HOME": "/nonexistent", "PATH": "/usr/bin:/bin"}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def pristine_repo(files: dict[str, str]) -> tuple[Path, str]:
    """(path of the read-only pristine repository holding `files`, its state digest). Built once per content."""
    key = content_hash(files, length=24)
    target = cache_root() / "code-pristine" / key
    if not target.exists():
        staging = target.with_name(f"{key}.tmp-{os.getpid()}")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        write_tree(staging, files)
        for cmd in (["git", "init", "-q", "--template=", "-b", "main"], ["git", "add", "-A"],
                    ["git", "commit", "-q", "-m", "Initial import"]):
            done = subprocess.run(cmd, cwd=staging, env=GIT_ENV, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"building the task repository failed at {' '.join(cmd)}: {done.stderr.strip()}")
        try:
            os.rename(staging, target)
        except OSError:  # another process built it first
            shutil.rmtree(staging, ignore_errors=True)
    return target, state_digest(target)


def state_digest(root: Path) -> str:
    """The digest of a repository's working files (`.git` is tooling, not the state an agent is judged on)."""
    return tree_hash(root, ignore=(".git",))


MAX_TEXT_BYTES = 1 << 20  # a file larger than this is not read as text (it is hashed, and graded as too large)
MAX_ALIGN_WORK = 2_000_000  # changed_lines: beyond it, a linear count
MAX_DIFF_LINES = 5000     # beyond this, line changes are counted without aligning the texts


@dataclass
class Tree:
    """A directory as the verifier sees it, read without following links or opening special files."""

    files: dict[str, str | None] = field(default_factory=dict)  # regular files: text, None if binary or too large
    sizes: dict[str, int] = field(default_factory=dict)
    symlinks: dict[str, str] = field(default_factory=dict)       # path -> link target (never followed)
    special: dict[str, str] = field(default_factory=dict)        # path -> 'fifo' | 'socket' | 'device' | ...
    digests: dict[str, str] = field(default_factory=dict)        # files too large to read: a content hash
    directories: list[str] = field(default_factory=list)         # every directory walked (not links), parents first

    def kind(self, path: str) -> str | None:
        """'file', 'symlink', a special kind, or None if absent."""
        if path in self.files:
            return "file"
        if path in self.symlinks:
            return "symlink"
        return self.special.get(path)

    def as_text(self) -> dict[str, str | None]:
        """Every entry as text for diffs and comparisons (links and special files described, not read)."""
        out: dict[str, str | None] = {}
        for path, text in self.files.items():
            out[path] = f"<{self.sizes[path]} bytes, sha256 {self.digests[path]}>" if path in self.digests else text
        out.update({p: f"<symlink to {t}>" for p, t in self.symlinks.items()})
        out.update({p: f"<{k}>" for p, k in self.special.items()})
        return dict(sorted(out.items()))


def _special_kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def scan_tree(root: Path, ignore: tuple[str, ...] = (".git",), max_text_bytes: int = MAX_TEXT_BYTES) -> Tree:
    """Read `root` safely: regular files up to `max_text_bytes` as text, larger ones hashed; links and special
    files (FIFOs, sockets, devices) recorded, never opened, so nothing the agent left can block or flood this."""
    tree = Tree()
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ignore and d not in CACHE_DIRS)
        links = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        tree.directories += [os.path.relpath(os.path.join(dirpath, d), root) for d in dirnames if d not in links]
        for name in sorted(filenames) + links:
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root)
            try:
                st = os.lstat(full)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode):
                tree.symlinks[rel] = os.readlink(full)
            elif not stat.S_ISREG(st.st_mode):
                tree.special[rel] = _special_kind(st.st_mode)
            else:
                tree.sizes[rel] = st.st_size
                tree.files[rel] = _read_regular(full, st.st_size, max_text_bytes, tree.digests, rel)
    return tree


def _read_regular(full: str, size: int, limit: int, digests: dict[str, str], rel: str) -> str | None:
    try:
        with open(full, "rb", opener=lambda p, f: os.open(p, f | os.O_NOFOLLOW | os.O_NONBLOCK)) as fh:
            if size > limit:
                h = hashlib.sha256()
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
                digests[rel] = h.hexdigest()[:16]
                return None
            return fh.read(limit + 1).decode()
    except (UnicodeDecodeError, OSError):
        return None


def read_tree(root: Path, ignore: tuple[str, ...] = (".git",)) -> dict[str, str | None]:
    """Workspace-relative path -> text of every entry (see `Tree.as_text`); links are not followed, special
    files not opened, and large files hashed instead of read."""
    return scan_tree(root, ignore).as_text()


def unified_diff(before: Mapping[str, str | None], after: Mapping[str, str | None]) -> str:
    """A git-style unified diff between two trees read by `read_tree` (binary files noted, not diffed)."""
    chunks = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        if (path in before and a is None) or (path in after and b is None):
            chunks.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        if max(len((a or "").splitlines()), len((b or "").splitlines())) > MAX_DIFF_LINES:
            chunks.append(f"Files a/{path} and b/{path} differ (over {MAX_DIFF_LINES} lines: not diffed)\n")
            continue
        chunks.append("".join(difflib.unified_diff(
            (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if path in before else "/dev/null", tofile=f"b/{path}" if path in after else "/dev/null")))
    return "".join(c if c.endswith("\n") else c + "\n\\ No newline at end of file\n" for c in chunks)


def changed_lines(before: str, after: str) -> int:
    """Lines added plus lines removed between two texts, in time linear in their length plus a bounded amount.

    The lines both texts begin and end with are set aside; the rest is aligned as difflib's matcher aligns it
    (without ndiff's character-level pass) when that is cheap, and counted as a multiset difference otherwise
    (exact unless lines moved). The matcher's work grows with the product of the two lengths times the matches
    it finds, and the text is the agent's: a 10 kB module alternating a line the original repeats a thousand
    times with a new one took it four minutes (a red-team agent turned its failed rollouts into verifier
    timeouts that way), so it only sees middles whose n * m * min(n, m) is at most MAX_ALIGN_WORK."""
    a, b = before.splitlines(), after.splitlines()
    start = 0
    while start < len(a) and start < len(b) and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    a, b = a[start:len(a) - end], b[start:len(b) - end]
    n, m = len(a), len(b)
    if n * m * min(n, m) > MAX_ALIGN_WORK:
        ca, cb = Counter(a), Counter(b)
        return sum((ca - cb).values()) + sum((cb - ca).values())
    ops = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in ops if tag != "equal")


# every file pytest reads its configuration from (pytest 9 looks for the first four before the others)
PYTEST_CONFIGS = frozenset({"pytest.ini", ".pytest.ini", "pytest.toml", ".pytest.toml", "pyproject.toml", "tox.ini",
                            "setup.cfg"})


def is_test_path(path: str) -> bool:
    """A test file or a pytest hook as the verifier sees it: under tests/, conftest.py, test_*.py, *_test.py."""
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")
