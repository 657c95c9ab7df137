"""Pydantic models for everything that crosses a process, file or network boundary."""

from __future__ import annotations

import enum
import json
from functools import cached_property
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, computed_field, field_validator, model_validator

from gymsmith.core.hashing import content_hash


class Split(str, enum.Enum):
    """Which side of the train / held-out wall a task is on."""

    TRAIN = "train"
    HELDOUT = "heldout"


class ToolSpec(BaseModel):
    """One tool the agent may call, in OpenAI function-calling form."""

    model_config = ConfigDict(frozen=True)

    name: str = Field(description="Function name the agent calls.", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]{0,63}$")
    description: str = Field(description="What the tool does; this is the model's documentation.")
    parameters: dict[str, Any] = Field(description="JSON Schema (an object schema) of the arguments.")

    def to_openai(self) -> dict[str, Any]:
        """The `tools` entry expected by an OpenAI-compatible chat-completions endpoint."""
        return {"type": "function", "function": self.model_dump()}


class StartStateRef(BaseModel):
    """Where a task's start state comes from, and the digest that proves which one it is."""

    model_config = ConfigDict(frozen=True)

    kind: str = Field(description="How the state is built, e.g. 'generated' (rebuilt from the seed).")
    digest: str = Field(description="Content hash of the pristine start state.")


class TaskSpec(BaseModel):
    """A versioned task definition. Its `id` is a content hash of every other field.

    Nothing here is private: a TaskSpec is what the agent side may see. Solution witnesses and expected
    final states are rebuilt by the verifier from the same seed and never stored in the spec.
    """

    model_config = ConfigDict(frozen=True)

    family: str = Field(description="Name of the family that generated the task.")
    family_version: str = Field(description="Version of that family; a new version makes new ids.")
    seed: int = Field(description="Seed the generator was called with.")
    knobs: dict[str, Any] = Field(description="Every knob value used, defaults resolved; includes 'difficulty'.",
                                  json_schema_extra={"required": ["difficulty"],  # what the validator below checks
                                                     "properties": {"difficulty": {"type": "number", "minimum": 0,
                                                                                   "maximum": 1}}})
    goal: str = Field(description="The instruction the agent receives.")
    start_state: StartStateRef
    tools: tuple[ToolSpec, ...] = Field(description="Tools available in this task.")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Agent-visible facts (e.g. goal kind).")

    @field_validator("knobs")
    @classmethod
    def _difficulty_in_unit_range(cls, knobs: dict[str, Any]) -> dict[str, Any]:
        d = knobs.get("difficulty")
        try:
            ok = d is not None and 0.0 <= float(d) <= 1.0
        except (TypeError, ValueError, OverflowError):  # a list, an object, 10**400: a refusal, not a crash
            ok = False
        if not ok:
            raise ValueError(f"knobs['difficulty'] must be a number in [0, 1], got {repr(d)[:80]}")
        return knobs

    @model_validator(mode="before")
    @classmethod
    def _check_stated_id(cls, data: Any) -> Any:
        # A spec read from a file may carry its id; it must match the content or the file was edited.
        if isinstance(data, dict) and "id" in data:
            data = dict(data)
            stated = data.pop("id")
            spec = cls.model_validate(data)
            if spec.id != stated:
                raise ValueError(f"task id {stated!r} does not match its content (hash {spec.id!r}); "
                                 "the task was edited or made by another family version")
        return data

    @computed_field  # type: ignore[prop-decorator]
    @cached_property
    def id(self) -> str:
        body = self.model_dump(exclude={"id"}, mode="json")
        return f"{self.family}-{content_hash(body, length=20)}"

    @property
    def difficulty(self) -> float:
        return float(self.knobs["difficulty"])


NO_TOOL_CALL = "(no tool call)"  # Action.tool of a model reply without a tool call; `arguments` holds its text


class Action(BaseModel):
    """A tool call from the agent. `arguments` may be the raw JSON text a model produced.

    A model reply with no tool call is recorded as an Action whose tool is NO_TOOL_CALL.
    """

    tool: str = Field(description="Name of the tool to call.")
    arguments: dict[str, Any] | str = Field(default_factory=dict, description="Arguments object or its JSON text.")
    call_id: str | None = Field(default=None, description="The model's tool-call id, if any.")

    def arguments_text(self) -> str:
        """The arguments as text: a model's raw text verbatim, an object as JSON. Never raises: a value JSON
        cannot hold is written as its repr."""
        if isinstance(self.arguments, str):
            return self.arguments
        try:
            return json.dumps(self.arguments, sort_keys=True, ensure_ascii=False, default=repr)
        except (ValueError, TypeError, RecursionError) as exc:
            return f"[arguments not representable as JSON: {type(exc).__name__}]"


