"""A long-lived server in a verifier sandbox, spoken to in JSON lines, with a private directory of jobs.

The base of the warm runners (`pytest_runner.WarmPytest`, `calltests.runner.CallRunner`): each job's files
are written into a host directory mounted read-only at /jobs inside the sandbox and removed afterwards;
requests and replies are single JSON lines; a server that dies or stops answering is replaced at the
next job. Runs are serialised (use several instances for parallelism).
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import queue
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

from gymsmith.core.errors import UngradableState, VerifierError
from gymsmith.sandbox import sharedfs
from gymsmith.sandbox.base import Limits, SandboxError
from gymsmith.sandbox.bwrap import BwrapSandbox
from gymsmith.sandbox.runtime import PythonRuntime

if TYPE_CHECKING:
    import subprocess

JOBS = "/jobs"
SERVER_DIR = "/run/gymsmith"
PID1 = Path(__file__).with_name("pid1.py")  # what every server needs as pid 1; mounted next to it


class JobLayoutError(UngradableState):
    """A job's files clash: one path is a file where another needs a directory."""


class JobFiles:
    """A private host directory of job folders, mounted read-only at /jobs inside the runner's sandbox."""

    def __init__(self) -> None:
        _reclaim_abandoned()
        # on tmpfs: a job's lookups of names that do not exist leave nothing for a later job (sharedfs.py)
        self.root = sharedfs.scratch(f"jobs-{os.getpid()}-")
        self.ids = itertools.count(1)

    def write(self, files: Mapping[str, bytes | str], defaults: Mapping[str, str] | None = None,
              directories: Sequence[str] = ()) -> tuple[int, Path]:
        """A new job folder holding `files` (paths relative to it; `defaults` for the paths `files` lacks) and
        `directories` (made even when empty: the interpreter imports a directory as a namespace package). Raises
        ValueError for a path that leaves the job, and JobLayoutError (an UngradableState) when one path is another's
        directory (`tests` a file and `tests/test_x.py`): the files come from the state an agent left, and a tree
        that cannot be laid out is that state's failure, never the verifier's. Checked before anything is written."""
        job = {**(defaults or {}), **files}
        for rel in [*job, *directories]:
            if os.path.isabs(rel) or ".." in Path(rel).parts or "\0" in rel:
                raise ValueError(f"job file path {rel!r} must be relative and stay inside the job")
        clashes = sorted(f"{'/'.join(parts[:i])} (a file) and {rel}" for rel in [*job, *directories]
                         for parts in [Path(rel).parts] for i in range(1, len(parts) + (rel in directories))
                         if "/".join(parts[:i]) in job)
        if clashes:
            raise JobLayoutError(f"the files cannot be laid out: a path is both a file and a directory: "
                                 f"{'; '.join(clashes[:3])}")
        n = next(self.ids)
        d = self.root / str(n)
        d.mkdir()
        for rel in directories:
            (d / rel).mkdir(parents=True, exist_ok=True)
        for rel, data in job.items():
            p = d / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.encode() if isinstance(data, str) else data)
        return n, d

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _reclaim_abandoned() -> None:
    """Remove job directories whose owning process is gone (a verifier worker killed at its timeout never
    ran its clean-up), so that killed workers do not fill the disk."""
    for d in sharedfs.scratch_root().glob("jobs-*-*"):
        owner = d.name.split("-")[1]
        if owner.isdigit() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(d, ignore_errors=True)


