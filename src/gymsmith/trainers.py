"""Adapters for trainers: a Parquet dataset of prompts, a GRPO-style reward function, and a multi-turn hook.

- `export_dataset(spec, path)`: one row per task — `prompt` (chat messages; the system message lists the tools
  and the call syntax), `tools` (OpenAI specs as JSON), `task_id`, `split`, `task` (TaskSpec JSON). Loads with
  `datasets.load_dataset("parquet", ...)`. Only train-split task sets unless `allow_heldout=True` (for an
  evaluation set).
- `grpo_reward(...)`: a function `reward(prompts, completions, task, **kwargs) -> list[float]` with the
  signature TRL's GRPOTrainer calls (dataset columns arrive as keyword lists). Each completion's tool calls
  are executed in a fresh environment of its task, then submitted and scored by the verifier.
- `MultiTurnRollout`: for trainers that drive their own generation: `messages()` to prompt, `act(reply)`
  to execute the model's tool calls and get tool messages back, `reward()` at the end. With
  `step_rewards=True`, also a reward per executed call (`step_rewards`, `progress`, `start_progress`): the change
  in the verifier's value of the state (docs/trainers.md, "Per-step rewards").

A bad completion never raises (malformed tool calls, garbage JSON, huge or deeply nested arguments): each
bad call is an error observation, and a completion the adapters cannot execute at all scores 0 with the
reason (`grpo_reward`'s `last_details`, `MultiTurnRollout.end_reason`). Infrastructure failures (a verifier
or sandbox that cannot run) still raise: they must never pass for a reward of 0. See docs/episodes.md.
"""

from __future__ import annotations

import math

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gymsmith.core.errors import SplitPolicyError, is_infrastructure
from gymsmith.core.types import NO_TOOL_CALL, Action, EndReason, Reward, TaskSpec
from gymsmith.runner.episode import DEFAULT_MAX_STEPS, Episode
from gymsmith.envs.base import MAX_ARGUMENTS_CHARS, clip, preview
from gymsmith.registry import TaskSetSpec, build_taskset, get_family, split_of
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.progress import required_discount
from gymsmith.verifier.service import VerifierService

DATASET_SCHEMA = pa.schema([
    ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ("tools", pa.string()), ("task_id", pa.string()), ("split", pa.string()), ("difficulty", pa.float64()),
    ("task", pa.string()),
])


TOOL_CALL_FORMAT = ('To call a tool, write one JSON object on a line of its own: {"tool": NAME, "arguments": {...}}. '
                    "Write one line per call; the calls run in order.")


def tools_section(tools: list[dict[str, Any]]) -> str:
    """The text that lists `tools` (OpenAI function specs) in a system message: one spec per line, as JSON, and
    TOOL_CALL_FORMAT, the call syntax `grpo_reward` reads."""
    return "# Tools\n" + "\n".join(json.dumps(t, separators=(",", ":")) for t in tools) + "\n\n" + TOOL_CALL_FORMAT


def prompt_messages(task: TaskSpec, first_observation: str, *, tools_in_prompt: bool = False) -> list[dict[str, str]]:
    """The messages that open an episode of `task`: the family's system prompt with the goal, and the first
    observation. With `tools_in_prompt`, the system message also lists the task's tools (`tools_section`), for a
    trainer that renders none itself: TRL's GRPOTrainer renders only the Python callables passed as its `tools`,
    never a dataset's `tools` column."""
    template = getattr(get_family(task.family), "system_prompt", None) or "Task:\n{goal}"
    system = template.format(goal=task.goal)
    if tools_in_prompt:
        system += "\n\n" + tools_section([t.to_openai() for t in task.tools])
    return [{"role": "system", "content": system}, {"role": "user", "content": first_observation}]


def export_dataset(spec: TaskSetSpec, path: str | Path, *, allow_heldout: bool = False,
                   tools_in_prompt: bool = True) -> int:
    """Write the task set as a prompt dataset; returns the row count. Raises SplitPolicyError for held-out
    tasks unless `allow_heldout` (an evaluation set must say so). The system message of each `prompt` lists the
    task's tools and the call syntax unless `tools_in_prompt=False` (for a trainer that renders the `tools` column
    through its chat template instead)."""
    if spec.split != "train" and not allow_heldout:
        raise SplitPolicyError(f"a training dataset uses split 'train', not {spec.split!r} (allow_heldout=True for eval)")
    rows = []
    for task in build_taskset(spec):
        env = get_family(task.family).make_env()
        try:
            first = env.reset(task, seed=0).text
        finally:
            env.close()
        rows.append({"prompt": prompt_messages(task, first, tools_in_prompt=tools_in_prompt), "tools": json.dumps([t.to_openai() for t in task.tools]),
                     "task_id": task.id, "split": split_of(task.id, heldout_fraction=spec.heldout_fraction).value,
                     "difficulty": task.difficulty, "task": task.model_dump_json()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=DATASET_SCHEMA), path)
    return len(rows)


