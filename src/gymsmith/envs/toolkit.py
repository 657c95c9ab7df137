"""Declaring a family's tools once: `Toolbox.tool` builds a tool's JSON schema from its Python signature and
its description from its docstring, so the schema the model reads and the function that runs cannot drift.

    tools = Toolbox()

    @tools.tool(read_only=True)
    def get_item(conn, item_id: Annotated[int, Param(minimum=1, maximum=2**31 - 1)]) -> dict:
        '''One item by id.'''
        ...

The first parameter is the family's context (a database connection, an environment) and is not part of the
schema (its annotation is not evaluated, so it may name a class imported only under TYPE_CHECKING). Every other parameter becomes a property: `int` an integer, `str` a string, `float` a number, `bool`
a boolean, `dict` an object, `list[X]` an array of X, `Literal[...]` an enum; `X | None` is X. A parameter
with a default is optional, one without is required (in signature order). `Param(...)` adds JSON-schema
keywords to the property (bounds, an enum, a description), or (`schema=`) gives it whole. The schema allows
no other property (`additionalProperties: false`); `ToolEnvironment` validates every call against it,
bounded, before the function runs.

One refusal convention: a tool refuses a call by raising `ToolRefusal(kind, message)` (the agent sees the
message as an error observation of that kind); anything else it raises is a tool error.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from gymsmith.core.types import ToolSpec

_JSON_TYPES = {int: "integer", str: "string", float: "number", bool: "boolean", dict: "object"}


class Param:
    """JSON-schema keywords for one tool parameter, given as `Annotated[type, Param(...)]`: any keyword
    (`minimum=1`, `maxLength=200`, `enum=[...]`, `description="..."`), or `schema={...}` for the whole schema."""

    def __init__(self, schema: dict[str, Any] | None = None, **keywords: Any):
        self.schema, self.keywords = schema, keywords


def _schema_of(annotation: Any, where: str) -> dict[str, Any]:
    origin = get_origin(annotation)
    if origin is Annotated:
        base, *extras = get_args(annotation)
        params = [e for e in extras if isinstance(e, Param)]
        for p in params:
            if p.schema is not None:
                return dict(p.schema)
        out = _schema_of(base, where)
        for p in params:
            out.update(p.keywords)
        return out
    if origin in (Union, types.UnionType):
        rest = [a for a in get_args(annotation) if a is not type(None)]
        if len(rest) != 1:
            raise TypeError(f"{where}: a union other than `X | None` has no tool schema")
        return _schema_of(rest[0], where)
    if origin is Literal:
        values = list(get_args(annotation))
        kinds = {type(v) for v in values}
        if len(kinds) != 1 or next(iter(kinds)) not in _JSON_TYPES:
            raise TypeError(f"{where}: Literal values must share one JSON type")
        return {"type": _JSON_TYPES[next(iter(kinds))], "enum": values}
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        return {"type": "array"} if item is Any else {"type": "array", "items": _schema_of(item, where)}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    raise TypeError(f"{where}: no tool schema for the annotation {annotation!r}; use int, str, float, bool, dict, "
                    "list[X], Literal[...], X | None, or Annotated[X, Param(schema=...)]")


def tool_spec(fn: Callable[..., Any], name: str | None = None) -> ToolSpec:
    """The ToolSpec of `fn`: its name, its docstring's first paragraph, and an object schema of every parameter
    after the first. Raises TypeError naming the function and parameter when one cannot be described."""
    name = name or fn.__name__
    doc = inspect.getdoc(fn)
    if not doc:
        raise TypeError(f"tool {name}: a tool needs a docstring (its first paragraph is what the model reads)")
    parameters = list(inspect.signature(fn).parameters.values())
    # the context's annotation is not read: it may name a class the tools' module imports only for type checking
    # (the environment that imports the tools)
    context = fn.__annotations__.get(parameters[0].name) if parameters else None
    hints = typing.get_type_hints(fn, localns={context: object} if isinstance(context, str) and context.isidentifier()
                                  else None, include_extras=True)
    parameters = parameters[1:]
    properties, required = {}, []
    for p in parameters:
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            raise TypeError(f"tool {name}: parameter {p.name} must be a plain or keyword-only parameter")
        if p.name not in hints:
            raise TypeError(f"tool {name}: parameter {p.name} needs a type annotation")
        properties[p.name] = _schema_of(hints[p.name], f"tool {name}, parameter {p.name}")
        if p.default is p.empty:
            required.append(p.name)
    description = " ".join(doc.split("\n\n")[0].split())
    return ToolSpec(name=name, description=description, parameters={
        "type": "object", "properties": properties, "required": required, "additionalProperties": False})


class Toolbox:
    """A family's tools, in declaration order: their specs (what the model reads), their functions, and which
    only read. `tool` is the decorator that adds one."""

    def __init__(self) -> None:
        self.functions: dict[str, Callable[..., Any]] = {}
        self.specs: dict[str, ToolSpec] = {}
        self.read_only: set[str] = set()

    def tool(self, fn: Callable[..., Any] | None = None, *, read_only: bool = False, name: str | None = None) -> Any:
        """Add `fn` as a tool (usable bare, `@tools.tool`, or with options). Raises ValueError on a second tool
        of the same name, TypeError when its signature or docstring cannot be turned into a schema."""
        def add(fn: Callable[..., Any]) -> Callable[..., Any]:
            spec = tool_spec(fn, name)
            if spec.name in self.specs:
                raise ValueError(f"tool {spec.name} is declared twice")
            self.functions[spec.name], self.specs[spec.name] = fn, spec
            if read_only:
                self.read_only.add(spec.name)
            return fn
        return add(fn) if fn is not None else add

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self.specs.values())
