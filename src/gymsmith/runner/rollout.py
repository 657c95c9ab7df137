"""One rollout: an `Episode` (`runner.episode`: reset, steps under the limits, one final verification) driven by an
agent, recorded as a Trajectory.

Who failed decides how a rollout ends (docs/episodes.md); the rule, in order:

1. An infrastructure failure (`gymsmith.core.errors.is_infrastructure`: the sandbox cannot run, the browser
   died, the verifier or the model endpoint is down, out of memory), anything raised by `env.reset` (before the
   agent acted) and anything raised by the verifier service: status ERROR, no reward, end reason
   INFRASTRUCTURE, the message in `error`. Only these are retried by the runners.
2. The agent (the policy side) raising in `reset` or `act`, or returning something that is not an Action:
   TRUNCATED, reward 0, end reason AGENT_FAILURE, the exception in `end_detail`.
3. The environment raising anything else out of `step` or `final_state` after the agent acted:
   `ToolEnvironment` never does for agent input (a tool's exception is an error observation), so this is a
   bug of the environment that the agent's input met. It must not let a policy escape its score, nor pass
   unseen: TRUNCATED, reward 0, end reason ENVIRONMENT_EXCEPTION, the traceback in `end_detail` (the action is
   the rollout's last step).
4. A final state that cannot be graded (`FinalState.ungradable`, or checks raising UngradableState):
   reward 0 from the verifier, end reason UNGRADABLE_STATE; the status says whether the agent had submitted.
5. Otherwise SUBMITTED (COMPLETED), STEP_LIMIT or TIME_LIMIT (TRUNCATED), scored by the verifier.

With `step_rewards`, the verifier also values the start state and the state after every step
(`gymsmith.verifier.progress`): each step gets `progress` V(s_t) and `step_reward` V(s_t) - V(s_{t-1}), the
rollout `start_progress` V(s0). The last step's progress is the rollout's reward value, whatever ended it, so the
step rewards sum to reward - V(s0) (a failure's 0 included). A per-step verification that fails is logged with its
step (`progress_error`) and never ends the rollout, and the time spent valuing states does not count against
`time_limit_s`.

The rollout is written once, as a coroutine (`rollout_coroutine`) that reaches the agent and the environment
through `RolloutCalls`: `run_rollout` drives it with calls made in place (it never suspends), the async engine
(`runner.async_engine`) with calls that await the model and run blocking environment steps in threads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar

import gymsmith
from gymsmith.agents.base import Agent
from gymsmith.core.errors import ModelEndpointError, VerifierError, is_infrastructure
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import Action, EndReason, ErrorKind, Observation, Reward, RolloutStatus, Split, TaskSpec, Trajectory
from gymsmith.envs.base import Environment, preview
from gymsmith.runner.episode import DEFAULT_MAX_RECORD_BYTES, MAX_END_DETAIL_CHARS, Episode, describe_exception
from gymsmith.verifier.service import VerifierService

__all__ = ["MAX_END_DETAIL_CHARS", "RolloutCalls", "InlineCalls", "describe_exception", "error_kind", "rollout_coroutine",
           "rollout_id", "run_inline", "run_rollout"]

T = TypeVar("T")


class RolloutCalls(Protocol):
    """How a rollout reaches what it waits on: the agent's next action, and every environment and verifier call."""

    async def act(self, agent: Agent, observation: Observation) -> Any:
        """The agent's answer to `observation` (what it returned, or the exception it raised)."""
        ...

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`: an environment call (its result, or the exception it raised)."""
        ...

    async def verify(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`: a call that waits on the verifier (and may read the environment)."""
        ...

    def speculate(self, episode: Episode) -> None:
        """Between steps, before the agent's next action: verify the episode's state elsewhere now, if worth it
        (`Episode.speculate`), so that `finish` need not when the episode ends in it. Returns at once."""
        ...


class InlineCalls:
    """Every call made in place, at once: a rollout driven with these never suspends (`run_rollout`)."""

    async def act(self, agent: Agent, observation: Observation) -> Any:
        return agent.act(observation)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)

    verify = call

    def speculate(self, episode: Episode) -> None:
        """Nothing: an inline rollout has no idle time to verify in."""


def run_inline(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never suspends (one awaiting `InlineCalls` only), without an event loop.

    Raises RuntimeError if it does suspend (something in it awaited real I/O)."""
    try:
        coroutine.send(None)
    except StopIteration as stop:
        return stop.value
    coroutine.close()
    raise RuntimeError("a rollout driven inline suspended: it awaited something other than InlineCalls")


def rollout_id(run_id: str, task_id: str, agent: str, seed: int) -> str:
    """Deterministic, so a resumed run recognises a rollout it has already stored."""
    return content_hash([run_id, task_id, agent, seed], length=24)


def run_rollout(*, env: Environment, agent: Agent, task: TaskSpec, split: Split, seed: int, run_id: str,
                verifier: VerifierService, policy: str, max_steps: int, time_limit_s: float,
                step_rewards: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES) -> Trajectory:
    """Run `agent` on `task` and return the trajectory, classified by the rule in the module docstring.

    Never raises for agent behaviour. The reward is None exactly when the status is ERROR, and every
    trajectory has an `end_reason`. Stored actions are bounded (`envs.base.bounded_action`), and so are
    observations (by the environment). With `step_rewards`, every step carries its progress and step reward
    (module docstring); without, they are None and no state but the final one is verified.
    """
    return run_inline(rollout_coroutine(env=env, agent=agent, task=task, split=split, seed=seed, run_id=run_id,
                                        verifier=verifier, policy=policy, max_steps=max_steps,
                                        time_limit_s=time_limit_s, step_rewards=step_rewards,
                                        max_record_bytes=max_record_bytes, calls=InlineCalls()))