MAX_COMPLETION_CALLS = 1_000  # tool calls read from one completion; the rest are ignored


def _call_action(name: Any, arguments: Any) -> Action:
    """An Action from a tool call's name and arguments as a model sent them, whatever their types."""
    if not isinstance(name, str):
        return Action(tool=NO_TOOL_CALL, arguments=clip(f"a tool call whose name is {preview(name)}", 1000))
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, (dict, str)):  # e.g. a list: the environment explains it is not an object
        try:
            arguments = json.dumps(arguments)
        except (ValueError, TypeError, RecursionError):
            arguments = preview(arguments)
    if isinstance(arguments, dict) and not all(isinstance(k, str) for k in arguments):
        arguments = preview(arguments)
    return Action(tool=name, arguments=arguments)


def _calls_in_message(m: Any) -> list[Action]:
    if not isinstance(m, dict):
        m = {"role": "assistant", "content": m if isinstance(m, str) else None}
    actions: list[Action] = []
    calls = m.get("tool_calls")
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            actions.append(Action(tool=NO_TOOL_CALL, arguments=clip(f"a tool call that is not an object: {preview(call)}", 1000)))
            continue
        fn = call.get("function", call)
        fn = fn if isinstance(fn, dict) else {}
        actions.append(_call_action(fn.get("name", ""), fn.get("arguments")))
    content = m.get("content")
    for line in (content if isinstance(content, str) else "").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        if len(line) > MAX_ARGUMENTS_CHARS + 4096:  # not parsed: the environment would refuse it as too large
            actions.append(Action(tool=NO_TOOL_CALL, arguments=line[:1000]))
            continue
        try:
            call = json.loads(line)
        except (ValueError, RecursionError):  # not JSON (or nested beyond parsing): a reply without a tool call
            actions.append(Action(tool=NO_TOOL_CALL, arguments=line[:MAX_ARGUMENTS_CHARS]))
            continue
        if not isinstance(call, dict):
            continue
        name = call.get("tool", call.get("name"))
        if isinstance(name, str):
            actions.append(_call_action(name, call.get("arguments")))
    return actions


def tool_calls_of(completion: Any) -> list[Action]:
    """Tool calls from a completion: chat messages with `tool_calls`, or text with one JSON call per line
    ({"tool": ..., "arguments": {...}}, or OpenAI's {"name": ..., "arguments": ...}). Never raises: whatever
    cannot be read as a call becomes a reply without a tool call; at most MAX_COMPLETION_CALLS calls."""
    if isinstance(completion, dict):
        messages: list[Any] = [completion]
    elif isinstance(completion, list):
        messages = completion
    else:
        messages = [{"role": "assistant", "content": completion if isinstance(completion, str) else str(completion)}]
    actions: list[Action] = []
    for m in messages:
        actions += _calls_in_message(m)
        if len(actions) >= MAX_COMPLETION_CALLS:
            break
    return actions[:MAX_COMPLETION_CALLS]


