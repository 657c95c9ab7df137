"""A base for scripted agents written as generators: `obs = yield from self.call(tool, **args)`.

Families' oracles and red-team agents subclass it; the episode is submitted when `script()` returns.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gymsmith.core.types import Action, Observation, TaskSpec

Script = Generator[Action, Observation, None]


class ScriptedAgent:
    """Subclasses implement `script()`; `submit_note` is sent with the final submit."""

    name = "scripted"
    submit_note = ""

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        self.task, self.first, self.seed = task, observation, seed
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

    def call(self, tool: str, **arguments: Any) -> Generator[Action, Observation, Observation]:
        """Call a tool once and return its observation."""
        return (yield Action(tool=tool, arguments=arguments))
