"""Tools declared once (`envs.toolkit.Toolbox`): the JSON schema from the signature, the description from the
docstring; what cannot be described is refused by name. The ops family declares its tools this way."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import pytest

from gymsmith.envs.toolkit import Param, Toolbox, tool_spec


def test_the_schema_follows_the_signature_and_the_docstring():
    tools = Toolbox()

    @tools.tool(read_only=True)
    def find(ctx, kind: Literal["a", "b"], limit: Annotated[int, Param(minimum=1, maximum=50)] = 10,
             text: str | None = None, tags: list[str] | None = None, where: dict[str, Any] | None = None) -> dict:
        """Find things of one kind.

        The second paragraph is for maintainers, not the model."""
        return {}

    @tools.tool
    def rate(ctx, score: float, ok: bool, raw: Annotated[Any, Param(schema={"type": "string", "maxLength": 3})]) -> dict:
        """Rate  a
        thing."""
        return {"rated": score}

    spec = tools.specs["find"]
    assert spec.description == "Find things of one kind."
    assert spec.parameters == {"type": "object", "additionalProperties": False, "required": ["kind"], "properties": {
        "kind": {"type": "string", "enum": ["a", "b"]}, "limit": {"type": "integer", "minimum": 1, "maximum": 50},
        "text": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "where": {"type": "object"}}}
    assert tools.specs["rate"].description == "Rate a thing."
    assert tools.specs["rate"].parameters["required"] == ["score", "ok", "raw"]
    assert tools.specs["rate"].parameters["properties"]["raw"] == {"type": "string", "maxLength": 3}
    assert [s.name for s in tools.tool_specs()] == ["find", "rate"] and tools.read_only == {"find"}
    assert tools.functions["rate"](None, 2.0, True, "x") == {"rated": 2.0}


def test_what_cannot_be_described_is_refused_by_name():
    def undocumented(ctx, x: int) -> dict:
        return {}

    def untyped(ctx, x) -> dict:
        """Doc."""

    def odd(ctx, x: int | str) -> dict:
        """Doc."""

    def varargs(ctx, *xs: int) -> dict:
        """Doc."""
    with pytest.raises(TypeError, match="tool undocumented: a tool needs a docstring"):
        tool_spec(undocumented)
    with pytest.raises(TypeError, match="tool untyped: parameter x needs a type annotation"):
        tool_spec(untyped)
    with pytest.raises(TypeError, match="tool odd, parameter x: a union other than"):
        tool_spec(odd)
    with pytest.raises(TypeError, match="tool varargs: parameter xs must be"):
        tool_spec(varargs)
    tools = Toolbox()

    def first(ctx) -> dict:
        """One."""
    tools.tool(name="same")(first)
    with pytest.raises(ValueError, match="tool same is declared twice"):
        tools.tool(name="same")(first)


def test_ops_tools_are_declared_through_the_toolbox():
    from gymsmith.families.ops import tools

    assert tools.TOOL_SPECS == tools.TOOLS.tool_specs() and set(tools.IMPLEMENTATIONS) == {s.name for s in tools.TOOL_SPECS}
    assert tools.READ_ONLY == {"get_status", "search_records", "get_record", "check_inventory"}
    place = tools.TOOLS.specs["place_purchase_order"].parameters
    assert place["required"] == ["supplier_id", "warehouse_id", "quantity"]
    assert place["properties"]["quantity"] == {"type": "integer", "minimum": 1, "maximum": 1000}


def test_every_family_declares_its_tools_through_the_toolbox():
    """Code and web too (issue 19 item 2): the specs a task carries are the toolbox's, and every tool has a function."""
    from gymsmith.families.code import tools as code_tools
    from gymsmith.families.web import env as web_env

    for module in (code_tools, web_env):
        assert module.TOOL_SPECS == module.TOOLS.tool_specs()
        assert set(module.TOOLS.functions) == {s.name for s in module.TOOL_SPECS}
    assert code_tools.TOOLS.read_only == {"list_files", "read_file"}
    assert web_env.TOOLS.specs["press"].parameters["properties"]["key"]["enum"] == list(web_env.KEYS)
    assert all(key in web_env.TOOLS.specs["press"].description for key in web_env.KEYS)  # the docstring names them
    assert code_tools.TOOLS.specs["list_files"].parameters["properties"]["path"]["default"] == "."


def test_the_context_parameter_may_name_a_class_imported_only_for_type_checking():
    namespace: dict[str, Any] = {}
    exec("from __future__ import annotations\nfrom gymsmith.envs.toolkit import Toolbox\nTOOLS = Toolbox()\n\n"
         "@TOOLS.tool\ndef ping(env: NotImportedHere, times: int = 1) -> str:\n    '''Ping.'''\n    return 'pong'\n",
         namespace)
    assert namespace["TOOLS"].specs["ping"].parameters["properties"] == {"times": {"type": "integer"}}
