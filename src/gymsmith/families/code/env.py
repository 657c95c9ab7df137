"""The coding environment: a git repository with a bug, in a sandbox, reset from its pristine copy per rollout.

Every tool call is bounded by its schema (`tools.py`) and by the checks here, so nothing an agent sends or
leaves in the repository makes `step` or `final_state` raise or block: paths with NUL bytes, paths that leave
the repository or are too long, FIFOs and sockets (never opened), non-UTF-8 files and names, trees too deep to
walk. The final state is copied by a bounded walk (`snapshot_tree`); a state it cannot copy faithfully (a
special file, a name that is not UTF-8, too deep, too many entries, too large) is marked `ungradable`, which
the verifier service turns into a reward of 0 with the reason. See docs/episodes.md.
"""

from __future__ import annotations

import difflib
import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

from gymsmith.core.errors import StaleTaskError
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import ActionErrorKind, Observation, TaskSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, ToolRefusal, preview
from gymsmith.families.code.generator import CodeTask, generate_code_task
from gymsmith.families.code.repo import pristine_repo, state_digest
from gymsmith.families.code.tools import TOOLS
from gymsmith.sandbox import CowWorkspace, ExecResult, Limits, Sandbox, open_sandbox
from gymsmith.sandbox.base import CACHE_DIRS
from gymsmith.sandbox.local import UNSAFE_LABEL

AGENT_LIMITS = Limits(memory_mb=1024, pids=128, cpu_s=60, file_size_mb=16, disk_mb=128, tmp_mb=64, timeout_s=30,
                      output_bytes=16384)
# the final state's bounded walk: past any of these the state is ungradable (docs/episodes.md)
MAX_TREE_DEPTH = 32
MAX_TREE_ENTRIES = 20_000
MAX_TREE_BYTES = 64 << 20
MAX_PATH_BYTES = 1024
# the final diff (stored with the rollout, read by audits): files beyond these are summarised, not diffed
MAX_DIFF_FILE_BYTES = 256_000
MAX_DIFF_FILE_LINES = 2_000
MAX_DIFF_WORK = 16_000_000  # sum over diffed files of lines before x lines after (difflib is quadratic at worst)
MAX_FINAL_DIFF_CHARS = 200_000
SKIPPED = frozenset({".git"}) | CACHE_DIRS  # tooling and caches: not the state an agent is judged on
_TIMING = re.compile(r" in \d+(\.\d+)?s( \(\d+:\d\d:\d\d\))?")  # pytest's run time: not part of what happened
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,16}\b")  # object addresses in reprs differ from run to run (sqlparse: upper case)


def sandbox_backend() -> str:
    """The agent sandbox's backend: $GYMSMITH_SANDBOX, else bwrap (there is no silent fall-back to 'local')."""
    return os.environ.get("GYMSMITH_SANDBOX", "bwrap")


@lru_cache(maxsize=512)
def _generated(seed: int, knobs_json: str) -> CodeTask:
    return generate_code_task(seed, json.loads(knobs_json))


def code_task(task: TaskSpec) -> CodeTask:
    """The private task behind a generated TaskSpec (rebuilt from the seed; cached per process)."""
    return _generated(task.seed, json.dumps(task.knobs, sort_keys=True))


def start_files(task: TaskSpec) -> dict[str, str]:
    """The files of the task's start state: generated, or read from a task file's repository."""
    if task.metadata.get("source") == "repository":
        from gymsmith.families.code.byo import repository_files
        return repository_files(task)
    return code_task(task).files


def _runtime(task: TaskSpec):
    """The packages the agent's commands see: a registered repository's layer for its tasks, else pytest's."""
    if task.knobs.get("source"):
        from gymsmith.families.code.repotasks import runtime_of
        return runtime_of(task.knobs["source"])
    from gymsmith.sandbox.runtime import python_runtime
    return python_runtime()


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link that leads nowhere (a loop)"))


