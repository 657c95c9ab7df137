"""The Family protocol and its declared knobs (the curriculum dial)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from gymsmith.core.errors import KnobError
from gymsmith.core.types import TaskSpec

if TYPE_CHECKING:
    from gymsmith.agents.base import Agent
    from gymsmith.envs.base import Environment


class KnobKind(str, enum.Enum):
    FLOAT = "float"
    INT = "int"
    CHOICE = "choice"


class Knob(BaseModel):
    """A declared generator parameter. `default=None` means: derived from `difficulty`."""

    name: str
    kind: KnobKind
    description: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    default: Any = None
    # (other knob, its allowed values): a choice knob set to anything but its first choice needs the other knob
    # unset (None) or one of these values; checked by `resolve_knobs`, and stated in the server's schema
    only_with: tuple[str, tuple[Any, ...]] | None = None

    def validate_value(self, value: Any) -> Any:
        """Return `value` coerced to the knob's type; raise KnobError naming the knob otherwise."""
        if self.kind is KnobKind.CHOICE:
            if value not in self.choices:
                raise KnobError(f"knob {self.name!r} must be one of {list(self.choices)}, got {value!r}")
            return value
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise KnobError(f"knob {self.name!r} expects a number in [{self.low}, {self.high}], got {value!r}") from None
        if self.kind is KnobKind.INT:
            if number != int(number):
                raise KnobError(f"knob {self.name!r} expects an integer in [{self.low:g}, {self.high:g}], got {value!r}")
            number = int(number)
        if not (self.low <= number <= self.high):  # type: ignore[operator]
            raise KnobError(f"knob {self.name!r} = {value!r} is out of range: expected {self.low:g} <= {self.name} <= {self.high:g}")
        return number


DIFFICULTY = Knob(name="difficulty", kind=KnobKind.FLOAT, low=0.0, high=1.0, default=0.5,
                  description="Master dial in [0, 1]; knobs left unset are derived from it.")


def resolve_knobs(declared: tuple[Knob, ...], given: Mapping[str, Any],
                  derive: Callable[[float], Mapping[str, Any]]) -> dict[str, Any]:
    """Validate `given` against `declared` and fill the rest: `difficulty` first, then `derive(difficulty)`.

    Raises KnobError for an unknown knob name, a wrong type, a value outside its range, or a knob set where another
    knob's value does not allow it (`Knob.only_with`).
    """
    by_name = {k.name: k for k in declared}
    unknown = sorted(set(given) - set(by_name))
    if unknown:
        raise KnobError(f"unknown knob(s) {unknown}; this family declares: {sorted(by_name)}")
    resolved = {name: by_name[name].validate_value(v) for name, v in given.items() if v is not None}
    difficulty = resolved.setdefault("difficulty", by_name["difficulty"].default)
    derived = derive(float(difficulty))
    for knob in declared:
        if knob.name not in resolved:
            value = derived.get(knob.name, knob.default)
            resolved[knob.name] = knob.validate_value(value) if value is not None else None
    for knob in declared:
        if knob.only_with is not None and resolved[knob.name] not in (None, *knob.choices[:1]):
            other, allowed = knob.only_with
            if resolved.get(other) is not None and resolved[other] not in allowed:
                raise KnobError(f"knob {knob.name!r} = {resolved[knob.name]!r} needs knob {other!r} unset or one of "
                                f"{[a for a in allowed if a is not None]}, got {resolved[other]!r}")
    return resolved


@runtime_checkable
class Family(Protocol):
    """A task family: a seeded generator with knobs, its environment, its agents and its hidden checks.

    Attributes:
        name: registry name, e.g. ``"ops"``.
        version: bumped whenever generation or checks change; part of every task id.
        knobs: declared knobs; must include ``difficulty``.
        checks_module: import path of the hidden checks, loaded only by the verifier process.
    """

    name: str
    version: str
    knobs: tuple[Knob, ...]
    checks_module: str

    def generate(self, seed: int, **knobs: Any) -> TaskSpec:
        """Return the task for `seed` and `knobs` (same inputs, same task). Raises KnobError on bad knobs."""
        ...

    def make_env(self) -> "Environment":
        """Return a fresh environment that can be reset to any task of this family."""
        ...

    def agents(self) -> Mapping[str, Callable[[], "Agent"]]:
        """Scripted agents this family ships, by name (at least ``oracle`` and ``greedy``)."""
        ...


class FamilyInfo(BaseModel):
    """What `gymsmith families` prints."""

    name: str
    version: str
    source: str = Field(description="'builtin' or the entry point that provided it.")
    knobs: list[Knob]
    agents: list[str]
