"""What a sandboxed warm server needs as pid 1 of its namespace. Standard library only: it runs in the sandbox.

Mounted next to the servers (`pytest_server.py`, `calltests/server.py`) at /run/gymsmith and imported by them
before any code under test exists in the process.
"""

import os
import signal
import time


def set_dumpable(flag):
    """Non-dumpable: processes of the same uid cannot ptrace us or read our memory through /proc."""
    import ctypes
    try:
        ctypes.CDLL(None).prctl(4, int(flag), 0, 0, 0)  # PR_SET_DUMPABLE
    except OSError:
        pass


def kill_others():
    """Kill every other process in this pid namespace. Only as its init (pid 1): never on a host."""
    me = os.getpid()
    if me == 1:
        for _ in range(50):
            others = [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me]
            if not others:
                break
            for pid in others:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            reap()
            time.sleep(0.001)
    reap()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
