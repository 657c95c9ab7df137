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
               cap: int, preexec_fn: Callable[[], None] | None = None, pass_fds: Sequence[int] = ()) -> Completed:
    """Start `argv` in a new session, feed `input`, collect output until it exits or `timeout` passes.

    On timeout the process group gets SIGKILL, then the leader is reaped.
    Raises OSError if the process cannot be started.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                            start_new_session=True, preexec_fn=preexec_fn, pass_fds=tuple(pass_fds))
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
        kill_group(proc)
    try:
        returncode = proc.wait(timeout=max(0.1, deadline - time.perf_counter()) if not timed_out else 10)
    except subprocess.TimeoutExpired:  # streams closed but the leader lingers past the deadline
        timed_out = True
        kill_group(proc)
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


# -- the launcher: `python -S proc.py` as a per-sandbox helper process ---------------------------------
# Entering a sandbox's cgroup, network namespace and rlimits needs code between fork and exec, which
# makes Python fork the whole interpreter (~5 ms). The launcher enters them once, at its own start, and
# then starts each command with a plain spawn: the command inherits all three. One JSON line per
# request on stdin, one JSON line per reply on stdout; it exits when its stdin closes (its owner died).

def _serve() -> None:
    import base64
    import json
    import resource
    import sys

    for line in sys.stdin:
        req = json.loads(line)
        args_r, args_w = os.pipe()
        status_r, status_w = os.pipe()
        with os.fdopen(args_w, "wb") as w:
            w.write(base64.b64decode(req["args"]))
        argv = [req["exe"], "--args", str(args_r), "--json-status-fd", str(status_w), "--", *req["argv"]]
        try:
            done = run_capped(argv, env=req["env"], cwd=None, timeout=req["timeout"], cap=req["cap"],
                              input=base64.b64decode(req["input"]) if req["input"] is not None else None,
                              pass_fds=(args_r, status_w))
            reply = {"returncode": done.returncode, "stdout": base64.b64encode(done.stdout).decode(),
                     "stderr": base64.b64encode(done.stderr).decode(), "stdout_dropped": done.stdout_dropped,
                     "stderr_dropped": done.stderr_dropped, "duration_s": done.duration_s, "timed_out": done.timed_out}
        except OSError as exc:
            reply = {"spawn_error": str(exc)}
        finally:
            os.close(args_r)
            os.close(status_w)
        with os.fdopen(status_r, "rb") as f:
            reply["status"] = f.read().decode(errors="replace")
        usage = resource.getrusage(resource.RUSAGE_SELF)
        reply["cpu_self_s"] = usage.ru_utime + usage.ru_stime
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
