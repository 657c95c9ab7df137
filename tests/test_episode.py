"""One episode, five interfaces (issue 19 item 1): the runner, Gymnasium, MCP (over stdio), the HTTP server (over real
HTTP) and the trainer hook drive the same `runner.episode.Episode`, so the same actions are limited, ended, verified
and paid the same way through each.

An independent attacker (41) showed why it matters: before, `gymsmith serve` and MCP had no step limit (320 reads,
then the repair, then submit: 1.0 where `gymsmith run` at 300 steps gives 0), and the Gymnasium wrapper went on
acting and paying after its end (three submits paid 1.0 each; an action after truncation was verified again)."""

from __future__ import annotations

import json
import sys
import time

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gymsmith.core.types import Action, ActionErrorKind, EndReason, Observation, RolloutStatus, Split, Step, StepResult
from gymsmith.envs.base import bound_observation, bounded_action
from gymsmith.families.ops.generator import generate_world
from gymsmith.gym import GymsmithEnv
from gymsmith.registry import get_family
from gymsmith.runner.episode import DEFAULT_MAX_RECORD_BYTES, Episode, record_bytes
from gymsmith.runner.rollout import run_rollout
from gymsmith.server import RemoteEnvironment
from gymsmith.trainers import MultiTurnRollout

from conftest import CountingVerifier, Running

READ = {"tool": "get_status", "arguments": {}}
SUBMIT = {"tool": "submit", "arguments": {}}
POLICY = "shaped_gated"


@pytest.fixture(scope="module")
def solved():
    """An ops task without simulated faults and its oracle's witness (the repair), replayed as is."""
    task = get_family("ops").generate(9, difficulty=0.3, fidelity=0.0)
    return task, generate_world(task.seed, task.knobs).witness


class Replay:
    """An agent that sends `actions` in order, then submits."""

    name = "replay"

    def __init__(self, actions):
        self.actions = list(actions)

    def reset(self, task, observation, *, seed):
        self.left = iter(self.actions)

    def act(self, observation):
        a = next(self.left, SUBMIT)
        return Action(tool=a["tool"], arguments=a["arguments"])


# -- every interface, driven with the same actions: (what it paid, call by call; why the episode ended) ----------
def by_runner(task, actions, max_steps):
    with CountingVerifier() as verifier:
        t = run_rollout(env=get_family("ops").make_env(), agent=Replay(actions), task=task, split=Split.TRAIN, seed=0,
                        run_id="episode", verifier=verifier, policy=POLICY, max_steps=max_steps, time_limit_s=120)
    return [t.reward.value], t.end_reason.value


def by_gymnasium(task, actions, max_steps):
    env = GymsmithEnv("ops", policy=POLICY, max_steps=max_steps)
    env.reset(seed=0, options={"task": task})
    paid, reason = [], None
    try:
        for a in actions:  # on past the end, as a careless training loop would
            _, reward, terminated, truncated, info = env.step(json.dumps(a))
            if reason is None and (terminated or truncated) or reason is not None and reward != 0:
                paid.append(reward)  # the reward at the end, and anything paid after it
                reason = reason or info["end_reason"]
    finally:
        env.close()
    return paid, reason


def by_mcp(task, actions, max_steps, tmp_path):
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())

    async def drive():
        params = StdioServerParameters(command=sys.executable, args=["-m", "gymsmith.cli", "mcp", "ops", "--task", str(path),
                                                                      "--policy", POLICY, "--max-steps", str(max_steps),
                                                                      "--allow-heldout"])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [await session.call_tool(a["tool"], a["arguments"]) for a in actions]

    results = anyio.run(drive)
    ended = [r.structured_content for r in results if "reward" in (r.structured_content or {})]
    return [e["reward"]["value"] for e in ended], ended[0]["end_reason"] if ended else None


def by_http(task, actions, max_steps):
    with Running(policy=POLICY, max_steps=max_steps) as server:
        remote = RemoteEnvironment(server.url, family="ops")
        remote.reset(task, episode_seed=0)
        paid, reason = [], None
        for a in actions:
            result = remote.step(Action(tool=a["tool"], arguments=a["arguments"]))
            if "reward" in result.info:
                paid.append(result.info["reward"].value)
                reason = reason or result.info["end_reason"]
        remote.close()
    return paid, reason


def by_trainer_hook(task, actions, max_steps):
    rollout = MultiTurnRollout(task, policy=POLICY, max_steps=max_steps)
    rollout.act("\n".join(json.dumps(a) for a in actions))
    return [rollout.reward().value], rollout.end_reason.value


@pytest.fixture(scope="module")
def interfaces():
    return {"runner": by_runner, "gymnasium": by_gymnasium, "http": by_http, "trainer": by_trainer_hook}


