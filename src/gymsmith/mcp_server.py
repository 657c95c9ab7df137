"""`gymsmith mcp FAMILY --task ID|--seed N`: one task's tools over MCP (stdio). The verifier stays in this
process tree; when the episode ends (the submit, the step or time limit), the reward comes back in that call's
tool result, once."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from gymsmith.core.types import Action, TaskSpec
from gymsmith.registry import as_generated, get_family
from gymsmith.runner.episode import DEFAULT_MAX_STEPS, Episode
from gymsmith.runner.lane import Lane
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.service import VerifierService


class TaskSession:
    """The episode behind the MCP tools of one task: limited, ended and verified as `gymsmith run` does it
    (`runner.episode`). The episode's reward comes back, once, in the result of the call that ended it (the
    submit, the step limit, an environment failure); after that every call is refused as `episode_over`."""

    def __init__(self, task: TaskSpec, *, episode_seed: int = 0, policy: str = DEFAULT_POLICY,
                 max_steps: int = DEFAULT_MAX_STEPS, time_limit_s: float = math.inf):
        self.task, self.policy = task, policy
        self.lane = Lane("gymsmith-mcp")  # every call of the environment on one thread, never the event loop's
        self.env = self.lane.run(get_family(task.family).make_env)
        self.verifier = VerifierService()
        self.episode = Episode(env=self.env, task=task, verifier=self.verifier, policy=policy, max_steps=max_steps,
                               time_limit_s=time_limit_s)
        self.first = self.lane.run(self.episode.reset, episode_seed)

    def call(self, name: str, arguments: dict[str, Any] | None) -> types.CallToolResult:
        """One tool call, after every call made before it (the lane's order); the reward in the result of the call
        that ended the episode only. Whether the episode had ended is read on the lane with the play, so calls in
        flight together cannot each take the reward (a hundred-and-fiftieth attacker's 5 concurrent submits were each
        paid, 25 of 25)."""
        def play() -> tuple[bool, Any, Any]:
            ended_before = self.episode.outcome is not None
            return (ended_before, *self.episode.play(Action(tool=name, arguments=arguments or {})))
        ended_before, result, outcome = self.lane.run(play)
        text = result.observation.text
        structured: dict[str, Any] = {"observation": result.observation.model_dump(mode="json")}
        if outcome is not None and not ended_before:
            structured["reward"] = outcome.reward.model_dump(mode="json")
            structured["end_reason"] = outcome.reason.value
            text += f"\nepisode over ({outcome.reason.value}); reward: {outcome.reward.value} (accepted: {outcome.reward.accepted})"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured,
                                    is_error=result.observation.error is not None)

    def close(self) -> None:
        """End the session: calls not yet started are dropped (a client gone leaves nothing to run: a
        hundred-and-fifty-fifth attacker's 50 queued 2 s commands ran for 98 s after its stdin closed), the one running
        finishes, then the environment is closed."""
        self.lane.cancel_pending()
        try:
            self.lane.run(self.env.close)
        finally:
            self.lane.close()
            self.verifier.close()


def build_server(session: TaskSession) -> Server:
    tools = [types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in session.task.tools]

    async def on_list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(ctx, params: types.CallToolRequestParams) -> types.CallToolResult:
        # the loop answers meanwhile; a call cancelled with the session (its client gone) is not waited for
        return await anyio.to_thread.run_sync(session.call, params.name, params.arguments, abandon_on_cancel=True)

    return Server("gymsmith", version="1", instructions=session.task.goal + "\n\n" + session.first.text,
                  on_list_tools=on_list_tools, on_call_tool=on_call_tool)


async def serve_stdio(task: TaskSpec, *, episode_seed: int = 0, policy: str = DEFAULT_POLICY,
                      max_steps: int = DEFAULT_MAX_STEPS, time_limit_s: float = math.inf) -> None:
    session = TaskSession(task, episode_seed=episode_seed, policy=policy, max_steps=max_steps, time_limit_s=time_limit_s)
    server = build_server(session)
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        session.close()


def resolve_task(family: str, *, task: str | None, seed: int | None, knobs: dict[str, Any],
                 store: str | None = None) -> TaskSpec:
    """The task to serve: a task id found in `store`, a TaskSpec JSON file or text, or the family's task for
    `seed` and `knobs`. Raises ValueError when a task id is not in the store or is of another family, and
    NotGeneratedError when a task sent in full is not what its family generates from its seed and knobs."""
    if not task:
        return get_family(family).generate(seed or 0, **knobs)
    found = None
    if task.lstrip().startswith("{"):
        spec = TaskSpec.model_validate(json.loads(task))
    elif Path(task).exists():
        spec = TaskSpec.model_validate(json.loads(Path(task).read_text()))
    else:
        found = TrajectoryStore(store, create=False).find_task(task) if store else None  # a typo is no empty store
        if found is None:
            raise ValueError(f"task id {task!r} is not in the store {store!r}; pass a TaskSpec file or --seed")
        spec = found
    if spec.family != family:
        raise ValueError(f"--task is a {spec.family!r} task, not {family!r}")
    if found is None:  # sent in full: played only if it is what the family makes (its id, and so its split, not the
        # sender's); a repository task is served by its id from a store that holds it (any run of it stores it)
        return as_generated(get_family(family), spec)
    return spec