class WarmServer:
    """A sandboxed `python -I <script>` that says {"ready": true} and then answers one JSON line per request."""

    script: Path  # set by subclasses: the server program, mounted read-only at SERVER_DIR
    helpers: tuple[Path, ...] = ()  # modules the server imports, mounted next to it
    label = "the warm test runner"  # how errors name the server

    def __init__(self, *, limits: Limits, start_timeout_s: float = 30.0, runtime: PythonRuntime | None = None):
        self.limits, self.start_timeout_s, self.runtime = limits, start_timeout_s, runtime
        self.jobs = JobFiles()
        self.lock = threading.Lock()
        self._sandbox: BwrapSandbox | None = None
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.runs = 0
        self.hello: dict[str, Any] = {}  # the server's ready line, as it said it (what it could prepare)
        self.hash_seed = 0  # the PYTHONHASHSEED of the running server

    # -- lifetime (callers hold self.lock) ---------------------------------------------------------
    def ensure_started(self, hash_seed: int = 0) -> None:
        """A live server whose interpreter runs under PYTHONHASHSEED `hash_seed` (one under another is replaced)."""
        if self._proc is None or self._proc.poll() is not None or self.hash_seed != hash_seed:
            self._start(hash_seed)

    def _start(self, hash_seed: int = 0) -> None:
        self._stop()
        self.hash_seed = hash_seed
        empty = sharedfs.scratch("runner-ws-")
        inside = f"{SERVER_DIR}/{self.script.name}"
        try:
            mounts = {str(self.jobs.root): JOBS, str(self.script): inside,
                      **{str(p): f"{SERVER_DIR}/{p.name}" for p in (PID1, *self.helpers)}}
            # pid1 makes each job's world in user namespaces of its own, then forbids the job to make more
            self._sandbox = BwrapSandbox(empty, self.limits, extra_ro=mounts, runtime=self.runtime,
                                         user_namespaces=True, proc=True)
        except SandboxError as exc:
            raise VerifierError(f"cannot start the test runner's sandbox: {exc}") from None
        # -P -s: no script directory on sys.path, no user site (the sandbox sets the whole environment)
        self._proc = self._sandbox.spawn([self._sandbox.runtime.interpreter, "-P", "-s", inside],
                                         env={"PYTHONHASHSEED": str(hash_seed)})
        self._lines = queue.Queue()
        threading.Thread(target=self._pump, args=(self._proc.stdout, self._lines), daemon=True).start()
        hello = self._read(self.start_timeout_s)
        try:
            said = json.loads(hello) if hello is not None else None
            ready = isinstance(said, dict) and said.get("ready")
        except ValueError:
            said, ready = None, False
        self.hello = said if isinstance(said, dict) else {}
        if not ready:
            self._stop()
            raise VerifierError(f"the warm test runner ({self.script.name}) did not start (no 'ready' line)")

    def _pump(self, stream, sink: queue.Queue) -> None:
        for line in stream:
            sink.put(line.decode(errors="replace"))
        sink.put(None)

    def _read(self, timeout: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout)
        except queue.Empty:
            return None

    def _write(self, data: bytes) -> None:
        """Write `data` to the server's stdin and flush it. Raises OSError (ValueError, AttributeError once the
        server is stopped and its pipe closed or gone)."""
        # started by the caller (ensure_started); spawn gives it a stdin pipe
        stdin = cast(IO[bytes], cast("subprocess.Popen", self._proc).stdin)
        stdin.write(data)
        stdin.flush()

    def _send(self, message: dict[str, Any]) -> None:
        """Write one request line. Raises VerifierError (after stopping it) if the server cannot be reached."""
        try:
            self._write((json.dumps(message) + "\n").encode())
        except OSError:
            self._stop()
            raise VerifierError(f"{self.label} is gone") from None

    def request(self, message: dict[str, Any], timeout: float) -> dict[str, Any] | None:
        """Send one request and wait for its reply; None if the server died or did not answer in time
        (it is stopped, and started again for the next request). Raises VerifierError if it cannot be reached."""
        self._send(message)
        line = self._read(timeout)
        if line is None:
            self._stop()
            return None
        try:
            reply = json.loads(line)
        except ValueError:
            self._stop()
            return None
        if not isinstance(reply, dict) or reply.get("id") != message.get("id"):
            self._stop()
            return None
        self.runs += 1
        cpu = reply.get("cpu")
        if isinstance(cpu, int | float) and cpu > self.limits.cpu_s / 4:
            # its CPU limit would end it in some later job (code under test flooding the report pipe costs it CPU,
            # and the CPU stays): a fresh server before it can crash another rollout's verification. A quarter:
            # one job, deadline and grace included, cannot burn the rest
            self._stop()
        return reply

    def _stop(self) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, 9)
            except ProcessLookupError:
                pass
            self._proc.wait()
            self._proc = None
        if self._sandbox is not None:
            ws = self._sandbox.workspace
            self._sandbox.close()
            shutil.rmtree(ws, ignore_errors=True)
            self._sandbox = None

    def close(self) -> None:
        with self.lock:
            self._stop()
            self.jobs.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


_shared: dict[type, tuple[int, WarmServer]] = {}
_shared_lock = threading.Lock()


def shared_instance(cls: type[WarmServer]) -> WarmServer:
    """This process's server of class `cls`, started on first use and closed at exit (a forked child makes its own)."""
    with _shared_lock:
        current = _shared.get(cls)
        if current is None or current[0] != os.getpid():
            # the classes shared give every argument a default
            current = _shared[cls] = (os.getpid(), cast(Callable[[], WarmServer], cls)())
            atexit.register(current[1].close)
        return current[1]