def _special(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def _diff_text(data: bytes) -> str | None:
    """How a regular file enters the final diff: its text, None if binary, a summary line if too large."""
    if len(data) > MAX_DIFF_FILE_BYTES:
        return f"<{len(data)} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]}: too large to diff>\n"
    try:
        return data.decode()
    except UnicodeDecodeError:
        return None


@dataclass
class TreeSnapshot:
    """What a bounded walk of a repository found: each entry as diff text, and why it cannot be graded (if so)."""

    entries: dict[str, str | None] = field(default_factory=dict)  # path -> text, None for binary, "<...>" described
    problems: list[str] = field(default_factory=list)
    links: dict[str, str] = field(default_factory=dict)  # path -> the target of a symbolic link

    @property
    def ungradable(self) -> str | None:
        if not self.problems:
            return None
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        return "; ".join(self.problems[:5]) + more


def walk_bounded(root: Path, problems: list[str], rel_root: str = "") -> Iterator[tuple[os.DirEntry, str, os.stat_result, int]]:
    """(entry, path relative to the repository, lstat, depth) of everything under `root`, without recursion,
    following no link and opening nothing; `.git` and caches skipped. Bounded: a name that is not UTF-8, a path
    over MAX_PATH_BYTES, a directory deeper than MAX_TREE_DEPTH or more than MAX_TREE_ENTRIES entries is added to
    `problems` and not walked into (the walk stops at the entry limit). Never raises for what is in the tree."""
    stack: list[tuple[str, str, int]] = [(str(root), rel_root, 0)]  # (host directory, relative path, depth)
    entries = 0
    while stack:
        directory, rel_dir, depth = stack.pop()
        try:
            with os.scandir(directory) as it:
                listing = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{preview(rel_dir or '.')}: cannot be listed ({exc.strerror})")
            continue
        for entry in listing:
            if entry.name in SKIPPED:
                if entry.name == BYTECODE_DIR:
                    problems += _not_bytecode(entry, f"{rel_dir}/{entry.name}" if rel_dir else entry.name)
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                problems.append(f"{preview(os.fsencode(rel))}: the name is not UTF-8")
                continue
            entries += 1
            if entries > MAX_TREE_ENTRIES:
                problems.append(f"more than {MAX_TREE_ENTRIES} files and directories")
                return
            if len(os.fsencode(rel)) > MAX_PATH_BYTES:
                problems.append(f"{preview(rel)}: a path longer than {MAX_PATH_BYTES} bytes")
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                problems.append(f"{preview(rel)}: cannot be read ({exc.strerror or exc})")
                continue
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 >= MAX_TREE_DEPTH:
                    problems.append(f"{preview(rel)}: directories nested deeper than {MAX_TREE_DEPTH} levels")
                    continue
                stack.append((entry.path, rel, depth + 1))
            yield entry, rel, st, depth


BYTECODE_DIR = "__pycache__"
MAX_CACHE_ENTRIES = 5_000  # a cache directory's entries looked at (one .pyc per module and interpreter)


def _not_bytecode(entry: os.DirEntry, rel: str) -> list[str]:
    """Why a `__pycache__` entry of the tree makes it ungradable, if it does. The snapshot leaves caches out, but
    Python imports a `__pycache__` directory inside a package as a namespace package, with any source in it (a
    hundred-and-thirty-first attacker: `from .__pycache__ import mark` ran the bug in the workspace, the fix in the
    graded copy, accepted on 12 of 12 package tasks): a cache directory may hold only regular `.pyc` files, which
    Python reads only as the caches of sources the snapshot has (and `drop_bytecode` removes from the workspace)."""
    if not entry.is_dir(follow_symlinks=False):
        return [f"{preview(rel)}: a cache directory's name on what is not a directory"]
    try:
        with os.scandir(entry.path) as it:
            for i, item in enumerate(it):
                if i >= MAX_CACHE_ENTRIES:
                    return [f"{preview(rel)}: more than {MAX_CACHE_ENTRIES} entries in a cache directory"]
                if not (item.name.endswith(".pyc") and item.is_file(follow_symlinks=False)):
                    return [f"{preview(rel + '/' + item.name)}: a cache directory holds only bytecode (Python imports "
                            "anything else in it, and the graded state leaves caches out)"]
    except OSError as exc:
        return [f"{preview(rel)}: cannot be listed ({exc.strerror})"]
    return []


def drop_bytecode(root: Path) -> None:
    """Remove the bytecode Python cached under `root` (`__pycache__/*.pyc`, not following links): the graded snapshot
    leaves caches out, so a workspace holding none imports what the snapshot holds (a .pyc written to pass for a
    source's cache, timestamp- or hash-based, would be run in place of that source). What is not bytecode stays, and
    makes the state ungradable (`_not_bytecode`)."""
    directories = [str(root)] + [e.path for e, _, st, _ in walk_bounded(root, []) if stat.S_ISDIR(st.st_mode)]
    for directory in directories:  # bounded as the snapshot's walk is; its problems are the snapshot's to report
        try:  # a cache directory itself, never one a link names (that could be anywhere on the host)
            fd = os.open(os.path.join(directory, BYTECODE_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:  # none there, or not a directory (`_not_bytecode` says so)
            continue
        try:
            with os.scandir(fd) as it:
                stale = [item.name for item in it if item.name.endswith(".pyc") and item.is_file(follow_symlinks=False)]
            for name in stale:
                os.unlink(name, dir_fd=fd)
        except OSError:
            pass
        finally:
            os.close(fd)


def _check_the_workspace_user_may_read(rel: str, st: os.stat_result, problems: list[str]) -> None:
    """Add a problem where the sandbox's user could not read the file (or list and enter the directory) at `rel`.

    The walk reads as this process's user, which may be root and read anything, and the copy is made readable; the
    workspace's runs are the sandbox's user's, without capabilities. So a module the agent made unreadable (`chmod
    000`) was graded as readable: a hundred-and-sixty-seventh attacker's fix ran only where its gate module could be
    imported, the verifier's copy (accepted 0.96 on 2 of 3 repository layouts and 14 of 14 registered-package tasks,
    pytest failing FAIL_TO_PASS). The sandbox's user is this process's, mapped into its user namespace (`bwrap
    --uid`), so the owner's bits are its own, the group's where the group is ours, the others' otherwise."""
    if stat.S_ISLNK(st.st_mode):
        return  # a link has no mode of its own: what it names is walked, or is outside and refused
    need = 0o5 if stat.S_ISDIR(st.st_mode) else 0o4
    shift = 6 if st.st_uid == os.getuid() else 3 if st.st_gid == os.getgid() else 0
    if (st.st_mode >> shift) & need != need:
        problems.append(f"{preview(rel)}: the workspace's user cannot {'list' if need == 0o5 else 'read'} it (mode "
                        f"{stat.filemode(st.st_mode)}), so the verifier would run what the workspace cannot")


def snapshot_tree(root: Path, copy_to: Path | None = None) -> TreeSnapshot:
    """Read `root` by `walk_bounded`: each regular file's diff text, links described, and (with `copy_to`) a copy
    of the regular files (read-only), directories and symlinks. Anything that cannot be copied faithfully (a
    special file, what the walk refuses, more than MAX_TREE_BYTES of files) is a problem in the result."""
    snap = TreeSnapshot()
    size = 0
    _check_the_workspace_user_may_read(".", os.stat(root), snap.problems)
    for entry, rel, st, _ in walk_bounded(root, snap.problems):
        target = os.path.join(copy_to, rel) if copy_to is not None else None
        _check_the_workspace_user_may_read(rel, st, snap.problems)
        try:
            if stat.S_ISLNK(st.st_mode):
                link = os.readlink(entry.path)
                snap.entries[rel] = f"<symlink to {link}>"
                snap.links[rel] = link
                if target:
                    os.symlink(link, target)
            elif stat.S_ISDIR(st.st_mode):
                if target:
                    os.mkdir(target)
            elif stat.S_ISREG(st.st_mode):
                size += st.st_size
                if size > MAX_TREE_BYTES:
                    snap.problems.append(f"the files hold more than {MAX_TREE_BYTES >> 20} MiB")
                    break
                fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                with os.fdopen(fd, "rb") as fh:
                    data = fh.read(MAX_TREE_BYTES + 1)
                snap.entries[rel] = _diff_text(data)
                if target:
                    with open(target, "wb") as out:
                        out.write(data)
                    os.chmod(target, 0o444)
            else:
                snap.problems.append(f"{preview(rel)} is {_special(st.st_mode)}")
        except OSError as exc:
            snap.problems.append(f"{preview(rel)}: cannot be read ({exc.strerror or exc})")
    return snap


def bounded_diff(before: dict[str, str | None], after: dict[str, str | None]) -> str:
    """A git-style unified diff of two snapshots, bounded in time and size: binary files noted, files too large
    or too long summarised, at most MAX_DIFF_WORK of line alignment, and the text cut at MAX_FINAL_DIFF_CHARS."""
    chunks, work, total = [], 0, 0
    for path in sorted(set(before) | set(after)):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        if (path in before and a is None) or (path in after and b is None):
            chunk = f"Binary files a/{path} and b/{path} differ\n"
        else:
            la, lb = (a or "").splitlines(keepends=True), (b or "").splitlines(keepends=True)
            cost = max(len(la), 1) * max(len(lb), 1)
            if max(len(la), len(lb)) > MAX_DIFF_FILE_LINES or work + cost > MAX_DIFF_WORK:
                chunk = f"Files a/{path} and b/{path} differ ({len(la)} and {len(lb)} lines: too large to diff)\n"
            else:
                work += cost
                chunk = "".join(difflib.unified_diff(la, lb, fromfile=f"a/{path}" if path in before else "/dev/null",
                                                     tofile=f"b/{path}" if path in after else "/dev/null"))
                if not chunk.endswith("\n"):
                    chunk += "\n\\ No newline at end of file\n"
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_FINAL_DIFF_CHARS:
            break
    text = "".join(chunks)
    if len(text) > MAX_FINAL_DIFF_CHARS:
        text = text[:MAX_FINAL_DIFF_CHARS] + f"\n[... the diff is cut at {MAX_FINAL_DIFF_CHARS} characters]\n"
    return text


# keyed by OSError.errno, which is None for an error raised without one (then the default applies)
_OS_ERRORS: dict[int | None, tuple[ActionErrorKind, str]] = {errno.ENAMETOOLONG: (ActionErrorKind.INVALID_ARGUMENTS, "the path is too long"),
              errno.ENOSPC: (ActionErrorKind.RULE_VIOLATION, "the repository's disk quota is full"),
              errno.EDQUOT: (ActionErrorKind.RULE_VIOLATION, "the repository's disk quota is full"),
              errno.EFBIG: (ActionErrorKind.RULE_VIOLATION, "the file would be too large"),
              errno.ELOOP: (ActionErrorKind.INVALID_ARGUMENTS, "the path has too many levels of symbolic links"),
              errno.EEXIST: (ActionErrorKind.INVALID_ARGUMENTS, "a file is in the way of a directory on the path"),
              errno.ENOTDIR: (ActionErrorKind.INVALID_ARGUMENTS, "a file is in the way of a directory on the path"),
              errno.EISDIR: (ActionErrorKind.INVALID_ARGUMENTS, "the path is a directory")}


class CodeEnvironment(ToolEnvironment):
    """Tools act on a copy-on-write view of the task's pristine repository; commands run in the sandbox."""

    def __init__(self, *, backend: str | None = None, limits: Limits = AGENT_LIMITS):
        super().__init__()
        self.backend, self.limits = backend or sandbox_backend(), limits
        self.workspace: CowWorkspace | None = None
        self.sandbox: Sandbox | None = None
        self.task: TaskSpec | None = None
        self.start_tree: dict[str, str | None] = {}
        self.start_links: dict[str, str] = {}
        self.command_env: dict[str, str] = {}

    def _reset(self, task: TaskSpec, seed: int) -> Observation:
        pristine, digest = pristine_repo(start_files(task))
        StaleTaskError.check(task.id, task.start_state.digest, digest, "repository")
        if self.workspace is None:
            self.workspace = CowWorkspace(disk_mb=self.limits.disk_mb)
        self.workspace.restore(pristine)
        runtime = _runtime(task)
        if self.sandbox is not None and getattr(self.sandbox, "runtime", None) is not None and runtime is not None \
                and cast(Any, self.sandbox).runtime != runtime:  # the getattr above: this backend has one
            self.sandbox.close()  # another repository's packages: a sandbox that mounts this task's layer
            self.sandbox = None
        if self.sandbox is None:
            options: dict[str, Any] = {"seeded": True} if self.backend == "bwrap" else {}
            if runtime is not None and self.backend == "bwrap":
                options["runtime"] = runtime
            self.sandbox = open_sandbox(self.workspace.path, backend=self.backend, limits=self.limits, **options)
        else:
            self.sandbox.reset()  # no process or /tmp file of the last rollout, and the new overlay seen
        self.task, self.start_tree, self.start_links = task, _start_tree(pristine), _start_links(pristine)
        # the commands' randomness (a seeded sandbox): the same task and seed see the same values (seeded_site.py)
        self.command_env = {"SANDBOX_SEED": content_hash([task.id, seed], length=16)}
        listing = "\n".join(self.sandbox.list_files())
        return Observation(text=f"{task.goal}\n\nRepository files:\n{listing}",
                           data={"goal": task.goal, "files": listing.splitlines()})

    # -- tools (`tools.py`) ----------------------------------------------------------------------
    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Run tool `name` (`tools.TOOLS`); the file system's errors become refusals that name the path."""
        assert self.sandbox is not None, "reset() must be called before step()"
        path = preview(arguments.get("path", "."))
        try:
            return TOOLS.functions[name](self, **arguments)
        except FileNotFoundError:
            raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"no such file: {path}") from None
        except (IsADirectoryError, NotADirectoryError):
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{path}: a directory is not a file, or a file not a "
                                                                 "directory, on this path") from None
        except PermissionError:
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"{path} is outside the repository; only files inside "
                                                              "it can be used (paths relative to its root)") from None
        except UnicodeDecodeError:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{path} is not a UTF-8 text file") from None
        except ValueError as exc:  # the sandbox's path check: empty, or a NUL byte
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS, f"{path} is not a usable path ({exc.__class__.__name__}: "
                                                                 "a path is non-empty text without NUL bytes)") from None
        except RecursionError:
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"{path}: directories are nested too deeply to list") from None
        except OSError as exc:
            kind, why = _OS_ERRORS.get(exc.errno, (ActionErrorKind.RULE_VIOLATION, exc.strerror or "the file system refused it"))
            raise ToolRefusal(kind, f"{path}: {why}") from None

    def regular_file(self, path: str, *, may_be_missing: bool = False) -> Path:
        """The host path of `path`, refused unless it is a regular file (or absent, when allowed): a FIFO, socket
        or device is never opened, so no call can block on one."""
        target = cast(Sandbox, self.sandbox).resolve(path)
        try:
            mode = os.lstat(target).st_mode
        except FileNotFoundError:
            if may_be_missing:
                return target
            raise
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(mode):
            raise ToolRefusal(ActionErrorKind.RULE_VIOLATION, f"{preview(path)} is {_special(mode)}, not a regular file; "
                                                              "only regular files can be read or written")
        return target

    def listing(self, path: str) -> tuple[list[str], list[str]]:
        """The files under directory `path` (relative to the repository root, sorted) and why the listing is
        incomplete, if it is (`walk_bounded`)."""
        base = cast(Sandbox, self.sandbox).resolve(path)
        if not base.is_dir():
            raise NotADirectoryError(path)
        root = os.path.realpath(cast(CowWorkspace, self.workspace).path)
        rel_root = "" if str(base) == root else os.path.relpath(base, root)
        problems: list[str] = []
        files = sorted(rel for _, rel, st, _ in walk_bounded(base, problems, rel_root) if not stat.S_ISDIR(st.st_mode))
        return files, problems

    def exec_observation(self, r: ExecResult, *, normalise: bool = False) -> Observation:
        """What a command's result reads as: its exit code (and the limit that killed it), then its output."""
        out, err = r.stdout, r.stderr
        if normalise:  # pytest's report: keep what the tests did, drop run time and memory addresses
            out, err = (_ADDRESS.sub("0x…", _TIMING.sub("", text)) for text in (out, err))
        parts = [f"[{UNSAFE_LABEL}]"] if r.unsafe else []
        parts.append(f"exit code: {r.exit_code}" + (f" (killed: {r.killed.value} limit)" if r.killed else ""))
        if out:
            parts.append(out + ("\n[stdout truncated]" if r.stdout_truncated else ""))
        if err:
            parts.append("stderr:\n" + err + ("\n[stderr truncated]" if r.stderr_truncated else ""))
        return Observation(text="\n".join(parts), data={"exit_code": r.exit_code, "killed": r.killed.value if r.killed else None,
                                                        "unsafe": r.unsafe})

    # -- state ------------------------------------------------------------------------------------
    def state_hash(self) -> str:
        """The workspace's digest (`repo.state_digest`). A tree the bounded walk finds problems in (too deep, too
        many entries, paths too long, names that are not UTF-8, special files), or that digest cannot walk, gets a
        digest of what the bounded walk saw instead: this never raises, and its cost is bounded."""
        assert self.workspace is not None, "reset() must be called first"
        problems: list[str] = []
        for _ in walk_bounded(self.workspace.path, problems):  # a cheap look first: is the tree one to walk?
            if problems:
                break
        if not problems:
            try:
                return state_digest(self.workspace.path)
            except (OSError, RecursionError, UnicodeError) as exc:
                problems.append(type(exc).__name__)
        snap = snapshot_tree(self.workspace.path)
        return content_hash(["bounded walk", snap.entries, snap.problems], length=32)

    def final_state(self, directory: Path) -> FinalState:
        assert self.workspace is not None, "reset() must be called first"
        target = Path(directory) / "repo"
        target.mkdir(parents=True)
        drop_bytecode(self.workspace.path)
        snap = snapshot_tree(self.workspace.path, copy_to=target)
        snap.problems += _new_links(snap.links, self.start_links) + _new_metadata(snap.entries, self.start_tree)
        return FinalState(kind="repo", path=str(target), digest=self.state_hash(),
                          diff=bounded_diff(self.start_tree, snap.entries), ungradable=snap.ungradable)

    def close(self) -> None:
        if self.sandbox is not None:
            self.sandbox.close()
            self.sandbox = None
        if self.workspace is not None:
            self.workspace.close()
            self.workspace = None


