"""One episode: reset, steps under the limits, one final verification. Every interface drives this object.

The runner (`runner.rollout`), Gymnasium (`gymsmith.gym`), MCP (`gymsmith.mcp_server`), the HTTP server
(`gymsmith.server`) and the trainer hooks (`gymsmith.trainers`) are thin layers over an `Episode`, so an episode
is limited, ended, verified and scored the same way whichever of them a caller uses (docs/episodes.md):

- it ends at the submit, at `max_steps` steps, at `time_limit_s` (time spent valuing states for step rewards does
  not count, up to `valuation_limit_s` of it: past that it ends at its time limit, the valuations being the states'), when its record passes `max_record_bytes` (reward 0: what the policy's steps made the caller hold, an
  estimate by `record_bytes`, is bounded whatever the policy does), when the environment raises on the agent's input (reward 0: an environment bug the input met must
  not let a policy escape its score) or when the caller reports the agent's failure (`fail`, reward 0);
- after the end nothing is accepted: a step is refused without reaching the environment;
- the final state is verified exactly once, whatever ended the episode (`finish`; or its verdict was found while
  the agent waited, for the same bytes: `speculate`), after the environment settled
  (`Environment.settle`, when it has one: nothing the agent started may change the state after the snapshot); a
  state that cannot be graded scores 0 (UNGRADABLE_STATE);
- with step rewards, V(s0) and the state after each step are valued (`verifier.progress`), each step's reward is
  `gamma` V(s_t) - V(s_t-1) (`gamma`: the trainer's discount, so that progress undone later is taken back under it
  too), and the last step's value is the episode's reward value, whatever ended it, so the step rewards always
  sum (discounted by `gamma`) to gamma^T reward - V(s0): a
  failure takes back the progress made before it, as the reward does (an action the environment raised on is
  recorded as a step: the one that carries the failure).

Infrastructure failures (`core.errors.is_infrastructure`: the sandbox, browser, verifier or model endpoint cannot
run) propagate from every method; the caller records an error without reward and closes the environment.

Each method does one piece of blocking work (an environment call or a verification), so an async driver can run
each where it belongs (`runner.async_engine`): `reset`, `value_start`, `step`, `value_step`, `finish`. `play` does
`step` and, when due, `value_step` and `finish`, for callers that run everything in place.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
import traceback
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

from gymsmith.core.errors import is_infrastructure
from gymsmith.core.types import (
    Action,
    ActionErrorKind,
    EndReason,
    Observation,
    Reward,
    RolloutStatus,
    Step,
    StepResult,
    TaskSpec,
)
from gymsmith.envs.base import (
    Environment,
    StateImages,
    bounded_action,
    clip,
    error_observation,
    observation_bytes,
    preview,
    scrub,
)
from gymsmith.verifier.progress import ProgressMeter, StepValue, step_rewards, value_of
from gymsmith.verifier.service import VerifierService

DEFAULT_MAX_STEPS = 300  # every interface's default limits (`gymsmith run`'s RunConfig, serve, mcp)
DEFAULT_TIME_LIMIT_S = 120.0
# the time valuing states for step rewards may take (left out of `time_limit_s`): the state's cost, so the agent's;
# past it the episode ends at its time limit, scored. Unbounded, a policy writing a slow-to-verify state at every step
# ran the async engine's deadline out first, an infrastructure error (a hundred-and-thirtieth attacker, 1 of 2)
VALUATION_LIMIT_S = DEFAULT_TIME_LIMIT_S
MAX_END_DETAIL_CHARS = 8_000  # an exception's message and traceback, as stored with the rollout
DEFAULT_MAX_RECORD_BYTES = 16 << 20  # what one episode's record may hold (`record_bytes`): the async engine's in-flight
# default is sized so that every rollout in flight can reach it (runner.async_engine.default_max_in_flight)
# Python's memory per unit a step's record holds, measured on a model agent's ops rollouts (tracemalloc, the trajectory
# and the agent alive: an observation's data held as objects about three times its JSON; token ids above 255 and
# logprobs are objects of their own in lists; a step of tiny observations held about 10 kB: its models, dicts and the
# model turn's)
DATA_COPIES, BYTES_PER_TOKEN, BYTES_PER_MESSAGE, BYTES_PER_STEP = 3, 40, 8, 12_000
_FAILURES = frozenset({EndReason.AGENT_FAILURE, EndReason.ENVIRONMENT_EXCEPTION})


_IMAGES: dict[type, bool] = {}


def _has_images(env: Environment) -> TypeGuard[StateImages]:
    """isinstance(env, StateImages), by the environment's class once (a protocol check costs ~25 us: each step)."""
    kind = type(env)
    if kind not in _IMAGES:
        _IMAGES[kind] = isinstance(env, StateImages)
    return _IMAGES[kind]


