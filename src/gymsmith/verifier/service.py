"""The runner's side of the verifier: a pool of long-lived worker processes behind one call."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, cast

from gymsmith.core.errors import VerifierError
from gymsmith.core.types import Reward, TaskSpec
from gymsmith.envs.base import FinalState
from gymsmith.verifier.policies import DEFAULT_POLICY, get_policy
from gymsmith.verifier.protocol import VerifyRequest, VerifyResponse

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0
CPU_BUDGET_S = 20.0  # the verifier's own CPU one final state may cost (an honest one: under 0.2 s; docs/verifier.md)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
PREPARED_PER_WORKER = 4096  # task ids a worker is known to have prepared (then forgotten, and prepared again)


class _TooCostly(Exception):
    """The verification of a final state spent more of the worker's own CPU than its budget."""


def _niced(nice: int) -> list[str]:
    """The command prefix that starts a process at CPU priority `nice` (from its first instruction, imports
    included), where the system has `nice`; none for 0."""
    tool = shutil.which("nice") if nice else None
    return [tool, "-n", str(nice)] if tool else []


class _Worker:
    """One verifier process. Not thread-safe: the pool hands each worker to one caller at a time."""

    def __init__(self, env: Mapping[str, str] | None, nice: int = 0):
        self.proc = subprocess.Popen(
            # -P: the working directory is not put on sys.path, so a random.py, json.py or sitecustomize.py
            # where gymsmith was started cannot replace what the verifier imports (issue 20)
            _niced(nice) + [sys.executable, "-P", "-m", "gymsmith.verifier.worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1,
            env={**os.environ, **(env or {})}, start_new_session=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stderr_tail: list[str] = []
        self.prepared: set[str] = set()  # tasks whose state-independent work this worker has done (`VerifierService`)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self._keep_stderr), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:
        with stream:  # closed at the process's end of output: a pipe left open is a ResourceWarning (issue 20)
            for line in stream:
                sink(line)
        sink(None)

    def _keep_stderr(self, line: str | None) -> None:
        if line is not None:
            self.stderr_tail = (self.stderr_tail + [line.rstrip()])[-20:]

    def cpu_s(self) -> float | None:
        """The CPU seconds the process itself (every thread, not its children) has used; None where the system does
        not say (no /proc)."""
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat[stat.rindex(")") + 2:].split()  # after the command name, which may hold spaces
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime

    def call(self, request: VerifyRequest, timeout: float, cpu_budget: float | None = None) -> VerifyResponse:
        """`request`'s response. Raises VerifierError (the process died, timed out after `timeout` wall seconds, or
        answered out of protocol) and, with `cpu_budget`, _TooCostly once the process has spent that many CPU seconds
        of its own on the request; either kills the process."""
        try:
            stdin = cast(IO[str], self.proc.stdin)  # opened with PIPE
            stdin.write(request.model_dump_json() + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError) as exc:
            raise VerifierError(f"verifier process is gone ({exc}); stderr: {self._tail()}") from None
        began = time.monotonic()
        spent = self.cpu_s() if cpu_budget is not None else None
        while True:
            left = began + timeout - time.monotonic()
            try:
                line = self.lines.get(timeout=max(0.0, min(left, 0.25) if spent is not None else left))
                break
            except queue.Empty:
                used = self.cpu_s() if spent is not None else None
                if used is not None and spent is not None and used - spent >= cast(float, cpu_budget):
                    self.kill()
                    raise _TooCostly(f"verifying it took more than {cpu_budget:g} s of the verifier's own CPU") from None
                if time.monotonic() - began >= timeout:
                    self.kill()
                    raise VerifierError(f"verifier timed out after {timeout:g} s on task {request.task.id}") from None
        if line is None:
            code = self.proc.wait()
            raise VerifierError(f"verifier process died (exit code {code}) on task {request.task.id}; stderr: {self._tail()}")
        try:
            response = VerifyResponse.model_validate_json(line)
        except ValueError as exc:
            self.kill()
            raise VerifierError(f"verifier sent an unreadable response: {exc}") from None
        if response.request_id != request.request_id:
            self.kill()
            raise VerifierError(f"verifier answered request {response.request_id}, expected {request.request_id}")
        return response

    def _tail(self) -> str:
        return " | ".join(self.stderr_tail[-5:]) or "(empty)"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.kill()
        self.proc.wait()

    def close(self) -> None:
        self.end_input()
        self.reap()

    def end_input(self) -> None:
        """Close the process's input: it exits once it has answered what it was sent."""
        if self.alive():
            cast(IO[str], self.proc.stdin).close()

    def reap(self) -> None:
        """Wait for the process to exit (after `end_input`), at most 5 s; then kill it."""
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()


def _reap(workers: list[_Worker]) -> None:
    for w in workers:
        w.reap()


class VerifierService:
    """Scores final states in separate processes. Thread-safe; `workers` verifications run at once.

    A crash, a timeout or an error inside the checks raises VerifierError: it is never turned into a
    reward of 0. A dead or timed-out worker is replaced on the next call. The one exception is a final state whose
    verification spends more than `cpu_budget_s` of the worker's own CPU (the part that depends on the state: each
    task's own work is done first, outside it, by the checks' `prepare`): that state is the agent's failure, a
    rejected reward of 0 (ungradable), not an infrastructure error an agent could escape its score into. `nice` (0 to 19): the workers' CPU
    priority below the caller's (the async engine's speculative verifications use only CPU nothing else wants).
    """

    def __init__(self, *, workers: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S, env: Mapping[str, str] | None = None,
                 nice: int = 0, cpu_budget_s: float | None = None):
        if workers < 1:
            raise ValueError(f"workers must be >= 1, got {workers}")
        if not 0 <= nice <= 19:
            raise ValueError(f"nice must be in [0, 19], got {nice}")
        self.timeout_s, self._env, self._workers, self._nice = timeout_s, env, workers, nice
        # within the wall limit with room to spare: a worker given a third of a core still reaches it in time
        self.cpu_budget_s = cpu_budget_s if cpu_budget_s is not None else min(CPU_BUDGET_S, timeout_s / 3)
        self._idle: queue.Queue[_Worker | None] = queue.Queue()
        for _ in range(workers):
            self._idle.put(None)  # started lazily
        self._ids = itertools.count(1)
        self.verifications = 0  # states scored by the workers (`verify`; a preparation is not one)
        self._all: list[_Worker] = []
        self._lock = threading.Lock()
        self._taking_all = threading.RLock()  # two callers each holding some workers while waiting for the rest would deadlock
        self._closed = False
        self._later: queue.SimpleQueue[TaskSpec | None] | None = None  # `prepare_later`'s tasks, for its thread
        self._queued: set[str] = set()

    def verify(self, task: TaskSpec, final_state: FinalState, *, policy: str = DEFAULT_POLICY) -> Reward:
        """Return the Reward for `final_state` of `task` under `policy`. Raises VerifierError, ValueError (policy).

        A final state marked `ungradable` by its environment is a rejected reward of 0 without running checks."""
        return self.verify_with_digest(task, final_state, policy=policy, digest=False)[0]

    def verify_with_digest(self, task: TaskSpec, final_state: FinalState, *, policy: str = DEFAULT_POLICY,
                           digest: bool = True) -> tuple[Reward, str | None]:
        """`verify`, and (with `digest`) the final state's content hash computed by the verifier, as the
        environment's `state_hash()` gives it: None when the family's checks do not compute it (no
        `state_digest`) or the state is ungradable. Raises what `verify` raises."""
        get_policy(policy)
        if final_state.ungradable is not None:  # the environment could not snapshot what the agent left: its failure
            return Reward.rejected(policy=policy, reason=f"ungradable final state: {final_state.ungradable}",
                                   ungradable=final_state.ungradable), None
        if not Path(final_state.path).exists():
            raise VerifierError(f"final state {final_state.path} does not exist")
        request = VerifyRequest(request_id=next(self._ids), task=task, final_state_kind=final_state.kind,
                                final_state_path=final_state.path, policy=policy, digest=digest)
        worker = self._idle.get()
        try:
            worker = self._live(worker)
            if task.id not in worker.prepared:  # the task's own work, outside the state's budget (and the worker up)
                error = self._prepare_task(worker, task)
                if error is not None:
                    raise VerifierError(error)
            response = worker.call(request, self.timeout_s, cpu_budget=self.cpu_budget_s)
        except _TooCostly as exc:  # the state's doing: its verification alone ran the worker past its budget
            log.warning("verification of task %s: %s", task.id, exc)
            with self._lock:
                self.verifications += 1
            return Reward.rejected(policy=policy, reason=f"ungradable final state: {exc}", ungradable=str(exc)), None
        finally:
            self._idle.put(worker if worker is not None and worker.alive() else None)
        with self._lock:
            self.verifications += 1
        if response.error is not None or response.reward is None:
            log.warning("verification of task %s failed: %s", task.id, (response.error or "no reward").splitlines()[0][:300])
            raise VerifierError(response.error or "verifier returned neither a reward nor an error")
        return response.reward, response.digest

    def start(self) -> "VerifierService":
        """Start the worker processes now instead of at their first verification, so that their interpreter
        start-up overlaps the caller's own work. Returns at once (the processes start in the background)."""
        with self._every_worker():
            pass
        return self

    @contextlib.contextmanager
    def _every_worker(self) -> Iterator[list[_Worker]]:
        """Every worker, started, held by the caller alone; all go back (dead ones as None) when the block ends."""
        with self._taking_all:
            taken: list[_Worker | None] = [self._idle.get() for _ in range(self._workers)]
            try:
                for i, worker in enumerate(taken):  # in place: those started before a failure go back started
                    taken[i] = self._live(worker)
                yield taken  # type: ignore[misc]
            finally:
                for worker in taken:
                    self._idle.put(worker if worker is not None and worker.alive() else None)

    def prepare(self, tasks: Sequence[TaskSpec], *, chunk: int = 16) -> int:
        """Warm every worker's per-task caches for `tasks` (the family checks' optional `prepare(task)`; ops: the
        pristine database and what verifying it computes, such as a staffing task's cheapest roster), so that the
        first verification of a task costs what later ones do. Meant for the idle time while rollouts wait on a
        model: a run whose rollouts all end together otherwise pays every task's cold start at its end.

        Never changes a verdict (caches are pure functions of the task). Works `chunk` tasks at a time, each chunk
        on every worker at once, so a verification waits at most one chunk. Returns how many preparations failed;
        a failure is logged, never raised: the task's verification meets the same problem and reports it."""
        failed = 0
        for start in range(0, len(tasks), chunk):
            with self._taking_all:  # closed is read under the lock close() takes: no worker starts after it
                if self._closed:
                    break
                with self._every_worker() as taken:
                    counts = [0] * len(taken)
                    threads = [threading.Thread(target=self._prepare_on, args=(w, tasks[start:start + chunk], counts, i),
                                                daemon=True) for i, w in enumerate(taken)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
                    failed += sum(counts)
        return failed

    def _prepare_task(self, worker: _Worker, task: TaskSpec) -> str | None:
        """The checks' `prepare(task)` on `worker` (held by the caller), recorded in `worker.prepared` when it
        succeeds: None, or the error it answered. Raises VerifierError (the process died or timed out)."""
        request = VerifyRequest(request_id=next(self._ids), task=task, final_state_kind="", final_state_path="",
                                policy=DEFAULT_POLICY, prepare=True)
        error = worker.call(request, self.timeout_s).error
        if error is None:
            if len(worker.prepared) >= PREPARED_PER_WORKER:
                worker.prepared.clear()
            worker.prepared.add(task.id)
        return error

    def _prepare_on(self, worker: _Worker, tasks: Sequence[TaskSpec], failures: list[int], slot: int) -> None:
        """`tasks` prepared on `worker` (held by the caller), failures counted in `failures[slot]`."""
        for task in tasks:
            try:
                error = self._prepare_task(worker, task)
            except VerifierError as exc:
                error = str(exc)
            if error is not None:
                failures[slot] += 1
                log.debug("preparing task %s failed: %s", task.id, error.splitlines()[0][:300])
                if not worker.alive():
                    return

    def prepare_later(self, task: TaskSpec) -> None:
        """`prepare([task])` on a background thread, each task once per service; returns at once. The thread
        takes whatever tasks are queued by then, a chunk at a time (the async engine calls this as each rollout
        starts, so the workers prepare while the rollouts wait on the model)."""
        with self._lock:
            if self._closed or task.id in self._queued:
                return
            self._queued.add(task.id)
            if self._later is None:
                self._later = queue.SimpleQueue()
                threading.Thread(target=self._prepare_queued, args=(self._later,), daemon=True,
                                 name="gymsmith-verifier-prepare").start()
            self._later.put(task)

    def _prepare_queued(self, tasks: "queue.SimpleQueue[TaskSpec | None]") -> None:
        while True:
            batch = [tasks.get()]
            while batch[-1] is not None and len(batch) < 16:
                try:
                    batch.append(tasks.get_nowait())
                except queue.Empty:
                    break
            ready = [t for t in batch if t is not None]
            if ready:
                self.prepare(ready)
            if len(ready) < len(batch):  # closed
                return

    def _live(self, worker: _Worker | None) -> _Worker:
        """`worker`, or a new one in its place when it was never started or has died."""
        if worker is not None and worker.alive():
            return worker
        if self._closed:  # a call that outlived close() (a thread of a stopped engine) starts nothing that is never closed
            raise VerifierError("the verifier service is closed")
        if worker is not None:
            log.warning("verifier process %d ended (exit code %s); starting another", worker.proc.pid, worker.proc.poll())
        worker = _Worker(self._env, self._nice)
        with self._lock:
            self._all.append(worker)
        return worker

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests that check the boundary)."""
        with self._lock:
            return [w.proc.pid for w in self._all if w.alive()]

    def close(self, *, wait: bool = True) -> None:
        """Stop the workers: each exits once its input ends. With `wait` (the default) return once they have
        exited (a worker still running after 5 s is killed); without, at once, and a background thread waits for
        them (the async engine: a run need not wait out its verifiers' interpreter shutdowns)."""
        with self._lock:
            self._closed = True
            if self._later is not None:
                self._later.put(None)
        # a chunk being prepared finishes first (at most `chunk` tasks); a chunk still waiting for workers after
        # that is not waited for: killing the workers below ends it
        if self._taking_all.acquire(timeout=5):
            self._taking_all.release()
        with self._lock:
            workers, self._all = self._all, []
        for w in workers:  # every worker told first, then waited for: their exits overlap
            w.end_input()
        if wait:
            _reap(workers)
        else:
            threading.Thread(target=_reap, args=(workers,), daemon=True, name="gymsmith-verifier-reap").start()

    def __enter__(self) -> "VerifierService":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
