"""Files sandboxes share, held in memory: whether a page of one is cached carries nothing between sandboxes.

Every sandbox maps the same host files read-only: the programs and libraries of /usr, the interpreter and its
standard library, the runtime's packages, a registered repository's layer, a task's pristine tree under a
workspace overlay. Whether a page of such a file is in the page cache is kernel state kept per inode, outside
every namespace, and a sandbox can change it and read it with no call the seccomp filter refuses: touching a page
brings it in; filling its own memory cgroup sends out the pages it brought in; and a page touched after
`MADV_RANDOM` counts a major fault (`getrusage`, `/proc/self/stat`) exactly when it was out. A twenty-seventh
independent attacker wrote a correct rollout's answers as page residency while the verifier ran its code, read
them in a later rollout of the same task that kept the bug, and was accepted (0.95-0.99; template, hashids and
sqids tasks). The filter cannot close this: reading a page is not a call.

So before a sandbox starts, the host maps and locks (`mlock`) every page of every regular file the sandbox can
read from the host, and keeps them locked while any sandbox of this process can read them: all are resident, none
can be brought in or sent out (a locked page is not reclaimed, by a cgroup's limit or the whole machine's), and
every probe reads the same. The host's own mapping also means no page of them is ever mapped by one process only
(`/proc/self/pagemap`'s exclusive bit). Costs: the shared files' size in locked memory (about 1.5 GiB on the
development machine, mostly /usr/lib; counted once however many processes lock them), one memory mapping per
file (`vm.max_map_count`), and ~0.3 s per process the first time (~3 s on a cold machine).

`hold(roots)` locks trees for the life of the process (system directories, the interpreter, runtime layers: they
do not change while gymsmith runs); `lease(root)`
locks a tree while a lease is held and keeps it locked after the last one ends, for the next (a pristine tree: the
many rollouts of a task restore it again and again, and locking 20,000 files takes ~0.5 s), releasing trees no
lease holds, least recently used first, once they hold over KEEP_FILES files. `hold` skips subtrees a sandbox cannot see (`skip`); both skip symbolic links (a link's
target is locked through the tree it is in, if a sandbox can see it). Locking needs CAP_IPC_LOCK (root) or a
`ulimit -l` above the shared files' size; without it, `SandboxError` (the sandbox does not start).
"""

from __future__ import annotations

import ctypes
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Iterator

from gymsmith.sandbox.base import SandboxError

KEEP_FILES = 20_000  # files of trees no lease holds that stay locked (each is a memory mapping of this process)
_PROT_READ, _MAP_SHARED = 0x1, 0x01
_MAP_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
_libc.mlock.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
_libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)


class _Mapping:
    __slots__ = ("address", "size", "users")

    def __init__(self, address: int, size: int) -> None:
        self.address, self.size, self.users = address, size, 0


_lock = threading.Lock()
_mappings: dict[tuple[int, int], _Mapping] = {}  # (st_dev, st_ino) -> the locked mapping of that file
_held: set[tuple[str, frozenset[str]]] = set()  # roots `hold` has locked in this process
_owner = os.getpid()  # locks are not inherited by a forked child: it locks its mappings again


def _after_fork() -> None:
    global _owner, _lock
    _owner = -1  # checked (and the locks taken again) at the next hold or lease
    _lock = threading.Lock()  # another thread of the parent may have held it at the fork: the child has none


os.register_at_fork(after_in_child=_after_fork)


def hold(roots: Iterable[str], skip: Collection[str] = ()) -> None:
    """Lock every regular file under each of `roots` (a directory, walked, or a file), except under the paths in
    `skip`, for the rest of this process. A root already held is not walked again. Raises SandboxError if a file
    cannot be locked (nothing is unlocked: what was locked stays held)."""
    with _lock:
        _relock_after_fork()
        frozen = frozenset(skip)
        for root in roots:
            if (root, frozen) not in _held:
                _lock_tree(root, frozen, [])
                _held.add((root, frozen))


class _Tree:
    __slots__ = ("keys", "stamp", "leases")

    def __init__(self, keys: list[tuple[int, int]], stamp: tuple[int, int, int]) -> None:
        self.keys, self.stamp, self.leases = keys, stamp, 0


_trees: OrderedDict[str, _Tree] = OrderedDict()  # lease roots, least recently leased first


