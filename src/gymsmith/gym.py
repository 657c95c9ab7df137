"""Gymnasium adapter: every family as a Gymnasium environment with text observations and JSON tool-call actions.

    import gymnasium, gymsmith.gym            # importing registers gymsmith/<family>-v<major> for each family
    env = gymnasium.make("gymsmith/ops-v3")   # or, without the import: gymnasium.make("gymsmith.gym:gymsmith/ops-v3")
    envs = gymnasium.make_vec("gymsmith/ops-v3", 4, vectorization_mode="async")   # "sync" too; tuples of str
    obs, info = env.reset(seed=0)             # info["tools"]: the OpenAI function specs
    obs, reward, terminated, truncated, info = env.step('{"tool": "get_status", "arguments": {}}')

An action is a JSON object ``{"tool": NAME, "arguments": {...}}``; anything else is recorded as a reply
with no tool call and answered with an error observation. The reward is 0 until the episode ends (submit
or the step limit), then the verifier's reward under `policy`, with its components in `info`. Tasks
come from the train split only: generated at `difficulty` (drawn per reset when None) with `knobs`, or drawn from
``tasks=`` (a list of the family's train tasks, e.g. ``build_taskset(spec)``; a held-out one is refused, at the
run's ``heldout_fraction``, the task set's), and
``reset(options={"task": t})`` plays a given one. Observations longer than MAX_OBSERVATION characters are cut, and
characters outside CHARSET are replaced by "?".

Gymnasium 1.4 loads no entry-point plug-ins, so `import gymnasium` alone registers none of these ids: import this
module, or name it in the id ("gymsmith.gym:gymsmith/ops-v3"), which Gymnasium imports first.

With ``step_rewards=True`` and ``gamma``, your learner's discount per step (``gymnasium.make(id, step_rewards=True,
gamma=0.99)``; 1.0 for a learner that does not discount), every step's reward is instead the change in the
verifier's value of the state, gamma V(s_t) - V(s_{t-1}) (docs/trainers.md, "Per-step rewards"): the verifier
values the start state at reset (``info["start_progress"]``) and the state after each step (``info["progress"]``,
``info["step_reward"]``), and the last step's value is the episode's reward, so an episode's rewards, discounted by
gamma, sum to gamma^T times its final reward minus V(s0): progress undone later earns nothing. ``gamma`` must be
given with step rewards: a learner that discounts rewards shaped for another discount keeps part of the credit of
progress it undid (a fifty-eighth attacker's agent solved a task, undid it and ended with reward 0, and was paid
0.83 at 0.99 when this wrapper shaped for 1.0). It costs one verification per step that changes the state. A value
that could not be computed (``info["progress_error"]``) is held at the last known one: a reward of (gamma - 1) times
it (0 with gamma 1), and the next known value's step reward is taken from it, so failures change no discounted sum.

`step` never raises on a bad action (not JSON, not an object, an unknown tool, garbage or huge arguments):
it is an error observation with reward 0, and `info["error"]` names its kind. When the episode ends,
`info["end_reason"]` says why (submitted, step_limit, ungradable_state, environment_exception); an episode
the environment could not go on with (it raised on the action) ends with reward 0. The episode is a
`runner.episode.Episode`, limited, ended and verified as `gymsmith run` does it: its reward is paid once, and a
step after the end changes nothing and earns 0 (`info["error"]` is "episode_over"). Infrastructure failures
(a verifier or sandbox that cannot run) still raise. See docs/episodes.md.
"""

from __future__ import annotations

import math

import json
from collections.abc import Sequence
from typing import Any

import gymnasium
from gymnasium import spaces

from gymsmith.core.errors import NoTaskForSeed
from gymsmith.core.types import NO_TOOL_CALL, Action, EndReason, RolloutStatus, Split, TaskSpec
from gymsmith.envs.base import MAX_ARGUMENTS_CHARS, clip, preview
from gymsmith.gym_text import SharedText
from gymsmith.registry import DEFAULT_HELDOUT_FRACTION, get_family, list_families, split_of
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.runner.episode import Episode, Outcome
from gymsmith.verifier.progress import required_discount, value_of
from gymsmith.verifier.service import VerifierService

CHARSET = "".join(chr(c) for c in (9, 10, 13, *range(32, 127), *range(0xA0, 0x250)))
_ALLOWED = frozenset(CHARSET)
MAX_OBSERVATION = 100_000
MAX_ACTION = 16_384


