"""One rollout: reset, the agent-environment loop under step and time limits, verification.

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
   unseen: TRUNCATED, reward 0, end reason ENVIRONMENT_EXCEPTION, the traceback in `end_detail`.
4. A final state that cannot be graded (`FinalState.ungradable`, or checks raising UngradableState):
   reward 0 from the verifier, end reason UNGRADABLE_STATE; the status says whether the agent had submitted.
5. Otherwise SUBMITTED (COMPLETED), STEP_LIMIT or TIME_LIMIT (TRUNCATED), scored by the verifier.

With `step_rewards`, the verifier also values the start state and the state after every step
(`gymsmith.verifier.progress`): each step gets `progress` V(s_t) and `step_reward` V(s_t) - V(s_{t-1}), the
rollout `start_progress` V(s0). The last step's progress is the final verification's reward value, so the step
rewards sum to reward - V(s0). A per-step verification that fails is logged with its step (`progress_error`)
and never ends the rollout, and the time spent valuing states does not count against `time_limit_s`.

The rollout is written once, as a coroutine (`rollout_coroutine`) that reaches the agent and the environment
through `RolloutCalls`: `run_rollout` drives it with calls made in place (it never suspends), the async engine
(`runner.async_engine`) with calls that await the model and run blocking environment steps in threads.
"""

from __future__ import annotations

import tempfile
import time
import traceback
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

import gymsmith
from gymsmith.agents.base import Agent
from gymsmith.core.errors import ModelEndpointError, VerifierError, is_infrastructure
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import Action, EndReason, ErrorKind, Observation, Reward, RolloutStatus, Split, Step, TaskSpec, Trajectory
from gymsmith.envs.base import Environment, bounded_action, clip, preview, scrub
from gymsmith.verifier.progress import ProgressMeter, step_rewards as _step_rewards
from gymsmith.verifier.service import VerifierService

MAX_END_DETAIL_CHARS = 8_000  # an exception's message and traceback, as stored with the rollout
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


class InlineCalls:
    """Every call made in place, at once: a rollout driven with these never suspends (`run_rollout`)."""

    async def act(self, agent: Agent, observation: Observation) -> Any:
        return agent.act(observation)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)

    verify = call


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


def describe_exception(exc: BaseException, *, trace: bool = True) -> str:
    """`Type: message` and (with `trace`) the last frames of the traceback, bounded, as valid text."""
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose str() raises
        message = ""
    text = f"{type(exc).__name__}: {clip(message, 1000)}"
    if trace:
        text += "\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-6))
    return clip(scrub(text), MAX_END_DETAIL_CHARS)


class _Ended(Exception):
    """How the loop ended, when it was a failure (carried out of the loop to one place that builds the record)."""

    def __init__(self, reason: EndReason, detail: str):
        super().__init__(detail)
        self.reason, self.detail = reason, detail


def run_rollout(*, env: Environment, agent: Agent, task: TaskSpec, split: Split, seed: int, run_id: str,
                verifier: VerifierService, policy: str, max_steps: int, time_limit_s: float,
                step_rewards: bool = False) -> Trajectory:
    """Run `agent` on `task` and return the trajectory, classified by the rule in the module docstring.

    Never raises for agent behaviour. The reward is None exactly when the status is ERROR, and every
    trajectory has an `end_reason`. Stored actions are bounded (`envs.base.bounded_action`), and so are
    observations (by the environment). With `step_rewards`, every step carries its progress and step reward
    (module docstring); without, they are None and no state but the final one is verified.
    """
    return run_inline(rollout_coroutine(env=env, agent=agent, task=task, split=split, seed=seed, run_id=run_id,
                                        verifier=verifier, policy=policy, max_steps=max_steps,
                                        time_limit_s=time_limit_s, step_rewards=step_rewards, calls=InlineCalls()))


