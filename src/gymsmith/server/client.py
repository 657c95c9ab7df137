"""The client for `gymsmith serve`, with the same calls as a local environment (reset, tools, step, close),
so a trainer on another machine swaps one for the other. The reward arrives in `StepResult.info["reward"]`
when the task is submitted, because the verifier stays on the server."""

from __future__ import annotations

from typing import Any

import httpx

from gymsmith.core.errors import GymsmithError
from gymsmith.core.types import Action, Observation, Reward, StepResult, TaskSpec, ToolSpec


class RemoteError(GymsmithError):
    """The server refused a call; the message carries its status and reason."""


class RemoteEnvironment:
    def __init__(self, base_url: str, *, family: str, token: str | None = None, timeout_s: float = 120.0):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout_s)
        self.family = family
        self.session_id: str | None = None
        self._key: str | None = None
        self._tools: list[ToolSpec] = []
        self.task: TaskSpec | None = None
        self.reward: Reward | None = None

    def _check(self, response: httpx.Response) -> dict[str, Any]:
        if response.status_code >= 400:
            detail = response.json().get("detail") if response.headers.get("content-type", "").startswith("application/json") else response.text
            raise RemoteError(f"HTTP {response.status_code}: {detail}")
        return response.json() if response.content else {}

    def reset(self, task: TaskSpec | None = None, *, task_id: str | None = None, seed: int = 0,
              knobs: dict[str, Any] | None = None, episode_seed: int = 0) -> Observation:
        """Open a session on `task`, on a task id the server's store knows, or on the task generated from
        `seed` and `knobs`; raises RemoteError."""
        self.close()
        body: dict[str, Any] = {"family": self.family, "seed": seed, "knobs": knobs or {}, "episode_seed": episode_seed}
        if task_id is not None:
            body["task_id"] = task_id
        if task is not None:
            body["task"] = task.model_dump(mode="json")
        data = self._check(self._http.post("/sessions", json=body))
        self.session_id, self._key = data["session_id"], data["session_key"]
        self.task = TaskSpec.model_validate(data["task"])
        self._tools = [ToolSpec.model_validate(t) for t in data["tools"]]
        self.reward = None
        return Observation.model_validate(data["observation"])

    def tools(self) -> list[ToolSpec]:
        return list(self._tools)

    def step(self, action: Action) -> StepResult:
        if self.session_id is None:
            raise RemoteError("reset() must be called before step()")
        data = self._check(self._http.post(f"/sessions/{self.session_id}/step", headers=self._session_headers(),
                                           json={"tool": action.tool, "arguments": action.arguments}))
        info: dict[str, Any] = {}
        if data.get("reward") is not None:
            self.reward = Reward.model_validate(data["reward"])
            info["reward"] = self.reward
        if data.get("end_reason") is not None:
            info["end_reason"] = data["end_reason"]
        return StepResult(observation=Observation.model_validate(data["observation"]), done=data["done"], info=info)

    def _session_headers(self) -> dict[str, str]:
        return {"X-Session-Key": self._key or ""}  # set with the session id by reset(); callers check that first

    def state_hash(self) -> str:
        data = self._check(self._http.get(f"/sessions/{self.session_id}", headers=self._session_headers()))
        return data["state_hash"]

    def close(self) -> None:
        if self.session_id is not None:
            try:
                self._http.delete(f"/sessions/{self.session_id}", headers=self._session_headers())
            except httpx.HTTPError:
                pass  # the server may have expired it already
            self.session_id = None