async def rollout_coroutine(*, env: Environment, agent: Agent, task: TaskSpec, split: Split, seed: int, run_id: str,
                            verifier: VerifierService, policy: str, max_steps: int, time_limit_s: float,
                            step_rewards: bool = False, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
                            calls: RolloutCalls) -> Trajectory:
    """`run_rollout`, reaching the agent, the environment and the verifier through `calls`. Cancelling it
    (a timeout, Ctrl-C) leaves nothing behind but the environment's state: the trajectory exists only once
    it returns."""
    base: dict[str, Any] = dict(rollout_id=rollout_id(run_id, task.id, agent.name, seed), run_id=run_id, task_id=task.id,
                family=task.family, family_version=task.family_version, split=split, difficulty=task.difficulty,
                seed=seed, agent=agent.name, package_version=gymsmith.__version__)
    episode = Episode(env=env, task=task, verifier=verifier, policy=policy, max_steps=max_steps,
                      time_limit_s=time_limit_s, step_rewards=step_rewards, max_record_bytes=max_record_bytes)

    def record(status: RolloutStatus, reason: EndReason, *, reward: Reward | None, detail: str | None = None,
               error: str | None = None, error_kind: ErrorKind | None = None, final_hash: str | None = None,
               final_diff: str | None = None) -> Trajectory:
        meter = episode.meter
        return Trajectory(**base, reset_observation=episode.first, steps=episode.steps, reward=reward, status=status,
                          error=error, error_kind=error_kind, end_reason=reason, end_detail=detail,
                          invalid_actions=getattr(env, "invalid_actions", 0), final_state_hash=final_hash,
                          final_diff=final_diff, started_at=episode.started, finished_at=time.time(),
                          start_progress=meter.start_value if meter is not None else None)

    def infrastructure(exc: BaseException, kind: ErrorKind) -> Trajectory:
        episode.abandon()
        prefix = "verifier error: " if isinstance(exc, VerifierError) else f"{_WHERE[kind]}: "
        return record(RolloutStatus.ERROR, EndReason.INFRASTRUCTURE, reward=None, error_kind=error_kind(exc, kind),
                      error=prefix + describe_exception(exc, trace=not isinstance(exc, VerifierError)))

    try:
        await calls.call(episode.reset, seed)
    except Exception as exc:  # nothing of the agent's yet: the environment could not start
        return infrastructure(exc, ErrorKind.ENVIRONMENT_RESET)
    if step_rewards:
        await calls.verify(episode.value_start)
    try:
        await _loop(episode, agent, seed, calls)
    except Exception as exc:  # only infrastructure failures leave _loop as exceptions
        return infrastructure(exc, ErrorKind.ENVIRONMENT)
    try:  # one call: the snapshot's directory is made and removed where the verification waits, not on a loop
        outcome = await calls.verify(episode.finish)
    except Exception as exc:
        return infrastructure(exc, ErrorKind.FINAL_STATE)
    return record(outcome.status, outcome.reason, reward=outcome.reward, detail=outcome.detail,
                  final_hash=outcome.final_hash, final_diff=outcome.final_diff)


async def _loop(episode: Episode, agent: Agent, seed: int, calls: RolloutCalls) -> None:
    """The agent-environment loop, until the episode is over (the agent's failure ends it too). Raises only
    infrastructure failures. With step rewards, each step's state is valued but the last one's (its value is the
    final verification's)."""
    try:
        agent.reset(episode.task, episode.first, seed=seed)
    except Exception as exc:
        return _agent_failed(episode, exc, "reset")
    observation = episode.first
    while episode.limit() is None:
        try:
            action = await calls.act(agent, observation)
        except Exception as exc:
            return _agent_failed(episode, exc, "act")
        if not isinstance(action, Action):
            return episode.fail(EndReason.AGENT_FAILURE, f"the agent's act returned {preview(action)}, not an Action")
        result = await calls.call(episode.step, action, agent_info=getattr(agent, "step_info", None))
        if episode.over:
            return
        if episode.meter is not None:
            await calls.verify(episode.value_step)
        calls.speculate(episode)
        observation = result.observation


# the prefix of an infrastructure error's message, by where the rollout was when it failed
_WHERE = {ErrorKind.ENVIRONMENT_RESET: "environment reset", ErrorKind.ENVIRONMENT: "infrastructure",
          ErrorKind.FINAL_STATE: "final state"}


def error_kind(exc: BaseException, where: ErrorKind) -> ErrorKind:
    """The part that failed: named by the exception when it can tell (the verifier, the model endpoint, memory),
    else by where the rollout was (`where`). An infrastructure failure raised through the agent's `act` is the
    model endpoint's only when its class says so."""
    if isinstance(exc, VerifierError):
        return ErrorKind.VERIFIER
    if isinstance(exc, MemoryError):
        return ErrorKind.OUT_OF_MEMORY
    if isinstance(exc, ModelEndpointError):
        return ErrorKind.MODEL_ENDPOINT
    return where


def _agent_failed(episode: Episode, exc: Exception, where: str) -> None:
    if is_infrastructure(exc):  # e.g. the model endpoint is down: not the policy's failure
        raise exc
    episode.fail(EndReason.AGENT_FAILURE, f"the agent's {where} raised: {describe_exception(exc)}")


