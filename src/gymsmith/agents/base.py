"""The agent protocol, and the scripted agents every family gets: null and random."""

from __future__ import annotations

import random
from typing import Any, Protocol, runtime_checkable

from gymsmith.core.types import Action, AgentRole, Observation, TaskSpec, ToolSpec


@runtime_checkable
class Agent(Protocol):
    """The policy side of a rollout. One instance runs one rollout at a time."""

    name: str

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        """Start a rollout of `task`; `observation` is what the environment's reset returned."""
        ...

    def act(self, observation: Observation) -> Action:
        """Return the next tool call, given the latest observation."""
        ...


class NullAgent:
    """Submits at once. Must never be accepted: a family whose null agent passes checks nothing."""

    name = "null"
    role = AgentRole.BASELINE

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        pass

    def act(self, observation: Observation) -> Action:
        return Action(tool="submit", arguments={})


def _collect_ids(value: Any, pools: dict[str, set[int]], entity: str | None = None) -> None:
    """Gather integers from an observation by the argument name they would fill (`order_id`, `amount_cents`, ...).

    Relies only on naming conventions (`<entity>_id`, a row's `id` within an `entity` listing), so it
    works for any family that follows them.
    """
    if isinstance(value, dict):
        entity = value.get("entity", entity) if isinstance(value.get("entity"), str) else entity
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, int):
                _collect_ids(v, pools, entity)
            elif k != "id":
                pools.setdefault(k, set()).add(v)
            elif k == "id" and entity:
                pools.setdefault(f"{entity.removesuffix('s')}_id", set()).add(v)
                pools.setdefault(f"{entity}:id", set()).add(v)
    elif isinstance(value, list):
        for v in value:
            _collect_ids(v, pools, entity)


class RandomAgent:
    """Seeded, schema-valid random tool calls, mostly reusing values it has seen; submits with a small chance per step."""

    name = "random"
    role = AgentRole.BASELINE

    def __init__(self, submit_probability: float = 0.02):
        self.submit_probability = submit_probability

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        self.rng = random.Random(f"random-agent:{task.id}:{seed}")
        self.tools: list[ToolSpec] = [t for t in task.tools if t.name != "submit"]
        self.pools: dict[str, set[int]] = {}
        _collect_ids(observation.data, self.pools)

    def act(self, observation: Observation) -> Action:
        _collect_ids(observation.data, self.pools)
        if not self.tools or self.rng.random() < self.submit_probability:
            return Action(tool="submit", arguments={})
        tool = self.rng.choice(self.tools)
        return Action(tool=tool.name, arguments=self._object(tool.parameters))

    def _object(self, schema: dict[str, Any]) -> dict[str, Any]:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        out: dict[str, Any] = {}
        for name, sub in props.items():  # in schema order, so `entity` is chosen before `id`
            if name in required or self.rng.random() < 0.3:
                out[name] = self._value(name, sub, out)
        return out

    def _value(self, name: str, schema: dict[str, Any], siblings: dict[str, Any]) -> Any:
        if "enum" in schema:
            return self.rng.choice(schema["enum"])
        kind = schema.get("type")
        if kind == "integer":
            lo = schema.get("minimum", 0)
            hi = schema.get("maximum", lo + 10)
            pool = self.pools.get(f"{siblings.get('entity')}:id" if name == "id" else name)
            if pool and self.rng.random() < 0.8:
                return self.rng.choice(sorted(pool))
            return self.rng.randint(lo, max(lo, hi))
        if kind == "string":
            return "random agent " + str(self.rng.randint(0, 99))
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "object":
            return {}
        return None