class ActionErrorKind(str, enum.Enum):
    """Why an action produced an error observation instead of an effect."""

    MALFORMED_JSON = "malformed_json"        # arguments are not a JSON object
    UNKNOWN_TOOL = "unknown_tool"            # no tool of that name in this task
    INVALID_ARGUMENTS = "invalid_arguments"  # arguments fail the tool's JSON schema
    NOT_FOUND = "not_found"                  # a referenced record does not exist
    RULE_VIOLATION = "rule_violation"        # the business rules refuse the action
    TRANSIENT = "transient"                  # simulated flaky backend; retrying may work
    RATE_LIMITED = "rate_limited"            # simulated rate limit; retrying later may work
    EPISODE_OVER = "episode_over"            # the task was already submitted
    NO_TOOL_CALL = "no_tool_call"            # a model replied with text only
    TOOL_ERROR = "tool_error"                # the tool failed unexpectedly on these arguments (an environment bug
                                             # the agent's input met; the exception is in StepResult.info)

    @property
    def is_invalid_action(self) -> bool:
        """True for errors that mean the agent sent a bad call (counted as invalid actions)."""
        return self in (ActionErrorKind.MALFORMED_JSON, ActionErrorKind.UNKNOWN_TOOL,
                        ActionErrorKind.INVALID_ARGUMENTS, ActionErrorKind.EPISODE_OVER,
                        ActionErrorKind.NO_TOOL_CALL)


class ActionError(BaseModel):
    kind: ActionErrorKind
    message: str = Field(description="What went wrong, written for the agent to read.")


class Observation(BaseModel):
    """What the agent sees after reset or a step."""

    text: str = Field(description="Text rendering for a language model.")
    data: Any = Field(default=None, description="The same result as JSON, for programmatic agents.")
    error: ActionError | None = Field(default=None, description="Set when the action had no effect.")
    # the memory of the data's JSON text, when `envs.base.bound_observation` measured it (`envs.base.observation_bytes`)
    _data_bytes: int | None = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        """Equal by what the agent sees (pydantic's own would compare the measured size too, which an observation
        read back from JSON lacks)."""
        if not isinstance(other, Observation):
            return NotImplemented
        return (self.text, self.data, self.error) == (other.text, other.data, other.error)

    __hash__ = None  # type: ignore[assignment]  # as pydantic's models: mutable, so unhashable


class StepResult(BaseModel):
    observation: Observation
    done: bool = Field(description="The episode ended (submitted).")
    truncated: bool = Field(default=False, description="The episode was cut by a step or time limit.")
    info: dict[str, Any] = Field(default_factory=dict)


class RewardComponent(BaseModel):
    value: float = Field(ge=0.0, le=1.0, description="Score of this component in [0, 1].")
    weight: float = Field(ge=0.0, description="Weight in the shaped reward.")
    detail: str = Field(default="", description="Why this score, for humans.")


class Reward(BaseModel):
    """The verifier's verdict: dense components, a sparse gate, and the scalar a policy made of them."""

    components: dict[str, RewardComponent]
    accepted: bool = Field(description="The hidden checks' gate: every hard requirement holds.")
    gate_failures: list[str] = Field(default_factory=list, description="Hard requirements that failed (violations "
                                     "included, prefixed 'violation: ').")
    violations: list[str] = Field(default_factory=list, description="Forbidden effects the checks found (collateral "
                                  "change, broken rule, forged results, another account's action); any one makes "
                                  "`value` 0 under every policy.")
    value: float = Field(description="The scalar for training, computed by `policy`.")
    policy: str = Field(description="Name of the reward policy that computed `value`.")
    errors: list[str] = Field(default_factory=list, description="Non-fatal problems met while checking.")
    ungradable: str | None = Field(default=None, description="Set when the final state the agent left could not be "
                                   "graded (the environment could not snapshot it, or the checks refused it): why. "
                                   "The reward is then a rejection with value 0.")

    @classmethod
    def rejected(cls, *, policy: str, reason: str, ungradable: str | None = None) -> "Reward":
        """A reward of 0 that accepts nothing, for a rollout whose end was the agent's failure (`reason`, a gate
        failure, says why; `ungradable` when it is a state that cannot be graded)."""
        return cls(components={}, accepted=False, gate_failures=[reason], value=0.0, policy=policy, ungradable=ungradable)

    @property
    def shaped(self) -> float:
        total = sum(c.weight for c in self.components.values())
        return sum(c.value * c.weight for c in self.components.values()) / total if total else 0.0


class AgentRole(str, enum.Enum):
    """What an agent is for, as data (an agent class's `role`; `agents.roles.role_of` reads it).

    Audits decide by role, not by name: an exploit must never be accepted nor score above the null agent; an
    oracle knows the answer by construction (privileged: left out of the hacking audit's ranking)."""

    ORACLE = "oracle"      # solves by construction from the task's private data (the oracle, its partial rungs)
    BASELINE = "baseline"  # a reference point: null, random, greedy, a trivial edit
    EXPLOIT = "exploit"    # a red-team agent that tries a hack
    MODEL = "model"        # a policy behind an endpoint: what is trained and evaluated


class RolloutStatus(str, enum.Enum):
    COMPLETED = "completed"  # the agent submitted and the verifier scored it
    TRUNCATED = "truncated"  # a limit or the agent's failure ended it; still scored (0 for a failure)
    ERROR = "error"          # infrastructure or verifier error: no reward, never a reward of 0


