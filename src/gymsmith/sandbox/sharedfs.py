"""Host directories a sandbox sees live on tmpfs: what one sandbox looks up leaves nothing for the next to time.

On a disk filesystem, looking up a name that does not exist (`stat`, `open`, an import's search) leaves a
*negative dentry* in the host's directory cache. It outlives the sandbox and makes the same lookup faster later
(about 0.8 µs against 2 µs): a bit per name that any later sandbox reads by timing, with no call a filter can
refuse and no /proc. A thirty-second independent attacker wrote a correct rollout's repair as such names in the
standard library's directory while the verifier ran its code; a later rollout of the same task that kept the bug
read them (in its verification, or in its own sandbox) and was accepted (template tasks 0.95-0.97, hashids 0.95).

tmpfs keeps no negative dentry past its lookup (each is dropped when the lookup ends), holds every positive one
for the life of the file, and, with no swap, never evicts a page: a lookup or a read there changes nothing a later
lookup can time. So every host directory bwrap binds into a sandbox is on tmpfs:
- read-only binds (the system directories, the interpreter and its standard library, runtime and repository
  layers, the command server) are bound from copies that `stage` makes, once per content, under `root()`: a
  directory on a host-wide tmpfs (`$GYMSMITH_SHARED_FS`, else `/dev/shm/sandbox-files-<uid>`), kept for every
  later sandbox (about 1.5 GiB of memory on the development machine, mostly /usr/lib);
- directories a caller writes for sandboxes (the verifier's job files, a runner's empty workspace) are made by
  `scratch` in the same place;
- a workspace's pristine tree is copied into the workspace's own tmpfs (`workspace.py`).
Where `root()` is not on tmpfs, no sandbox starts (`SandboxError`): the channel would be open.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
import tempfile
import threading
from collections.abc import Collection, Sequence
from pathlib import Path

from gymsmith.sandbox.base import SandboxError

TMPFS_MAGIC = 0x01021994
# options that mount something at their last argument, and how many arguments they take
COVERING = {"--ro-bind": 2, "--ro-bind-try": 2, "--bind": 2, "--bind-try": 2, "--tmpfs": 1, "--dir": 1,
            "--symlink": 2, "--proc": 1, "--dev": 1}
READ_ONLY_BINDS = ("--ro-bind", "--ro-bind-try")

_libc = ctypes.CDLL(None, use_errno=True)
_staged: dict[tuple[str, frozenset[str]], str] = {}  # (source, skipped) -> its copy, for this process
_lock = threading.Lock()


def on_tmpfs(path: str | os.PathLike) -> bool:
    """Whether `path` lies on a tmpfs. Raises OSError if it cannot be looked up."""
    buf = (ctypes.c_long * 32)()  # struct statfs; f_type is its first word
    if _libc.statfs(os.fsencode(path), buf) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"statfs {path}: {os.strerror(err)}")
    return buf[0] & 0xFFFFFFFF == TMPFS_MAGIC


def root() -> Path:
    """The host-wide tmpfs directory that staged copies and scratch directories live in (made on first use, mode
    0700). Raises SandboxError if it is not on tmpfs, or exists and is not this user's own directory."""
    base = os.environ.get("GYMSMITH_SHARED_FS") or f"/dev/shm/sandbox-files-{os.getuid()}"
    path = Path(base)
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
            raise SandboxError(f"{path} (the sandboxes' shared tmpfs directory) must be a directory of uid "
                               f"{os.getuid()} that no one else can write (mode 0700)")
        if not on_tmpfs(path):
            raise SandboxError(f"{path} is not on tmpfs: files that sandboxes look up there would carry state from one "
                               "sandbox to the next; set $GYMSMITH_SHARED_FS to a directory on a tmpfs")
    except OSError as exc:
        raise SandboxError(f"cannot use {path} for the sandboxes' shared files: {exc}") from None
    return path


def scratch_root() -> Path:
    """The directory `scratch` makes its directories in (made on first use). Raises SandboxError as `root`."""
    parent = root() / "scratch"
    parent.mkdir(exist_ok=True)
    return parent


