"""Per-step progress: V(s), the verifier's reward value for the state the environment is in now.

Potential-based shaping with the verifier as the potential (docs/trainers.md, "Per-step rewards"). V(s) is the
`Reward.value` the verifier service would give if the episode ended in state s: the environment's snapshot of s
(`Environment.final_state`, exactly as for a final state), the same verifier processes and hidden checks, the
same reward policy. The step reward of step t is V(s_t) - V(s_{t-1}), so the step rewards of an episode sum to
V(s_T) - V(s_0). Nothing the agent wrote is read here: the value is the verifier's verdict on the snapshot.

- A state the verifier cannot grade (`Reward.ungradable`, a rejection) is worth 0 at that step.
- A value that cannot be computed (the snapshot or the verification failed) is None with the reason, never an
  exception: the episode goes on, and the next known value's step reward carries the change since the last
  known one, so the sum is kept. The final verification, done by the caller, stays authoritative.
- A state is verified once: values are kept by the environment's state digest (`Environment.state_hash`, the
  digest the store records as `final_state_hash`), so a step that changed nothing costs a hash, not a verification.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gymsmith.core.types import Reward, TaskSpec
from gymsmith.envs.base import Environment, clip, scrub
from gymsmith.verifier.service import VerifierService

log = logging.getLogger(__name__)

MAX_PROGRESS_ERROR_CHARS = 1_000  # a failed per-step verification's reason, as stored with the step


@dataclass(frozen=True)
class StepValue:
    """The value of the state after one step: `progress` V(s_t), `step_reward` its change from the last known
    value (None without one), and `error` when V(s_t) could not be computed (progress None, and the step reward that
    of the last known value held: (gamma - 1) times it, None with gamma 1)."""

    progress: float | None
    step_reward: float | None
    error: str | None = None


def value_of(reward: Reward) -> float:
    """V(s) for the verifier's verdict on s: its value, 0 for a state it cannot grade."""
    return 0.0 if reward.ungradable is not None else float(reward.value)


def check_discount(gamma: float, name: str = "gamma") -> None:
    """Raise ValueError naming `name` unless `gamma` is a discount in (0, 1]."""
    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"{name} {gamma!r}: expected a discount in (0, 1]")


def required_discount(step_rewards: bool, gamma: float | None) -> float:
    """The discount a live interface shapes step rewards with (1.0 without step rewards). Raises ValueError when
    step rewards are asked for without `gamma`, or with one outside (0, 1]: shaping is undone only under the
    learner's own discount, and no default is right for every learner."""
    if gamma is None:
        if step_rewards:
            raise ValueError("step_rewards=True needs gamma: your learner's discount per step (1.0 if it does not "
                             "discount); rewards shaped for another discount pay part of the progress an agent "
                             "undoes (docs/trainers.md, 'Per-step rewards')")
        return 1.0
    check_discount(gamma)
    return gamma


def step_rewards(start: float | None, progress: Sequence[float | None], gamma: float = 1.0) -> list[float | None]:
    """Each step's reward: `gamma` times its progress minus the last known progress before it (`start`, V(s0), for
    the first): potential-based shaping for a trainer that discounts by `gamma` per step.

    None where no value is known before it. A step whose progress is None (its value could not be computed) is
    valued as the last known one: its reward is (gamma - 1) times that value, None with gamma 1 (nothing), so the
    discounted sum is gamma^T V(s_T) - V(s0) whatever failed in between (a sixtieth attacker: leaving the failed
    steps at nothing skipped their share of the discount, and progress undone while values failed kept about half
    its credit at 0.99). Credit for progress undone later is taken back, discount or not (with plain differences, a
    trainer discounting by 0.99 paid a rollout that made progress early and undid it at the end)."""
    check_discount(gamma)
    last = start
    out: list[float | None] = []
    for p in progress:
        if p is None:
            out.append(_held(last, gamma))
            continue
        out.append(None if last is None else gamma * p - last)
        last = p
    return out


def _held(last: float | None, gamma: float) -> float | None:
    """The reward of a step whose value is unknown, valued as the last known one: (gamma - 1) * last."""
    return None if last is None or gamma == 1.0 else (gamma - 1.0) * last


class ProgressMeter:
    """Values the states of one episode of `task` in `env`, through `verifier` under `policy`; each step's reward
    is `gamma` times its value minus the last known value (`step_rewards`: `gamma` is the trainer's discount).

    `start()` once after reset (V(s0)), then `step()` after each step; `settle(value)` gives the final
    verification's value for the state after the last step. Counters: `verifications` (calls to the verifier),
    `reused` (states valued before, by digest), `failures`, and `seconds` spent valuing (snapshots included).
    """

    def __init__(self, env: Environment, task: TaskSpec, verifier: VerifierService, *, policy: str, gamma: float = 1.0):
        check_discount(gamma)
        self.env, self.task, self.verifier, self.policy, self.gamma = env, task, verifier, policy, gamma
        self.start_value: float | None = None
        self.start_error: str | None = None
        self.last: float | None = None  # the last known value: the baseline of the next step reward
        self.verifications = self.reused = self.failures = 0
        self.seconds = 0.0
        self._known: dict[str, float] = {}

    def start(self) -> StepValue:
        """V(s0), the value of the state right after reset; the baseline of the first step reward."""
        self.start_value, self.start_error = self.value()
        self.last = self.start_value
        return StepValue(self.start_value, None, self.start_error)

    def step(self) -> StepValue:
        """The value of the current state and its change from the last known value."""
        progress, error = self.value()
        return self._advance(progress, error)

    def settle(self, value: float) -> StepValue:
        """The step value of the last step when its state's value is known from the final verification."""
        return self._advance(value, None)

    def _advance(self, progress: float | None, error: str | None) -> StepValue:
        if progress is None:  # valued as the last known value (`step_rewards`)
            return StepValue(None, _held(self.last, self.gamma), error)
        reward = None if self.last is None else self.gamma * progress - self.last  # as `step_rewards` gives it
        self.last = progress
        return StepValue(progress, reward, None)

    def value(self) -> tuple[float | None, str | None]:
        """(V(current state), None), or (None, why) when it could not be computed. Never raises an Exception."""
        t0 = time.perf_counter()
        try:
            digest = self.env.state_hash()
            if digest in self._known:
                self.reused += 1
                return self._known[digest], None
            with tempfile.TemporaryDirectory(prefix="gymsmith-progress-") as tmp:
                snapshot = self.env.final_state(Path(tmp))
                self.verifications += 1
                verdict = self.verifier.verify(self.task, snapshot, policy=self.policy)
        except Exception as exc:  # noqa: BLE001 - a failed per-step value is logged with the step, never fatal
            self.failures += 1
            log.warning("task %s: a per-step verification failed (the rollout goes on): %s", self.task.id,
                        _describe(exc).splitlines()[0][:300])
            return None, _describe(exc)
        finally:
            self.seconds += time.perf_counter() - t0
        value = self._known[digest] = value_of(verdict)
        return value, None


def _describe(exc: BaseException) -> str:
    try:
        message = str(exc)
    except Exception:  # noqa: BLE001 - an exception whose str() raises
        message = ""
    return clip(scrub(f"{type(exc).__name__}: {message}"), MAX_PROGRESS_ERROR_CHARS)
