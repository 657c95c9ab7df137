"""The Ray backend: rollouts spread over a Ray cluster, each actor with its own environment and verifier.

Where the actors can reach the store (a database server, or a SQLite file when Ray runs on this machine),
each actor writes its own rollouts, one transaction each, and is handed a few rollouts of one task at a
time; otherwise the actors return trajectories and the driver writes them. Either way a rollout is stored
exactly once: the rollout id is the primary key, and the driver asks the store what a dead actor finished.
An actor that dies takes its running rollout with it; that rollout is retried once on a fresh actor, and if
that dies too it is stored as an infrastructure error — never lost, never duplicated. Rollouts that were
only queued on the dead actor are handed out again without counting against them.
"""

from __future__ import annotations

import itertools
import os
import pickle
import time
import traceback
from collections.abc import Callable

import gymsmith
from gymsmith.core.types import Observation, RolloutStatus, TaskSpec, Trajectory
from gymsmith.registry import get_family, split_of
from gymsmith.runner.local import (ProgressCallback, RolloutOutcome, RolloutWorker, RunConfig, RunTally,
                                   agent_factories, check_split_policy, plan_run, task_chunks)
from gymsmith.runner.rollout import rollout_id
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

ACTOR_DEATH_RETRIES = 1


class _Actor:
    """Body of the Ray actor: a RolloutWorker with its own verifier process, fed TaskSpecs as JSON; it writes
    into the store itself when given its location."""

    def __init__(self, config_json: str, store_location: str | None = None):
        self.worker = RolloutWorker(RunConfig.model_validate_json(config_json), VerifierService(workers=1).start())
        self.store = TrajectoryStore(store_location) if store_location else None

    def pid(self) -> int:
        return os.getpid()

    def fingerprint(self) -> dict:
        return self.worker.fingerprint()

    def rollouts(self, task_json: str, items: list[tuple[str, int]], collect: bool) -> bytes:
        """`RolloutWorker.run_batch` on this actor, pickled."""
        out = self.worker.run_batch(TaskSpec.model_validate_json(task_json), items, self.store, collect=collect)
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)


def _lost(config: RunConfig, task: TaskSpec, agent: str, seed: int, reason: str) -> Trajectory:
    now = time.time()
    return Trajectory(rollout_id=rollout_id(config.run_id, task.id, agent, seed), run_id=config.run_id, task_id=task.id,
                      family=task.family, family_version=task.family_version,
                      split=split_of(task.id, heldout_fraction=config.taskset.heldout_fraction),
                      difficulty=task.difficulty, seed=seed, agent=agent, package_version=gymsmith.__version__,
                      reset_observation=Observation(text=""), status=RolloutStatus.ERROR, error=reason,
                      started_at=now, finished_at=now)


def _actors_reach(store: TrajectoryStore, ray) -> bool:
    """Whether Ray actors can write into `store`: a database server, or a SQLite file with every node of the
    cluster on this machine (a SQLite path on another node would be a different, empty file)."""
    if store.shared_location is None:
        return False
    if store.engine.dialect.name != "sqlite":
        return True
    here = ray.util.get_node_ip_address()
    return all(node["NodeManagerAddress"] == here for node in ray.nodes() if node.get("Alive"))


