"""The local worker pool: forked worker processes, each with its own environment and verifier process, fed
batches (a few rollouts of one task) over its own queue and answering on its own pipe.

Its own pool rather than `concurrent.futures.ProcessPoolExecutor`: when one of the executor's workers dies,
the executor breaks and fails every pending batch, so a crash ended the run. Here a dead worker (its pipe
reaches end of file) takes only its own batches; they go through `runner.recovery` like a dead Ray actor's,
and a fresh worker takes its place.
"""

from __future__ import annotations

import logging
import itertools
import multiprocessing
import os
import pickle
import signal
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection, wait
from typing import cast

from gymsmith.core.types import TaskSpec
from gymsmith.runner.local import IN_FLIGHT, RolloutWorker, RunConfig, RunTally, WorkItem, task_chunks
from gymsmith.runner.recovery import Chunk, WorkerDeaths
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

log = logging.getLogger(__name__)

STOP_TIMEOUT_S = 30.0


def _die_with_parent(parent: int) -> None:
    """A worker must not outlive its run, even when the run is killed with SIGKILL (Linux prctl)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the pool's own shutdown still applies
        pass
    if os.getppid() != parent:  # the parent died before the signal was armed
        os._exit(1)


def _serve(config_json: str, parent: int, store_location: str | None, requests, results) -> None:
    """A worker process: run each batch from `requests` in order, writing its rollouts into the store (unless
    it is in memory), and send back, pickled, ("ok", whether it stored them, what `run_batch` returned).
    An exception (not a rollout's: those are recorded in the trajectory) is sent back as ("error", traceback)
    and ends the worker: it is a fault of the set-up or the store, which the parent raises."""
    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    worker = None
    try:
        worker = RolloutWorker(RunConfig.model_validate_json(config_json), VerifierService(workers=1).start())
        # the worker's own connection: the parent's engine must not be used across fork
        store = TrajectoryStore(store_location) if store_location else None
        while (request := requests.get()) is not None:
            task_json, items, collect = request
            out = worker.run_batch(TaskSpec.model_validate_json(task_json), items, store, collect=collect)
            results.send_bytes(pickle.dumps(("ok", store is not None, out), protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        results.send_bytes(pickle.dumps(("error", traceback.format_exc())))
    finally:
        # The environment is closed (sandboxes, browsers). The verifier process is not waited for: it exits at
        # the end of its input, when this process exits (waiting for it cost each run 0.1 s).
        if worker is not None:
            worker.close()


class WorkerFailure(RuntimeError):
    """A worker process raised (outside any rollout): its traceback is in the message."""


class _Worker:
    """The parent's handle on one worker process: its request queue, its result pipe, its batches in order."""

    def __init__(self, ctx, config_json: str, store_location: str | None):
        # a Queue's feeder thread sends the requests, so the parent never blocks on a worker busy answering
        self.requests = ctx.Queue()
        self.results, send = ctx.Pipe(duplex=False)
        self.proc = ctx.Process(target=_serve, name="gymsmith-worker",
                                args=(config_json, os.getpid(), store_location, self.requests, send))
        self.proc.start()
        send.close()  # the worker holds the only writing end: its death is end of file here
        self.batches: deque[tuple[int, Chunk]] = deque()

    def send(self, number: int, chunk: Chunk, collect: bool) -> None:
        self.batches.append((number, chunk))
        self.requests.put((chunk[0].model_dump_json(), chunk[1], collect))

    def cause_of_death(self) -> str:
        self.proc.join(timeout=5)
        code = self.proc.exitcode
        how = (f"killed by signal {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exit code {code}")
        return f"worker process {self.proc.pid} died ({how})"

    def ask_to_stop(self) -> None:
        """Queue the stop after the worker's batches (it closes its environment, then exits)."""
        if self.proc.is_alive():
            try:
                self.requests.put(None)
            except (OSError, ValueError):
                pass

    def stop(self, wait_s: float) -> None:
        """Wait up to `wait_s` for the worker to exit (after `ask_to_stop`), then kill it; release the pipes."""
        self.proc.join(timeout=wait_s)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
        self.requests.cancel_join_thread()  # a dead reader must not keep the parent waiting at exit
        self.requests.close()
        self.results.close()


def _stop_all(workers: list[_Worker], wait_s: float) -> None:
    """Stop every worker at once (each one's clean-up runs alongside the others'), within `wait_s` in all."""
    for w in workers:
        w.ask_to_stop()
    deadline = time.monotonic() + wait_s
    for w in workers:
        w.stop(max(0.0, deadline - time.monotonic()))


def run_in_processes(config: RunConfig, store: TrajectoryStore, work: list[WorkItem], tally: RunTally, *,
                     collect: bool, on_worker_death=None) -> None:
    """Run `work` in `config.concurrency` forked worker processes, adding each finished rollout to `tally`.

    Workers store their own rollouts when the store has a shared location; an in-memory store is written
    here, and then each batch is a single rollout (a dead worker's unreturned batch is work to redo).
    A worker that dies is replaced; its batches go through `WorkerDeaths` (`on_worker_death` is called with
    (task id, agent, seed, deaths so far) for each rollout charged). Raises WorkerFailure when a worker
    raises outside a rollout (its set-up, or writing to the store).
    """
    # fork, not spawn: workers inherit the families (also those from register_family), the tasks' cached
    # start states and sys.path, and a user's script is not re-imported as __main__ in every worker.
    ctx = multiprocessing.get_context("fork")
    config_json, location = config.model_dump_json(), store.shared_location
    queue: deque[Chunk] = deque(task_chunks(work, config.batch_size(len(work), workers_store=location is not None)))
    deaths = WorkerDeaths(config, store, tally, workers_store=location is not None, on_death=on_worker_death)
    numbers = itertools.count()  # submission order: a worker takes its batches in this order
    workers: list[_Worker] = []

    def feed(w: _Worker) -> None:
        while queue and len(w.batches) < IN_FLIGHT:
            w.send(next(numbers), queue.popleft(), collect)

    finished = False
    try:
        for _ in range(config.concurrency):
            workers.append(_Worker(ctx, config_json, location))
        for w in workers:
            feed(w)
        while any(w.batches for w in workers):
            by_pipe = {w.results: w for w in workers if w.batches}
            for pipe in wait(list(by_pipe)):
                w = by_pipe[pipe]
                try:
                    message = pickle.loads(cast(Connection, pipe).recv_bytes())  # `wait` hands back what it was given
                except (EOFError, OSError):  # the worker died: every batch it had is in doubt
                    failed = list(w.batches)
                    w.batches.clear()
                    cause = w.cause_of_death()
                    log.warning("%s with %d batch(es) in hand; starting another", cause, len(failed))
                    w.stop(0)  # already dead: release its pipes
                    workers[workers.index(w)] = fresh = _Worker(ctx, config_json, location)
                    queue.extendleft(reversed(deaths.worker_died(failed, cause)))
                    feed(fresh)
                    continue
                if message[0] == "error":
                    raise WorkerFailure(f"a worker process failed:\n{message[1]}")
                _, stored, returned = message
                _, (task, _) = w.batches.popleft()
                tally.add_returned(task, returned, None if stored else store)
                feed(w)
        finished = True
    finally:  # after an error or an interrupt, stop at once: what was stored stays, a rerun does the rest
        _stop_all(workers, STOP_TIMEOUT_S if finished else 0)