class ErrorKind(str, enum.Enum):
    """Which part failed, for a rollout whose status is ERROR (no reward): what to look at, and what a retry may
    cure. Stored as `rollouts.error_kind`; the message stays in `error`."""

    ENVIRONMENT_RESET = "environment_reset"  # the environment could not start the task
    ENVIRONMENT = "environment"              # the sandbox, browser or database failed during a step
    FINAL_STATE = "final_state"              # the final state could not be taken
    VERIFIER = "verifier"                    # the verifier service failed or timed out
    MODEL_ENDPOINT = "model_endpoint"        # the model server was unreachable or kept failing
    OUT_OF_MEMORY = "out_of_memory"          # a MemoryError in the worker
    WORKER_LOST = "worker_lost"              # the worker process died (repeatedly) while running it
    ROLLOUT_TIMEOUT = "rollout_timeout"      # the rollout's wall-clock deadline passed in the engine


class CheckStatus(str, enum.Enum):
    """The outcome of one check of `gymsmith check`, as stored in its history."""

    PASS = "pass"
    WARN = "warn"  # reported, but does not fail the check run (e.g. drift after an upgrade)
    FAIL = "fail"


class EndReason(str, enum.Enum):
    """Why a rollout ended. Every reason but INFRASTRUCTURE has a reward; see docs/episodes.md for the rule."""

    SUBMITTED = "submitted"                  # the agent called submit (completed)
    STEP_LIMIT = "step_limit"                # max_steps actions were taken (truncated)
    TIME_LIMIT = "time_limit"                # the rollout's wall-clock limit passed (truncated)
    AGENT_FAILURE = "agent_failure"          # the agent (policy side) raised or returned no Action: reward 0
    UNGRADABLE_STATE = "ungradable_state"    # the final state the agent left cannot be snapshot or graded: reward 0
    ENVIRONMENT_EXCEPTION = "environment_exception"  # the environment raised on the agent's action (a bug to fix,
                                                     # never silent: the traceback is in end_detail): reward 0
    INFRASTRUCTURE = "infrastructure"        # an infrastructure or verifier failure: status error, no reward


class Step(BaseModel):
    index: int
    action: Action
    observation: Observation
    duration_ms: float = Field(description="Wall time the environment took for this step.")
    agent_info: dict[str, Any] | None = Field(default=None, description="What the agent reported for this step "
                                              "(a model agent: latency, token usage, retries).")
    progress: float | None = Field(default=None, description="Step rewards only (`step_rewards=True`): V(s), the "
                                   "reward value the verifier gives the state this step left, scored from a snapshot "
                                   "like a final state; the last step's is the rollout's reward. None when step "
                                   "rewards are off or this step's value could not be computed (`progress_error`).")
    step_reward: float | None = Field(default=None, description="Step rewards only: `progress` minus the last known "
                                      "value before it (the trajectory's `start_progress` for the first step), so "
                                      "the step rewards sum to the final progress minus V(s0). None with `progress`.")
    progress_error: str | None = Field(default=None, description="Why `progress` is None although step rewards were "
                                       "on (a per-step verification that failed; the rollout went on).")


class Trajectory(BaseModel):
    """One rollout: every action, observation and the reward, with what is needed to reproduce it."""

    rollout_id: str
    run_id: str
    task_id: str
    family: str
    family_version: str
    split: Split
    difficulty: float
    seed: int = Field(description="Episode seed (agent sampling, simulated faults).")
    agent: str
    package_version: str
    group_id: str | None = Field(default=None, description="The sampling group (a run with `group`: the rollouts of "
                                 "one task and agent sampled together, for group-relative advantages); None without.")
    reset_observation: Observation
    steps: list[Step] = Field(default_factory=list)
    reward: Reward | None = None
    status: RolloutStatus
    error: str | None = Field(default=None, description="Infrastructure or verifier error, if any.")
    error_kind: ErrorKind | None = Field(default=None, description="Which part failed, exactly when the status is "
                                         "ERROR (None in rollouts stored before schema 10).")
    end_reason: EndReason | None = Field(default=None, description="Why the rollout ended (None in rollouts stored "
                                         "before schema 6).")
    end_detail: str | None = Field(default=None, description="What ended it, for a failure: the agent's or the "
                                   "environment's exception, or why the state is ungradable (bounded).")
    invalid_actions: int = 0
    final_state_hash: str | None = None
    fingerprint: str | None = Field(default=None, description="Digest of the environment fingerprint (see the "
                                    "store's fingerprints table): interpreter, packages, family source.")
    final_diff: str | None = Field(default=None, description="The final state as a unified diff against the start "
                                   "(families whose state is files, e.g. code); read by the audits.")
    start_progress: float | None = Field(default=None, description="Step rewards only: V(s0), the verifier's reward "
                                         "value for the start state, the baseline of the first step's `step_reward` "
                                         "(None when step rewards are off or it could not be computed).")
    started_at: float = Field(description="Unix time the rollout started (wall clock, for the record only).")
    finished_at: float
