"""The base of scripted ops agents: `obs = yield from self._call(tool, **args)` retries simulated faults."""

from __future__ import annotations

import re
from collections.abc import Generator
from typing import Any

from gymsmith.agents.scripted import Script, ScriptedAgent as BaseScriptedAgent
from gymsmith.core.types import Action, Observation
from gymsmith.families.ops.oracle import RETRYABLE

__all__ = ["Script", "ScriptedAgent"]


class ScriptedAgent(BaseScriptedAgent):
    """The generic scripted agent, plus ops helpers that retry simulated faults and page through records."""

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

    def _ask_caller_email(self) -> Generator[Action, Observation, dict[str, Any]]:
        """Ask the customer on the line for their e-mail address: {"customer_email": it}, or {} if no reply gave one."""
        reply = yield from self._call("message_user", text="What is the e-mail address on your account?")
        email = re.search(r"[\w.+-]+@[\w.-]+\w", reply.data.get("reply", "")) if reply.error is None else None
        return {"customer_email": email.group(0)} if email else {}
