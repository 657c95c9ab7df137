"""The environment protocol, and a base class that turns every bad tool call into an error observation.

What an agent sends is bounded here, once, for every family built on `ToolEnvironment` (docs/episodes.md
lists the caps and the rules):

- before schema validation, the arguments' raw JSON text is at most MAX_ARGUMENTS_CHARS characters, nested at
  most MAX_ARGUMENT_DEPTH levels, made of JSON values only (no NaN or Infinity, integers within +-2**63, strings
  that are valid Unicode: no lone surrogate);
- every tool schema is validated with a default bound on whatever it leaves unbounded (`bounded_schema`:
  strings, numbers, arrays, objects, and no unknown top-level fields);
- a tool that raises anything but an infrastructure failure gives an error observation of kind `tool_error`
  (the exception is in `StepResult.info`); infrastructure failures (`gymsmith.core.errors.is_infrastructure`)
  still propagate;
- observations are capped (text, data, error messages) and echo at most a short prefix of a bad argument.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import reprlib
import sys
import traceback
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import fastjsonschema
from pydantic import BaseModel, Field

from gymsmith.core.errors import is_infrastructure
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

# -- what an agent can send, and what it gets back (docs/episodes.md) ----------------------------------
MAX_ARGUMENTS_CHARS = 262_144  # raw JSON text of one call's arguments (a dict is measured as its JSON text would be,
# non-ASCII characters unescaped: `Action.arguments_text`, which is what a trajectory stores)
MAX_ARGUMENT_DEPTH = 8  # nesting of objects and arrays; the arguments object itself is level 1
MAX_JSON_INTEGER = 2**63 - 1  # no integer beyond +-this passes, whatever a schema says (SQLite's range)
DEFAULT_MAX_STRING = 10_000  # what `bounded_schema` gives a string, number, array or object left unbounded
DEFAULT_MINIMUM, DEFAULT_MAXIMUM = -(2**31), 2**31 - 1
DEFAULT_MAX_ITEMS = 100
DEFAULT_MAX_PROPERTIES = 64
MAX_ECHO_CHARS = 80  # a bad argument is echoed as at most this prefix
MAX_ERROR_CHARS = 2_000  # an error message
MAX_OBSERVATION_CHARS = 100_000  # an observation's text
MAX_OBSERVATION_DATA_CHARS = 100_000  # an observation's data, as JSON; larger data is replaced by a note


class FinalState(BaseModel):
    """A read-only snapshot of the end of a rollout, handed to the verifier."""

    kind: str = Field(description="Format of the snapshot, e.g. 'sqlite'.")
    path: str = Field(description="File or directory holding the snapshot (read-only).")
    digest: str = Field(description="Content hash of the state, the same as `Environment.state_hash()`.")
    diff: str | None = Field(default=None, description="What the rollout changed, as a unified diff against the start "
                                                       "state, for families whose state is files (stored for audits).")
    ungradable: str | None = Field(default=None, description="Set when the state the agent left cannot be snapshot "
                                   "faithfully (special files, a tree too deep or too large, undecodable names): why. "
                                   "The verifier service then rejects it with a reward of 0 without running checks.")


@runtime_checkable
class Environment(Protocol):
    """What the runner drives. One instance serves many rollouts, one at a time.

    An environment whose state can still change after a step returns (a browser's request in flight) may also define
    `settle()`: the episode is over, stop everything the agent started and wait until the state can change no more.
    `runner.episode.Episode` calls it, when present, before the final snapshot."""

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
        """Write a read-only snapshot of the current state into `directory` and describe it.

        Never raises for what the agent left: a state it cannot snapshot faithfully is a FinalState whose
        `ungradable` says why."""
        ...

    def close(self) -> None:
        """Release everything the environment holds."""
        ...


@runtime_checkable
class StateImages(Protocol):
    """An environment whose whole state is one byte string (an in-memory SQLite database), of which its final
    state is a copy. Equal images are the same state, and so get the same verdict: the async engine verifies a
    rollout's image while the agent waits on its model and keeps that verdict when the final image is the same
    bytes (`runner.episode.Episode.speculate`; docs/verifier.md, "Verdicts kept for an unchanged state")."""

    def state_image(self) -> bytes:
        """The current state's bytes: what `final_state` would write now. Cheap (the rows are not read into
        Python objects); call it where the environment's own calls run."""
        ...

    def image_snapshot(self, image: bytes, directory: Path) -> FinalState:
        """Write `image` into `directory` as `final_state` writes the state, for the verifier: the same file, so the
        same verdict, but its `digest` is `image_digest(image)` (of the bytes; the state's content hash,
        `state_hash()`, costs a read of every row). Reads nothing of the live environment: it may run on any
        thread while the environment steps."""
        ...


