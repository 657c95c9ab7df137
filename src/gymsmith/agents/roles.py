"""Agent roles as data: each agent class says what it is for (`role`, an `AgentRole`), and audits read it.

Built-in agents declare their role; a plug-in family's agents should too. An agent without one gets the role
its name implies, for compatibility: ``oracle`` and ``oracle@K`` ORACLE, ``exploit:*`` EXPLOIT, ``model``
MODEL, anything else BASELINE. A declared role wins over the name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from gymsmith.core.types import AgentRole


def declared_role(factory: Callable[..., Any] | None) -> AgentRole | None:
    """The `role` `factory` declares: a class's attribute, or that of the class a `functools.partial` makes."""
    declared = getattr(factory, "role", None)
    if declared is None:
        declared = getattr(getattr(factory, "func", None), "role", None)
    return None if declared is None else AgentRole(declared)


def role_of(name: str, factory: Callable[..., Any] | None = None) -> AgentRole:
    """The role of the agent called `name` made by `factory` (its class, usually): its declared `role`, else the
    one its name implies."""
    declared = declared_role(factory)
    if declared is not None:
        return declared
    if name == "oracle" or name.startswith(("oracle@", "oracle:")):
        return AgentRole.ORACLE
    if name.startswith("exploit:"):
        return AgentRole.EXPLOIT
    if name == "model":
        return AgentRole.MODEL
    return AgentRole.BASELINE


def roles(agents: dict[str, Callable[..., Any]] | Any) -> dict[str, AgentRole]:
    """name -> role for a family's `agents()` mapping."""
    return {name: role_of(name, factory) for name, factory in agents.items()}


_Class = TypeVar("_Class", bound=type)


def mark(classes: Iterable[_Class], role: AgentRole) -> tuple[_Class, ...]:
    """Declare `role` on each of `classes` (e.g. a family's tuple of red-team agents); returns them."""
    out = tuple(classes)
    for cls in out:
        setattr(cls, "role", role)  # a class attribute the Agent protocol reads
    return out
