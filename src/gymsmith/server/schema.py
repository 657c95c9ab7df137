"""The request bodies of `gymsmith serve`, built from the families it serves, so that its OpenAPI schema says
exactly what it accepts: `family` is one of the served families, each family's `knobs` are its declared knobs
with their types and ranges (no others), seeds are integers in [0, 2**53) (exact in every JSON reader). A boolean is refused wherever a
number is expected (JSON Schema's `integer` and `number` do not admit `false`; pydantic's lax mode would take
it as 0), while an integral float such as `3.0` is accepted as an integer (JSON Schema counts it as one).

A body valid against this schema opens a session unless a session limit, a store lookup or the task given
refuses it; those refusals have status codes of their own (429, 404, 409), documented per route in `app.py`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict, Union, cast

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, create_model

from gymsmith.core.types import TaskSpec
from gymsmith.registry import Knob, KnobKind



def _not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got the boolean {str(value).lower()}")
    return value


Int = Annotated[int, BeforeValidator(_not_bool)]


class _Bounds(TypedDict):
    ge: int
    le: int


SEED: _Bounds = dict(ge=0, le=2**53 - 1)


class ErrorMessage(BaseModel):
    """Every error this server answers (all 4xx) carries one line naming the input and what was expected."""

    detail: str = Field(description="What was wrong, in one line.")


class _ResetBase(BaseModel):
    model_config = ConfigDict(extra="forbid")

    task: TaskSpec | None = Field(default=None, description="A task to play (it must be the one the server's family "
                                  "generates from the task's seed and knobs; else 409); otherwise one is generated "
                                  "from seed and knobs.")
    task_id: str | None = Field(default=None, description="Id of a task in the server's store (see --store); 404 if "
                                "it is not there.")
    # mypy does not read **kwargs in a dataclass-transform field specifier such as Field (a limit of mypy's)
    seed: Int = Field(default=0, description="Generator seed (ignored when task is given).", **SEED)  # type: ignore[misc]
    episode_seed: Int = Field(default=0, description="Seed of the episode (simulated faults, sampling).", **SEED)  # type: ignore[misc]


def _knob_field(knob: Knob) -> tuple[Any, Any]:
    """The type and field of one knob in a request: optional (None: the generator's default or derived value)."""
    if knob.kind is KnobKind.CHOICE:
        return Literal[knob.choices] | None, Field(default=None, description=knob.description)
    if knob.kind is KnobKind.INT:
        # the bounds go on the number itself, before the validator: on the union, or after the validator, they
        # would be checked but written into the schema as unknown keys ("ge") that no client reads
        # an int knob declares both bounds
        bounded: Any = Annotated[int, Field(ge=int(cast(float, knob.low)), le=int(cast(float, knob.high))),
                                 BeforeValidator(_not_bool)]
    else:  # allow_inf_nan=False: JSON has no NaN or infinity, and a range cannot hold them
        bounded = Annotated[float, Field(ge=knob.low, le=knob.high, allow_inf_nan=False), BeforeValidator(_not_bool)]
    return bounded | None, Field(default=None, description=knob.description)


def _together(knobs: tuple[Knob, ...]) -> dict[str, Any] | None:
    """What the knobs' schema says of knobs set together (`Knob.only_with`), as JSON Schema conditions, so that a
    client (or a fuzzer) reads from the schema which combinations the generator refuses."""
    rules = [{"if": {"properties": {k.name: {"enum": list(k.choices[1:])}}, "required": [k.name]},
              "then": {"properties": {k.only_with[0]: {"enum": [*k.only_with[1], None]}}}}
             for k in knobs if k.only_with is not None]
    return {"allOf": rules} if rules else None


def reset_body(families: dict[str, tuple[Knob, ...]]) -> Any:
    """The body of POST /sessions for `families` (name -> declared knobs): a union discriminated by `family`,
    each member with that family's knobs. Raises ValueError for no families."""
    if not families:
        raise ValueError("a server needs at least one family to serve")
    members = []
    for name, knobs in sorted(families.items()):
        knob_model = create_model(f"{name.title()}Knobs", __config__=ConfigDict(extra="forbid", json_schema_extra=_together(knobs)),
                                  **cast(dict[str, Any], {k.name: _knob_field(k) for k in knobs}))
        knob_model.__doc__ = f"Knob values of the {name} family; omitted ones take the generator's default."
        members.append(create_model(
            f"{name.title()}ResetRequest", __base__=_ResetBase,
            family=(cast(Any, Literal[name]), Field(description="Family name.")),  # a type made at run time
            knobs=(knob_model, Field(default_factory=knob_model, description="Knob values, e.g. {'difficulty': 0.5}."))))
    if len(members) == 1:
        return members[0]
    return Annotated[Union[tuple(members)], Field(discriminator="family")]