def _train_pool(family: str, tasks: Sequence[TaskSpec | dict[str, Any]] | None, difficulty: float | None,
                knobs: dict[str, Any] | None, heldout_fraction: float) -> tuple[TaskSpec, ...]:
    """The tasks an unoptioned reset draws from (empty: generated ones). Raises ValueError naming the task that is
    not one of `family`'s train split (a held-out task never enters training), or when `tasks` comes with knobs."""
    if tasks is None:
        return ()
    if isinstance(tasks, (str, bytes, dict, TaskSpec)) or not tasks:
        raise ValueError(f"tasks: expected a non-empty sequence of {family} TaskSpecs, got {preview(tasks)}")
    if difficulty is not None or knobs:
        raise ValueError("tasks: give either tasks or difficulty/knobs (the tasks' own knobs are used)")
    pool = []
    for i, item in enumerate(tasks):
        try:
            task = item if isinstance(item, TaskSpec) else TaskSpec.model_validate(item)
        except ValueError as exc:
            raise ValueError(f"tasks[{i}]: not a TaskSpec ({str(exc).splitlines()[0]})") from None
        if task.family != family:
            raise ValueError(f"tasks[{i}]: a task of family {task.family!r}, expected {family!r}")
        if split_of(task.id, heldout_fraction=heldout_fraction) is not Split.TRAIN:
            raise ValueError(f"tasks[{i}]: task {task.id} is in the held-out split, which never enters training")
        pool.append(task)
    return tuple(pool)


def _clean(text: str, limit: int) -> str:
    text = "".join(ch if ch in _ALLOWED else "?" for ch in text)
    return text if len(text) <= limit else text[: limit - 20] + "\n[... truncated]"