def run_on_ray(config: RunConfig, store: TrajectoryStore, *, address: str | None = None,
               progress: ProgressCallback | None = None, tasks: list[TaskSpec] | None = None,
               collect: bool = True,
               on_actor_pids: Callable[[list[int]], None] | None = None,
               on_actor_death: Callable[[str, str, int, int], None] | None = None) -> list[Trajectory]:
    """Like `gymsmith.runner.run` (including `collect`), with `config.concurrency` Ray actors doing the rollouts.

    `address` joins an existing cluster (e.g. ``"ray://head:10001"`` or ``"auto"``); without it a local
    Ray instance is started with `config.concurrency` CPUs and shut down afterwards.
    `on_actor_pids` is called with the actors' process ids once they are up, and `on_actor_death` with
    (task id, agent, seed, deaths so far) each time an actor dies under a rollout (for monitoring and tests).
    """
    import ray
    from ray.exceptions import RayActorError, WorkerCrashedError

    check_split_policy(config)  # the cheap refusals before a cluster is started or joined
    agent_factories(config, get_family(config.taskset.family))
    started_here = not ray.is_initialized()
    if started_here:
        init = dict(address=address) if address else dict(num_cpus=config.concurrency)
        ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False, **init)
    try:
        Actor = ray.remote(num_cpus=1, max_restarts=0)(_Actor)
        config_json = config.model_dump_json()
        location = store.shared_location if _actors_reach(store, ray) else None
        # the actors start (a new process, imports: about a second) while the tasks are built and planned
        actors = [Actor.remote(config_json, location) for _ in range(config.concurrency)]
        plan = plan_run(config, store, tasks)
        tally = RunTally(plan.finished, plan.total, progress, collect)
        for fp in ray.get([a.fingerprint.remote() for a in actors]):  # a remote node may differ from the driver
            store.record_fingerprint(fp)
        if on_actor_pids:
            on_actor_pids(ray.get([a.pid.remote() for a in actors]))
        # Actors that store their own rollouts get batches of one task; actors that return them, single
        # rollouts (a dead actor's unreturned batch would be lost work). Two at a time: an actor never waits
        # for the driver between them (one at a time left each actor idle for about a fifth of the run).
        size = config.batch_size(len(plan.work)) if location else 1
        in_flight = 2
        queue = list(reversed(task_chunks(plan.work, size)))
        pending: dict = {}  # object ref -> (submission number, slot, the actor it went to, (task, items))
        deaths: dict[tuple[str, str, int], int] = {}
        serial = itertools.count()

        def submit(slot: int) -> None:
            if queue:
                chunk = queue.pop()
                actor = actors[slot]
                ref = actor.rollouts.remote(chunk[0].model_dump_json(), chunk[1], collect)
                pending[ref] = (next(serial), slot, actor, chunk)

        def actor_died(slot: int, actor, exc: Exception, failed: list[tuple[int, tuple[TaskSpec, list]]]) -> None:
            """Every batch that was on a dead actor: keep what it stored, charge the rollout it was running
            (the first unstored one of its earliest batch), queue the rest again."""
            if actors[slot] is actor:
                actors[slot] = Actor.remote(config_json, location)
            charged = False
            for _, (task, items) in sorted(failed, key=lambda f: f[0]):
                ids = {rollout_id(config.run_id, task.id, a, s): (a, s) for a, s in items}
                done = store.stored_ids(ids) if location else set()
                for rid in [r for r in ids if r in done]:  # finished and stored before the actor died
                    t = store.trajectory(rid)
                    tally.add(t if collect else RolloutOutcome.of(t))
                retry = []
                for rid, (agent, seed) in ids.items():
                    if rid in done:
                        continue
                    if charged:
                        retry.append((agent, seed))
                        continue
                    charged = True
                    key = (task.id, agent, seed)
                    deaths[key] = deaths.get(key, 0) + 1
                    if on_actor_death:
                        on_actor_death(*key, deaths[key])
                    if deaths[key] <= ACTOR_DEATH_RETRIES:
                        queue.append((task, [(agent, seed)]))
                    else:
                        reason = (f"ray worker died {deaths[key]} times during this rollout: {type(exc).__name__}: "
                                  f"{''.join(traceback.format_exception_only(exc)).strip()[:300]}")
                        lost = _lost(config, task, agent, seed, reason)
                        store.add(lost, task)
                        tally.add(lost if collect else RolloutOutcome.of(lost))
                if retry:
                    queue.append((task, retry))

        for slot in range(len(actors)):
            for _ in range(in_flight):
                submit(slot)
        while pending:
            [ref], _ = ray.wait(list(pending), num_returns=1)
            number, slot, actor, (task, items) = pending.pop(ref)
            try:
                returned = pickle.loads(ray.get(ref))
            except (RayActorError, WorkerCrashedError) as exc:
                failed = [(number, (task, items))]
                for other in [r for r, p in pending.items() if p[2] is actor]:  # queued on the dead actor: failed too
                    other_number, _, _, chunk = pending.pop(other)
                    failed.append((other_number, chunk))
                actor_died(slot, actor, exc, failed)
                for _ in range(in_flight):
                    submit(slot)
                continue
            for item in returned:
                if location is None:
                    store.add(item, task)
                tally.add(item)
            submit(slot)
        return tally.results
    finally:
        if started_here:
            ray.shutdown()
