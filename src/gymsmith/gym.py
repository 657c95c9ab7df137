"""Gymnasium adapter: every family as a Gymnasium environment with text observations and JSON tool-call actions.

    import gymnasium, gymsmith.gym            # importing registers gymsmith/<family>-v<major> for each family
    env = gymnasium.make("gymsmith/ops-v1")   # or, without the import: gymnasium.make("gymsmith.gym:gymsmith/ops-v1")
    obs, info = env.reset(seed=0)             # info["tools"]: the OpenAI function specs
    obs, reward, terminated, truncated, info = env.step('{"tool": "get_status", "arguments": {}}')

An action is a JSON object ``{"tool": NAME, "arguments": {...}}``; anything else is recorded as a reply
with no tool call and answered with an error observation. The reward is 0 until the episode ends (submit
or the step limit), then the verifier's reward under `policy`, with its components in `info`. Tasks
come from the train split only. Observations longer than MAX_OBSERVATION characters are cut, and
characters outside CHARSET are replaced by "?".
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import gymnasium
from gymnasium import spaces

from gymsmith.core.types import NO_TOOL_CALL, Action, Split, TaskSpec
from gymsmith.registry import get_family, list_families, split_of
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.service import VerifierService

CHARSET = "".join(chr(c) for c in (9, 10, 13, *range(32, 127), *range(0xA0, 0x250)))
_ALLOWED = frozenset(CHARSET)
MAX_OBSERVATION = 100_000
MAX_ACTION = 16_384


def _clean(text: str, limit: int) -> str:
    text = "".join(ch if ch in _ALLOWED else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 20] + "\n[... truncated]"


class GymsmithEnv(gymnasium.Env[str, str]):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, family: str = "ops", *, difficulty: float | None = None, knobs: dict[str, Any] | None = None,
                 policy: str = DEFAULT_POLICY, max_steps: int = 300, render_mode: str | None = None):
        self.family = get_family(family)
        self.difficulty, self.knobs, self.policy, self.max_steps = difficulty, dict(knobs or {}), policy, max_steps
        self.render_mode = render_mode
        self.observation_space = spaces.Text(min_length=0, max_length=MAX_OBSERVATION, charset=CHARSET)
        self.action_space = spaces.Text(min_length=0, max_length=MAX_ACTION, charset=CHARSET)
        self._env = self.family.make_env()
        self._verifier: VerifierService | None = None
        self._task: TaskSpec | None = None
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """`options`: "task" (a TaskSpec or its dict) to play a given task, "difficulty" to override."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            task = options["task"] if isinstance(options["task"], TaskSpec) else TaskSpec.model_validate(options["task"])
        else:
            while True:
                difficulty = options.get("difficulty", self.difficulty)
                if difficulty is None:
                    difficulty = round(float(self.np_random.uniform(0.0, 1.0)), 4)
                task = self.family.generate(int(self.np_random.integers(0, 2**31 - 1)), **{**self.knobs, "difficulty": difficulty})
                if split_of(task.id) is Split.TRAIN:
                    break
        self._task, self._steps = task, 0
        episode_seed = int(self.np_random.integers(0, 2**31 - 1))
        observation = self._env.reset(task, seed=episode_seed)
        self._last = _clean(observation.text, MAX_OBSERVATION)
        return self._last, {"task_id": task.id, "goal": task.goal, "tools": [t.to_openai() for t in task.tools],
                            "difficulty": task.difficulty}

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if self._task is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        self._steps += 1
        result = self._env.step(_parse(action))
        self._last = _clean(result.observation.text, MAX_OBSERVATION)
        terminated = result.done
        truncated = not terminated and self._steps >= self.max_steps
        info: dict[str, Any] = {"error": result.observation.error.kind.value if result.observation.error else None}
        reward = 0.0
        if terminated or truncated:
            if self._verifier is None:
                self._verifier = VerifierService()
            with tempfile.TemporaryDirectory(prefix="gymsmith-gym-") as tmp:
                verdict = self._verifier.verify(self._task, self._env.final_state(Path(tmp)), policy=self.policy)
            reward = float(verdict.value)
            info.update(accepted=verdict.accepted, reward_components={k: c.value for k, c in verdict.components.items()},
                        gate_failures=verdict.gate_failures)
        return self._last, reward, terminated, truncated, info

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._env.close()
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None


def _parse(action: str) -> Action:
    try:
        call = json.loads(action)
    except (json.JSONDecodeError, TypeError):
        return Action(tool=NO_TOOL_CALL, arguments=str(action))
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
        return Action(tool=NO_TOOL_CALL, arguments=str(action))
    arguments = call.get("arguments", {})
    return Action(tool=call["tool"], arguments=arguments if isinstance(arguments, (dict, str)) else json.dumps(arguments))


def env_id(family: str, version: str) -> str:
    return f"gymsmith/{family}-v{version.split('.')[0]}"


def register_all() -> list[str]:
    """Register every family with Gymnasium; returns the ids. Called on import."""
    ids = []
    for info in list_families():
        gid = env_id(info.name, info.version)
        if gid not in gymnasium.registry:
            gymnasium.register(id=gid, entry_point="gymsmith.gym:GymsmithEnv", kwargs={"family": info.name})
        ids.append(gid)
    return ids


register_all()