async def rollout_coroutine(*, env: Environment, agent: Agent, task: TaskSpec, split: Split, seed: int, run_id: str,
                            verifier: VerifierService, policy: str, max_steps: int, time_limit_s: float,
                            step_rewards: bool = False, calls: RolloutCalls) -> Trajectory:
    """`run_rollout`, reaching the agent, the environment and the verifier through `calls`. Cancelling it
    (a timeout, Ctrl-C) leaves nothing behind but the environment's state: the trajectory exists only once
    it returns."""
    started = time.time()
    base = dict(rollout_id=rollout_id(run_id, task.id, agent.name, seed), run_id=run_id, task_id=task.id,
                family=task.family, family_version=task.family_version, split=split, difficulty=task.difficulty,
                seed=seed, agent=agent.name, package_version=gymsmith.__version__)
    steps: list[Step] = []
    first = Observation(text="")
    meter = ProgressMeter(env, task, verifier, policy=policy) if step_rewards else None

    async def record(status: RolloutStatus, reason: EndReason, *, reward: Reward | None, detail: str | None = None,
                     error: str | None = None, error_kind: ErrorKind | None = None, final_hash: str | None = None,
                     final_diff: str | None = None) -> Trajectory:
        if meter is not None:
            await calls.verify(_settle, meter, steps, reward if reason in _VERIFIED else None,
                             value_last=status is not RolloutStatus.ERROR)
        return Trajectory(**base, reset_observation=first, steps=steps, reward=reward, status=status, error=error,
                          error_kind=error_kind,
                          end_reason=reason, end_detail=detail, invalid_actions=getattr(env, "invalid_actions", 0),
                          final_state_hash=final_hash, final_diff=final_diff, started_at=started, finished_at=time.time(),
                          start_progress=meter.start_value if meter is not None else None)

    async def infrastructure(exc: BaseException, kind: ErrorKind) -> Trajectory:
        prefix = "verifier error: " if isinstance(exc, VerifierError) else f"{_WHERE[kind]}: "
        return await record(RolloutStatus.ERROR, EndReason.INFRASTRUCTURE, reward=None, error_kind=error_kind(exc, kind),
                      error=prefix + describe_exception(exc, trace=not isinstance(exc, VerifierError)))

    try:
        first = await calls.call(env.reset, task, seed=seed)
    except Exception as exc:  # nothing of the agent's yet: the environment could not start
        return await infrastructure(exc, ErrorKind.ENVIRONMENT_RESET)
    if meter is not None:
        await calls.verify(meter.start)
    try:
        done, reason = await _loop(env, agent, task, first, seed, steps, started, max_steps, time_limit_s, meter, calls)
    except _Ended as ended:
        return await _failed(env, ended, record, policy, calls)
    except Exception as exc:  # only infrastructure failures leave _loop as exceptions
        return await infrastructure(exc, ErrorKind.ENVIRONMENT)
    status = RolloutStatus.COMPLETED if done else RolloutStatus.TRUNCATED
    try:  # one call: the snapshot's directory is made and removed where the verification waits, not on a loop
        final, reward = await calls.verify(_verify_final, env, verifier, task, policy)
    except _Ended as ended:
        return await _failed(env, ended, record, policy, calls, status=status)
    except Exception as exc:
        return await infrastructure(exc, ErrorKind.FINAL_STATE)
    if reward.ungradable is not None:
        reason = EndReason.UNGRADABLE_STATE
    return await record(status, reason, reward=reward, detail=clip(reward.ungradable, MAX_END_DETAIL_CHARS) if reward.ungradable else None,
                  final_hash=final.digest, final_diff=final.diff)


