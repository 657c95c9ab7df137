"""Adapters for trainers: a Parquet dataset of prompts, a GRPO-style reward function, and a multi-turn hook.

- `export_dataset(spec, path)`: one row per task — `prompt` (chat messages), `tools` (OpenAI specs as
  JSON), `task_id`, `split`, `task` (TaskSpec JSON). Loads with `datasets.load_dataset("parquet", ...)`.
  Only train-split task sets unless `allow_heldout=True` (for an evaluation set).
- `grpo_reward(...)`: a function `reward(prompts, completions, task, **kwargs) -> list[float]` with the
  signature TRL's GRPOTrainer calls (dataset columns arrive as keyword lists). Each completion's tool calls
  are executed in a fresh environment of its task, then submitted and scored by the verifier.
- `MultiTurnRollout`: for trainers that drive their own generation: `messages()` to prompt, `act(reply)`
  to execute the model's tool calls and get tool messages back, `reward()` at the end.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gymsmith.core.errors import SplitPolicyError
from gymsmith.core.types import NO_TOOL_CALL, Action, Reward, TaskSpec
from gymsmith.registry import TaskSetSpec, build_taskset, get_family, split_of
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.service import VerifierService

DATASET_SCHEMA = pa.schema([
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("tools", pa.string()), ("task_id", pa.string()), ("split", pa.string()), ("difficulty", pa.float64()),
    ("task", pa.string()),
])


def prompt_messages(task: TaskSpec, first_observation: str) -> list[dict[str, str]]:
    template = getattr(get_family(task.family), "system_prompt", None) or "Task:\n{goal}"
    return [{"role": "system", "content": template.format(goal=task.goal)}, {"role": "user", "content": first_observation}]


def export_dataset(spec: TaskSetSpec, path: str | Path, *, allow_heldout: bool = False) -> int:
    """Write the task set as a prompt dataset; returns the row count. Raises SplitPolicyError for held-out
    tasks unless `allow_heldout` (an evaluation set must say so)."""
    if spec.split != "train" and not allow_heldout:
        raise SplitPolicyError(f"a training dataset uses split 'train', not {spec.split!r} (allow_heldout=True for eval)")
    rows = []
    for task in build_taskset(spec):
        env = get_family(task.family).make_env()
        try:
            first = env.reset(task, seed=0).text
        finally:
            env.close()
        rows.append({"prompt": prompt_messages(task, first), "tools": json.dumps([t.to_openai() for t in task.tools]),
                     "task_id": task.id, "split": split_of(task.id, heldout_fraction=spec.heldout_fraction).value,
                     "difficulty": task.difficulty, "task": task.model_dump_json()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=DATASET_SCHEMA), path)
    return len(rows)


def tool_calls_of(completion: Any) -> list[Action]:
    """Tool calls from a completion: chat messages with `tool_calls`, or text with one JSON call per line
    ({"tool": ..., "arguments": {...}}, or OpenAI's {"name": ..., "arguments": ...})."""
    actions: list[Action] = []
    if isinstance(completion, dict):
        messages = [completion]
    elif isinstance(completion, list):
        messages = completion
    else:
        messages = [{"role": "assistant", "content": completion}]
    for m in messages:
        for call in m.get("tool_calls") or []:
            fn = call.get("function", call)
            actions.append(Action(tool=str(fn.get("name", "")), arguments=fn.get("arguments") or {}))
        for line in str(m.get("content") or "").splitlines():
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                call = json.loads(line)
            except json.JSONDecodeError:
                actions.append(Action(tool=NO_TOOL_CALL, arguments=line))
                continue
            name = call.get("tool", call.get("name"))
            if isinstance(name, str):
                actions.append(Action(tool=name, arguments=call.get("arguments") or {}))
    return actions


class MultiTurnRollout:
    """One episode driven by the trainer's own generation loop."""

    def __init__(self, task: TaskSpec, *, episode_seed: int = 0, policy: str = DEFAULT_POLICY,
                 verifier: VerifierService | None = None, max_steps: int = 300):
        self.task, self.policy, self.max_steps = task, policy, max_steps
        self.env = get_family(task.family).make_env()
        self.first = self.env.reset(task, seed=episode_seed)
        self._own_verifier = verifier is None
        self.verifier = verifier or VerifierService()
        self.done, self.steps = False, 0
        self._reward: Reward | None = None

    def messages(self) -> list[dict[str, str]]:
        return prompt_messages(self.task, self.first.text)

    def tools(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self.task.tools]

    def act(self, reply: Any) -> list[dict[str, Any]]:
        """Execute the tool calls in `reply` (a message or text); return the tool/user messages to append."""
        calls = tool_calls_of(reply) or [Action(tool=NO_TOOL_CALL, arguments=str(reply))]
        out = []
        for action in calls:
            if self.done or self.steps >= self.max_steps:
                break
            result = self.env.step(action)
            self.steps += 1
            self.done = result.done
            out.append({"role": "tool", "tool_call_id": f"call_{self.steps}", "content": result.observation.text})
        return out

    def reward(self) -> Reward:
        """Submit if the model did not, and score. Call once, at the end."""
        if self._reward is None:
            if not self.done:
                self.env.step(Action(tool="submit", arguments={}))
            with tempfile.TemporaryDirectory(prefix="gymsmith-rollout-") as tmp:
                self._reward = self.verifier.verify(self.task, self.env.final_state(Path(tmp)), policy=self.policy)
            self.env.close()
            if self._own_verifier:
                self.verifier.close()
        return self._reward


def grpo_reward(*, policy: str = DEFAULT_POLICY, max_steps: int = 300, workers: int = 1):
    """A reward function for GRPO-style trainers: `f(prompts, completions, task, **kwargs) -> list[float]`.

    `task` is the dataset's `task` column (TaskSpec JSON per row). Invalid tool calls are executed as such
    (and penalised only through the reward); a verifier error raises, as it must not pass for a 0 reward.
    """
    verifier = VerifierService(workers=workers)

    def reward(prompts: list[Any], completions: list[Any], task: list[str], **kwargs: Any) -> list[float]:
        if not (len(prompts) == len(completions) == len(task)):
            raise ValueError(f"prompts, completions and task must have one entry per sample "
                             f"({len(prompts)}, {len(completions)}, {len(task)})")
        scores = []
        for completion, task_json in zip(completions, task):
            rollout = MultiTurnRollout(TaskSpec.model_validate_json(task_json), policy=policy, verifier=verifier,
                                       max_steps=max_steps)
            rollout.act(completion)
            scores.append(rollout.reward().value)
        return scores

    reward.__name__ = f"gymsmith_{policy}"
    reward.close = verifier.close  # type: ignore[attr-defined]
    return reward
