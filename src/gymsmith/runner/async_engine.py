"""The async rollout engine: hundreds to thousands of rollouts at once in one process, as coroutines.

A model-bound rollout spends nearly all its time waiting for the model. A worker process per rollout (the
process pool) keeps a few dozen in flight on one machine; here each rollout is a coroutine
(`runner.rollout.rollout_coroutine`) on one event loop:

- the model agents share one `httpx.AsyncClient` (one connection pool, as many connections as rollouts in
  flight) and await their calls concurrently; per call, the model config's `timeout_s` applies (then its
  retries), and a rollout that still runs after `RunConfig.rollout_deadline()` is cancelled and stored as an
  infrastructure error naming the limit;
- environment steps run on the loop when they are quick (ops: an in-memory SQLite), or, for families whose
  steps block (a family with `blocking_steps = True`, and `BLOCKING_FAMILIES`: code's sandbox commands, web's
  browser), each environment's calls run on a thread of its own (the same thread every time: Playwright's sync
  API is bound to it), so a slow step holds up only its rollout;
- final states (and, with step rewards, every state) are scored by a small pool of verifier processes
  (`VerifierService`, one per core by default), never in this process: the verifier stays where the agent's
  side cannot reach it;
- at most `max_in_flight` rollouts run at once (backpressure: the next starts when one has been stored); each
  finished rollout is written by one writer thread, then counted: in its own transaction, or in one with those
  that ended while the last write was under way (`_BatchWriter`: a run's rollouts that end together);
- on Ctrl-C (or any cancellation) every running rollout is cancelled and nothing of it is written; what was
  being written is finished (a transaction either commits whole or not at all), so resuming the run id loses
  and duplicates nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from gymsmith.agents.base import Agent
from gymsmith.core.types import EndReason, ErrorKind, Observation, RolloutStatus, TaskSpec, Trajectory
from gymsmith.envs.base import Environment
from gymsmith.registry import get_family, split_of
from gymsmith.registry.fingerprint import environment_fingerprint
from gymsmith.runner.local import RolloutOutcome, RunConfig, RunTally, WorkItem, agent_factories
from gymsmith.runner.episode import DEFAULT_MAX_RECORD_BYTES, Episode, Verdict
from gymsmith.runner.recovery import lost_trajectory
from gymsmith.runner.rollout import rollout_coroutine
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

T = TypeVar("T")
log = logging.getLogger(__name__)
BLOCKING_FAMILIES = frozenset({"code", "web"})  # their steps wait on sandboxes or a browser: run them off the loop
MIB = 1 << 20
MEMORY_PER_ROLLOUT = {"ops": 4 * MIB}  # measured: 632 MiB PSS in all for 1,024 in flight with 11-call conversations
# (benchmarks/model_bound.py); the margin is for longer conversations
MAX_IN_FLIGHT_PER_CORE = {"code": 32, "web": 2}  # a sandbox, or a Chromium, per rollout in flight
DEFAULT_MAX_IN_FLIGHT = 4096
SPECULATION_NICE = 10  # speculative verifications take the CPU the rollouts leave, not the rollouts' own


def default_max_in_flight(family: str, record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> int:
    """Rollouts in flight when `max_in_flight` is not set, sized to this machine: for a family whose steps
    block, a number per core (each rollout holds a sandbox or a browser); otherwise as many as a quarter of the
    available memory holds at their usual size, and as three quarters of it hold if every one reached its record's
    bound (`record_bytes`: `RunConfig.max_record_mib`), so that no policy can make the engine run out of memory;
    at most DEFAULT_MAX_IN_FLIGHT."""
    cores = os.cpu_count() or 1
    if family in MAX_IN_FLIGHT_PER_CORE:
        return MAX_IN_FLIGHT_PER_CORE[family] * cores
    available = available_memory()
    usual = available // 4 // MEMORY_PER_ROLLOUT.get(family, 16 * MIB)
    return max(1, min(DEFAULT_MAX_IN_FLIGHT, usual, available * 3 // 4 // max(1, record_bytes)))


def available_memory() -> int:
    """The memory available to this process now, in bytes (8 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 8 << 30


def _loop_factory():
    """uvloop's event loop where it is installed (measured: less time per model call), else asyncio's."""
    if os.environ.get("GYMSMITH_LOOP") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


class _BatchWriter:
    """Writes finished rollouts into a store on one thread: those that end while a write is under way go together,
    in the next transaction (at most MAX_BATCH; `TrajectoryStore.add_many`). Rollouts that end together, as a
    run's last ones do, cost one statement per table instead of one per rollout and table. A rollout cancelled
    before its write starts is not written; a transaction under way commits whole."""

    MAX_BATCH = 64

    def __init__(self, store: TrajectoryStore, thread: ThreadPoolExecutor):
        self.store, self.thread = store, thread
        self.pending: list[tuple[Trajectory, TaskSpec, asyncio.Future[bool]]] = []
        self.busy = False

    async def write(self, trajectory: Trajectory, task: TaskSpec) -> bool:
        """Store `trajectory`; returns what `TrajectoryStore.add` returns, raises what it raises."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self.pending.append((trajectory, task, done))
        if not self.busy:
            self._next()
        return await done

    def _next(self) -> None:
        batch = [item for item in self.pending[:self.MAX_BATCH] if not item[2].cancelled()]
        self.pending = self.pending[self.MAX_BATCH:]
        if not batch:
            if self.pending:
                self._next()
            return
        self.busy = True
        written = asyncio.get_running_loop().run_in_executor(self.thread, self.store.add_many,
                                                             [(t, task) for t, task, _ in batch])
        written.add_done_callback(lambda f: self._written(batch, f))

    def _written(self, batch: list[tuple[Trajectory, TaskSpec, asyncio.Future[bool]]], result: asyncio.Future) -> None:
        self.busy = False
        failure = result.exception() if not result.cancelled() else asyncio.CancelledError()
        for i, (_, _, done) in enumerate(batch):
            if done.done():
                continue
            outcome = failure if failure is not None else result.result()[i]
            if isinstance(outcome, BaseException):  # this rollout alone could not be stored (`add_many`)
                done.set_exception(outcome)
            else:
                done.set_result(outcome)
        if self.pending:
            self._next()


@contextlib.contextmanager
def _heap_frozen() -> Iterator[None]:
    """The objects that exist when a run starts (tasks, start states, the caller's own) left out of the garbage
    collector's scans until it ends (`gc.freeze`): they outlive the run, and the rollouts' many short-lived
    objects set off collections that walked all of them (measured: 0.26 s of collections in an 8 s run of 256
    rollouts, 0.10 s frozen). Not when the caller froze objects itself: unfreezing would release theirs too."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class _Lane:
    """One environment and where its calls run: on the loop, or (`thread`) on a thread of its own."""

    def __init__(self, env: Environment, thread: ThreadPoolExecutor | None):
        self.env, self.thread = env, thread

    def discard(self) -> None:
        """Close the environment after whatever call of it is still running (a cancelled step goes on in its
        thread); an environment on the loop is closed at once (nothing of it runs)."""
        if self.thread is None:
            self.env.close()
            return
        self.thread.submit(self.env.close)
        self.thread.shutdown(wait=False)


class _Speculation:
    """Where speculative verifications run: one thread, one verifier process at a lower CPU priority."""

    def __init__(self) -> None:
        self.thread = ThreadPoolExecutor(1, thread_name_prefix="gymsmith-speculate")
        self.verifier = VerifierService(workers=1, nice=SPECULATION_NICE).start()
        self.scratch = Path(tempfile.mkdtemp(prefix="gymsmith-speculative-"))  # the one thread's snapshot, rewritten

    def submit(self, episode: Episode, image: bytes) -> Future[Verdict]:
        return self.thread.submit(episode.verdict_of, image, self.verifier, self.scratch)

    def close(self) -> None:
        self.verifier.close(wait=False)  # its input ends: a verification under way is answered, nothing else is
        self.thread.shutdown(wait=True, cancel_futures=True)  # so this waits for that answer at most
        shutil.rmtree(self.scratch, ignore_errors=True)


class _Calls:
    """`RolloutCalls` for one rollout of the engine: the agent's model calls awaited on the loop, its other
    agents and the environment on the loop or the lane's thread, the verifier on the verification threads, and
    speculative verifications (with `speculation`) on theirs."""

    def __init__(self, lane: _Lane, verify_threads: ThreadPoolExecutor, speculation: _Speculation | None = None):
        self.lane, self.verify_threads, self.speculation = lane, verify_threads, speculation

    def speculate(self, episode: Episode) -> None:
        # only an environment on the loop: its image is taken here, between its steps, at no cost to the others
        if self.speculation is None or self.lane.thread is not None:
            return
        image = episode.speculation_image()
        if image is not None:
            episode.speculate(image, self.speculation.submit(episode, image))

    async def act(self, agent: Agent, observation: Observation) -> Any:
        if hasattr(agent, "act_async"):  # a model agent: the engine made it with the shared client
            return await agent.act_async(observation)
        return await self.call(agent.act, observation)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        if self.lane.thread is None:
            return fn(*args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self.lane.thread, functools.partial(fn, *args, **kwargs))

    async def verify(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        pool = self.lane.thread or self.verify_threads  # the lane's own thread when the call also reads its environment
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args, **kwargs))


class AsyncEngine:
    """Runs the rollouts of one run configuration as coroutines in this process.

    `verifier_workers`: verifier processes (default: one per core). `max_in_flight`: default
    `config.max_in_flight`, else `default_max_in_flight(family)`. `prepare_verifier`: warm the verifier's caches
    for each task as its first rollout starts (`VerifierService.prepare_later`); by default when a model agent
    runs, since the verifier is idle while the rollouts wait on the model, and rollouts that end together would
    otherwise pay every task's first, cold verification at once. `speculate`: verify a rollout's state while its
    agent waits on the model, in one more verifier process at a lower CPU priority, and keep the verdict if the
    rollout ends in that state, byte for byte (`Episode.speculate`: the rollouts that end together then need
    fewer verifications at their end); by default when a model agent runs without step rewards in a family
    whose environments have state images (`envs.base.StateImages`) and run on the loop. Use as a context
    manager, or call `close()`. Raises UnknownFamilyError, or ValueError for an unknown agent, when made.
    """

    def __init__(self, config: RunConfig, *, verifier_workers: int | None = None, max_in_flight: int | None = None,
                 prepare_verifier: bool | None = None, speculate: bool | None = None):
        # one engine per run config: its agents, limits and model client are the config's
        self.config, self.client = config, None
        self.family = get_family(config.taskset.family)
        self.factories = agent_factories(config, self.family)
        self.max_in_flight = (max_in_flight or config.max_in_flight
                              or default_max_in_flight(self.family.name, config.max_record_bytes()))
        self.blocking = bool(getattr(self.family, "blocking_steps", self.family.name in BLOCKING_FAMILIES))
        worst, available = self.max_in_flight * config.max_record_bytes(), available_memory()
        if not self.blocking and worst > available:
            log.warning("%d rollouts in flight, each allowed a record of %g MiB (max_record_mib), could hold %.1f GiB, "
                        "more than the %.1f GiB available: a policy that floods its observations could make this "
                        "process run out of memory (lower --max-in-flight or max_record_mib)", self.max_in_flight,
                        config.max_record_mib, worst / 2**30, available / 2**30)
        self.verifier = VerifierService(workers=verifier_workers or os.cpu_count() or 1).start()
        self.prepare_verifier = "model" in config.agents if prepare_verifier is None else prepare_verifier
        self.verify_threads = ThreadPoolExecutor(self.verifier._workers, thread_name_prefix="gymsmith-verify")
        if speculate is None:
            speculate = "model" in config.agents and not config.step_rewards and not self.blocking
        self.speculation = _Speculation() if speculate else None
        self.idle: list[_Lane] = []
        self.fingerprint = environment_fingerprint(self.family.name)["digest"]
        self.in_flight = self.peak_in_flight = 0
        self._writers: dict[tuple[int, int], _BatchWriter] = {}
        self._batch_slots: asyncio.Semaphore | None = None

    # -- running ----------------------------------------------------------------------------------
    def run(self, work: list[WorkItem], store: TrajectoryStore, tally: RunTally) -> None:
        """Run every item of `work`, storing each finished rollout in `store` (in its own transaction) and then
        adding it to `tally`. Returns when all are stored; raises KeyboardInterrupt on Ctrl-C (after cancelling
        the running rollouts: none of them is stored) and whatever writing to the store raised."""
        with _heap_frozen(), asyncio.Runner(loop_factory=_loop_factory()) as runner:  # Ctrl-C cancels run_async,
            runner.run(self.run_async(work, store, tally))                           # then raises here

    async def run_async(self, work: list[WorkItem], store: TrajectoryStore, tally: RunTally) -> None:
        """`run` on the running event loop (cancel it to stop: the running rollouts are cancelled, unstored)."""
        # an in-memory SQLite store is one connection, this thread's: written here; a file or server, by one thread
        writer = ThreadPoolExecutor(1, thread_name_prefix="gymsmith-store") if store.shared_location else None
        slots = asyncio.Semaphore(self.max_in_flight)
        running: set[asyncio.Task] = set()
        failure: list[BaseException] = []

        async def one(task: TaskSpec, agent: str, seed: int) -> None:
            try:
                trajectory = await self._stored(task, agent, seed, store, writer)
                tally.add(trajectory if tally.collect else RolloutOutcome.of(trajectory))
            except asyncio.CancelledError:
                raise
            except BaseException as exc:  # noqa: BLE001 - the store failed: stop the run, raise it
                failure.append(exc)
            finally:
                self.in_flight -= 1
                slots.release()

        try:
            for task, agent, seed in work:
                await slots.acquire()  # backpressure: a new rollout starts when one has been stored
                if failure:
                    break
                self.in_flight += 1
                self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
                t = asyncio.create_task(one(task, agent, seed))
                running.add(t)
                t.add_done_callback(running.discard)
            if running:
                await asyncio.gather(*running)
        finally:
            for t in list(running):  # cancelled (Ctrl-C) or failed: nothing more starts, nothing running is kept
                t.cancel()
            if running:
                await asyncio.gather(*running, return_exceptions=True)
            if self.client is not None:
                await self.client.aclose()
                self.client = None
            if writer is not None:
                writer.shutdown(wait=True)  # a transaction under way commits whole (or not at all): never half
                self._writers.pop((id(store), id(writer)), None)
        if failure:
            raise failure[0]

    async def run_batch(self, task: TaskSpec, items: list[tuple[str, int]], store: TrajectoryStore | None,
                        writer: ThreadPoolExecutor | None, *, collect: bool) -> list[Trajectory | RolloutOutcome]:
        """Run `items` ((agent, seed) pairs) of `task` at once, within this engine's `max_in_flight` (shared by
        every batch running on this event loop), each written into `store` (when given; through `writer` when
        given) as it ends. Returns, in the order of `items`, the trajectories, or only their outcomes when they
        are stored and not collected (as `RolloutWorker.run_batch`)."""
        if self._batch_slots is None:  # made here: it belongs to the loop the batches run on
            self._batch_slots = asyncio.Semaphore(self.max_in_flight)
        slots = self._batch_slots

        async def one(agent: str, seed: int) -> Trajectory | RolloutOutcome:
            async with slots:
                trajectory = await self._stored(task, agent, seed, store, writer)
            return trajectory if collect or store is None else RolloutOutcome.of(trajectory)

        return list(await asyncio.gather(*(one(agent, seed) for agent, seed in items)))

    async def _stored(self, task: TaskSpec, agent: str, seed: int, store: TrajectoryStore | None,
                      writer: ThreadPoolExecutor | None) -> Trajectory:
        """One rollout, written into `store` (when given) in its own transaction, by `writer` (when given)."""
        trajectory = await self._rollout(task, agent, seed)
        if store is not None and writer is not None:
            await self._writer(store, writer).write(trajectory, task)
        elif store is not None:
            store.add(trajectory, task)
        return trajectory

    def _writer(self, store: TrajectoryStore, thread: ThreadPoolExecutor) -> "_BatchWriter":
        """The batch writer of `store` on `thread` (one per pair, made on the loop that uses it)."""
        key = (id(store), id(thread))
        if key not in self._writers:
            self._writers[key] = _BatchWriter(store, thread)
        return self._writers[key]

    def _model_client(self) -> None:
        """The model agents' shared client, made on first use (on the engine's loop: its pool belongs to it)."""
        model = self.config.model
        if self.client is not None or model is None or "model" not in self.config.agents:
            return
        from gymsmith.agents.model import ModelAgent, make_client

        client = self.client = make_client(model, connections=self.max_in_flight)
        prompt = getattr(self.family, "system_prompt", None)
        self.factories = {**self.factories, "model": lambda: ModelAgent(model, system_prompt=prompt, client=client)}

    async def _rollout(self, task: TaskSpec, agent_name: str, seed: int) -> Trajectory:
        """One rollout, retried in a fresh environment after an infrastructure error (`config.retries` times);
        cut off after `config.rollout_deadline()` seconds (stored as an infrastructure error naming the limit)."""
        c = self.config
        split = split_of(task.id, heldout_fraction=c.taskset.heldout_fraction)
        deadline = c.rollout_deadline()
        self._model_client()
        if self.prepare_verifier:
            self.verifier.prepare_later(task)
            if self.speculation is not None:
                self.speculation.verifier.prepare_later(task)
        for attempt in range(c.retries + 1):
            lane = await self._lane()
            agent = self.factories[agent_name]()
            healthy = False
            try:
                async with asyncio.timeout(deadline):
                    trajectory = await rollout_coroutine(
                        env=lane.env, agent=agent, task=task, split=split, seed=seed, run_id=c.run_id,
                        verifier=self.verifier, policy=c.policy, max_steps=c.max_steps, time_limit_s=c.time_limit_s,
                        step_rewards=c.step_rewards, max_record_bytes=c.max_record_bytes(), calls=_Calls(lane, self.verify_threads, self.speculation))
                healthy = trajectory.end_reason is not EndReason.ENVIRONMENT_EXCEPTION and \
                    trajectory.status is not RolloutStatus.ERROR  # otherwise the next rollout gets a fresh environment
            except TimeoutError:
                trajectory = lost_trajectory(c, task, agent_name, seed,
                                             f"rollout timed out: not finished after {deadline:g} s (wall clock; "
                                             "RunConfig.rollout_timeout_s)", ErrorKind.ROLLOUT_TIMEOUT)
            finally:
                if hasattr(agent, "close"):
                    agent.close()
                if healthy:
                    self.idle.append(lane)
                else:  # broken, cancelled or cut off mid-call: never reused
                    lane.discard()
            if trajectory.status is not RolloutStatus.ERROR:
                break
        if attempt and trajectory.error:
            trajectory.error = f"after {attempt + 1} attempts: {trajectory.error}"
        trajectory.fingerprint = self.fingerprint
        trajectory.group_id = c.group_id(task.id, agent_name, seed)
        return trajectory

    async def _lane(self) -> _Lane:
        if self.idle:
            return self.idle.pop()
        if not self.blocking:
            return _Lane(self.family.make_env(), None)
        thread = ThreadPoolExecutor(1, thread_name_prefix="gymsmith-env")
        env = await asyncio.get_running_loop().run_in_executor(thread, self.family.make_env)
        return _Lane(env, thread)

    def close(self) -> None:
        """Close the environments (each on its own thread) and the verifier processes."""
        for lane in self.idle:
            lane.discard()
        self.idle = []
        self.verify_threads.shutdown(wait=False, cancel_futures=True)
        self.verifier.close(wait=False)  # the workers' exits need not hold up the caller
        if self.speculation is not None:
            self.speculation.close()

    def __enter__(self) -> "AsyncEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_in_engine(config: RunConfig, store: TrajectoryStore, work: list[WorkItem], tally: RunTally) -> None:
    """`gymsmith.runner.run` with `engine='async'`: `work` in one `AsyncEngine` in this process."""
    with AsyncEngine(config) as engine:
        engine.run(work, store, tally)


class EngineThread:
    """An AsyncEngine on an event loop of its own thread, serving batches to callers on other threads (a Ray
    actor's concurrent method calls): `run_batch` blocks its caller, not the other batches. Close it when done."""

    def __init__(self, config: RunConfig, *, verifier_workers: int = 1, max_in_flight: int | None = None):
        import threading

        self.engine = AsyncEngine(config, verifier_workers=verifier_workers, max_in_flight=max_in_flight)
        factory = _loop_factory() or asyncio.new_event_loop
        self.loop = factory()
        self.writer = ThreadPoolExecutor(1, thread_name_prefix="gymsmith-store")
        self.thread = threading.Thread(target=self.loop.run_forever, name="gymsmith-engine", daemon=True)
        self.thread.start()

    def run_batch(self, task: TaskSpec, items: list[tuple[str, int]], store: TrajectoryStore | None, *,
                  collect: bool) -> list[Trajectory | RolloutOutcome]:
        """`AsyncEngine.run_batch` on the engine's loop; raises what it raises."""
        coroutine = self.engine.run_batch(task, items, store, self.writer if store is not None else None,
                                          collect=collect)
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def close(self) -> None:
        async def stop() -> None:
            if self.engine.client is not None:
                await self.engine.client.aclose()

        asyncio.run_coroutine_threadsafe(stop(), self.loop).result(timeout=30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.writer.shutdown(wait=True)
        self.engine.close()
