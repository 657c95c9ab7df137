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
from typing import IO, cast


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
               end_rest: Callable[[subprocess.Popen], None] | None = None) -> Completed:
    """Start `argv` in a new session, feed `input`, collect output until it exits or `timeout` passes.

    When the command itself exits, `end_rest(proc)` (default: SIGKILL to its process group) ends what it
    left running, so a background process holding its output pipes cannot keep us waiting until the
    deadline. On timeout the process group gets SIGKILL, then the leader is reaped.
    Raises OSError if the process cannot be started.
    """
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env), cwd=cwd,
                            start_new_session=True, preexec_fn=preexec_fn, pass_fds=tuple(pass_fds))
    # stdout and stderr are pipes (above), and so is stdin when there is input
    out_pipe, err_pipe = cast(IO[bytes], proc.stdout), cast(IO[bytes], proc.stderr)
    bufs = {out_pipe.fileno(): bytearray(), err_pipe.fileno(): bytearray()}
    dropped = dict.fromkeys(bufs, False)
    sel = selectors.DefaultSelector()
    for f in (out_pipe, err_pipe):
        sel.register(f, selectors.EVENT_READ)
    if input is not None:
        try:
            cast(IO[bytes], proc.stdin).write(input)
        except BrokenPipeError:
            pass
        finally:
            cast(IO[bytes], proc.stdin).close()
    deadline = started + timeout
    timed_out = False
    open_streams = 2
    exit_fd = _pidfd(proc.pid)  # readable when the command exits; without pidfds we poll
    if exit_fd is not None:
        sel.register(exit_fd, selectors.EVENT_READ)
    leader_done = False
    while open_streams:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            timed_out = True
            break
        events = sel.select(timeout=min(remaining, 0.5 if exit_fd is not None else 0.05))
        if not leader_done and (any(key.fd == exit_fd for key, _ in events) or (exit_fd is None and proc.poll() is not None)):
            leader_done = True
            proc.wait()  # its status first: ending the rest may reap every child
            (end_rest or kill_group)(proc)
            if exit_fd is not None:
                sel.unregister(exit_fd)
        for key, _ in events:
            if key.fd == exit_fd:
                continue
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
    if exit_fd is not None:
        os.close(exit_fd)
    o_fd, e_fd = out_pipe.fileno(), err_pipe.fileno()
    out, err = bytes(bufs[o_fd]), bytes(bufs[e_fd])
    out_pipe.close()
    err_pipe.close()
    return Completed(returncode=returncode if returncode >= 0 else 128 - returncode,
                     stdout=out[:cap], stderr=err[:cap], stdout_dropped=dropped[o_fd] or len(out) > cap,
                     stderr_dropped=dropped[e_fd] or len(err) > cap,
                     duration_s=time.perf_counter() - started, timed_out=timed_out)


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):  # before Linux 5.3 or Python 3.9
        return None


def not_started(argv0: str, exc: OSError) -> Completed:
    """What a shell reports for a command it could not start: 127 if not found, else 126."""
    code = 127 if isinstance(exc, FileNotFoundError) else 126
    return Completed(returncode=code, stdout=b"", stderr=f"{argv0}: {exc.strerror}\n".encode(), stdout_dropped=False,
                     stderr_dropped=False, duration_s=0.0, timed_out=False)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- the command server: `python -S proc.py` as pid 1 of a sandbox's pid namespace --------------------
# Starting bubblewrap costs ~4 ms (namespaces, mounts). The sandbox is started once per rollout with this
# server as its init; each command is then a plain spawn inside it. One JSON request per line on stdin,
# one JSON reply per line on stdout; it exits when its stdin closes, and every process in the namespace
# dies with it. After each command it kills every other process in the namespace, so nothing a command
# started outlives it. As init it cannot be killed from inside (the kernel drops signals from the
# namespace to its init unless init handles them, and it handles none), and it is non-dumpable, so
# commands of the same uid cannot ptrace it or read its memory.

def end_others() -> None:
    """SIGKILL every other process of this pid namespace and reap them. Only as pid 1: never on a host."""
    if os.getpid() != 1:
        return
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # from a namespace's init: everyone in the namespace but itself
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)  # orphans are our children: when none is left, the namespace is empty
        except ChildProcessError:
            return


def _serve() -> None:
    import base64
    import ctypes
    import json
    import resource
    import sys

    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a handled signal would reach init from inside: handle none
    try:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    except OSError:
        pass
    out = sys.stdout
    out.write('{"ready": true}\n')
    out.flush()
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)  # the host reads our stderr only for start-up errors
    for line in sys.stdin:
        req = json.loads(line)
        cpu = req.get("cpu_s")

        def limit_cpu(cpu: int | None = cpu) -> None:
            # the command's CPU limit, not the server's: a command that made the server burn CPU (reading a flood of
            # output) had it killed by a limit of its own, which the host could only report as a broken sandbox
            if cpu is not None:
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))

        try:
            done = run_capped(req["argv"], env=req["env"], cwd=req["cwd"], timeout=req["timeout"], cap=req["cap"],
                              input=base64.b64decode(req["input"]) if req["input"] is not None else None,
                              preexec_fn=limit_cpu, end_rest=lambda _: end_others())
        except OSError as exc:
            done = not_started(req["argv"][0], exc)
        end_others()
        reply = {"returncode": done.returncode, "stdout": base64.b64encode(done.stdout).decode(),
                 "stderr": base64.b64encode(done.stderr).decode(), "stdout_dropped": done.stdout_dropped,
                 "stderr_dropped": done.stderr_dropped, "duration_s": done.duration_s, "timed_out": done.timed_out}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    _serve()