def scratch(prefix: str) -> Path:
    """A new empty directory (mode 0755) under `scratch_root()`, for files a caller writes and sandboxes read; the
    caller removes it. Raises SandboxError as `root`."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))
    os.chmod(path, 0o755)
    return path


def stage(source: str, skip: Collection[str] = ()) -> str:
    """The path of a read-only copy of host file or directory `source` on the shared tmpfs, with the subtrees in
    `skip` (host paths under it) left empty. Copied once per content (paths, modes, sizes, modification times and link
    targets) and kept: later calls, from any process, get the same copy. A source already on tmpfs is returned as
    it is. Raises SandboxError if it cannot be copied."""
    real = os.path.realpath(source)
    skipped = frozenset(os.path.relpath(s, real) for s in skip if s.startswith(real.rstrip("/") + "/"))
    with _lock:
        files = root() / "files"  # checked every time: a copy is only as good as the tmpfs it is on
        known = _staged.get((real, skipped))
        if known is not None and os.path.exists(known):
            return known
        if on_tmpfs(real):
            return real
        files.mkdir(exist_ok=True)
        target = files / f"{_fingerprint(real, skipped)}-{os.path.basename(real.rstrip('/')) or 'root'}"
        if not target.exists():
            with open(files / f".lock-{target.name}", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)  # one process copies; the others wait for it
                if not target.exists():
                    _copy(real, target, skipped)
        _staged[(real, skipped)] = str(target)
        return str(target)


def stage_binds(args: Sequence[str], live: Collection[str] = ()) -> list[str]:
    """bwrap `args` with the source of every read-only bind replaced by its staged copy (`stage`), less what a later
    mount covers. Sources in `live` (directories the caller writes per job: they must be `scratch` directories) and
    missing `--ro-bind-try` sources are left as they are."""
    out = list(args)
    binds = bind_mounts(args)
    for k, (i, option, source, dest) in enumerate(binds):
        if option not in READ_ONLY_BINDS or source is None or source in live:
            continue
        if option == "--ro-bind-try" and not os.path.exists(source):
            continue
        out[i + 1] = stage(source, covered(binds, k))
    return out


def bind_mounts(args: Sequence[str]) -> list[tuple[int, str, str | None, str]]:
    """(index, option, source or None, destination) of each mount in bwrap `args`, in order."""
    mounts, i = [], 0
    while i < len(args):
        n = COVERING.get(args[i])
        if n is None:
            i += 1
            continue
        mounts.append((i, args[i], args[i + 1] if n == 2 else None, args[i + n]))
        i += n + 1
    return mounts


def covered(mounts: Sequence[tuple[int, str, str | None, str]], k: int) -> set[str]:
    """Host paths under the source of mount `k` that a later mount covers (a tmpfs over the standard library's
    test suite, the runtime's packages over its site-packages): a sandbox cannot see them."""
    _, _, source, dest = mounts[k]
    if source is None:
        return set()
    top = dest.rstrip("/") + "/"
    return {source.rstrip("/") + later[len(dest.rstrip("/")):] for _, _, _, later in mounts[k + 1:]
            if later.startswith(top)}


def _fingerprint(real: str, skipped: frozenset[str]) -> str:
    """A digest of what a copy of `real` would hold: each entry's path, type, mode, size, mtime and link target."""
    h = hashlib.sha256(f"{real}\n{sorted(skipped)}\n".encode())
    st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        h.update(f"{st.st_mode} {st.st_size} {st.st_mtime_ns}\n".encode())
        return h.hexdigest()[:20]
    for dirpath, dirnames, filenames in os.walk(real):
        rel_dir = os.path.relpath(dirpath, real)
        dirnames[:] = sorted(d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d)) not in skipped)
        for name in sorted(dirnames + filenames):
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in skipped:
                continue
            s = os.lstat(os.path.join(dirpath, name))
            link = os.readlink(os.path.join(dirpath, name)) if stat.S_ISLNK(s.st_mode) else ""
            h.update(f"{rel}\0{s.st_mode}\0{s.st_size}\0{s.st_mtime_ns}\0{link}\n".encode())
    return h.hexdigest()[:20]


def _copy(real: str, target: Path, skipped: frozenset[str]) -> None:
    """Copy `real` to `target` (atomically: a partial copy is never seen under `target`), without `skipped`."""
    partial = target.with_name(f".partial-{target.name}-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        if os.path.isdir(real):
            partial.mkdir()
            # tar keeps modes, owners, hard links and symbolic links as they are; a skipped subtree is copied as an
            # empty directory (the mount point of what covers it)
            excludes = [f"--exclude=./{rel}/*" for rel in sorted(skipped)]
            pack = subprocess.Popen(["tar", "-C", real, "--anchored", *excludes, "-cf", "-", "."],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            assert pack.stdout is not None and pack.stderr is not None
            unpack = subprocess.run(["tar", "-C", str(partial), "-xpf", "-"], stdin=pack.stdout, capture_output=True)
            pack.stdout.close()
            packed = pack.wait()
            if packed != 0 or unpack.returncode != 0:
                raise SandboxError(f"cannot copy {real} to the sandboxes' shared tmpfs: "
                                   f"{(pack.stderr.read() + unpack.stderr).decode(errors='replace').strip()[:300]}")
        else:
            shutil.copy2(real, partial)
        os.rename(partial, target)
    except OSError as exc:
        raise SandboxError(f"cannot copy {real} to the sandboxes' shared tmpfs: {exc}") from None
    finally:
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        elif partial.exists():
            partial.unlink()