def image_digest(image: bytes) -> str:
    """The digest of a state image's bytes (`StateImages.image_snapshot`)."""
    return "image:" + hashlib.sha256(image).hexdigest()[:32]


# -- bounded text -----------------------------------------------------------------------------------
class _Preview(reprlib.Repr):
    """repr() of an agent's value, bounded: a string by its prefix and length, a huge integer by its size."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel, self.maxstring, self.maxother, self.maxlong = 3, MAX_ECHO_CHARS, MAX_ECHO_CHARS, 40
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = self.maxfrozenset = 6

    def repr_str(self, x: str, level: int) -> str:
        if len(x) <= self.maxstring:
            return repr(x)
        return f"{x[:self.maxstring]!r}... ({len(x)} characters)"

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:  # str() of a huge integer is slow, and refused past 4300 digits
            return f"<an integer of {x.bit_length()} bits>"
        return super().repr_int(x, level)


_PREVIEW = _Preview()


def preview(value: Any) -> str:
    """A short repr of `value` to echo in a message: at most about MAX_ECHO_CHARS characters of any string in it."""
    try:
        return _PREVIEW.repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr raises
        return f"<{type(value).__name__}>"


def clip(text: str, limit: int) -> str:
    """`text`, cut to `limit` characters with a note of how much was cut."""
    return text if len(text) <= limit else f"{text[:limit]}\n[... {len(text) - limit} characters cut]"


def scrub(text: str) -> str:
    """`text` as valid Unicode: a lone surrogate (e.g. from a file name that is not UTF-8) becomes an escape."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _scrub_data(value: Any) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(k)): _scrub_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub_data(v) for v in value]
    return value


def _bounded_data(data: Any) -> tuple[Any, int]:
    """`data` within the cap (a note when larger or not JSON), and the memory its JSON text takes (`sys.getsizeof`:
    4 bytes a character for text with characters beyond the Basic Multilingual Plane, 1 for ASCII)."""
    try:
        dumped = json.dumps(data, ensure_ascii=False, default=str)
        try:
            dumped.encode("utf-8")
        except UnicodeEncodeError:
            data = _scrub_data(data)
            dumped = json.dumps(data, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError) as exc:
        return {"unserialisable": f"{type(exc).__name__}: {clip(str(exc), 200)}"}, 400
    if len(dumped) > MAX_OBSERVATION_DATA_CHARS:
        return {"truncated": True, "chars": len(dumped), "limit": MAX_OBSERVATION_DATA_CHARS,
                "note": "the data of this observation was larger than the cap; its text holds what fits"}, 400
    return data, sys.getsizeof(dumped)


def bound_observation(observation: Observation) -> Observation:
    """`observation` within the caps: text and error message cut, data replaced by a note when too large,
    lone surrogates escaped (so it can be stored as JSON and in SQL)."""
    text = clip(scrub(observation.text), MAX_OBSERVATION_CHARS)
    data, size = (None, 0) if observation.data is None else _bounded_data(observation.data)
    error = observation.error
    if error is not None:
        message = clip(scrub(error.message), MAX_ERROR_CHARS)
        if message != error.message:
            error = ActionError(kind=error.kind, message=message)
    if not (text is observation.text and data is observation.data and error is observation.error):
        observation = Observation(text=text, data=data, error=error)
    observation._data_bytes = size  # measured here, where the data is encoded anyway
    return observation


def observation_bytes(observation: Observation, *, data_copies: int = 1) -> int:
    """The memory `observation`'s text takes, with its data's as JSON text (as `bound_observation` measured it, else
    measured now; times `data_copies`) and its error message's (`sys.getsizeof`: astral characters take 4 bytes each,
    ASCII 1)."""
    size = observation._data_bytes
    if size is None:
        size = 0 if observation.data is None else _bounded_data(observation.data)[1]
        observation._data_bytes = size
    error = observation.error
    return sys.getsizeof(observation.text) + size * data_copies + (sys.getsizeof(error.message) if error is not None else 0)


