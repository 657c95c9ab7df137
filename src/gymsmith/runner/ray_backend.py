"""The Ray backend: rollouts spread over a Ray cluster, each actor with its own environment and verifier.

Where the actors can reach the store (a database server, or a SQLite file when Ray runs on this machine),
each actor writes its own rollouts, one transaction each, and is handed a few rollouts of one task at a
time; otherwise the actors return trajectories and the driver writes them. Either way a rollout is stored
exactly once: the rollout id is the primary key, and the driver asks the store what a dead actor finished.
An actor that dies takes its running rollout with it; that rollout is retried once on a fresh actor, and if
that dies too it is stored as an infrastructure error — never lost, never duplicated. Rollouts that were
only queued on the dead actor are handed out again without counting against them (`runner.recovery`, shared
with the local pool).

A run that uses the async engine (`RunConfig.uses_engine()`: a model agent) runs one `AsyncEngine` per actor:
the actor takes many batches at once (its "engine" concurrency group, each call on a thread of its own that
waits for its batch), and they all run as coroutines on the engine's one event loop, up to the run's
`max_in_flight` split evenly among the actors. A dead actor's batches were all running: the first unstored
rollout of the earliest is charged the death, the others are run again uncharged (as above).
"""

from __future__ import annotations

import itertools
import os
import pickle
import shutil
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable

from gymsmith.core.types import TaskSpec, Trajectory
from gymsmith.runner.async_engine import EngineThread, default_max_in_flight
from gymsmith.registry import get_family
from gymsmith.runner.local import (IN_FLIGHT, ProgressCallback, RolloutWorker, RunConfig, RunTally,
                                   agent_factories, check_split_policy, plan_run, task_chunks)
from gymsmith.runner.recovery import WorkerDeaths
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

SLOW_START_S = 20.0  # actors not up by then: say why the run may be waiting (for CPUs, usually)
ENGINE_CALLS = 256  # batches an actor's engine takes at once (threads of its "engine" concurrency group)
WAIT_SLICE_S = 1.0  # the longest a signal handler's exception waits inside one of Ray's waits (see _wait)


def _wait(ray, refs: list, num_returns: int = 1, timeout: float | None = None) -> tuple[list, list]:
    """`ray.wait` for `num_returns` of `refs` (for at most `timeout` seconds; None: no deadline), in slices of
    WAIT_SLICE_S, raising what a signal handler raised meanwhile.

    Why: inside `ray.wait` and `ray.get` a signal's Python handler runs, but what it raises stays pending until
    the call's own timeout ends (then it comes out as a SystemError caused by it), so with no timeout a run
    waiting on a stuck actor never gives way to Ctrl-C, SIGTERM or a test's timeout alarm: it hangs its caller.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        left = WAIT_SLICE_S if deadline is None else max(0.0, min(WAIT_SLICE_S, deadline - time.monotonic()))
        try:
            ready, rest = ray.wait(refs, num_returns=num_returns, timeout=left)
        except SystemError as exc:  # a handler's exception, held by Ray's C code until the slice ended
            if exc.__cause__ is None:
                raise
            raise exc.__cause__ from None
        if len(ready) >= num_returns or (deadline is not None and time.monotonic() >= deadline):
            return ready, rest


def _get(ray, refs):
    """`ray.get(refs)` (one reference or a list) once they are ready, waiting as `_wait` does."""
    many = isinstance(refs, list)
    _wait(ray, refs if many else [refs], len(refs) if many else 1)
    return ray.get(refs)


class _Actor:
    """Body of the Ray actor: a RolloutWorker with its own verifier process, kept across runs (its environment,
    sandbox pool and caches stay warm), fed TaskSpecs as JSON; it writes into the store itself when told where."""

    def __init__(self):
        import threading

        self.verifier = VerifierService(workers=1).start()
        self.engine: EngineThread | None = None  # for runs on the async engine, made by their first batch
        self.engine_lock = threading.Lock()
        self.worker: RolloutWorker | None = None
        self.store: TrajectoryStore | None = None
        self.stores: dict[str, TrajectoryStore] = {}

    def pid(self) -> int:
        return os.getpid()

    def configure(self, config_json: str, store_location: str | None) -> dict:
        """Serve the run `config_json` from now on; returns this actor's environment fingerprint."""
        config = RunConfig.model_validate_json(config_json)
        self.config = config
        if self.engine is not None and self.engine.engine.config != config:  # an engine serves one run config
            self.engine.close()
            self.engine = None
        if self.worker is None:
            self.worker = RolloutWorker(config, self.verifier)
        else:
            self.worker.reconfigure(config)
        if store_location and store_location not in self.stores:
            self.stores[store_location] = TrajectoryStore(store_location)
        self.store = self.stores[store_location] if store_location else None
        return self.worker.fingerprint()

    def rollouts(self, task_json: str, items: list[tuple[str, int]], collect: bool) -> bytes:
        """`RolloutWorker.run_batch` on this actor, pickled."""
        assert self.worker is not None, "configure() first"
        out = self.worker.run_batch(TaskSpec.model_validate_json(task_json), items, self.store, collect=collect)
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)

    def engine_rollouts(self, task_json: str, items: list[tuple[str, int]], collect: bool, max_in_flight: int) -> bytes:
        """`items` of the task run at once on this actor's engine (the configured run's, made on first use with
        `max_in_flight`), each stored as it ends (when the actor writes the store); pickled as `rollouts`.
        Called on the "engine" concurrency group: many batches at once."""
        with self.engine_lock:
            if self.engine is None:
                self.engine = EngineThread(self.config, max_in_flight=max_in_flight)
        out = self.engine.run_batch(TaskSpec.model_validate_json(task_json), items, self.store, collect=collect)
        return pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)

    def close(self) -> None:
        if self.engine is not None:
            self.engine.close()
        if self.worker is not None:
            self.worker.close()
        self.verifier.close()
        for store in self.stores.values():
            store.close()


