"""Reward policies: how a verdict's components and gate become the scalar used for training."""

from __future__ import annotations

from collections.abc import Callable

from gymsmith.core.types import Reward
from gymsmith.verifier.protocol import CheckResult

Policy = Callable[[float, bool], float]
_POLICIES: dict[str, Policy] = {}
SHAPED_GATED_CAP = 0.5
DEFAULT_POLICY = "shaped_gated"


def reward_policy(name: str) -> Callable[[Policy], Policy]:
    """Register a policy `fn(shaped, accepted) -> value` under `name`."""
    def register(fn: Policy) -> Policy:
        _POLICIES[name] = fn
        return fn
    return register


@reward_policy("shaped")
def shaped(shaped_value: float, accepted: bool) -> float:
    """The weighted mean of the components; ignores the gate (for shaping experiments only)."""
    return shaped_value


@reward_policy("sparse")
def sparse(shaped_value: float, accepted: bool) -> float:
    """1 if the hidden checks accept, else 0."""
    return 1.0 if accepted else 0.0


@reward_policy("shaped_gated")
def shaped_gated(shaped_value: float, accepted: bool) -> float:
    """The shaped value, capped at SHAPED_GATED_CAP until the gate passes: partial credit cannot beat a solve."""
    return shaped_value if accepted else min(shaped_value, SHAPED_GATED_CAP)


def policy_names() -> list[str]:
    return sorted(_POLICIES)


def get_policy(name: str) -> Policy:
    """Raises ValueError naming the known policies when `name` is not one."""
    try:
        return _POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown reward policy {name!r}; expected one of {policy_names()}") from None


def apply_policy(result: CheckResult, policy: str) -> Reward:
    fn = get_policy(policy)
    reward = Reward(components=result.components, accepted=result.accepted,
                    gate_failures=[*result.gate_failures, *(f"violation: {v}" for v in result.violations)],
                    violations=result.violations, value=0.0, policy=policy, errors=result.errors)
    # a violation zeroes the reward under every policy: a hack never pays more than doing nothing
    reward.value = 0.0 if result.violations else round(fn(reward.shaped, reward.accepted), 6)
    return reward
