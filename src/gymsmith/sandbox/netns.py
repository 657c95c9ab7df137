"""An empty network namespace (loopback only), made once per sandbox and joined by each of its commands.

Creating a network namespace costs about 7 ms here, more than the rest of a bubblewrap start; joining an
existing one costs microseconds. A namespace with only `lo` has no route anywhere: no host loopback, no DNS.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import threading

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
_libc = ctypes.CDLL(None, use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        ifreq = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s, SIOCGIFFLAGS, ifreq))[1]
        fcntl.ioctl(s, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


def create_empty_netns() -> int | None:
    """An fd holding a new network namespace with loopback up, or None if this process may not make one.

    The namespace is made in a short-lived thread (network namespaces are per thread), so this process
    stays in its own. It lives as long as the fd is open.
    """
    result: list[int | BaseException] = []

    def make() -> None:
        try:
            _check(_libc.unshare(CLONE_NEWNET), "unshare(CLONE_NEWNET)")
            _loopback_up()
            result.append(os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY | os.O_CLOEXEC))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            result.append(exc)

    t = threading.Thread(target=make, name="gymsmith-netns")
    t.start()
    t.join()
    return result[0] if isinstance(result[0], int) else None


def join_netns(fd: int) -> None:
    """Move the calling thread into the namespace held by `fd` (used between fork and exec)."""
    _check(_libc.setns(fd, CLONE_NEWNET), "setns(CLONE_NEWNET)")