def _actors_reach(store: TrajectoryStore, ray) -> bool:
    """Whether Ray actors can write into `store`: a database server, or a SQLite file with every node of the
    cluster on this machine (a SQLite path on another node would be a different, empty file)."""
    if store.shared_location is None:
        return False
    if store.engine.dialect.name != "sqlite":
        return True
    here = ray.util.get_node_ip_address()
    return all(node["NodeManagerAddress"] == here for node in ray.nodes() if node.get("Alive"))


class RayRunner:
    """Ray actors kept across runs: what a training loop that asks for experience again and again wants.

    Each actor is a Ray worker process with its own environment (sandbox pool, caches) and verifier process;
    starting one costs about a second (a new process importing Ray and gymsmith), which `run_on_ray` pays on
    every call and a RayRunner pays once. Actors are started on first use, as many as the largest
    `config.concurrency` asked for; a run uses `config.concurrency` of them, and an actor that dies is replaced.

    `address` joins an existing cluster (e.g. ``"ray://head:10001"`` or ``"auto"``); without it, and if Ray is
    not already initialized in this process, a local Ray instance is started with `num_cpus` CPUs (default:
    this machine's) on first use and shut down by `close()`. Use as a context manager, or call `close()`:
    it stops the actors (and their verifier processes) and frees their CPUs for other Ray work.

    The actors import nothing from the directory the driver runs in: Ray puts that directory first on every
    worker's sys.path unless the job has a `working_dir`, so when this runner starts or joins Ray it gives the
    job an empty one of its own (a `random.py` or `gymsmith.py` where `gymsmith run` started would otherwise
    replace what the actors import). If Ray was initialized by the caller, the caller's `ray.init` decides:
    pass ``runtime_env={"working_dir": ...}`` there for the same isolation.

    Not thread-safe: one run at a time per runner.
    """

    def __init__(self, *, address: str | None = None, num_cpus: int | None = None):
        self.address, self.num_cpus = address, num_cpus
        self.actors: list = []
        self._started_ray = False
        self._closed = False
        self._working_dir: str | None = None

    def __enter__(self) -> "RayRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _ray(self):
        import ray

        if self._closed:
            raise RuntimeError("this RayRunner is closed; make a new one")
        if not ray.is_initialized():
            init = dict(address=self.address) if self.address else dict(num_cpus=self.num_cpus)
            # an empty working_dir keeps the driver's working directory off the workers' sys.path (see above)
            self._working_dir = tempfile.mkdtemp(prefix="gymsmith-ray-")
            ray.init(include_dashboard=False, log_to_driver=False, configure_logging=False,
                     runtime_env={"working_dir": self._working_dir}, **init)
            self._started_ray = True
        return ray

    def _new_actor(self):
        ray = self._ray()
        return ray.remote(num_cpus=1, max_restarts=0, concurrency_groups={"engine": ENGINE_CALLS})(_Actor).remote()

    def start(self, n: int) -> "RayRunner":
        """Start actors (if fewer are running) so that `n` are up or starting; returns self. A run does this
        itself; call it early to overlap the actors' start with other work. Each actor holds one CPU of the
        cluster until `close()`."""
        while len(self.actors) < n:
            self.actors.append(self._new_actor())
        return self

    def pids(self) -> list[int]:
        """The process ids of the actors (waits until they are up)."""
        ray = self._ray()
        return _get(ray, [a.pid.remote() for a in self.actors])

    def close(self) -> None:
        """Stop the actors and, if this runner started Ray, Ray itself. Idempotent."""
        if self._closed:
            return
        self._closed = True
        import ray

        if ray.is_initialized() and self.actors:
            # a clean stop closes each environment and verifier process (its outcome unread); a stuck actor is
            # killed anyway
            closing = [a.close.remote() for a in self.actors]
            _wait(ray, closing, len(closing), timeout=30)
            for actor in self.actors:
                ray.kill(actor, no_restart=True)
        self.actors = []
        if self._started_ray:
            ray.shutdown()
        if self._working_dir:
            shutil.rmtree(self._working_dir, ignore_errors=True)

    def run(self, config: RunConfig, store: TrajectoryStore, *, progress: ProgressCallback | None = None,
            tasks: list[TaskSpec] | None = None, collect: bool = True,
            on_actor_pids: Callable[[list[int]], None] | None = None,
            on_actor_death: Callable[[str, str, int, int], None] | None = None) -> list[Trajectory]:
        """Like `gymsmith.runner.run` (including `collect` and resuming a run id), on `config.concurrency` of
        this runner's actors.

        `on_actor_pids` is called with the actors' process ids once they are up, and `on_actor_death` with
        (task id, agent, seed, deaths so far) each time an actor dies under a rollout (for monitoring and tests).
        Raises SplitPolicyError, UnknownFamilyError, KnobError, TaskSetError, ValueError before anything runs
        (and before Ray is started or joined).
        """
        check_split_policy(config)  # the cheap refusals before a cluster is started or joined
        agent_factories(config, get_family(config.taskset.family))
        ray = self._ray()
        from ray.exceptions import RayActorError, WorkerCrashedError

        config_json = config.model_dump_json()
        location = store.shared_location if _actors_reach(store, ray) else None
        self.start(config.concurrency)  # new actors start (about a second) while the tasks are built and planned
        actors = self.actors[:config.concurrency]
        configured = [a.configure.remote(config_json, location) for a in actors]
        plan = plan_run(config, store, tasks)
        tally = RunTally(plan.finished, plan.total, progress, collect)

        def replace(slot: int):
            """A fresh actor in `slot`, configured for this run; returns the configure call's reference."""
            actor = self._new_actor()
            actors[slot] = self.actors[slot] = actor
            return actor.configure.remote(config_json, location)  # runs before any batch sent to it later

        ready, waiting = _wait(ray, configured, len(configured), timeout=SLOW_START_S)
        if waiting:
            free = ray.available_resources().get("CPU", 0)
            warnings.warn(f"RayRunner: {len(waiting)} of {len(configured)} actor(s) not up after {SLOW_START_S:g} s; "
                          f"each needs a CPU and the cluster has {free:g} free. Still waiting: other Ray work, or "
                          "another RayRunner not yet closed, may hold the CPUs (or an autoscaler is adding nodes)",
                          RuntimeWarning, stacklevel=2)
        fingerprints = []
        for slot, ref in enumerate(configured):
            try:
                fingerprints.append(_get(ray, ref))
            except (RayActorError, WorkerCrashedError):  # died since the previous run: replaced
                fingerprints.append(_get(ray, replace(slot)))
        for fp in {f["digest"]: f for f in fingerprints}.values():  # a remote node may differ from the driver
            store.record_fingerprint(fp)
        if on_actor_pids:
            on_actor_pids(_get(ray, [a.pid.remote() for a in actors]))
        size = config.batch_size(len(plan.work), workers_store=location is not None)
        in_flight, per_actor = IN_FLIGHT, 0  # batches per actor; rollouts in flight per actor's engine
        if config.uses_engine():  # the run's rollouts in flight, split among the actors
            per_actor = -(-(config.max_in_flight or default_max_in_flight(config.taskset.family, config.max_record_bytes())) // len(actors))
            size = max(size, -(-per_actor // ENGINE_CALLS)) if location is not None else size
        queue = list(reversed(task_chunks(plan.work, size)))
        if per_actor and queue:  # enough batches to fill the engine (a batch holds one task's rollouts: often < size)
            in_flight = max(1, min(ENGINE_CALLS, -(-per_actor * len(queue) // len(plan.work))))
        pending: dict = {}  # object ref -> (submission number, slot, the actor it went to, (task, items))
        deaths = WorkerDeaths(config, store, tally, workers_store=location is not None, on_death=on_actor_death)
        serial = itertools.count()

        def submit(slot: int) -> None:
            if queue:
                chunk = queue.pop()
                actor = actors[slot]
                if config.uses_engine():
                    ref = actor.engine_rollouts.options(concurrency_group="engine").remote(
                        chunk[0].model_dump_json(), chunk[1], collect, per_actor)
                else:
                    ref = actor.rollouts.remote(chunk[0].model_dump_json(), chunk[1], collect)
                pending[ref] = (next(serial), slot, actor, chunk)

        for slot in range(len(actors)):
            for _ in range(in_flight):
                submit(slot)
        while pending:
            [ref], _ = _wait(ray, list(pending))
            number, slot, actor, (task, items) = pending.pop(ref)
            try:
                returned = pickle.loads(ray.get(ref))
            except (RayActorError, WorkerCrashedError) as exc:
                failed = [(number, (task, items))]
                for other in [r for r, p in pending.items() if p[2] is actor]:  # queued on the dead actor: failed too
                    other_number, _, _, chunk = pending.pop(other)
                    failed.append((other_number, chunk))
                if actors[slot] is actor:
                    replace(slot)
                cause = f"Ray actor lost: {''.join(traceback.format_exception_only(exc)).strip()[:300]}"
                queue.extend(deaths.worker_died(failed, cause))
                for _ in range(in_flight):
                    submit(slot)
                continue
            tally.add_returned(task, returned, None if location else store)
            submit(slot)
        return tally.results


def run_on_ray(config: RunConfig, store: TrajectoryStore, *, address: str | None = None,
               progress: ProgressCallback | None = None, tasks: list[TaskSpec] | None = None,
               collect: bool = True,
               on_actor_pids: Callable[[list[int]], None] | None = None,
               on_actor_death: Callable[[str, str, int, int], None] | None = None) -> list[Trajectory]:
    """One run on `config.concurrency` fresh Ray actors, stopped when it ends: `RayRunner.run` on a runner of
    its own (see there for the arguments). A loop of runs should keep one `RayRunner` instead.

    `address` joins an existing cluster; without it, and if Ray is not initialized in this process, a local
    Ray instance is started with `config.concurrency` CPUs and shut down afterwards.
    """
    with RayRunner(address=address, num_cpus=config.concurrency) as runner:
        return runner.run(config, store, progress=progress, tasks=tasks, collect=collect,
                          on_actor_pids=on_actor_pids, on_actor_death=on_actor_death)