# -- bounded arguments ------------------------------------------------------------------------------
_BOUNDED_TYPES = {"string": ("maxLength",), "integer": ("maximum", "minimum"), "number": ("maximum", "minimum"),
                  "array": ("maxItems",), "object": ("maxProperties",)}
_DEFAULTS = {"maxLength": DEFAULT_MAX_STRING, "maximum": DEFAULT_MAXIMUM, "minimum": DEFAULT_MINIMUM,
             "maxItems": DEFAULT_MAX_ITEMS, "maxProperties": DEFAULT_MAX_PROPERTIES}
_EXCLUSIVE = {"maximum": "exclusiveMaximum", "minimum": "exclusiveMinimum"}
_SUBSCHEMA = ("items", "additionalProperties", "contains", "not", "propertyNames", "if", "then", "else",
              "additionalItems", "unevaluatedItems", "unevaluatedProperties")
_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()


def _walk_schema(schema: Any, visit, path: str = "") -> Any:
    if not isinstance(schema, dict):
        return schema
    out = visit(dict(schema), path)
    for key in _SUBSCHEMA:
        if isinstance(out.get(key), dict):
            out[key] = _walk_schema(out[key], visit, f"{path}/{key}")
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {k: _walk_schema(v, visit, f"{path}/{key}/{k}") for k, v in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_walk_schema(v, visit, f"{path}/{key}/{i}") for i, v in enumerate(out[key])]
    return out


def _missing_bounds(schema: dict[str, Any]) -> list[str]:
    closed = schema.get("additionalProperties") is False  # an object of listed fields only is bounded by its list
    return [b for t in _types(schema) for b in _BOUNDED_TYPES.get(t, ())
            if b not in schema and _EXCLUSIVE.get(b) not in schema and "enum" not in schema and "const" not in schema
            and not (b == "maxProperties" and closed)]