def record_bytes(step: Step) -> int:
    """An estimate of the memory `step`'s record holds wherever an episode is driven, as `sys.getsizeof` sizes texts
    (a character beyond the Basic Multilingual Plane counts the 4 bytes Python stores it in): the observation's text
    (held by the step and the agent's conversation) and its JSON (the conversation's encoded copy, where a control
    character takes six), its data (as objects, DATA_COPIES times its JSON) and error; the action's arguments as
    stored; a model turn's reply whole (its text and every tool call's arguments, whatever the step kept of them,
    and its JSON), token ids, logprobs and the list of the messages it sent; and what any step holds besides."""
    observation = step.observation
    size = observation_bytes(observation, data_copies=DATA_COPIES) + sys.getsizeof(observation.text) + \
        sys.getsizeof(_json_text(observation.text)) + sys.getsizeof(step.action.arguments_text())
    tokens = messages = 0
    turn = (step.agent_info or {}).get("turn")
    if isinstance(turn, dict):
        tokens = sum(len(v) for v in (turn.get("prompt_ids"), turn.get("completion_ids"), turn.get("logprobs"))
                     if isinstance(v, list))
        messages = len(turn["messages"]) if isinstance(turn.get("messages"), list) else 0
        size += _reply_bytes(turn.get("reply"))
    return BYTES_PER_STEP + size + tokens * BYTES_PER_TOKEN + messages * BYTES_PER_MESSAGE


def _reply_bytes(reply: Any) -> int:
    """A model reply's texts (its content, each tool call's name and arguments) and its JSON, as held."""
    if not isinstance(reply, dict):
        return 0
    texts = [reply.get("content")]
    for call in reply.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            texts += [function.get("name"), function.get("arguments")]
    raw = sum(sys.getsizeof(t) for t in texts if isinstance(t, str))
    try:
        return raw + sys.getsizeof(_json_text(reply))
    except (TypeError, ValueError, RecursionError):
        return 2 * raw


_json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode  # as the model agent encodes


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


@dataclass(frozen=True)
class Verdict:
    """A verification's result for a state: the reward, the snapshot's diff (`FinalState.diff`) and the state's
    content hash when the verifier computed it (`VerifierService.verify_with_digest`)."""

    reward: Reward
    diff: str | None
    digest: str | None = None


@dataclass(frozen=True)
class Outcome:
    """How an episode ended and what it earned: `status` COMPLETED (submitted) or TRUNCATED, `reason`, the
    verifier's `reward` (a rejection of 0 for a failure), `detail` (the failure or why the state is ungradable),
    and the final state's digest and diff when it was snapshot."""

    status: RolloutStatus
    reason: EndReason
    reward: Reward
    detail: str | None = None
    final_hash: str | None = None
    final_diff: str | None = None