class MultiTurnRollout:
    """One episode driven by the trainer's own generation loop: a `runner.episode.Episode`, limited, ended and
    verified as `gymsmith run` does it.

    With `step_rewards=True` and `gamma` (the trainer's discount per step, 1.0 if it does not discount; required,
    ValueError without) the verifier values the start state (`start_progress`, V(s0)) and the state after each
    executed call: `progress[i]` is V(s_i) and `step_rewards[i]` gamma V(s_i) minus the last known value (None
    where no value is known before it; a value that could not be computed, `progress_errors[i]` says why, is held at
    the last known one: (gamma - 1) times it). `reward()` settles the last entry with the
    episode's reward value (0 for a failure), so that the step rewards, discounted by gamma, sum to gamma^T times
    the episode's reward minus V(s0): progress undone later earns nothing under the trainer's own discount.
    Each changed state costs one verification."""

    def __init__(self, task: TaskSpec, *, episode_seed: int = 0, policy: str = DEFAULT_POLICY,
                 verifier: VerifierService | None = None, max_steps: int = DEFAULT_MAX_STEPS, step_rewards: bool = False,
                 gamma: float | None = None, time_limit_s: float | None = None):
        self.gamma = required_discount(step_rewards, gamma)
        self.task, self.policy, self.max_steps = task, policy, max_steps
        self.env = get_family(task.family).make_env()
        self._own_verifier = verifier is None
        self.verifier = verifier or VerifierService()
        self.episode = Episode(env=self.env, task=task, verifier=self.verifier, policy=policy, max_steps=max_steps,
                               step_rewards=step_rewards, gamma=self.gamma, time_limit_s=time_limit_s or math.inf)
        try:
            self.first = self.episode.reset(episode_seed)
        except BaseException:
            self.close()
            raise
        start = self.episode.value_start()
        self.start_progress: float | None = start.progress if start is not None else None

    @property
    def done(self) -> bool:
        """The model submitted."""
        return self.episode.reason is EndReason.SUBMITTED

    @property
    def steps(self) -> int:
        return len(self.episode.steps)

    @property
    def failure(self) -> str | None:
        """The environment's exception on the model's input, if one ended the episode."""
        return self.episode.detail if self.episode.reason is EndReason.ENVIRONMENT_EXCEPTION else None

    @property
    def end_reason(self) -> EndReason | None:
        """Why the episode ended, once `reward()` scored it."""
        outcome = self.episode.outcome
        return outcome.reason if outcome is not None else None

    @property
    def progress(self) -> list[float | None]:
        return [s.progress for s in self.episode.steps] if self.episode.meter is not None else []

    @property
    def step_rewards(self) -> list[float | None]:
        return [s.step_reward for s in self.episode.steps] if self.episode.meter is not None else []

    @property
    def progress_errors(self) -> list[str | None]:
        return [s.progress_error for s in self.episode.steps] if self.episode.meter is not None else []

    def messages(self) -> list[dict[str, str]]:
        return prompt_messages(self.task, self.first.text)

    def tools(self) -> list[dict[str, Any]]:
        return [t.to_openai() for t in self.task.tools]

    def act(self, reply: Any) -> list[dict[str, Any]]:
        """Execute the tool calls in `reply` (a message or text) until the episode is over; return the tool/user
        messages to append."""
        calls = tool_calls_of(reply) or [Action(tool=NO_TOOL_CALL, arguments=clip(reply if isinstance(reply, str) else preview(reply), 1000))]
        out = []
        for action in calls:
            if self.episode.over or self.episode.limit() is not None:
                break
            result = self.episode.step(action)
            if not self.episode.over:
                self.episode.value_step()
            out.append({"role": "tool", "tool_call_id": f"call_{self.steps}", "content": result.observation.text})
        return out

    def reward(self) -> Reward:
        """Score the episode (the model's last state, submitted or not). Call once, at the end; later calls return
        the same reward. A failed episode (the environment raised on the model's input, or the final state cannot
        be graded) scores 0, with `end_reason` saying why; an infrastructure failure raises."""
        try:
            return self.episode.finish().reward
        finally:
            self.close()

    def close(self) -> None:
        """Release the environment (and the verifier, if this rollout started it); `reward()` does it too."""
        self.env.close()
        if self._own_verifier:
            self.verifier.close()


def grpo_reward(*, policy: str = DEFAULT_POLICY, max_steps: int = DEFAULT_MAX_STEPS, workers: int = 1,
                time_limit_s: float | None = None):
    """A reward function for GRPO-style trainers: `f(prompts, completions, task, **kwargs) -> list[float]`.

    `task` is the dataset's `task` column (TaskSpec JSON per row). Invalid tool calls are executed as such
    (and penalised only through the reward); a completion that cannot be executed at all scores 0. It never
    raises on a bad completion; it raises on a bad `task` column (the caller's data) and on infrastructure
    failures (a verifier error must not pass for a 0 reward). After each call, `reward.last_details` holds one
    dict per sample: task_id, value, end_reason and (for a failure) detail. `time_limit_s`: seconds each sample's
    episode may last (none by default), as `gymsmith run --time-limit`.
    """
    verifier = VerifierService(workers=workers)

    def reward(prompts: list[Any], completions: list[Any], task: list[str], **kwargs: Any) -> list[float]:
        if not (len(prompts) == len(completions) == len(task)):
            raise ValueError(f"prompts, completions and task must have one entry per sample "
                             f"({len(prompts)}, {len(completions)}, {len(task)})")
        specs = [TaskSpec.model_validate_json(t) for t in task]  # the caller's data: a bad row raises
        scores, details = [], []
        for completion, spec in zip(completions, specs):
            rollout = MultiTurnRollout(spec, policy=policy, verifier=verifier, max_steps=max_steps,
                                       time_limit_s=time_limit_s)
            detail: dict[str, Any] = {"task_id": spec.id}
            try:
                rollout.act(completion)
                verdict = rollout.reward()
                detail.update(value=verdict.value, end_reason=rollout.end_reason.value if rollout.end_reason else None)
                if rollout.end_reason not in (EndReason.SUBMITTED, EndReason.STEP_LIMIT):
                    detail["detail"] = verdict.gate_failures[0] if verdict.gate_failures else None
                scores.append(verdict.value)
            except Exception as exc:  # act and reward handle the model's input themselves; this is a last guard
                if is_infrastructure(exc):
                    raise
                detail.update(value=0.0, end_reason=EndReason.ENVIRONMENT_EXCEPTION.value,
                              detail=f"{type(exc).__name__}: {clip(str(exc), 500)}")
                scores.append(0.0)
            finally:
                rollout.close()
            details.append(detail)
        reward.last_details = details  # type: ignore[attr-defined]
        return scores

    reward.__name__ = f"gymsmith_{policy}"
    reward.last_details = []  # type: ignore[attr-defined]
    reward.close = verifier.close  # type: ignore[attr-defined]
    return reward
