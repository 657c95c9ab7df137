"""The host's device nodes, seen read-only: a sandbox uses /dev/null and /dev/urandom but changes nothing of them.

bubblewrap's `--dev` binds the host's own `/dev/null`, `zero`, `full`, `random`, `urandom` and `tty` into every
sandbox, read-write, and a sandbox's uid maps to the host uid that runs gymsmith (root in CI), which owns them. So a
sandbox could set their timestamps (`utimensat`: about 110 bytes that every later sandbox reads with `stat`) or
their mode (`chmod 0 /dev/null`: every later sandbox, and the verifier's, breaks). A twenty-eighth independent
attacker carried a correct rollout's answers to a later rollout that kept its bug in those timestamps and was
accepted (template tasks, 0.95-0.97).

`read_only_nodes()` runs between fork and exec of bwrap, as root: it gives the child a private mount namespace
(nothing of it reaches the host's) in which each node is bound onto itself read-only, devices still allowed. The
nodes bwrap binds from there keep that flag, so inside the sandbox writing to `/dev/null` works, and changing its
times, mode or owner fails with EROFS. The verifier's package process binds its devices from these and keeps them
read-only too (`verifier/pid1.py`). Without root (no pre-made namespaces) this is not done: the nodes then belong
to root, not to the sandbox's uid, so only "touched now" is left to a sandbox (docs/sandbox.md).
"""

from __future__ import annotations

import ctypes
import os

NODES = ("null", "zero", "full", "random", "urandom", "tty")  # what bwrap's --dev binds from the host
_CLONE_NEWNS = 0x00020000
_MS_RDONLY, _MS_NOSUID, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x1, 0x2, 0x20, 0x1000, 0x4000, 0x40000
_libc = ctypes.CDLL(None, use_errno=True)


def read_only_nodes() -> None:
    """In this process (a child about to exec bwrap): a private mount namespace whose device nodes `NODES` are
    read-only. Raises OSError naming the step that failed (the sandbox must then not start)."""
    _check(_libc.unshare(_CLONE_NEWNS), "unshare the mount namespace")
    _check(_libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make the mounts private")
    for name in NODES:
        path = f"/dev/{name}".encode()
        if not os.path.exists(path):
            continue
        _check(_libc.mount(path, path, None, _MS_BIND, None), f"bind /dev/{name}")
        _check(_libc.mount(None, path, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID, None),
               f"make /dev/{name} read-only")


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"cannot {what} for the sandbox's device nodes: {os.strerror(errno)}")
