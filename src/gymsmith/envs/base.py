"""The environment protocol, and a base class that turns bad tool calls into error observations."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import fastjsonschema
from pydantic import BaseModel, Field

from gymsmith.core.types import (
    NO_TOOL_CALL,
    Action,
    ActionError,
    ActionErrorKind,
    Observation,
    StepResult,
    TaskSpec,
    ToolSpec,
)


class FinalState(BaseModel):
    """A read-only snapshot of the end of a rollout, handed to the verifier."""

    kind: str = Field(description="Format of the snapshot, e.g. 'sqlite'.")
    path: str = Field(description="File or directory holding the snapshot (read-only).")
    digest: str = Field(description="Content hash of the state, the same as `Environment.state_hash()`.")
    diff: str | None = Field(default=None, description="What the rollout changed, as a unified diff against the start "
                                                       "state, for families whose state is files (stored for audits).")


@runtime_checkable
class Environment(Protocol):
    """What the runner drives. One instance serves many rollouts, one at a time."""

    def reset(self, task: TaskSpec, *, seed: int) -> Observation:
        """Restore `task`'s pristine start state and return the first observation (goal and status)."""
        ...

    def tools(self) -> list[ToolSpec]:
        """The tools of the current task, as OpenAI function-calling specs."""
        ...

    def step(self, action: Action) -> StepResult:
        """Apply one tool call. Bad calls give an error observation; this never raises for agent input."""
        ...

    def state_hash(self) -> str:
        """Content hash of the current state; equal to the task's start digest right after reset."""
        ...

    def final_state(self, directory: Path) -> FinalState:
        """Write a read-only snapshot of the current state into `directory` and describe it."""
        ...

    def close(self) -> None:
        """Release everything the environment holds."""
        ...


_COMPILED: dict[str, Any] = {}


def _compiled(tool: ToolSpec):
    """A compiled validator for the tool's schema, shared by every environment (schemas are immutable)."""
    key = json.dumps(tool.parameters, sort_keys=True)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = fastjsonschema.compile(tool.parameters)
    return fn


class ToolRefusal(Exception):
    """Raised inside a tool to refuse the call; becomes an error observation the agent reads."""

    def __init__(self, kind: ActionErrorKind, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def error_observation(kind: ActionErrorKind, message: str) -> Observation:
    return Observation(text=f"ERROR ({kind.value}): {message}", data=None, error=ActionError(kind=kind, message=message))


class ToolEnvironment:
    """Validates every action against the task's tool schemas before a subclass sees it.

    Subclasses implement `_reset(task, seed) -> Observation`, `_call(name, arguments) -> Observation`
    and set `self._tools`. The submit tool (named by `submit_tool`) ends the episode.
    """

    submit_tool = "submit"

    def __init__(self) -> None:
        self._tools: dict[str, ToolSpec] = {}
        self._validators: dict[str, Any] = {}
        self.done = False
        self.invalid_actions = 0

    # -- protocol -------------------------------------------------------------------------------
    def reset(self, task: TaskSpec, *, seed: int) -> Observation:
        self._tools = {t.name: t for t in task.tools}
        self._validators = {}
        self.done = False
        self.invalid_actions = 0
        return self._reset(task, seed)

    def tools(self) -> list[ToolSpec]:
        return list(self._tools.values())

    def step(self, action: Action) -> StepResult:
        parsed = self._parse(action)
        if isinstance(parsed, Observation):
            self.invalid_actions += 1
            return StepResult(observation=parsed, done=self.done, info={"invalid_action": True})
        try:
            observation = self._call(action.tool, parsed)
        except ToolRefusal as refusal:
            observation = error_observation(refusal.kind, refusal.message)
        if action.tool == self.submit_tool and observation.error is None:
            self.done = True
        return StepResult(observation=observation, done=self.done)

    # -- validation -----------------------------------------------------------------------------
    def _parse(self, action: Action) -> dict[str, Any] | Observation:
        if self.done:
            return error_observation(ActionErrorKind.EPISODE_OVER, "the task was already submitted; no further actions are accepted")
        if action.tool == NO_TOOL_CALL:
            return error_observation(ActionErrorKind.NO_TOOL_CALL, "your reply contained no tool call; act by calling "
                                     f"one of the tools ({', '.join(sorted(self._tools))}), and call submit when done")
        if action.tool not in self._tools:
            close = difflib.get_close_matches(action.tool, self._tools, n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            return error_observation(ActionErrorKind.UNKNOWN_TOOL,
                                     f"unknown tool {action.tool!r}; available tools: {', '.join(sorted(self._tools))}.{hint}")
        arguments = action.arguments
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                return error_observation(ActionErrorKind.MALFORMED_JSON,
                                         f"arguments for {action.tool!r} are not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); "
                                         "send a JSON object such as {\"order_id\": 12}")
        if not isinstance(arguments, dict):
            return error_observation(ActionErrorKind.MALFORMED_JSON,
                                     f"arguments for {action.tool!r} must be a JSON object, got {type(arguments).__name__}")
        fast = self._validators.get(action.tool)
        if fast is None:
            fast = self._validators[action.tool] = _compiled(self._tools[action.tool])
        try:
            fast(arguments)  # compiled check on the hot path; jsonschema only to explain a failure
            return arguments
        except fastjsonschema.JsonSchemaException:
            pass
        import jsonschema  # only to explain a failure; not imported by every worker and verifier at start

        schema = self._tools[action.tool].parameters
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: list(e.path))
        if errors:
            where = lambda e: "/".join(str(p) for p in e.path) or "(arguments)"  # noqa: E731
            detail = "; ".join(f"{where(e)}: {e.message}" for e in errors[:3])
            return error_observation(ActionErrorKind.INVALID_ARGUMENTS, f"arguments for {action.tool!r} do not match its schema: {detail}")
        return arguments

    # -- for subclasses -------------------------------------------------------------------------
    def _reset(self, task: TaskSpec, seed: int) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError

    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError
