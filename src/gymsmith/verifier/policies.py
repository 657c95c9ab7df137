"""Reward policies: how a verdict's components and gate become the scalar used for training.

Every family's components measure progress from the start state (doing nothing scores 0; see
docs/reward.md), so the shaped value is a potential Φ with Φ(start) = 0. The default policy,
`progress_gated`, keeps it strictly increasing in real progress and lets the gate decide acceptance:

    accepted:      ACCEPTED_FLOOR + (1 - ACCEPTED_FLOOR) * shaped      in [0.5, 1]
    not accepted:  PARTIAL_SCALE * shaped                               in [0, 0.45]
    a violation:   0 (under every policy)

so partial credit is always below any accepted solve, an accepted solve that wasted work (lower economy)
scores below the clean one, and no cap flattens partial progress (`shaped_gated`, the former default,
capped it at 0.5: fixing one bug of two paid what a comment paid).
"""

from __future__ import annotations

from collections.abc import Callable

from gymsmith.core.types import Reward
from gymsmith.verifier.protocol import CheckResult

Policy = Callable[[float, bool], float]
_POLICIES: dict[str, Policy] = {}
SHAPED_GATED_CAP = 0.5
ACCEPTED_FLOOR = 0.5
PARTIAL_SCALE = 0.45
DEFAULT_POLICY = "progress_gated"


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
    """The shaped value, capped at SHAPED_GATED_CAP until the gate passes. Kept to compare with earlier runs:
    the cap flattens partial credit (every state past half way scores the same)."""
    return shaped_value if accepted else min(shaped_value, SHAPED_GATED_CAP)


@reward_policy("progress_gated")
def progress_gated(shaped_value: float, accepted: bool) -> float:
    """The default. Accepted: ACCEPTED_FLOOR + (1 - ACCEPTED_FLOOR) * shaped; otherwise PARTIAL_SCALE * shaped.
    Strictly increasing in the shaped value on each side of the gate, and every accepted state above every
    rejected one (PARTIAL_SCALE < ACCEPTED_FLOOR)."""
    shaped_value = max(0.0, min(1.0, shaped_value))
    return ACCEPTED_FLOOR + (1 - ACCEPTED_FLOOR) * shaped_value if accepted else PARTIAL_SCALE * shaped_value


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