@dataclass
class Episode:
    """One episode of `task` in `env`, verified by `verifier` under `policy` (module docstring for the rules).

    Call `reset(seed)` first (and `value_start()` with step rewards), then `step(action)` (or `play`) until
    `over`, then `finish()`; `limit()` says whether a limit ended it before the next action. `steps` holds the
    record of every step the environment took.
    """

    env: Environment
    task: TaskSpec
    verifier: VerifierService
    policy: str
    max_steps: int
    time_limit_s: float = math.inf
    step_rewards: bool = False
    gamma: float = 1.0  # with step rewards: the trainer's discount (`verifier.progress.step_rewards`)
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES  # the record's bound (`record_bytes`): past it, reward 0
    valuation_limit_s: float = VALUATION_LIMIT_S  # with step rewards: the valuations' time, the agent's (above)
    record: int = 0  # the record's bytes so far (`record_bytes` of each step)
    steps: list[Step] = field(default_factory=list)
    first: Observation = field(default_factory=lambda: Observation(text=""))
    reason: EndReason | None = None  # set when the episode is over
    detail: str | None = None
    started: float = 0.0
    _meter: ProgressMeter | None = None
    _outcome: Outcome | None = None
    _speculated: tuple[bytes, Future[Verdict]] | None = None  # an image of the state and its verification

    @property
    def over(self) -> bool:
        return self.reason is not None

    @property
    def meter(self) -> ProgressMeter | None:
        return self._meter

    @property
    def outcome(self) -> Outcome | None:
        """The outcome, once `finish` gave it."""
        return self._outcome

    # -- the lifecycle ---------------------------------------------------------------------------
    def reset(self, seed: int) -> Observation:
        """Restore the task's start state for episode `seed`; return the first observation. Raises whatever
        `env.reset` raises (the agent has not acted: any failure here is the environment's)."""
        self.started = time.time()
        self.first = self.env.reset(self.task, seed=seed)
        if self.step_rewards:
            self._meter = ProgressMeter(self.env, self.task, self.verifier, policy=self.policy, gamma=self.gamma)
        return self.first

    def value_start(self) -> StepValue | None:
        """V(s0), with step rewards (None without). Never raises an Exception (a failure is in the value)."""
        return self._meter.start() if self._meter is not None else None

    def limit(self) -> EndReason | None:
        """The limit reached before the next action (STEP_LIMIT or TIME_LIMIT), which then ends the episode;
        None while the episode may go on or after it is over."""
        if self.over:
            return None
        if len(self.steps) >= self.max_steps:
            self._end(EndReason.STEP_LIMIT)
        elif time.time() - self.started - (self._meter.seconds if self._meter is not None else 0.0) >= self.time_limit_s \
                or (self._meter is not None and self._meter.seconds >= self.valuation_limit_s):
            self._end(EndReason.TIME_LIMIT)
        return self.reason

    def step(self, action: Action, *, agent_info: dict[str, Any] | None = None) -> StepResult:
        """Take `action` in the environment and record the step; `done` is True once the episode is over (the
        submit, the step limit, or the environment raising on this action, which ends it with reward 0 and an
        error observation). After the end, or past a limit, the action is refused (an `episode_over` error
        observation) without reaching the environment. Raises only infrastructure failures."""
        if self.limit() is not None or self.over:
            return StepResult(observation=error_observation(ActionErrorKind.EPISODE_OVER, "the episode is over "
                              f"({self.reason.value if self.reason else 'ended'}); no further actions are accepted"),
                              done=True, truncated=self.reason is not EndReason.SUBMITTED)
        if not isinstance(action, Action):
            raise TypeError(f"an episode's step takes an Action, not {preview(action)}")
        t0 = time.perf_counter()
        try:
            result = self.env.step(action)
        except Exception as exc:
            if is_infrastructure(exc):
                raise
            self.fail(EndReason.ENVIRONMENT_EXCEPTION,
                      f"step {len(self.steps)} ({preview(action.tool)}) raised: {describe_exception(exc)}")
            message = f"the environment failed on this action ({type(exc).__name__}); the episode is over"
            result = StepResult(observation=error_observation(ActionErrorKind.TOOL_ERROR, message), done=True,
                                info={"environment_exception": self.detail})
        # the action that met an environment failure is a step too: the episode's value (0) is that step's
        step = Step(index=len(self.steps), action=bounded_action(action), observation=result.observation,
                    duration_ms=round((time.perf_counter() - t0) * 1000, 3), agent_info=agent_info)
        self.steps.append(step)
        self.record += record_bytes(step)
        if self.over:
            pass  # the environment failed on this action
        elif self.record > self.max_record_bytes:  # before the submit: the record is held whatever the step was
            self.fail(EndReason.AGENT_FAILURE, f"the episode's record reached {self.record:,} bytes at step {step.index}, "
                      f"past its bound of {self.max_record_bytes:,} (max_record_bytes): the policy's actions and the "
                      "observations they asked for are more than a rollout may hold")
        elif result.done:
            self._end(EndReason.SUBMITTED)
        elif len(self.steps) >= self.max_steps:
            self._end(EndReason.STEP_LIMIT)
        return StepResult(observation=result.observation, done=self.over,
                          truncated=self.over and self.reason is not EndReason.SUBMITTED, info=result.info)

    def value_step(self) -> StepValue | None:
        """With step rewards, value the state the last step left, unless the episode is over (its last step's
        value is then the final verification's) or it was valued: the step's `progress`, `progress_error` and
        `step_reward` (its change from the last known value).
        None without step rewards or steps. Never raises an Exception."""
        if self._meter is None or not self.steps or self.over:
            return None
        last = self.steps[-1]
        if last.progress is not None or last.progress_error is not None:
            return None
        value = self._meter.step()
        last.progress, last.progress_error, last.step_reward = value.progress, value.error, value.step_reward
        return value

    def fail(self, reason: EndReason, detail: str) -> None:
        """End the episode with a failure (AGENT_FAILURE, ENVIRONMENT_EXCEPTION): reward 0. Raises ValueError for
        another reason. A no-op once the episode is over."""
        if reason not in _FAILURES:
            raise ValueError(f"reason {reason.value!r}: expected one of {sorted(r.value for r in _FAILURES)}")
        if not self.over:
            self._end(reason, clip(detail, MAX_END_DETAIL_CHARS))

    def finish(self, cut: EndReason = EndReason.STEP_LIMIT) -> Outcome:
        """End the episode (with `cut`, STEP_LIMIT or TIME_LIMIT, if it is not over yet: the caller stopped) and
        verify its final state, once: later calls return the same outcome. With step rewards, the last step's
        progress becomes the reward's value and every step gets its step reward. Raises infrastructure failures
        (the caller records an error: no reward)."""
        if self._outcome is not None:
            return self._outcome
        if not self.over:
            if cut not in (EndReason.STEP_LIMIT, EndReason.TIME_LIMIT):
                raise ValueError(f"cut {cut.value!r}: expected step_limit or time_limit")
            self._end(cut)
        assert self.reason is not None
        status = RolloutStatus.COMPLETED if self.reason is EndReason.SUBMITTED else RolloutStatus.TRUNCATED
        settle = getattr(self.env, "settle", None)
        if settle is not None:  # nothing the agent started may change the state after the snapshot (envs.base)
            settle()
        if self.reason not in _FAILURES:
            outcome = self._verified(status)
        else:
            outcome = self._failed(status)
        if self._meter is not None:
            self._settle(outcome.reward)
        self._outcome = outcome
        return outcome

    def play(self, action: Action, *, agent_info: dict[str, Any] | None = None) -> tuple[StepResult, Outcome | None]:
        """`step`, then `value_step` while the episode goes on or `finish` once it is over: (the step's result,
        the outcome when the episode ended). For callers that run every call in place."""
        result = self.step(action, agent_info=agent_info)
        if not self.over:
            self.value_step()
            return result, None
        return result, self.finish()

    def abandon(self) -> None:
        """After an infrastructure failure (no outcome, no reward): give each valued step its step reward from the
        values known, and leave the rest None."""
        if self._meter is not None:
            self._rewards()

    # -- speculation: the verdict of a state the episode may end in, found while the agent waits ----------
    def speculation_image(self) -> bytes | None:
        """The image of the current state (`envs.base.StateImages`), to verify while the agent waits on its model
        in case the episode ends in it; None when there is nothing to do: the episode is over, the environment
        has no images, step rewards value each state anyway, or this very image is being or was verified. Call it
        where the environment's calls run, between steps."""
        env = self.env
        if self.over or self._meter is not None or not _has_images(env):
            return None
        image = env.state_image()
        kept = self._speculated
        if kept is not None and kept[0] == image and not kept[1].cancelled():
            return None
        return image

    def speculate(self, image: bytes, verdict: Future[Verdict]) -> None:
        """Keep `verdict` (`verdict_of(image)`, running elsewhere) for `finish`, which uses it only if the final
        state's image is the same bytes and verifies the final state itself otherwise. An earlier kept verdict
        not yet started is cancelled."""
        if self._speculated is not None:
            self._speculated[1].cancel()
        self._speculated = (image, verdict)

    def verdict_of(self, image: bytes, verifier: VerifierService, scratch: Path | None = None) -> Verdict:
        """`verifier`'s reward for the state whose image is `image`, and the snapshot's diff. Blocking, and reads
        nothing of the live environment (any thread). `scratch`: a directory of the caller's own to write the
        snapshot in (its earlier one replaced; one caller at a time), instead of a new temporary one per call.
        Raises what `VerifierService.verify` raises."""
        env = self.env
        assert _has_images(env)
        if scratch is not None:
            final = env.image_snapshot(image, scratch)
            reward, digest = verifier.verify_with_digest(self.task, final, policy=self.policy)
            return Verdict(reward, final.diff, digest)
        with tempfile.TemporaryDirectory(prefix="gymsmith-speculative-") as tmp:
            return self.verdict_of(image, verifier, Path(tmp))

    def _kept_verdict(self) -> Verdict | None:
        """The speculative verdict, if the final state's image is the one it verified (the same bytes: the same
        file for the verifier, so the same reward); None otherwise, or if it was not started (verifying here is
        quicker than waiting in its queue), was cancelled or failed."""
        kept, self._speculated, env = self._speculated, None, self.env
        if kept is None or not _has_images(env):
            return None
        image, verdict = kept
        if env.state_image() != image or verdict.cancel():
            return None
        try:
            return verdict.result()
        except Exception:  # noqa: BLE001 - cancelled, or the verifier failed: the final state is verified as usual
            return None

    # -- inside ----------------------------------------------------------------------------------
    def _end(self, reason: EndReason, detail: str | None = None) -> None:
        self.reason, self.detail = reason, detail

    def _verified(self, status: RolloutStatus) -> Outcome:
        kept = self._kept_verdict()
        with tempfile.TemporaryDirectory(prefix="gymsmith-final-") as tmp:
            try:
                if kept is not None:  # the final state's image was verified while the agent waited
                    digest, diff, reward = kept.digest or self.env.state_hash(), kept.diff, kept.reward
                else:
                    final = self.env.final_state(Path(tmp))
                    digest, diff = final.digest, final.diff
            except Exception as exc:
                if is_infrastructure(exc):
                    raise
                self._end(EndReason.ENVIRONMENT_EXCEPTION, f"final_state raised: {describe_exception(exc)}")
                return self._failed(status)
            if kept is None:
                reward = self.verifier.verify(self.task, final, policy=self.policy)
        if reward.ungradable is not None:
            self._end(EndReason.UNGRADABLE_STATE, clip(reward.ungradable, MAX_END_DETAIL_CHARS))
        assert self.reason is not None
        return Outcome(status, self.reason, reward, self.detail, digest, diff)

    def _failed(self, status: RolloutStatus) -> Outcome:
        assert self.reason is not None
        try:
            final_hash = self.env.state_hash()
        except Exception:  # noqa: BLE001 - the state of a failed episode is for the record only
            final_hash = None
        reward = Reward.rejected(policy=self.policy, reason=f"{self.reason.value}: {clip(self.detail or '', 300)}")
        return Outcome(status, self.reason, reward, self.detail, final_hash)

    def _settle(self, reward: Reward) -> None:
        """The last step's value is the episode's (0 for a failure or an ungradable state); then each step's reward."""
        assert self._meter is not None
        if self.steps:
            self.steps[-1].progress, self.steps[-1].progress_error = value_of(reward), None
        self._rewards()

    def _rewards(self) -> None:
        assert self._meter is not None
        if self.steps and self._meter.start_error is not None:
            first = self.steps[0]
            first.progress_error = f"start state: {self._meter.start_error}" + (
                f"; {first.progress_error}" if first.progress_error else "")
        for step, change in zip(self.steps, step_rewards(self._meter.start_value, [s.progress for s in self.steps],
                                                         self.gamma)):
            step.step_reward = change
