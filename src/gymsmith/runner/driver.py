"""`run`: the one entry point that runs a configured set of rollouts, on the backend the config asks for.

It sits above the backends (`local`'s in-process worker, `process_pool`, `async_engine`), which build on the
pieces in `local` (config, plan, worker, tally) and never import this module: the runner's imports form no
cycle (issue 19).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from gymsmith.core.types import TaskSpec, Trajectory
from gymsmith.runner.async_engine import run_in_engine
from gymsmith.runner.local import ProgressCallback, RolloutWorker, RunConfig, RunTally, plan_run
from gymsmith.runner.process_pool import run_in_processes
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

log = logging.getLogger(__name__)


def run(config: RunConfig, store: TrajectoryStore, *, progress: ProgressCallback | None = None,
        tasks: list[TaskSpec] | None = None, collect: bool = True,
        on_worker_death: Callable[[str, str, int, int], None] | None = None) -> list[Trajectory]:
    """Run every (task, agent, seed) of `config` not already stored under its run id; return the new trajectories.

    With `collect=False` nothing is kept in memory and the list is empty: read the run back from the store
    (the CLI does this; a large run's trajectories need not fit in memory). `progress` then receives a
    `RolloutOutcome` instead of each Trajectory.

    With the async engine (`config.uses_engine()`: the default when an agent is 'model') up to `max_in_flight`
    rollouts run at once as coroutines in this process (`runner.async_engine`); Ctrl-C cancels them, storing
    none of them. Otherwise:
    with `concurrency` 1 the rollouts run in this process; above 1 (or with `processes=True`), in that many
    worker processes (forked), each with its own environment and verifier process, each handed a few
    rollouts of one task at a time. Each finished rollout is written, in its own transaction, as soon as it
    completes (by the worker that ran it, unless the store is in memory), so a killed run loses at most the
    rollouts running at that moment, and rerunning the same run id finishes the rest.
    A worker process that dies (a crash, the OOM killer) is replaced and the run goes on: the rollout it was
    running is retried once, then stored as an infrastructure error; what it stored is kept, what was queued
    on it runs elsewhere (`on_worker_death` is called with (task id, agent, seed, deaths so far) each time).
    `progress` is called in this process after each stored rollout (in a worker pool, as each batch returns).
    Raises SplitPolicyError, UnknownFamilyError, KnobError, TaskSetError before any rollout starts, and
    `process_pool.WorkerFailure` when a worker process raises outside a rollout.
    """
    plan = plan_run(config, store, tasks)
    backend = "async engine" if config.uses_engine() else "worker processes" if (
        config.processes if config.processes is not None else config.concurrency > 1) else "this process"
    log.info("run %s: %d rollouts to run (%d already stored) in %s", config.run_id, len(plan.work), plan.finished, backend)
    tally = RunTally(plan.finished, plan.total, progress, collect)
    if backend == "async engine":
        run_in_engine(config, store, plan.work, tally)
        return tally.results
    if backend == "this process":
        with VerifierService() as verifier:
            worker = RolloutWorker(config, verifier)
            try:
                for task, agent, seed in plan.work:
                    for item in worker.run_batch(task, [(agent, seed)], store, collect=collect):
                        tally.add(item)
            finally:
                worker.close()
        return tally.results
    run_in_processes(config, store, plan.work, tally, collect=collect, on_worker_death=on_worker_death)
    return tally.results