class Lease:
    """A tree locked by `lease` while this is held; `release()` once (later calls do nothing)."""

    def __init__(self, tree: _Tree) -> None:
        self._tree: _Tree | None = tree

    def release(self) -> None:
        with _lock:
            tree, self._tree = self._tree, None
            if tree is not None:
                tree.leases -= 1
                if tree.leases == 0 and all(t is not tree for t in _trees.values()):
                    _release(tree.keys)  # a tree rebuilt since it was leased: its old files are let go now
                _trim()


def lease(root: str) -> Lease:
    """Lock every regular file under `root` (as `hold`, nothing skipped) while the returned Lease is held. A tree leased before is
    not walked again unless its root directory changed since (another inode or modification time: rebuilt).
    Raises SandboxError if a file cannot be locked."""
    st = os.stat(root)
    stamp = (st.st_dev, st.st_ino, st.st_mtime_ns)
    with _lock:
        _relock_after_fork()
        tree = _trees.get(root)
        if tree is not None and tree.stamp != stamp:
            del _trees[root]
            if tree.leases == 0:
                _release(tree.keys)
            tree = None
        if tree is None:
            keys: list[tuple[int, int]] = []
            try:
                _lock_tree(root, frozenset(), keys)
            except SandboxError:
                _release(keys)
                raise
            tree = _trees[root] = _Tree(keys, stamp)
        tree.leases += 1
        _trees.move_to_end(root)
        return Lease(tree)


def _trim() -> None:
    """Release trees no lease holds, least recently leased first, while they hold over KEEP_FILES files (`_lock`
    held)."""
    idle = [(root, tree) for root, tree in _trees.items() if tree.leases == 0]
    count = sum(len(tree.keys) for _, tree in idle)
    for root, tree in idle:
        if count <= KEEP_FILES:
            break
        count -= len(tree.keys)
        _release(tree.keys)
        del _trees[root]


def locked_bytes() -> int:
    """Bytes of shared files this process holds locked."""
    with _lock:
        return sum(m.size for m in _mappings.values())


def _release(keys: list[tuple[int, int]]) -> None:
    """One use fewer of each file in `keys` (`_lock` held); a file no use is left of is unmapped (unlocked)."""
    for key in keys:
        mapping = _mappings.get(key)
        if mapping is not None:
            mapping.users -= 1
            if mapping.users == 0:
                _libc.munmap(mapping.address, mapping.size)
                del _mappings[key]


def _relock_after_fork() -> None:
    global _owner
    if _owner == os.getpid():
        return
    for mapping in _mappings.values():
        _mlock(mapping.address, mapping.size, "a file locked before this process was forked")
    _owner = os.getpid()


def _lock_tree(root: str, skip: frozenset[str], keys: list[tuple[int, int]]) -> None:
    """Lock the files of `root` (followed if a link, as bwrap follows a bind's source), links inside not followed."""
    for path in _files(root, skip) if os.path.isdir(root) else [os.path.realpath(root)]:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            _lock_file(path, st, keys)


def _files(root: str, skip: frozenset[str]) -> Iterator[str]:
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if os.path.join(here, d) not in skip)  # not descended into
        yield from (path for path in (os.path.join(here, name) for name in files) if path not in skip)


def _lock_file(path: str, st: os.stat_result, keys: list[tuple[int, int]]) -> None:
    key = (st.st_dev, st.st_ino)
    mapping = _mappings.get(key)
    if mapping is None:
        if st.st_size == 0:
            return  # no page to hold
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        except OSError:
            return  # unreadable to the host: no sandbox reads it either
        try:
            address = _libc.mmap(None, st.st_size, _PROT_READ, _MAP_SHARED, fd, 0)
        finally:
            os.close(fd)
        if address in (None, _MAP_FAILED):
            errno = ctypes.get_errno()
            raise SandboxError(f"cannot map {path} to hold it in memory: {os.strerror(errno)} (every file sandboxes "
                               "share is held resident; see docs/sandbox.md, vm.max_map_count)")
        try:
            _mlock(address, st.st_size, path)
        except SandboxError:
            _libc.munmap(address, st.st_size)
            raise
        mapping = _mappings[key] = _Mapping(address, st.st_size)
    mapping.users += 1
    keys.append(key)


def _mlock(address: int, size: int, what: str) -> None:
    if _libc.mlock(address, size) != 0:
        errno = ctypes.get_errno()
        raise SandboxError(
            f"cannot lock {what} in memory: {os.strerror(errno)}. Every file sandboxes share is held resident so "
            "that its page cache carries nothing from one sandbox to another (docs/sandbox.md): run as root "
            "(CAP_IPC_LOCK) or raise the locked-memory limit (ulimit -l) above the shared files' size")
