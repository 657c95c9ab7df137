"""What a run does when a worker process (a local pool worker or a Ray actor) dies under its batches.

Shared by both backends, so a crash means the same thing wherever it happens:
- what the dead worker had already stored is kept (the store is asked; the rollout id is its primary key);
- the rollout it was running (the first unstored one of its earliest batch: a worker runs its batches in
  order) is charged a death and run again; charged more than `WORKER_DEATH_RETRIES` times, it is stored as
  an infrastructure error;
- the rest of its batches (queued behind, never started) is handed out again without being charged.
Never lost, never duplicated.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import gymsmith
from gymsmith.core.types import EndReason, ErrorKind, Observation, RolloutStatus, TaskSpec, Trajectory
from gymsmith.registry import split_of
from gymsmith.runner.local import RolloutOutcome, RunConfig, RunTally
from gymsmith.runner.rollout import rollout_id
from gymsmith.store.sql import TrajectoryStore

WORKER_DEATH_RETRIES = 1

Chunk = tuple[TaskSpec, list[tuple[str, int]]]  # a batch: a task and its (agent, seed) pairs


def lost_trajectory(config: RunConfig, task: TaskSpec, agent: str, seed: int, reason: str, kind: ErrorKind) -> Trajectory:
    """The record of a rollout that could not be run: an infrastructure error of `kind` with `reason`, no reward."""
    now = time.time()
    return Trajectory(rollout_id=rollout_id(config.run_id, task.id, agent, seed), run_id=config.run_id, task_id=task.id,
                      family=task.family, family_version=task.family_version,
                      split=split_of(task.id, heldout_fraction=config.taskset.heldout_fraction),
                      difficulty=task.difficulty, seed=seed, agent=agent, package_version=gymsmith.__version__,
                      group_id=config.group_id(task.id, agent, seed),
                      reset_observation=Observation(text=""), status=RolloutStatus.ERROR, error=reason, error_kind=kind,
                      end_reason=EndReason.INFRASTRUCTURE, started_at=now, finished_at=now)


class WorkerDeaths:
    """The deaths charged to each rollout of one run, and what to do with a dead worker's batches.

    `workers_store`: whether workers write their own rollouts (otherwise nothing of a dead worker's batch
    was stored). `on_death` is called with (task id, agent, seed, deaths so far) for each charge.
    """

    def __init__(self, config: RunConfig, store: TrajectoryStore, tally: RunTally, *, workers_store: bool,
                 on_death: Callable[[str, str, int, int], None] | None = None):
        self.config, self.store, self.tally, self.workers_store = config, store, tally, workers_store
        self.on_death = on_death
        self.deaths: dict[tuple[str, str, int], int] = {}

    def worker_died(self, failed: list[tuple[int, Chunk]], cause: str) -> list[Chunk]:
        """`failed`: every batch that was on the dead worker, with its submission number (the order the worker
        took them in). Records what was stored or given up on; returns the batches to hand out again."""
        again: list[Chunk] = []
        charged = False
        for _, (task, items) in sorted(failed, key=lambda f: f[0]):
            ids = {rollout_id(self.config.run_id, task.id, a, s): (a, s) for a, s in items}
            done = self.store.stored_ids(ids) if self.workers_store else set()
            for rid in [r for r in ids if r in done]:  # finished and stored before the worker died
                t = self.store.trajectory(rid)
                self.tally.add(t if self.tally.collect else RolloutOutcome.of(t))
            retry = []
            for rid, (agent, seed) in ids.items():
                if rid in done:
                    continue
                if charged:
                    retry.append((agent, seed))
                    continue
                charged = True
                key = (task.id, agent, seed)
                self.deaths[key] = self.deaths.get(key, 0) + 1
                if self.on_death:
                    self.on_death(*key, self.deaths[key])
                if self.deaths[key] <= WORKER_DEATH_RETRIES:
                    again.append((task, [(agent, seed)]))
                else:
                    lost = lost_trajectory(self.config, task, agent, seed,
                                           f"worker died {self.deaths[key]} times during this rollout: {cause}",
                                           ErrorKind.WORKER_LOST)
                    self.store.add(lost, task)
                    self.tally.add(lost if self.tally.collect else RolloutOutcome.of(lost))
            if retry:
                again.append((task, retry))
        return again