def bounded_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A copy of a tool's parameter schema with a default bound on everything it leaves unbounded (a string's
    maxLength, a number's maximum and minimum, an array's maxItems, an object's maxProperties), and no unknown
    top-level field unless the schema says `additionalProperties` itself. This is what arguments are validated
    against, so a family gets the bounds for free; the families also declare theirs (see `unbounded_fields`)."""
    def visit(schema: dict[str, Any], path: str) -> dict[str, Any]:
        for bound in _missing_bounds(schema):
            schema[bound] = _DEFAULTS[bound]
        return schema

    out = _walk_schema(parameters, visit)
    if "object" in _types(out) and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def unbounded_fields(parameters: dict[str, Any]) -> list[str]:
    """Where a tool schema leaves a value unbounded (JSON-pointer-like paths with the missing keyword); [] when
    every string, number, array and object it declares is bounded and the top level has `additionalProperties`."""
    found: list[str] = []

    def visit(schema: dict[str, Any], path: str) -> dict[str, Any]:
        found.extend(f"{path or '/'}: {bound}" for bound in _missing_bounds(schema))
        return schema

    _walk_schema(parameters, visit)
    if "additionalProperties" not in parameters:
        found.append("/: additionalProperties")
    return found


class _Refused(Exception):
    """An argument that is not bounded JSON; the message says where and why."""


def _where(path: tuple[Any, ...]) -> str:
    return "/".join(p if isinstance(p, str) and len(p) <= 40 and p.isprintable() else preview(p) for p in map(str, path)) \
        or "(arguments)"


def _check_text(value: str, path: tuple[Any, ...]) -> str:
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _Refused(f"{_where(path)}: contains a lone surrogate (U+{ord(value[exc.start]):04X}) at character "
                           f"{exc.start}; send valid Unicode text") from None
    return value


def _normalise(value: Any, path: tuple[Any, ...], budget: list[int]) -> Any:
    """A plain-JSON copy of `value` (tuples become lists, integral floats integers), or _Refused."""
    if len(path) >= MAX_ARGUMENT_DEPTH and isinstance(value, (dict, list, tuple)):
        raise _Refused(f"{_where(path)}: nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    if value is None or isinstance(value, bool):
        budget[0] -= 5
        return value
    if isinstance(value, int):
        if not -MAX_JSON_INTEGER <= value <= MAX_JSON_INTEGER:
            raise _Refused(f"{_where(path)}: the integer {preview(value)} is out of range (|n| < 2**63)")
        budget[0] -= 20
        return int(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _Refused(f"{_where(path)}: {value!r} is not a JSON number")
        budget[0] -= 24
        if value.is_integer() and abs(value) <= MAX_JSON_INTEGER:
            return int(value)  # JSON Schema counts 1.0 as an integer; tools get an int
        return value
    if isinstance(value, str):
        budget[0] -= _json_length(value) if len(value) < budget[0] else len(value)
        if budget[0] < 0:
            raise _Refused(f"the arguments are larger than {MAX_ARGUMENTS_CHARS} characters of JSON")
        return _check_text(value, path)
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Refused(f"{_where(path)}: the key {preview(key)} is not a string")
            budget[0] -= (_json_length(key) if len(key) < budget[0] else len(key)) + 2
            if budget[0] < 0:
                raise _Refused(f"the arguments are larger than {MAX_ARGUMENTS_CHARS} characters of JSON")
            _check_text(key, (*path, key))
            out[key] = _normalise(item, (*path, key), budget)
            if budget[0] < 0:
                raise _Refused(f"the arguments are larger than {MAX_ARGUMENTS_CHARS} characters of JSON")
        return out
    if isinstance(value, (list, tuple)):
        out_list = []
        for i, item in enumerate(value):
            budget[0] -= 2
            out_list.append(_normalise(item, (*path, i), budget))
            if budget[0] < 0:
                raise _Refused(f"the arguments are larger than {MAX_ARGUMENTS_CHARS} characters of JSON")
        return out_list
    raise _Refused(f"{_where(path)}: a {type(value).__name__} is not a JSON value")


def _json_length(text: str) -> int:
    """Characters of `text` as a JSON string (quotes and escapes included, non-ASCII unescaped)."""
    if text.isascii() and text.isprintable() and '"' not in text and "\\" not in text:
        return len(text) + 2
    try:
        return len(json.dumps(text, ensure_ascii=False))
    except UnicodeError:  # a lone surrogate: refused by _check_text right after
        return len(text) + 2


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > 19:
        raise _Refused(f"an integer of {len(text.lstrip('-'))} digits is out of range (|n| < 2**63)")
    return int(text)


def _no_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def check_arguments(tool: str, arguments: dict[str, Any] | str) -> dict[str, Any] | Observation:
    """`arguments` (an object or its JSON text) as plain, bounded JSON, or the error observation saying why not.

    The checks that come before a tool's schema: raw size, JSON syntax, nesting depth, integer range, finite
    numbers, valid Unicode. Messages echo at most a short prefix of what was sent."""
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            return error_observation(ActionErrorKind.INVALID_ARGUMENTS,
                                     f"arguments for {tool!r} are longer than {MAX_ARGUMENTS_CHARS} characters of JSON; "
                                     "send less (write a large file in parts, read one in ranges)")
        try:
            arguments = json.loads(arguments, parse_int=_parse_int, parse_constant=_no_constant) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            return error_observation(ActionErrorKind.MALFORMED_JSON,
                                     f"arguments for {tool!r} are not valid JSON ({exc.msg} at line {exc.lineno} column "
                                     f"{exc.colno}); send a JSON object such as {{\"order_id\": 12}}")
        except RecursionError:
            return error_observation(ActionErrorKind.INVALID_ARGUMENTS,
                                     f"arguments for {tool!r}: nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        except _Refused as exc:
            return error_observation(ActionErrorKind.INVALID_ARGUMENTS, f"arguments for {tool!r}: {exc}")
    if not isinstance(arguments, dict):
        return error_observation(ActionErrorKind.MALFORMED_JSON,
                                 f"arguments for {tool!r} must be a JSON object, got {type(arguments).__name__}")
    try:
        return _normalise(arguments, (), [MAX_ARGUMENTS_CHARS])
    except _Refused as exc:
        return error_observation(ActionErrorKind.INVALID_ARGUMENTS, f"arguments for {tool!r}: {exc}")


MAX_STORED_TOOL_CHARS = 64  # a tool name, as stored
MAX_STORED_REFUSED_CHARS = 1_000  # the prefix kept of arguments that exceeded the caps


def bounded_action(action: Action) -> Action:
    """The action as a trajectory keeps it: verbatim when it is within the caps (so it replays as it ran);
    otherwise its arguments become a short text prefix saying why they were not kept, and a tool name is cut
    at MAX_STORED_TOOL_CHARS. Text is made valid Unicode."""
    update: dict[str, Any] = {}
    tool = action.tool
    if len(tool) > MAX_STORED_TOOL_CHARS or not tool.isascii():
        update["tool"] = scrub(tool[:MAX_STORED_TOOL_CHARS])
    arguments = action.arguments
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENTS_CHARS:
            update["arguments"] = scrub(f"{arguments[:MAX_STORED_REFUSED_CHARS]}... [{len(arguments)} characters; "
                                        "over the cap, not stored beyond this prefix]")
        elif scrub(arguments) is not arguments:
            update["arguments"] = scrub(arguments)
    else:
        try:
            _normalise(arguments, (), [MAX_ARGUMENTS_CHARS])
        except _Refused as exc:
            update["arguments"] = scrub(f"[arguments not stored: {exc}] {preview(arguments)}")
    if action.call_id is not None and len(action.call_id) > 128:
        update["call_id"] = scrub(action.call_id[:128])
    return action.model_copy(update=update) if update else action


def _explain(error: Any) -> str:
    """One schema error, in words, echoing at most a prefix of the value."""
    where = _where(tuple(error.absolute_path))
    if len(error.message) <= 300:
        return f"{where}: {scrub(error.message)}"
    kind, instance, value = error.validator, error.instance, error.validator_value
    if kind == "maxLength":
        return f"{where}: a string of {len(instance)} characters is too long (at most {value})"
    if kind in ("maxItems", "maxProperties"):
        return f"{where}: {len(instance)} {'items' if kind == 'maxItems' else 'fields'} are too many (at most {value})"
    if kind == "additionalProperties" and isinstance(instance, dict):
        known = set((error.schema or {}).get("properties") or {})
        unexpected = [k for k in instance if k not in known]
        return (f"{where}: Additional properties are not allowed ({', '.join(preview(k) for k in unexpected[:5])} "
                f"{'was' if len(unexpected) == 1 else 'were'} unexpected)")
    return f"{where}: {preview(instance)} fails {kind!r} {preview(value)}"


_COMPILED: dict[str, Any] = {}
_BOUNDED: dict[str, dict[str, Any]] = {}


def _schema_key(tool: ToolSpec) -> str:
    return json.dumps(tool.parameters, sort_keys=True)


def _bounded(tool: ToolSpec) -> dict[str, Any]:
    key = _schema_key(tool)
    schema = _BOUNDED.get(key)
    if schema is None:
        schema = _BOUNDED[key] = bounded_schema(tool.parameters)
    return schema


def _compiled(tool: ToolSpec):
    """A compiled validator for the tool's bounded schema, shared by every environment (schemas are immutable)."""
    key = _schema_key(tool)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = _COMPILED[key] = fastjsonschema.compile(_bounded(tool))
    return fn