def test_a_repair_after_the_step_limit_earns_nothing_through_any_interface(solved, interfaces, tmp_path):
    """Three reads use up a 3-step limit: the repair and the submit after them are refused everywhere (they were
    paid 1.0 over HTTP and MCP, which had no step limit, and by Gymnasium, which verified again after the end)."""
    task, witness = solved
    actions = [READ] * 3 + witness + [SUBMIT]
    assert by_runner(task, witness + [SUBMIT], 300)[0] == [1.0]  # the repair itself is worth 1.0
    seen = {name: drive(task, actions, 3) for name, drive in interfaces.items()}
    seen["mcp"] = by_mcp(task, actions, 3, tmp_path)
    assert seen == {name: ([0.0], "step_limit") for name in seen}, seen


def test_an_episode_is_paid_once_through_any_interface(solved, interfaces, tmp_path):
    """Submitting again (and acting after the submit) pays nothing more: Gymnasium paid 1.0 per extra submit."""
    task, witness = solved
    actions = witness + [SUBMIT, SUBMIT, READ, SUBMIT]
    seen = {name: drive(task, actions, 300) for name, drive in interfaces.items() if name != "runner"}
    seen["mcp"] = by_mcp(task, actions, 300, tmp_path)
    runner = by_runner(task, witness, 300)
    assert runner == ([1.0], "submitted")
    for name, (paid, reason) in seen.items():
        assert reason == "submitted" and sum(paid) == 1.0 and paid[0] == 1.0, (name, paid)


# -- the episode itself -------------------------------------------------------------------------------------------
class RaisesOn:
    """The ops environment, except that its `fail_at`-th step raises (an environment bug the agent's input met)."""

    def __init__(self, env, fail_at: int):
        self.env, self.fail_at, self.calls = env, fail_at, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def step(self, action):
        self.calls += 1
        if self.calls == self.fail_at:
            raise RuntimeError("a bug the input met")
        return self.env.step(action)


def _episode(task, env, verifier, **limits) -> Episode:
    episode = Episode(env=env, task=task, verifier=verifier, policy=POLICY, max_steps=limits.pop("max_steps", 300),
                      step_rewards=True, **limits)
    episode.reset(0)
    episode.value_start()
    return episode


def _act(episode: Episode, a: dict) -> StepResult:
    return episode.play(Action(tool=a["tool"], arguments=a["arguments"]))[0]


def test_an_environment_failure_takes_back_the_progress_made_before_it(solved):
    """Progress first, then the environment raises on an action: reward 0, and the step rewards sum to 0 - V(s0)
    (before, they summed to V(last state) - V(s0): a trainer reading step rewards paid the failure); the action is
    the last step, and nothing reaches the environment after it."""
    task, witness = solved
    env = RaisesOn(get_family("ops").make_env(), fail_at=len(witness))
    try:
        with CountingVerifier() as verifier:
            episode = _episode(task, env, verifier)
            results = [_act(episode, a) for a in witness]
            assert results[-1].done and results[-1].observation.error.kind is ActionErrorKind.TOOL_ERROR
            progressed = [s.progress for s in episode.steps[:-1]]
            assert max(progressed) > 0  # the steps before the failure made progress
            outcome = episode.finish()
            assert outcome.reason is EndReason.ENVIRONMENT_EXCEPTION and outcome.reward.value == 0.0
            assert outcome.status is RolloutStatus.TRUNCATED and "a bug the input met" in outcome.detail
            assert len(episode.steps) == len(witness) and episode.steps[-1].progress == 0.0
            assert sum(s.step_reward for s in episode.steps) == pytest.approx(0.0 - episode.meter.start_value)
            calls = env.calls
            after = _act(episode, SUBMIT)
            assert after.observation.error.kind is ActionErrorKind.EPISODE_OVER and env.calls == calls
            assert episode.finish() is outcome
    finally:
        env.close()


def test_the_agents_failure_scores_zero_whatever_it_did_before(solved):
    task, witness = solved
    env = get_family("ops").make_env()
    try:
        with CountingVerifier() as verifier:
            episode = _episode(task, env, verifier)
            for a in witness:
                _act(episode, a)
            episode.fail(EndReason.AGENT_FAILURE, "the policy raised")
            outcome = episode.finish()
            assert outcome.reason is EndReason.AGENT_FAILURE and outcome.reward.value == 0.0
            assert sum(s.step_reward for s in episode.steps) == pytest.approx(0.0 - episode.meter.start_value)
            with pytest.raises(ValueError, match="expected one of"):
                episode.fail(EndReason.SUBMITTED, "not a failure")
    finally:
        env.close()


def test_the_time_limit_refuses_the_next_action_and_the_final_state_is_verified_once(solved):
    task, witness = solved
    env = RaisesOn(get_family("ops").make_env(), fail_at=-1)
    try:
        with CountingVerifier() as verifier:
            episode = _episode(task, env, verifier, time_limit_s=0.3)
            _act(episode, witness[0])
            time.sleep(0.4)
            calls, verified = env.calls, verifier.calls
            refused = _act(episode, witness[1])
            assert refused.done and refused.observation.error.kind is ActionErrorKind.EPISODE_OVER
            assert env.calls == calls and episode.reason is EndReason.TIME_LIMIT
            outcome = episode.finish()
            assert episode.finish() is outcome and verifier.calls == verified + 1
            assert outcome.status is RolloutStatus.TRUNCATED and outcome.reward.accepted is False
    finally:
        env.close()


