"""Snapshot and restore of workspaces: the pristine tree is built once, each rollout gets a copy-on-write view.

Modes, best first (chosen once per CowWorkspace, reported in `mode`):
- `overlay`: overlayfs with the pristine tree as its read-only lower layer and a fresh, size-capped tmpfs
  as the upper layer. Restore is unmount + mount: its cost does not depend on the size of the tree, and
  the tmpfs size is the workspace's disk quota. Needs CAP_SYS_ADMIN (root here).
- `copy`: `cp -a --reflink=auto` of the pristine tree (a reflink clone on btrfs/XFS, else a plain copy).
  Linear in the tree's size and with no disk quota; used where mounting is not permitted.
A hard-link tree is not offered: a command that writes a file in place would change the pristine copy.

Under an overlay, the lower layer is the workspace's own copy of the pristine tree, on a tmpfs of its own, made
when the workspace first shows that tree and kept for its next rollouts of the task. Lookups there leave no
negative dentry (a pristine tree on disk kept every name a rollout looked up, for the next rollout to time:
sharedfs.py), and its files are held in memory while the workspace shows them (`residency.lease`), so their page
cache carries nothing from one rollout to the next either. A copy is the workspace's own.
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path

from gymsmith.sandbox import residency
from gymsmith.sandbox.base import CACHE_DIRS, SandboxError

MNT_DETACH = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT = 1, 2, 4, 32
HASH_EXCLUDED_FILES = frozenset({".git/index"})  # git's stat cache: rewritten by `git status`, not content
_libc = ctypes.CDLL(None, use_errno=True)
_counter = itertools.count()


def _base() -> Path:
    base = Path(os.environ.get("GYMSMITH_WORKSPACES") or Path(tempfile.gettempdir()) / "gymsmith-workspaces")
    base.mkdir(parents=True, exist_ok=True)
    return base


def _mount(source: str, target: Path, fstype: str, data: str, flags: int = MS_NOSUID | MS_NODEV) -> None:
    if _libc.mount(source.encode(), str(target).encode(), fstype.encode(), flags, data.encode()) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {fstype} on {target}: {os.strerror(err)}")


def _umount(target: Path) -> None:
    if os.path.ismount(target):
        _libc.umount2(str(target).encode(), MNT_DETACH)


def _collect_stale() -> None:
    """Unmount and remove workspaces whose owning process is gone (a run killed before it cleaned up)."""
    for d in _base().glob("*-*"):
        try:
            owner = int(d.name.split("-")[0])
        except ValueError:
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            for m in (d / "merged", d / "layer", d / "lower"):
                _umount(m)
            shutil.rmtree(d, ignore_errors=True)


class CowWorkspace:
    """One reusable workspace directory (`path`) that `restore(pristine)` resets to a pristine tree."""

    def __init__(self, *, disk_mb: int = 256, mode: str = "auto"):
        if mode not in ("auto", "overlay", "copy"):
            raise ValueError(f"workspace mode must be 'auto', 'overlay' or 'copy', got {mode!r}")
        _collect_stale()
        self.disk_mb = disk_mb
        self.root = _base() / f"{os.getpid()}-{next(_counter)}"
        self.root.mkdir(mode=0o700)
        self.path = self.root / "merged"
        self.path.mkdir()
        self._layer = self.root / "layer"
        self._layer.mkdir()
        self._lower = self.root / "lower"  # overlay mode: a tmpfs holding a copy of `_lower_of`
        self._lower.mkdir()
        self._lower_of: Path | None = None
        self.mode = self._probe() if mode == "auto" else mode
        self.pristine: Path | None = None
        self._pin: residency.Lease | None = None  # the lower layer's files, held while the overlay shows them

    def _probe(self) -> str:
        try:
            _mount("gymsmith", self._layer, "tmpfs", "size=1m")
            _umount(self._layer)
            return "overlay"
        except OSError:
            return "copy"

    def restore(self, pristine: Path) -> Path:
        """Make `path` an exact copy-on-write view of `pristine`; returns `path`. Raises SandboxError."""
        pristine = Path(pristine)
        if not pristine.is_dir():
            raise SandboxError(f"pristine tree {pristine} is not a directory")
        if self.mode == "overlay":
            self._unmount()
            try:
                self._copy_lower(pristine)
            except OSError as exc:
                raise SandboxError(f"could not copy {pristine} to the workspace's tmpfs: {exc}") from None
            held = residency.lease(str(self._lower))  # before any sandbox can read it (raises SandboxError)
            try:
                self._remount(self._lower)
            except OSError as exc:
                held.release()
                raise SandboxError(f"could not mount the workspace overlay: {exc}") from None
            self._release_pin()
            self._pin = held
        else:
            self._release_pin()
            self._unmount()
            shutil.rmtree(self.path, ignore_errors=True)
            done = subprocess.run(["cp", "-a", "--reflink=auto", f"{pristine}/.", str(self.path)],
                                  capture_output=True, text=True)
            if done.returncode != 0:
                raise SandboxError(f"could not copy {pristine}: {done.stderr.strip()}")
        self.pristine = pristine
        return self.path

    def _remount(self, pristine: Path) -> None:
        self._unmount()
        _mount("gymsmith", self._layer, "tmpfs", f"size={self.disk_mb}m,mode=0700")
        (self._layer / "upper").mkdir()
        (self._layer / "work").mkdir()
        os.chmod(self._layer / "upper", 0o755)
        _mount("overlay", self.path, "overlay",
               f"lowerdir={pristine},upperdir={self._layer}/upper,workdir={self._layer}/work")

    def _copy_lower(self, pristine: Path) -> None:
        """Make the lower tmpfs a read-only copy of `pristine` unless it is one already (the overlay unmounted)."""
        if self._lower_of == pristine and os.path.ismount(self._lower):
            return
        self._release_pin()  # the old copy's files are let go with it
        _umount(self._lower)
        self._lower_of = None
        _mount("gymsmith", self._lower, "tmpfs", "mode=0755")
        done = subprocess.run(["cp", "-a", f"{pristine}/.", str(self._lower)], capture_output=True, text=True)
        if done.returncode != 0:
            raise OSError(0, done.stderr.strip()[:300])
        _mount("gymsmith", self._lower, "tmpfs", "", MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
        self._lower_of = pristine

    def _unmount(self) -> None:
        _umount(self.path)
        _umount(self._layer)

    def _release_pin(self) -> None:
        if self._pin is not None:
            self._pin.release()
            self._pin = None

    def close(self) -> None:
        self._unmount()
        _umount(self._lower)
        self._release_pin()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "CowWorkspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def tree_hash(root: Path, ignore: tuple[str, ...] = ()) -> str:
    """Content hash of a tree: paths, file bytes, symlink targets and the executable bit; links are not followed.

    Caches that tools rewrite on their own (`__pycache__`, `.pytest_cache`, `.git/index`) are left out, so
    the hash speaks of the state an agent made, not of which commands it ran. Directories named in
    `ignore` are left out too.
    """
    root = Path(root)
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in CACHE_DIRS and d not in ignore)
        rel_dir = os.path.relpath(dirpath, root)
        h.update(f"D {rel_dir}\n".encode())
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            full = os.path.join(dirpath, name)
            rel = os.path.normpath(os.path.join(rel_dir, name))
            if rel in HASH_EXCLUDED_FILES:
                continue
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                h.update(f"L {rel} {os.readlink(full)}\n".encode())
            elif stat.S_ISREG(st.st_mode):
                with open(full, "rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
                h.update(f"F {rel} {int(bool(st.st_mode & 0o111))} {digest}\n".encode())
            else:
                h.update(f"O {rel} {stat.S_IFMT(st.st_mode)}\n".encode())
    return h.hexdigest()[:32]