@lru_cache(maxsize=64)
def _start_snapshot(pristine: str) -> TreeSnapshot:
    """The pristine repository as `snapshot_tree` sees it (read once per pristine tree: it never changes; callers
    copy what they keep)."""
    return snapshot_tree(Path(pristine))


def _start_tree(pristine: Path) -> dict[str, str | None]:
    return dict(_start_snapshot(str(pristine)).entries)


def _start_links(pristine: Path) -> dict[str, str]:
    return dict(_start_snapshot(str(pristine)).links)


METADATA_DIRS = (".dist-info", ".egg-info")  # installed distributions' metadata: what importlib.metadata lists


def _new_metadata(entries: dict[str, str | None], start: dict[str, str | None]) -> list[str]:
    """Why a final tree's distribution metadata makes it ungradable: a file of a `*.dist-info` or `*.egg-info`
    directory the start state does not have (or has otherwise), in any case (`importlib.metadata` lowers the names it
    matches: a hundred-and-thirty-ninth attacker's `gs.DIST-INFO`). `importlib.metadata` lists such directories on any
    path entry, the workspace's root included under `python -m pytest`, and pytest loads the plugins their entry points
    name, which the verifier never does (a hundred-and-thirty-seventh attacker's `.gs.dist-info` made pytest load a
    module that put the bug back in place of the graded fix: accepted on 13 of 13 tasks, the bug under pytest)."""
    new = sorted(rel for rel, text in entries.items() if start.get(rel, "\0") != text and _on_a_path(rel))
    if not new:
        return []
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return [f"{preview(new[0])}{more}: distribution metadata the start state does not have (pytest loads the plugins "
            "its entry points name; the verifier loads none)"]


