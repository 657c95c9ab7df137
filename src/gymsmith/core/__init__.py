"""Core types shared by every layer: tasks, tools, actions, observations, rewards, trajectories."""

from gymsmith.core.errors import (
    GymsmithError,
    KnobError,
    SplitPolicyError,
    StoreError,
    TaskSetError,
    UnknownFamilyError,
    VerifierError,
)
from gymsmith.core.hashing import canonical_json, content_hash
from gymsmith.core.types import (
    NO_TOOL_CALL,
    Action,
    ActionErrorKind,
    ActionError,
    EndReason,
    ErrorKind,
    Observation,
    Reward,
    RewardComponent,
    RolloutStatus,
    Split,
    StartStateRef,
    Step,
    StepResult,
    TaskSpec,
    ToolSpec,
    Trajectory,
)

__all__ = [
    "NO_TOOL_CALL", "Action", "ActionError", "ActionErrorKind", "EndReason", "ErrorKind", "GymsmithError", "KnobError", "Observation", "Reward",
    "RewardComponent", "RolloutStatus", "Split", "SplitPolicyError", "StartStateRef", "Step",
    "StepResult", "StoreError", "TaskSetError", "TaskSpec", "ToolSpec", "Trajectory",
    "UnknownFamilyError", "VerifierError", "canonical_json", "content_hash",
]
