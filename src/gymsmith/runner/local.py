"""The local runner: task set x agents x seeds, bounded concurrency, resumable, stored as it goes."""

from __future__ import annotations

import functools
import itertools
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from gymsmith.agents.base import Agent
from gymsmith.agents.model import ModelAgent, ModelAgentConfig
from gymsmith.core.errors import SplitPolicyError
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import EndReason, Reward, RolloutStatus, Split, TaskSpec, Trajectory
from gymsmith.envs.base import Environment
from gymsmith.registry.fingerprint import environment_fingerprint
from gymsmith.registry import Family, TaskSetSpec, build_taskset, get_family, split_of
from gymsmith.runner.episode import DEFAULT_MAX_RECORD_BYTES, DEFAULT_MAX_STEPS, DEFAULT_TIME_LIMIT_S
from gymsmith.runner.reuse import check_reuse
from gymsmith.runner.rollout import run_rollout
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY, get_policy
from gymsmith.verifier.service import VerifierService

DIFFICULTY_BINS = 5
CHUNK = 8  # default most rollouts of one task handed to a worker at once
IN_FLIGHT = 2  # batches given to each worker process or Ray actor at a time: it never waits for the driver
# between two (with one at a time, each Ray actor sat idle for about a fifth of the run)


class RunConfig(BaseModel):
    """A run: which tasks, which agents, how many episode seeds, and the limits."""

    run_id: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    purpose: Literal["train", "eval", "audit"] = Field(default="train", description="train: train split only (plus "
                                                        "its `paired_heldout` sample, evaluated only); eval: held-out only; "
                                                        "audit: the environment's own checks, any split.")
    taskset: TaskSetSpec
    paired_heldout: int = Field(default=0, ge=0, le=1_000_000, description="A train run only: this many held-out tasks "
                                "of the same task set (family, knobs, base seed, held-out fraction) run in the same run "
                                "id with the same agents and limits, so train vs held-out divergence can be measured "
                                "within one run. Their rollouts are stored with split 'heldout'; nothing trains on them.")
    agents: list[str] = Field(min_length=1)
    seeds: int = Field(default=1, ge=1, le=1000, description="Episode seeds per (task, agent): 0..seeds-1 (with "
                       "`group`, groups per (task, agent)).")
    group: int | None = Field(default=None, ge=1, le=1024, description="Sample in groups of this many rollouts per "
                              "(task, agent), for group-relative advantages (GRPO): the rollouts of a group have "
                              "distinct episode seeds and share a `group_id` in the store. Group g of `seeds` runs "
                              "episode seeds g*group .. g*group+group-1.")
    retry_errors: bool = Field(default=False, description="Run again the rollouts of this run id stored as "
                               "infrastructure errors; each new result replaces its error row (`TrajectoryStore.add`).")
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1)
    max_record_mib: float = Field(default=DEFAULT_MAX_RECORD_BYTES / 2**20, gt=0, le=1 << 20, description="What one "
                                  "rollout's record may hold in memory (`runner.episode.record_bytes`: observations, "
                                  "actions, model turns); a rollout past it is the agent's failure, reward 0. The async "
                                  "engine's in-flight default is sized so that every rollout can reach it.")
    time_limit_s: float = Field(default=DEFAULT_TIME_LIMIT_S, gt=0)
    concurrency: int = Field(default=2, ge=1, le=64)
    policy: str = DEFAULT_POLICY
    step_rewards: bool = Field(default=False, description="Also value the start state and the state after every "
                               "step with the verifier, storing each step's progress V(s_t) and step reward "
                               "V(s_t) - V(s_t-1) (docs/trainers.md, 'Per-step rewards'); costs one verification "
                               "per step that changes the state.")
    processes: bool | None = Field(default=None, description="Run rollouts in worker processes; default: when "
                                   "concurrency > 1 (environments are CPU-bound Python, threads would share one core).")
    model: ModelAgentConfig | None = Field(default=None, description="Endpoint for the agent named 'model'.")
    retries: int = Field(default=1, ge=0, le=5, description="Extra attempts for a rollout that ends in an infrastructure error.")
    batch: int | None = Field(default=None, ge=1, le=256, description="Rollouts of one task handed to a worker "
                              "at once (a worker pool or Ray actors that store their own rollouts); default: up to "
                              "8, fewer when the run is small, so the last batches keep every worker busy.")
    engine: Literal["auto", "async", "pool"] = Field(default="auto", description="async: the rollouts are coroutines "
                                                     "in one process (`runner.async_engine`), up to `max_in_flight` at "
                                                     "once; pool: one rollout at a time per worker process (`concurrency`"
                                                     " of them); auto: async when the agents include 'model'.")
    max_in_flight: int | None = Field(default=None, ge=1, le=100_000, description="The async engine's rollouts at "
                                      "once; default sized to the machine (`async_engine.default_max_in_flight`).")
    rollout_timeout_s: float | None = Field(default=None, gt=0, description="The async engine's wall-clock limit "
                                            "per rollout, past which it is cancelled and stored as an infrastructure "
                                            "error; default `time_limit_s` plus the longest one model call can "
                                            "take (every attempt, the backoff, the endpoint check: "
                                            "`ModelAgentConfig.longest_call_s`) plus the verifier's timeout (with "
                                            "step rewards, plus the valuations' bound `VALUATION_LIMIT_S` and one more "
                                            "verification).")

    def uses_engine(self) -> bool:
        """Whether this run goes to the async engine (`engine`, with 'auto' resolved)."""
        return self.engine == "async" or (self.engine == "auto" and "model" in self.agents)

    def max_record_bytes(self) -> int:
        """`max_record_mib` in bytes."""
        return int(self.max_record_mib * 2**20)

    def rollout_deadline(self) -> float:
        """`rollout_timeout_s`, or its default described there."""
        if self.rollout_timeout_s is not None:
            return self.rollout_timeout_s
        model = self.model.longest_call_s() if self.model is not None else 0.0
        from gymsmith.runner.episode import VALUATION_LIMIT_S
        from gymsmith.verifier.service import DEFAULT_TIMEOUT_S

        # with step rewards, the valuations' own bound and the one that passes it (the episode then ends, scored)
        valuing = VALUATION_LIMIT_S + DEFAULT_TIMEOUT_S if self.step_rewards else 0.0
        return self.time_limit_s + model + DEFAULT_TIMEOUT_S + valuing

    def episode_seeds(self) -> range:
        """The episode seeds each (task, agent) runs: 0 .. seeds * group - 1 (group 1 without `group`)."""
        return range(self.seeds * (self.group or 1))

    def group_id(self, task_id: str, agent: str, seed: int) -> str | None:
        """The sampling group of the rollout (task, agent, episode seed): a digest of the run id, task, agent and
        group number; None without `group`. Every backend labels its trajectories with it."""
        if self.group is None:
            return None
        return content_hash(["group", self.run_id, task_id, agent, seed // self.group], length=16)

    def batch_size(self, rollouts: int, *, workers_store: bool = True) -> int:
        """The batch size for a run of `rollouts`: `batch`, or the default described there. 1 when the
        workers cannot write into the store (`workers_store=False`): a dead worker's unreturned batch would
        be work lost, so each rollout comes back on its own."""
        if not workers_store:
            return 1
        if self.batch is not None:
            return self.batch
        return max(1, min(CHUNK, rollouts // (4 * self.concurrency)))

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        get_policy(value)
        return value

    def heldout_taskset(self) -> TaskSetSpec | None:
        """The task set of the paired held-out sample: `taskset` with split 'heldout' and `paired_heldout` tasks
        (so the same family, knobs and base seed: real held-out tasks of the same difficulty); None without one."""
        if not self.paired_heldout:
            return None
        return self.taskset.model_copy(update={"split": "heldout", "count": self.paired_heldout})


class SummaryRow(BaseModel):
    split: str
    agent: str
    difficulty_bin: str
    rollouts: int
    errors: int
    mean_reward: float | None
    acceptance: float | None


def check_split_policy(config: RunConfig) -> None:
    """Training runs see train tasks only; eval runs held-out tasks only; audits (which train nothing) any.

    Raises SplitPolicyError."""
    split = config.taskset.split
    if config.purpose == "train" and split != "train":
        raise SplitPolicyError(f"a training run may only use split 'train', not {split!r}; "
                               "held-out tasks are for evaluation (gymsmith eval)")
    if config.purpose == "eval" and split != "heldout":
        raise SplitPolicyError(f"an eval run uses split 'heldout', not {split!r}")
    if config.paired_heldout and config.purpose != "train":
        raise SplitPolicyError(f"paired_heldout pairs a training run with a held-out sample; a {config.purpose} run "
                               "has none (an eval run is held-out already)")


def check_given_tasks(config: RunConfig, tasks: list[TaskSpec]) -> None:
    """A training run handed its tasks: every held-out one among them must belong to the run's paired held-out
    sample (`RunConfig.heldout_taskset`), the one path by which held-out tasks enter a training run.

    Raises SplitPolicyError naming the first task that does not."""
    if config.purpose != "train":
        return
    fraction = config.taskset.heldout_fraction
    held = [t for t in tasks if split_of(t.id, heldout_fraction=fraction) is Split.HELDOUT]
    if not held:
        return
    heldout = config.heldout_taskset()
    paired = {t.id for t in build_taskset(heldout)} if heldout is not None else set()
    stray = [t.id for t in held if t.id not in paired]
    if stray:
        raise SplitPolicyError(f"training run {config.run_id!r} was given held-out task {stray[0]!r} "
                               f"({len(stray)} in all) outside its paired held-out sample; held-out tasks are for "
                               "evaluation (gymsmith eval, or gymsmith run --with-heldout N)")


def error_reasons(rows: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Why the rollouts of `rows` stored as infrastructure errors failed: each distinct reason (the first line of
    `error`, at most 200 characters) with its count, most frequent first (ties: first seen first)."""
    counts: dict[str, int] = {}
    for r in rows:
        if r["status"] == RolloutStatus.ERROR:
            reason = ((r.get("error") or "").strip().splitlines() or ["no reason recorded"])[0][:200]
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda item: -item[1])


def _bin(difficulty: float) -> str:
    i = min(DIFFICULTY_BINS - 1, int(difficulty * DIFFICULTY_BINS))
    return f"{i / DIFFICULTY_BINS:.1f}-{(i + 1) / DIFFICULTY_BINS:.1f}"


def summarize(rows: list[dict[str, Any]], *, by_bin: bool = True) -> list[SummaryRow]:
    """Mean reward and acceptance by split, agent and difficulty bin; errors are counted, not averaged in."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["split"], r["agent"], _bin(r["difficulty"]) if by_bin else "all")].append(r)
    out = []
    for (split, agent, b), rs in sorted(groups.items()):
        scored = [r for r in rs if r["status"] != RolloutStatus.ERROR]
        out.append(SummaryRow(split=split, agent=agent, difficulty_bin=b, rollouts=len(rs), errors=len(rs) - len(scored),
                              mean_reward=sum(r["reward"] for r in scored) / len(scored) if scored else None,
                              acceptance=sum(bool(r["accepted"]) for r in scored) / len(scored) if scored else None))
    return out


class RolloutOutcome(BaseModel):
    """What a run reports of a rollout it did not keep in memory (`run(..., collect=False)`): the full
    trajectory is in the store under `rollout_id`."""

    rollout_id: str
    task_id: str
    agent: str
    seed: int
    status: RolloutStatus
    reward: Reward | None = None
    error: str | None = None
    end_reason: EndReason | None = None

    @classmethod
    def of(cls, t: Trajectory) -> "RolloutOutcome":
        return cls(rollout_id=t.rollout_id, task_id=t.task_id, agent=t.agent, seed=t.seed, status=t.status,
                   reward=t.reward, error=t.error, end_reason=t.end_reason)


ProgressCallback = Callable[[int, int, "Trajectory | RolloutOutcome | None"], None]
WorkItem = tuple[TaskSpec, str, int]  # (task, agent name, episode seed)


PARTIAL_ORACLE = re.compile(r"^oracle@(\d{1,3})$")


def partial_fraction(agent: str) -> float | None:
    """`oracle@K` (K a percentage, 0-100) names the oracle stopped after K% of its sub-goals (for families with
    `partial_oracle`, used by the reward ladder); returns K/100, or None for any other name."""
    m = PARTIAL_ORACLE.match(agent)
    return int(m.group(1)) / 100 if m and int(m.group(1)) <= 100 else None


def agent_factories(config: RunConfig, family: Family) -> dict[str, Callable[[], Agent]]:
    """The family's agents, `oracle@K` partial oracles where the family has them, and `model` when an endpoint
    is configured. Raises ValueError for unknown agents."""
    factories = dict(family.agents())
    for name in config.agents:
        fraction = partial_fraction(name)
        if fraction is not None and hasattr(family, "partial_oracle"):
            factories[name] = functools.partial(family.partial_oracle, fraction)
    if config.model is not None:
        model_config = config.model
        factories["model"] = lambda: ModelAgent(model_config, system_prompt=getattr(family, "system_prompt", None))
    elif "model" in config.agents:
        raise ValueError("agent 'model' needs an endpoint: set RunConfig.model (CLI: --model-url and --model-name)")
    unknown = [a for a in config.agents if a not in factories]
    if unknown:
        raise ValueError(f"unknown agent(s) {unknown} for family {family.name!r}; available: {sorted(factories)}")
    return factories


class RolloutWorker:
    """Runs rollouts one at a time with its own environment; used by a local thread or a Ray actor.

    A rollout that ends in an infrastructure error is retried (`config.retries` times) in a fresh
    environment; what is returned is final.
    """

    def __init__(self, config: RunConfig, verifier: VerifierService):
        self.verifier = verifier
        self.env: Environment | None = None
        self.family: Family = get_family(config.taskset.family)
        self.reconfigure(config)

    def reconfigure(self, config: RunConfig) -> None:
        """Run `config`'s rollouts from now on; the environment is kept when the family is the same
        (a long-lived worker serving run after run keeps its warm environment and caches).

        Raises UnknownFamilyError, or ValueError for an unknown agent."""
        family = get_family(config.taskset.family)
        factories = agent_factories(config, family)
        if family is not self.family:
            self.close()
            self.env, self.family = None, family
        self.config, self.factories = config, factories

    def rollout(self, task: TaskSpec, agent_name: str, seed: int) -> Trajectory:
        c = self.config
        split = split_of(task.id, heldout_fraction=c.taskset.heldout_fraction)
        for attempt in range(c.retries + 1):
            env = self.env = self.env if self.env is not None else self.family.make_env()  # reused across rollouts
            agent = self.factories[agent_name]()
            try:
                trajectory = run_rollout(env=env, agent=agent, task=task, split=split, seed=seed,
                                         run_id=c.run_id, verifier=self.verifier, policy=c.policy,
                                         max_steps=c.max_steps, time_limit_s=c.time_limit_s,
                                         step_rewards=c.step_rewards, max_record_bytes=c.max_record_bytes())
            finally:
                if hasattr(agent, "close"):
                    agent.close()
            if trajectory.end_reason is EndReason.ENVIRONMENT_EXCEPTION:  # scored 0, not retried; but the
                env.close()  # environment raised where it must not, so the next rollout gets a fresh one
                self.env = None
            if trajectory.status is not RolloutStatus.ERROR:
                break
            env.close()  # an infrastructure error may have left the environment broken: start afresh
            self.env = None
        if attempt and trajectory.error:
            trajectory.error = f"after {attempt + 1} attempts: {trajectory.error}"
        trajectory.fingerprint = self.fingerprint()["digest"]
        trajectory.group_id = c.group_id(task.id, agent_name, seed)
        return trajectory

    def run_batch(self, task: TaskSpec, items: list[tuple[str, int]], store: TrajectoryStore | None, *,
                  collect: bool) -> list[Trajectory | RolloutOutcome]:
        """Run `items` ((agent, seed) pairs) of `task` in order, writing each into `store` (when given) as it
        ends. Returns the trajectories, or only their outcomes when they are stored and not collected
        (decoding every trajectory would cost whoever receives it about as much as storing it)."""
        out: list[Trajectory | RolloutOutcome] = []
        for agent, seed in items:
            trajectory = self.rollout(task, agent, seed)
            if store is not None:
                store.add(trajectory, task)
            out.append(trajectory if collect or store is None else RolloutOutcome.of(trajectory))
        return out

    def fingerprint(self) -> dict[str, Any]:
        """What this worker's rollouts run on (interpreter, packages, family source)."""
        return environment_fingerprint(self.family.name)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class RunTally:
    """What a run has finished, shared by every backend: the count, the progress reports, and (with
    `collect`) the returned items. Reports the starting count when made."""

    def __init__(self, finished: int, total: int, progress: ProgressCallback | None, collect: bool):
        self.finished, self.total, self.progress, self.collect = finished, total, progress, collect
        self.results: list = []
        if progress:
            progress(finished, total, None)

    def add_returned(self, task: TaskSpec, returned: list, store_here: TrajectoryStore | None) -> None:
        """Add a batch a worker returned; first write each item into `store_here`, when the worker could not."""
        for item in returned:
            if store_here is not None:
                store_here.add(item, task)
            self.add(item)

    def add(self, item: Trajectory | RolloutOutcome) -> None:
        if self.collect:
            self.results.append(item)
        self.finished += 1
        if self.progress:
            self.progress(self.finished, self.total, item)


@dataclass
class RunPlan:
    """What is left to do of a run after a resume: the work, and how much of the total is already stored."""

    work: list[WorkItem]
    total: int
    finished: int


def plan_run(config: RunConfig, store: TrajectoryStore, tasks: list[TaskSpec] | None = None) -> RunPlan:
    """Validate `config`, record the run, and list the rollouts not yet stored (with `retry_errors`, also those
    stored as infrastructure errors). Shared by every backend.

    The tasks are `tasks` when given (see `check_given_tasks`), else the task set followed by its paired held-out
    sample (`RunConfig.paired_heldout`).
    Raises SplitPolicyError, UnknownFamilyError, KnobError, TaskSetError, ValueError, and RunReuseError (the run id
    is taken by a run of another config, see `gymsmith.runner.reuse`) before anything runs.
    """
    check_split_policy(config)
    agent_factories(config, get_family(config.taskset.family))
    if tasks is None:
        tasks = build_taskset(config.taskset)
        heldout = config.heldout_taskset()
        if heldout is not None:
            tasks = tasks + build_taskset(heldout)
    else:
        check_given_tasks(config, tasks)
    check_reuse(config.run_id, store.run_config(config.run_id), config.model_dump(mode="json"))
    store.create_run(config.run_id, purpose=config.purpose, config=config.model_dump(mode="json"))
    store.record_fingerprint(environment_fingerprint(config.taskset.family))  # local workers share this code
    done = store.completed_keys(config.run_id, errors=not config.retry_errors)
    seeds = config.episode_seeds()
    work = [(t, a, s) for t in tasks for a in config.agents for s in seeds if (t.id, a, s) not in done]
    total = len(tasks) * len(config.agents) * len(seeds)
    return RunPlan(work=work, total=total, finished=total - len(work))


def task_chunks(work: list[WorkItem], size: int = CHUNK) -> list[tuple[TaskSpec, list[tuple[str, int]]]]:
    """Consecutive rollouts of the same task, at most `size` at a time, in the order of `work`.

    Handing a task's rollouts to one worker means its start state and its verifier's pristine state are
    built once, in one process, instead of once in every worker that happens to draw one of them."""
    if size < 1:
        raise ValueError(f"task_chunks: size must be >= 1, got {size}")
    chunks: list[tuple[TaskSpec, list[tuple[str, int]]]] = []
    for task, group in itertools.groupby(work, key=lambda item: item[0].id):
        items = list(group)
        for i in range(0, len(items), size):
            chunks.append((items[0][0], [(agent, seed) for _, agent, seed in items[i:i + size]]))
    return chunks
