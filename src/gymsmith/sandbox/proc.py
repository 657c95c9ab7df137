"""Run one process with a wall-clock deadline and capped output; shared by the sandbox backends.

`subprocess.communicate` keeps all output in memory, so a command printing forever would exhaust the
harness. Here each stream keeps its first `cap` bytes and the rest is read and dropped.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_dropped: bool
    stderr_dropped: bool
    duration_s: float
    timed_out: bool


def run_capped(argv: Sequence[str], *, env: Mapping[str, str], cwd: str | None, input: bytes | None, timeout: float,
               cap: int, preexec_fn: Callable[[], None] | None = None, pass_fds: Sequence[int] = (),
               kill: Callable[[subprocess.Popen], None] | None = None) -> Completed:
    """Start `argv` in a new session, feed `input`, collect output until it exits or `timeout` passes.

    On timeout, `kill(proc)` is called (default: SIGKILL to the process group), then the process is reaped.
    Raises OSError if the process cannot be started.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                            start_new_session=True, preexec_fn=preexec_fn, pass_fds=tuple(pass_fds))
    kill = kill or kill_group
    bufs = {proc.stdout.fileno(): bytearray(), proc.stderr.fileno(): bytearray()}
    dropped = dict.fromkeys(bufs, False)
    sel = selectors.DefaultSelector()
    for f in (proc.stdout, proc.stderr):
        sel.register(f, selectors.EVENT_READ)
    if input is not None:
        try:
            proc.stdin.write(input)
        except BrokenPipeError:
            pass
        finally:
            proc.stdin.close()
    deadline = started + timeout
    timed_out = False
    open_streams = 2
    while open_streams:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            timed_out = True
            break
        for key, _ in sel.select(timeout=min(remaining, 0.5)):
            chunk = os.read(key.fd, 65536)
            if not chunk:
                sel.unregister(key.fileobj)
                open_streams -= 1
                continue
            buf = bufs[key.fd]
            room = cap + 1 - len(buf)  # one byte past the cap tells that something was dropped
            if room > 0:
                buf += chunk[:room]
            if len(chunk) > room:
                dropped[key.fd] = True
    if timed_out:
        kill(proc)
    try:
        returncode = proc.wait(timeout=max(0.1, deadline - time.perf_counter()) if not timed_out else 10)
    except subprocess.TimeoutExpired:  # streams closed but the leader lingers past the deadline
        timed_out = True
        kill(proc)
        returncode = proc.wait()
    sel.close()
    o_fd, e_fd = proc.stdout.fileno(), proc.stderr.fileno()
    out, err = bytes(bufs[o_fd]), bytes(bufs[e_fd])
    proc.stdout.close()
    proc.stderr.close()
    return Completed(returncode=returncode if returncode >= 0 else 128 - returncode,
                     stdout=out[:cap], stderr=err[:cap], stdout_dropped=dropped[o_fd] or len(out) > cap,
                     stderr_dropped=dropped[e_fd] or len(err) > cap,
                     duration_s=time.perf_counter() - started, timed_out=timed_out)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