async def _loop(env: Environment, agent: Agent, task: TaskSpec, first: Observation, seed: int, steps: list[Step],
                started: float, max_steps: int, time_limit_s: float, meter: ProgressMeter | None,
                calls: RolloutCalls) -> tuple[bool, EndReason]:
    """The agent-environment loop; returns (submitted, end reason), or raises _Ended for a failure, or an
    infrastructure exception. With a `meter`, each step's state is valued, except a last step's (submit or the
    step limit), whose value is the final verification's."""
    try:
        agent.reset(task, first, seed=seed)
    except Exception as exc:
        _agent_failed(exc, "reset")
    observation = first
    while True:
        if len(steps) >= max_steps:
            return False, EndReason.STEP_LIMIT
        if time.time() - started - (meter.seconds if meter is not None else 0.0) >= time_limit_s:
            return False, EndReason.TIME_LIMIT
        try:
            action = await calls.act(agent, observation)
        except Exception as exc:
            _agent_failed(exc, "act")
        if not isinstance(action, Action):
            raise _Ended(EndReason.AGENT_FAILURE, f"the agent's act returned {preview(action)}, not an Action")
        t0 = time.perf_counter()
        try:
            result = await calls.call(env.step, action)
        except Exception as exc:
            if is_infrastructure(exc):
                raise
            raise _Ended(EndReason.ENVIRONMENT_EXCEPTION,
                         f"step {len(steps)} ({preview(action.tool)}) raised: {describe_exception(exc)}") from None
        steps.append(Step(index=len(steps), action=bounded_action(action), observation=result.observation,
                          duration_ms=round((time.perf_counter() - t0) * 1000, 3),
                          agent_info=getattr(agent, "step_info", None)))
        if meter is not None and not result.done and len(steps) < max_steps:
            steps[-1].progress, steps[-1].progress_error = await calls.verify(meter.value)
        observation = result.observation
        if result.done:
            return True, EndReason.SUBMITTED


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


def _verify_final(env: Environment, verifier: VerifierService, task: TaskSpec, policy: str):
    """(the final state, its reward). Raises _Ended when `final_state` raised (not an infrastructure failure)."""
    with tempfile.TemporaryDirectory(prefix="gymsmith-final-") as tmp:
        try:
            final = env.final_state(Path(tmp))
        except Exception as exc:
            if is_infrastructure(exc):
                raise
            raise _Ended(EndReason.ENVIRONMENT_EXCEPTION, f"final_state raised: {describe_exception(exc)}") from None
        return final, verifier.verify(task, final, policy=policy)


def _agent_failed(exc: Exception, where: str) -> None:
    if is_infrastructure(exc):  # e.g. the model endpoint is down: not the policy's failure
        raise exc
    raise _Ended(EndReason.AGENT_FAILURE, f"the agent's {where} raised: {describe_exception(exc)}") from None


async def _failed(env: Environment, ended: _Ended, record, policy: str, calls: RolloutCalls, *,
                  status: RolloutStatus = RolloutStatus.TRUNCATED) -> Trajectory:
    """The record of a rollout that ended in the agent's failure or an environment exception: reward 0."""
    try:
        final_hash = await calls.call(env.state_hash)
    except Exception:  # noqa: BLE001 - the state of a failed rollout is for the record only
        final_hash = None
    reward = Reward.rejected(policy=policy, reason=f"{ended.reason.value}: {clip(ended.detail, 300)}")
    return await record(status, ended.reason, reward=reward, detail=ended.detail, final_hash=final_hash)


# the end reasons whose reward is the final verification's verdict on the state after the last step
_VERIFIED = frozenset({EndReason.SUBMITTED, EndReason.STEP_LIMIT, EndReason.TIME_LIMIT, EndReason.UNGRADABLE_STATE})


def _settle(meter: ProgressMeter, steps: list[Step], final: Reward | None, *, value_last: bool) -> None:
    """Give the last step the final verification's value (the authority on that state) or, without one (the
    rollout ended in the agent's failure or an environment exception), value it now if it was not and
    `value_last` (not after an infrastructure error); then every step's reward.

    A rollout ended by the agent's failure or an environment exception is scored 0 whatever its progress: its
    step rewards sum to V(last state) - V(s0), and the reward differs from that by the failure's penalty."""
    if steps:
        last = steps[-1]
        if final is not None:
            last.progress = 0.0 if final.ungradable is not None else float(final.value)
            last.progress_error = None
        elif value_last and last.progress is None and last.progress_error is None:
            last.progress, last.progress_error = meter.value()
        if meter.start_error is not None:
            steps[0].progress_error = f"start state: {meter.start_error}" + (
                f"; {steps[0].progress_error}" if steps[0].progress_error else "")
    for step, reward in zip(steps, _step_rewards(meter.start_value, [s.progress for s in steps])):
        step.step_reward = reward