class ToolRefusal(Exception):
    """Raised inside a tool to refuse the call; becomes an error observation the agent reads."""

    def __init__(self, kind: ActionErrorKind, message: str):
        super().__init__(message)
        self.kind, self.message = kind, message


def error_observation(kind: ActionErrorKind, message: str) -> Observation:
    message = clip(scrub(message), MAX_ERROR_CHARS)
    return Observation(text=f"ERROR ({kind.value}): {message}", data=None, error=ActionError(kind=kind, message=message))


def tool_failure(tool: str, exc: BaseException) -> tuple[Observation, dict[str, Any]]:
    """The error observation (kind `tool_error`) and StepResult.info for a tool that raised `exc` unexpectedly."""
    try:
        detail = clip(str(exc), 300)
    except Exception:  # noqa: BLE001 - an exception whose str() raises
        detail = ""
    name = type(exc).__name__
    observation = error_observation(ActionErrorKind.TOOL_ERROR,
                                    f"{preview(tool)} failed on these arguments ({name}: {detail}); "
                                    "the environment is still usable: try other arguments or another tool")
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-8))
    return observation, {"tool_exception": {"type": name, "message": scrub(detail), "traceback": scrub(clip(trace, 4000))}}


class ToolEnvironment:
    """Validates every action against the task's tool schemas, bounded, before a subclass sees it.

    Subclasses implement `_reset(task, seed) -> Observation`, `_call(name, arguments) -> Observation`
    and set `self._tools`. The submit tool (named by `submit_tool`) ends the episode.

    `step` never raises for agent input: a bad call is an error observation (counted in `invalid_actions`
    when the validation refused it), a `ToolRefusal` is the observation it carries, and any other exception
    out of a tool is an error observation of kind `tool_error` with the exception in `StepResult.info`.
    Only infrastructure failures (`is_infrastructure`: the sandbox cannot run, the browser died) propagate.
    """

    submit_tool = "submit"

    def settle(self) -> None:
        """The episode is over (see `Environment`): a no-op for families whose every effect is done when `step`
        returns (a code sandbox's command kills whatever it started; ops' tools are one transaction each)."""

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
        return bound_observation(self._reset(task, seed))

    def tools(self) -> list[ToolSpec]:
        return list(self._tools.values())

    def step(self, action: Action) -> StepResult:
        info: dict[str, Any] = {}
        tool = action.tool if isinstance(action, Action) and isinstance(action.tool, str) else "(not an action)"
        try:
            parsed = self._parse(action)
            if isinstance(parsed, Observation):
                self.invalid_actions += 1
                return StepResult(observation=bound_observation(parsed), done=self.done, info={"invalid_action": True})
            try:
                observation = self._call(tool, parsed)
            except ToolRefusal as refusal:
                observation = error_observation(refusal.kind, refusal.message)
        except Exception as exc:
            if is_infrastructure(exc):
                raise
            observation, info = tool_failure(tool, exc)
        if tool == self.submit_tool and observation.error is None:
            self.done = True
        return StepResult(observation=bound_observation(observation), done=self.done, info=info)

    # -- validation -----------------------------------------------------------------------------
    def _parse(self, action: Action) -> dict[str, Any] | Observation:
        if not isinstance(action, Action) or not isinstance(action.tool, str):
            return error_observation(ActionErrorKind.MALFORMED_JSON, f"an action must be a tool call, got {preview(action)}")
        if self.done:
            return error_observation(ActionErrorKind.EPISODE_OVER, "the task was already submitted; no further actions are accepted")
        if action.tool == NO_TOOL_CALL:
            return error_observation(ActionErrorKind.NO_TOOL_CALL, "your reply contained no tool call; act by calling "
                                     f"one of the tools ({', '.join(sorted(self._tools))}), and call submit when done")
        if action.tool not in self._tools:
            close = difflib.get_close_matches(action.tool, self._tools, n=3) if len(action.tool) <= 64 else []
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            return error_observation(ActionErrorKind.UNKNOWN_TOOL,
                                     f"unknown tool {preview(action.tool)}; available tools: {', '.join(sorted(self._tools))}.{hint}")
        arguments = check_arguments(action.tool, action.arguments)
        if isinstance(arguments, Observation):
            return arguments
        fast = self._validators.get(action.tool)
        if fast is None:
            fast = self._validators[action.tool] = _compiled(self._tools[action.tool])
        try:
            fast(arguments)  # compiled check on the hot path; jsonschema only to explain a failure
            return arguments
        except fastjsonschema.JsonSchemaException:
            pass
        import jsonschema  # only to explain a failure; not imported by every worker and verifier at start

        schema = _bounded(self._tools[action.tool])
        errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(arguments), key=lambda e: [str(p) for p in e.path])
        if errors:
            detail = "; ".join(_explain(e) for e in errors[:3])
            return error_observation(ActionErrorKind.INVALID_ARGUMENTS, f"arguments for {action.tool!r} do not match its schema: {detail}")
        return arguments

    # -- for subclasses -------------------------------------------------------------------------
    def _reset(self, task: TaskSpec, seed: int) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError

    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:  # pragma: no cover - abstract
        raise NotImplementedError
