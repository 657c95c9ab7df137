"""A base for scripted ops agents written as generators: `obs = yield from self._call(tool, **args)`."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gymsmith.core.types import Action, Observation, TaskSpec
from gymsmith.families.ops.oracle import RETRYABLE

Script = Generator[Action, Observation, None]


class ScriptedAgent:
    """Subclasses implement `script()`; the episode is submitted when the script returns."""

    name = "scripted"
    submit_note = ""

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        self.task, self.first = task, observation
        self.script_gen: Script = self.script()
        self.started = False

    def act(self, observation: Observation) -> Action:
        try:
            if not self.started:
                self.started = True
                return next(self.script_gen)
            return self.script_gen.send(observation)
        except StopIteration:
            return Action(tool="submit", arguments={"note": self.submit_note} if self.submit_note else {})

    def script(self) -> Script:  # pragma: no cover - abstract
        raise NotImplementedError
        yield

    def _call(self, tool: str, **arguments: Any) -> Generator[Action, Observation, Observation]:
        """Call a tool, retrying simulated transient faults a few times."""
        for _ in range(6):
            obs = yield Action(tool=tool, arguments=arguments)
            if obs.error is None or obs.error.kind not in RETRYABLE:
                return obs
        return obs

    def _all(self, entity: str, filters: dict[str, Any] | None = None) -> Generator[Action, Observation, list[dict]]:
        """Every row of `entity` matching `filters`, page by page."""
        rows: list[dict] = []
        while True:
            obs = yield from self._call("search_records", entity=entity, filters=filters or {}, limit=50, offset=len(rows))
            if obs.error is not None:
                return rows
            rows += obs.data["rows"]
            if not obs.data["rows"] or len(rows) >= obs.data["total"]:
                return rows