def _on_a_path(rel: str) -> bool:
    """Whether `rel` (a file, or a link of any kind) is or lies in distribution metadata a path entry of the workspace
    can list: a part named like a metadata directory (in any case), that no hidden directory holds (`.venv/.../pip-
    23.dist-info` is no path entry's; a root `.gs.dist-info`, directory or link, is the root's: a hundred-and-
    forty-first attacker's link `.gs.dist-info -> .git/gsmeta` was accepted on 15 of 15 tasks)."""
    parts = rel.split("/")
    for i, part in enumerate(parts):
        if part.lower().endswith(METADATA_DIRS):
            return not any(p.startswith(".") for p in parts[:i])
    return False


def _new_links(links: dict[str, str], start: dict[str, str]) -> list[str]:
    """Why the links of a final tree make it ungradable: a symbolic link the start state does not have (or one it
    has, pointing elsewhere), that no hidden directory holds. The graded copy keeps a link but not what it points to,
    and a pytest run of the workspace follows it: a hundred-and-thirty-sixth attacker's `pkg/gsimpl.py` linked into
    `.pytest_cache` (which the snapshot skips), beside a namespace directory of the same name, and a linked
    directory, ran the bug in the workspace and the fix where graded (accepted on 24 of 24 and 6 of 6
    registered-package tasks). A link inside a hidden directory is not importable by name (`.venv/bin/python`); a
    hidden link itself may be listed (a root `.gs.dist-info` link: `_on_a_path`)."""
    new = sorted(rel for rel, target in links.items()
                 if start.get(rel) != target and not any(part.startswith(".") for part in rel.split("/")[:-1]))
    if not new:
        return []
    more = f" (and {len(new) - 1} more)" if len(new) > 1 else ""
    return [f"{preview(new[0])}{more}: a symbolic link the start state does not have (the graded copy does not carry "
            "what a link points to, and a pytest run of the workspace follows it)"]