FLOOD = {"tool": "search_records", "arguments": {"entity": "orders", "limit": 50}}


def _flood_step_bytes(task) -> int:
    """What one FLOOD step adds to an episode's record (`record_bytes`), measured on a real step."""
    env = get_family("ops").make_env()
    try:
        with CountingVerifier() as verifier:
            episode = Episode(env=env, task=task, verifier=verifier, policy=POLICY, max_steps=10)
            episode.reset(0)
            episode.step(Action(tool=FLOOD["tool"], arguments=FLOOD["arguments"]))
            assert episode.record == record_bytes(episode.steps[0]) > 20_000
            return episode.record
    finally:
        env.close()


def test_a_record_past_its_bound_is_the_agents_failure_through_any_interface(solved, interfaces):
    """A policy that asks for the largest observations it can, step after step, grew what the async engine holds
    per rollout to 14-48 MiB (an independent attacker's; the in-flight default assumed 4), so that a run could be
    killed for memory with every rollout in flight. Every interface's episode bounds its record
    (`max_record_bytes`): past it, the agent has failed (reward 0), whatever it does after, the repair included;
    the same repair after half as many reads is paid."""
    task, witness = solved
    per_step = _flood_step_bytes(task)
    floods = DEFAULT_MAX_RECORD_BYTES // per_step + 1  # the step that passes the bound
    assert floods + len(witness) + 1 < 2000
    actions = [FLOOD] * floods + witness + [SUBMIT]
    for name, play in interfaces.items():
        paid, reason = play(task, actions, 2000)
        assert (name, reason, paid) == (name, "agent_failure", [0.0])
    paid, reason = by_runner(task, [FLOOD] * (floods // 2) + witness + [SUBMIT], 2000)
    assert reason == "submitted" and paid[0] > 0.5


def test_the_record_bound_counts_what_a_model_turn_holds(solved):
    """A model agent's turn (token ids, logprobs, the messages sent, its reply) is part of the record: a policy
    with few, small observations but long replies reaches the bound too."""
    task, _ = solved
    env = get_family("ops").make_env()
    try:
        with CountingVerifier() as verifier:
            episode = Episode(env=env, task=task, verifier=verifier, policy=POLICY, max_steps=100,
                              max_record_bytes=1 << 20)
            episode.reset(0)
            turn = {"messages": [{"role": "user", "content": "x"}] * 50, "reply": {"content": "y" * 20_000},
                    "prompt_ids": list(range(1000, 3000)), "completion_ids": list(range(500)), "logprobs": [-0.5] * 500}
            step = None
            while not episode.over:
                episode.step(Action(tool=READ["tool"], arguments=READ["arguments"]), agent_info={"turn": turn})
                step = episode.steps[-1]
            assert record_bytes(step) >= 2 * 20_000 + 40 * 3000 + 8 * 50  # the reply: its text and its JSON
            assert len(episode.steps) == (1 << 20) // record_bytes(step) + 1 < 10
            assert episode.reason is EndReason.AGENT_FAILURE and "max_record_bytes" in episode.detail
            assert episode.finish().reward.value == 0.0
    finally:
        env.close()


def test_the_record_bound_counts_text_as_python_stores_it():
    """Python stores a text of characters beyond the Basic Multilingual Plane in 4 bytes a character: a policy that
    reads back files of emoji held four times what the same length of ASCII holds, and the record counts it so."""
    def step(text):
        return Step(index=0, action=Action(tool="read_file", arguments={"path": "a"}),
                    observation=bound_observation(Observation(text=text, data={"content": text})), duration_ms=1.0)

    ascii_, astral = record_bytes(step("a" * 50_000)), record_bytes(step("\U0001F600" * 50_000))
    assert ascii_ >= 3 * 2 * 50_000 and astral - ascii_ >= 3 * 2 * 3 * 50_000  # 3 more bytes a character, twice, x3


def test_the_record_counts_a_reply_whole_and_text_as_its_json_holds_it():
    """An eighty-second attacker's policy sent tool calls whose arguments were over the cap: the step keeps a prefix,
    but the conversation, the turn and the store keep them whole, and the record counted the prefix (one rollout
    held 88 MiB against an estimate of 2.4). And a control character takes six bytes in the conversation's JSON.
    The reply counts whole, and text as its JSON holds it."""
    arguments = json.dumps({"entity": "orders", "q": "a" * 300_000})
    reply = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "search_records", "arguments": arguments}}]}
    step = Step(index=0, action=bounded_action(Action(tool="search_records", arguments=arguments)),
                observation=bound_observation(Observation(text="refused")), duration_ms=1.0,
                agent_info={"turn": {"messages": [], "reply": reply}})
    assert len(step.action.arguments_text()) < 2_000 and record_bytes(step) >= 2 * 300_000
    control = Step(index=0, action=Action(tool="get_status", arguments={}), duration_ms=1.0,
                   observation=bound_observation(Observation(text="\x01" * 50_000)))
    assert record_bytes(control) >= 6 * 50_000 + 2 * 50_000
