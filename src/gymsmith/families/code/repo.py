"""The agent's start state on disk: the buggy repository as a fresh git repository with one commit.

Built once per distinct content into the cache (keyed by a hash of the files) and never written again:
rollouts get copy-on-write views of it. The commit has fixed author, committer and dates, so the same
files give the same commit on every machine; there is no history, no reference and no record of the
mutation for an agent to find.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
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


def read_tree(root: Path, ignore: tuple[str, ...] = (".git",)) -> dict[str, str | None]:
    """Workspace-relative path -> text of every regular file (None for binary); symlinks are not followed."""
    out: dict[str, str | None] = {}
    root = Path(root)
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ignore and d not in CACHE_DIRS)
        for name in sorted(filenames):
            full = Path(dirpath) / name
            rel = str(full.relative_to(root))
            if full.is_symlink():
                out[rel] = f"<symlink to {os.readlink(full)}>"
                continue
            try:
                out[rel] = full.read_text()
            except (UnicodeDecodeError, OSError):
                out[rel] = None
    return out


def unified_diff(before: dict[str, str | None], after: dict[str, str | None]) -> str:
    """A git-style unified diff between two trees read by `read_tree` (binary files noted, not diffed)."""
    chunks = []
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        if (path in before and a is None) or (path in after and b is None):
            chunks.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        chunks.append("".join(difflib.unified_diff(
            (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True),
            fromfile=f"a/{path}" if path in before else "/dev/null", tofile=f"b/{path}" if path in after else "/dev/null")))
    return "".join(c if c.endswith("\n") else c + "\n\\ No newline at end of file\n" for c in chunks)


def changed_lines(before: str, after: str) -> int:
    """Lines added plus lines removed between two texts."""
    return sum(1 for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-")
