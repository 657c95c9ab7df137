"""The Ray backend: rollouts spread over a Ray cluster, each actor with its own environment and verifier.

The driver keeps the store: actors return trajectories and the driver writes each in one transaction,
so a rollout is stored exactly once whatever happens to the actors. An actor that dies takes its
in-flight rollouts with it; each of those is retried once on a fresh actor, and if that dies too it is
stored as an infrastructure error — never lost, never duplicated.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable

import gymsmith
from gymsmith.core.types import Observation, RolloutStatus, TaskSpec, Trajectory
from gymsmith.registry import split_of
from gymsmith.runner.local import ProgressCallback, RolloutWorker, RunConfig, plan_run
from gymsmith.runner.rollout import rollout_id
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

ACTOR_DEATH_RETRIES = 1


class _Actor:
    """Body of the Ray actor: a RolloutWorker with its own verifier process, fed TaskSpecs as JSON."""

    def __init__(self, config_json: str):
        self.worker = RolloutWorker(RunConfig.model_validate_json(config_json), VerifierService(workers=1))

    def pid(self) -> int:
        return os.getpid()

    def fingerprint(self) -> dict:
        return self.worker.fingerprint()

    def rollout(self, task_json: str, agent: str, seed: int) -> str:
        return self.worker.rollout(TaskSpec.model_validate_json(task_json), agent, seed).model_dump_json()


def _lost(config: RunConfig, task: TaskSpec, agent: str, seed: int, reason: str) -> Trajectory:
    now = time.time()
    return Trajectory(rollout_id=rollout_id(config.run_id, task.id, agent, seed), run_id=config.run_id, task_id=task.id,
                      family=task.family, family_version=task.family_version,
                      split=split_of(task.id, heldout_fraction=config.taskset.heldout_fraction),
                      difficulty=task.difficulty, seed=seed, agent=agent, package_version=gymsmith.__version__,
                      reset_observation=Observation(text=""), status=RolloutStatus.ERROR, error=reason,
                      started_at=now, finished_at=now)


def run_on_ray(config: RunConfig, store: TrajectoryStore, *, address: str | None = None,
               progress: ProgressCallback | None = None, tasks: list[TaskSpec] | None = None,
               on_actor_pids: Callable[[list[int]], None] | None = None,
               on_actor_death: Callable[[str, str, int, int], None] | None = None) -> list[Trajectory]:
    """Like `gymsmith.runner.run`, with `config.concurrency` Ray actors doing the rollouts.

    `address` joins an existing cluster (e.g. ``"ray://head:10001"`` or ``"auto"``); without it a local
    Ray instance is started with `config.concurrency` CPUs and shut down afterwards.
    `on_actor_pids` is called with the actors' process ids once they are up, and `on_actor_death` with
    (task id, agent, seed, deaths so far) each time an actor dies under a rollout (for monitoring and tests).
    """
    import ray
    from ray.exceptions import RayActorError, WorkerCrashedError

    plan = plan_run(config, store, tasks)
    finished = plan.finished
    if progress:
        progress(finished, plan.total, None)
    started_here = not ray.is_initialized()
    if started_here:
        init = dict(address=address) if address else dict(num_cpus=config.concurrency)
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **init)
    try:
        Actor = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        config_json = config.model_dump_json()
        actors = [Actor.remote(config_json) for _ in range(config.concurrency)]
        for fp in ray.get([a.fingerprint.remote() for a in actors]):  # a remote node may differ from the driver
            store.record_fingerprint(fp)
        if on_actor_pids:
            on_actor_pids(ray.get([a.pid.remote() for a in actors]))
        deaths: dict[tuple[str, str, int], int] = {}
        queue = list(reversed(plan.work))
        pending: dict = {}  # object ref -> (slot, the actor it went to, work item)
        results: list[Trajectory] = []

        def submit(slot: int) -> None:
            if queue:
                task, agent, seed = item = queue.pop()
                actor = actors[slot]
                pending[actor.rollout.remote(task.model_dump_json(), agent, seed)] = (slot, actor, item)

        for slot in range(len(actors)):
            submit(slot)
            submit(slot)  # two in flight per actor: it never waits for the driver
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            slot, actor, (task, agent, seed) = pending.pop(ref)
            try:
                trajectory = Trajectory.model_validate_json(ray.get(ref))
            except (RayActorError, WorkerCrashedError) as exc:
                key = (task.id, agent, seed)
                deaths[key] = deaths.get(key, 0) + 1
                if on_actor_death:
                    on_actor_death(*key, deaths[key])
                if actors[slot] is actor:  # the first failure seen from this actor replaces it
                    actors[slot] = Actor.remote(config_json)
                if deaths[key] <= ACTOR_DEATH_RETRIES:
                    queue.append((task, agent, seed))
                    submit(slot)
                    continue
                trajectory = _lost(config, task, agent, seed, f"ray worker died {deaths[key]} times during this rollout: "
                                   f"{type(exc).__name__}: {''.join(traceback.format_exception_only(exc)).strip()[:300]}")
            store.add(trajectory, task)
            results.append(trajectory)
            finished += 1
            if progress:
                progress(finished, plan.total, trajectory)
            submit(slot)
        return results
    finally:
        if started_here:
            ray.shutdown()