class GymsmithEnv(gymnasium.Env[str, str]):
    metadata = {"render_modes": ["ansi"]}

    def __init__(self, family: str = "ops", *, difficulty: float | None = None, knobs: dict[str, Any] | None = None,
                 tasks: Sequence[TaskSpec | dict[str, Any]] | None = None, policy: str = DEFAULT_POLICY,
                 max_steps: int = 300, render_mode: str | None = None, step_rewards: bool = False,
                 gamma: float | None = None, heldout_fraction: float = DEFAULT_HELDOUT_FRACTION,
                 time_limit_s: float | None = None):
        self.gamma = required_discount(step_rewards, gamma)
        self.time_limit_s = time_limit_s or math.inf  # seconds an episode may last (none by default)
        self.family = get_family(family)
        if not 0.0 <= heldout_fraction < 1.0:
            raise ValueError(f"heldout_fraction: expected a number in [0, 1), got {heldout_fraction!r}")
        self.heldout_fraction = heldout_fraction  # the run's split: a task held out at it never enters training
        self.tasks = _train_pool(self.family.name, tasks, difficulty, knobs, heldout_fraction)
        self.difficulty, self.knobs, self.policy, self.max_steps = difficulty, dict(knobs or {}), policy, max_steps
        self.step_rewards = step_rewards
        self.render_mode = render_mode
        # SharedText: a Text space that AsyncVectorEnv's shared memory carries intact (gym_text)
        self.observation_space = SharedText(min_length=0, max_length=MAX_OBSERVATION, charset=CHARSET)
        self.action_space = spaces.Text(min_length=0, max_length=MAX_ACTION, charset=CHARSET)
        self._env = self.family.make_env()
        self._verifier: VerifierService | None = None
        self._episode: Episode | None = None
        self._last = ""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """`options`: "task" (a TaskSpec or its dict) to play a given task, "difficulty" to override."""
        super().reset(seed=seed)
        options = options or {}
        if "task" in options:
            task = options["task"] if isinstance(options["task"], TaskSpec) else TaskSpec.model_validate(options["task"])
        elif self.tasks:
            task = self.tasks[int(self.np_random.integers(0, len(self.tasks)))]
        else:
            while True:
                difficulty = options.get("difficulty", self.difficulty)
                if difficulty is None:
                    difficulty = round(float(self.np_random.uniform(0.0, 1.0)), 4)
                try:
                    task = self.family.generate(int(self.np_random.integers(0, 2**31 - 1)),
                                                **{**self.knobs, "difficulty": difficulty})
                except NoTaskForSeed:  # a seed that makes no task: the next one is drawn, as a task set does
                    continue
                if split_of(task.id, heldout_fraction=self.heldout_fraction) is Split.TRAIN:
                    break
        self._episode = Episode(env=self._env, task=task, verifier=self._service(), policy=self.policy,
                                max_steps=self.max_steps, step_rewards=self.step_rewards, gamma=self.gamma,
                                time_limit_s=self.time_limit_s)
        observation = self._episode.reset(int(self.np_random.integers(0, 2**31 - 1)))
        self._last = _clean(observation.text, MAX_OBSERVATION)
        info = {"task_id": task.id, "goal": task.goal, "tools": [t.to_openai() for t in task.tools],
                "difficulty": task.difficulty}
        start = self._episode.value_start()
        if start is not None:
            info["start_progress"] = start.progress
            if start.error is not None:
                info["progress_error"] = start.error
        return self._last, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        episode = self._episode
        if episode is None:
            raise gymnasium.error.ResetNeeded("call reset() before step()")
        if episode.over and episode.outcome is not None:  # paid once: a step after the end earns nothing
            result = episode.step(_parse(action))
            self._last = _clean(result.observation.text, MAX_OBSERVATION)
            over = {"error": "episode_over", **self._ended(episode.outcome)}
            return self._last, 0.0, *_ends(episode.outcome), over
        result, outcome = episode.play(_parse(action))
        self._last = _clean(result.observation.text, MAX_OBSERVATION)
        error = result.observation.error
        info: dict[str, Any] = {"error": error.kind.value if error else None}
        if outcome is None:
            last = episode.steps[-1] if self.step_rewards else None
            reward = 0.0
            if last is not None:
                reward = last.step_reward if last.step_reward is not None else 0.0
                info.update(progress=last.progress, step_reward=last.step_reward)
                if last.progress_error is not None:
                    info["progress_error"] = last.progress_error
            return self._last, reward, False, False, info
        if outcome.reason is EndReason.ENVIRONMENT_EXCEPTION and "environment_exception" in result.info:
            info["error"] = "environment_exception"
        info.update(self._ended(outcome))
        reward = value_of(outcome.reward)
        if self.step_rewards and episode.steps:
            last = episode.steps[-1]
            info.update(progress=last.progress, step_reward=last.step_reward)
            reward = last.step_reward if last.step_reward is not None else reward
        return self._last, reward, *_ends(outcome), info

    def _service(self) -> VerifierService:
        if self._verifier is None:
            self._verifier = VerifierService()
        return self._verifier

    @staticmethod
    def _ended(outcome: Outcome) -> dict[str, Any]:
        verdict = outcome.reward
        return {"end_reason": outcome.reason.value, "accepted": verdict.accepted,
                "reward_components": {k: c.value for k, c in verdict.components.items()},
                "gate_failures": verdict.gate_failures}

    def render(self) -> str | None:
        return self._last if self.render_mode == "ansi" else None

    def close(self) -> None:
        self._env.close()
        if self._verifier is not None:
            self._verifier.close()
            self._verifier = None


def _ends(outcome: Outcome) -> tuple[bool, bool]:
    """(terminated, truncated) for an episode that ended so: cut by the step or time limit is truncated (a trainer may
    bootstrap past it); the submit and every failure (the environment failing on an action, the policy's record past
    its bound, a state that cannot be graded: absorbing states worth 0) terminate it."""
    cut = outcome.status is RolloutStatus.TRUNCATED and outcome.reason in (EndReason.STEP_LIMIT, EndReason.TIME_LIMIT)
    return not cut, cut


def _parse(action: Any) -> Action:
    """The Action an agent's text stands for; never raises (what is not a tool call is a reply without one)."""
    if not isinstance(action, str):
        return Action(tool=NO_TOOL_CALL, arguments=clip(f"an action that is not text: {preview(action)}", 1000))
    if len(action) > MAX_ARGUMENTS_CHARS + 4096:  # not parsed: the environment refuses arguments this large anyway
        return Action(tool=NO_TOOL_CALL, arguments=action[:1000])
    try:
        call = json.loads(action)
    except (ValueError, RecursionError):
        return Action(tool=NO_TOOL_CALL, arguments=action)
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str):
        return Action(tool=NO_TOOL_CALL, arguments=action)
    arguments = call.get("arguments", {})
    if isinstance(arguments, dict) and all(isinstance(k, str) for k in arguments) or isinstance(arguments, str):
        return Action(tool=call["tool"], arguments=arguments)
    try:
        return Action(tool=call["tool"], arguments=json.dumps(arguments))
    except (ValueError, TypeError, RecursionError):
        return Action(tool=call["tool"], arguments=preview(arguments))


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
