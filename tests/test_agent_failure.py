"""Issue 15, property 10: agent-caused failure is the agent's failure (a reward of 0 with a typed reason), and
only infrastructure failure is an `error` without reward. Also: the stored size of a rollout of the worst
calls stays within the documented bound (docs/episodes.md), and Gymnasium's `step` and `grpo_reward` never
raise on a bad completion. Real parts throughout: SQLite, bubblewrap, Chromium, verifier processes."""

from __future__ import annotations

import sqlite3

import pytest

from gymsmith.agents.model import ModelEndpointError
from gymsmith.core import Action, ActionErrorKind, EndReason, ErrorKind, RolloutStatus, Split
from gymsmith.core.errors import VerifierError
from gymsmith.sandbox.base import SandboxError
from gymsmith.envs.base import MAX_ARGUMENTS_CHARS, MAX_ERROR_CHARS, MAX_OBSERVATION_CHARS, MAX_OBSERVATION_DATA_CHARS
from gymsmith.families.ops import tools as ops_tools
from gymsmith.registry import get_family
from gymsmith.runner.local import summarize
from gymsmith.runner.rollout import run_rollout
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService

MB = 1 << 20


@pytest.fixture(scope="module")
def verifier():
    service = VerifierService()
    yield service
    service.close()


class Scripted:
    """Plays `plan` (Actions, or exceptions to raise, or anything else to return), then submits."""

    def __init__(self, plan, name="scripted"):
        self.plan, self.name = list(plan), name

    def reset(self, task, observation, *, seed):
        self.i = 0

    def act(self, observation):
        self.i += 1
        if self.i > len(self.plan):
            return Action(tool="submit", arguments={})
        item = self.plan[self.i - 1]
        if isinstance(item, BaseException):
            raise item
        return item


def _rollout(family, task, agent, verifier, *, env=None, max_steps=50):
    own = env is None
    env = env or get_family(family).make_env()
    try:
        return run_rollout(env=env, agent=agent, task=task, split=Split.TRAIN, seed=0, run_id="r15", verifier=verifier,
                           policy="shaped_gated", max_steps=max_steps, time_limit_s=600)
    finally:
        if own:
            env.close()


STATUS = Action(tool="get_status", arguments={})


def test_an_agent_that_raises_gets_zero_with_a_typed_reason_not_an_error(ops, verifier, tmp_path):
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    t = _rollout("ops", task, Scripted([STATUS, STATUS, RuntimeError("policy crashed")]), verifier)
    assert t.status is RolloutStatus.TRUNCATED and t.end_reason is EndReason.AGENT_FAILURE
    assert t.reward is not None and t.reward.value == 0.0 and not t.reward.accepted
    assert "RuntimeError: policy crashed" in t.end_detail and len(t.steps) == 2 and t.error is None
    store = TrajectoryStore(tmp_path / "s.db")
    store.create_run("r15", purpose="train", config={})
    assert store.add(t, task)
    back = store.trajectory(t.rollout_id)
    assert back.end_reason is EndReason.AGENT_FAILURE and back.reward.value == 0.0 and "policy crashed" in back.end_detail
    (row,) = summarize(store.rollout_rows(), by_bin=False)
    assert row.errors == 0 and row.mean_reward == 0.0  # counted in the mean, not left out as an error


def test_an_agent_that_returns_no_action_fails_as_itself(ops, verifier):
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    t = _rollout("ops", task, Scripted([STATUS, {"tool": "submit"}]), verifier)
    assert (t.status, t.end_reason, t.reward.value) == (RolloutStatus.TRUNCATED, EndReason.AGENT_FAILURE, 0.0)
    assert "not an Action" in t.end_detail


def test_a_model_endpoint_that_is_down_is_infrastructure(ops, verifier):
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    t = _rollout("ops", task, Scripted([STATUS, ModelEndpointError("http://127.0.0.1:9/v1: HTTP 503")]), verifier)
    assert (t.status, t.end_reason, t.reward) == (RolloutStatus.ERROR, EndReason.INFRASTRUCTURE, None)
    assert "HTTP 503" in t.error and t.error_kind is ErrorKind.MODEL_ENDPOINT


@pytest.mark.parametrize("where,kind", [("reset", ErrorKind.ENVIRONMENT_RESET), ("step", ErrorKind.ENVIRONMENT),
                                        ("final_state", ErrorKind.FINAL_STATE), ("verify", ErrorKind.VERIFIER)])
def test_an_infrastructure_error_names_the_part_that_failed_and_is_stored(ops, verifier, monkeypatch, tmp_path,
                                                                          where, kind):
    """A sandbox failure at reset, at a step or at the final state, and a verifier failure, are errors of their own
    kinds (the message stays in `error`); the kind survives the store. A completed rollout has none."""
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    env = ops.make_env()

    def broken(*_a, **_k):
        raise (VerifierError if where == "verify" else SandboxError)(f"{where} broke")

    if where == "verify":
        monkeypatch.setattr(verifier, "verify", broken)
    else:
        monkeypatch.setattr(env, where, broken)
    try:
        t = _rollout("ops", task, Scripted([STATUS]), verifier, env=env)
    finally:
        monkeypatch.undo()
        env.close()
    assert (t.status, t.error_kind) == (RolloutStatus.ERROR, kind) and f"{where} broke" in t.error
    store = TrajectoryStore(tmp_path / "s.db")
    store.create_run("r15", purpose="train", config={})
    assert store.add(t, task) and store.trajectory(t.rollout_id).error_kind is kind
    ok = _rollout("ops", task, Scripted([STATUS]), verifier)
    assert ok.status is not RolloutStatus.ERROR and ok.error_kind is None


def test_an_environment_that_raises_on_an_action_scores_zero_and_says_so(ops, verifier, monkeypatch):
    """A family whose step raises (ToolEnvironment never does) cannot hand the agent an escape: reward 0,
    ENVIRONMENT_EXCEPTION, the traceback kept. The sandbox failing is still infrastructure."""
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    env = ops.make_env()
    try:
        real_step = env.step

        def step(action):
            if action.tool == "advance_clock":
                raise KeyError("bug in a family")
            return real_step(action)

        monkeypatch.setattr(env, "step", step)
        t = _rollout("ops", task, Scripted([STATUS, Action(tool="advance_clock", arguments={"days": 1})]), verifier, env=env)
        assert (t.status, t.end_reason, t.reward.value) == (RolloutStatus.TRUNCATED, EndReason.ENVIRONMENT_EXCEPTION, 0.0)
        assert "KeyError" in t.end_detail and "Traceback" in t.end_detail and t.error is None

        monkeypatch.setattr(env, "step", lambda action: (_ for _ in ()).throw(SandboxError("bwrap vanished")))
        t = _rollout("ops", task, Scripted([STATUS]), verifier, env=env)
        assert (t.status, t.end_reason, t.reward) == (RolloutStatus.ERROR, EndReason.INFRASTRUCTURE, None)
        assert "bwrap vanished" in t.error
    finally:
        env.close()


def test_a_tool_that_raises_is_an_error_observation_and_the_rollout_goes_on(ops, verifier, monkeypatch):
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)

    def broken(conn):
        return 1 // 0

    monkeypatch.setitem(ops_tools.IMPLEMENTATIONS, "get_status", broken)
    env = ops.make_env()
    try:
        env.reset(task, seed=0)
        r = env.step(STATUS)
        assert r.observation.error.kind is ActionErrorKind.TOOL_ERROR and "ZeroDivisionError" in r.observation.text
        assert r.info["tool_exception"]["type"] == "ZeroDivisionError" and "Traceback" in r.info["tool_exception"]["traceback"]
        t = _rollout("ops", task, Scripted([STATUS, STATUS]), verifier, env=env)
        assert (t.status, t.end_reason) == (RolloutStatus.COMPLETED, EndReason.SUBMITTED) and t.reward is not None
        assert [s.observation.error.kind for s in t.steps[:2]] == [ActionErrorKind.TOOL_ERROR] * 2
    finally:
        env.close()


@pytest.mark.parametrize("poison, problem", [
    ("mkfifo pipe.py", "is a FIFO"),
    ("python3 -c \"import socket; socket.socket(socket.AF_UNIX).bind('s.sock')\"", "is a socket"),
    ("python3 -c \"import os\nfor i in range(40): os.mkdir('d'); os.chdir('d')\"", "nested deeper than"),
    ("touch \"$(printf 'bad\\377.py')\"", "not UTF-8"),
    # what the sandbox's user cannot read is not graded as if it could (attacker 167: a fix gated on `chmod 000`)
    ("echo 'X = 1' > gate.py && chmod 000 gate.py", "'gate.py': the workspace's user cannot read it"),
    ("mkdir -p gates && echo 'X = 1' > gates/g.py && chmod 311 gates", "'gates': the workspace's user cannot list it"),
    ("chmod 070 .", "'.': the workspace's user cannot list it"),
])
def test_a_final_state_that_cannot_be_graded_is_the_agents_zero(verifier, poison, problem):
    code = get_family("code")
    task = code.generate(5, difficulty=0.3)
    t = _rollout("code", task, Scripted([Action(tool="run_command", arguments={"command": poison})]), verifier)
    assert (t.status, t.end_reason) == (RolloutStatus.COMPLETED, EndReason.UNGRADABLE_STATE)
    assert t.reward.value == 0.0 and not t.reward.accepted and problem in t.end_detail and problem in t.reward.ungradable


def test_a_store_without_end_reasons_is_upgraded_in_place(ops, verifier, tmp_path):
    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0)
    db = tmp_path / "old.db"
    store = TrajectoryStore(db)
    store.create_run("r15", purpose="train", config={})
    store.add(_rollout("ops", task, Scripted([]), verifier), task)
    store.close()
    with sqlite3.connect(db) as c:
        c.execute("ALTER TABLE rollouts DROP COLUMN end_reason")
        c.execute("ALTER TABLE rollouts DROP COLUMN end_detail")
        c.execute("DROP TABLE alembic_version")  # stores of schema 5 were made before the store used Alembic
    store = TrajectoryStore(db)
    (row,) = store.rollout_rows()
    assert row["end_reason"] is None and store.trajectory(row["rollout_id"]).end_reason is None
    with sqlite3.connect(db) as c:
        assert {"end_reason", "end_detail"} <= {r[1] for r in c.execute("PRAGMA table_info(rollouts)")}


# -- the stored size of a rollout of the worst calls ------------------------------------------------
def _deep(n):
    v = {}
    for _ in range(n):
        v = {"a": v}
    return v


WORST = {  # per family: calls that are as large as an agent can make them, or make the environment answer at length
    "ops": [Action(tool="search_records", arguments={"entity": "orders", "limit": 50}),
            Action(tool="search_records", arguments='{"entity": "' + "x" * MB + '"}'),
            Action(tool="get_record", arguments={"entity": "orders", "id": 2**70, "pad": "x" * (MB // 2)}),
            Action(tool="x" * MB, arguments=_deep(1000)),
            Action(tool="refund_payment", arguments="[" * 200_000)],
    "code": [Action(tool="read_file", arguments={"path": "big.py", "start_line": 1}),
             Action(tool="run_command", arguments={"command": "yes | head -c 9000000"}),
             Action(tool="list_files", arguments={}),
             Action(tool="write_file", arguments={"path": "w.py", "content": "\x01" * 199_000}),
             Action(tool="read_file", arguments={"path": "w.py"}),
             Action(tool="write_file", arguments='{"path": "a.py", "content": "' + "x" * MB + '"}')],
    "web": [Action(tool="goto", arguments={"path": "/login?" + "x" * 2000}),
            Action(tool="type", arguments={"element": 1, "text": "\x01" * 4000}),
            Action(tool="goto", arguments='{"path": "/' + "x" * MB + '"}'),
            Action(tool="select", arguments={"element": 2**70, "option": _deep(900)})],
}
STEP_BOUND = {"arguments": MAX_ARGUMENTS_CHARS + 1_100,
              "observation": 6 * (MAX_OBSERVATION_CHARS + MAX_ERROR_CHARS + 200) + MAX_OBSERVATION_DATA_CHARS + 1_000}


@pytest.mark.parametrize("family", ["ops", "code", "web"])
def test_a_rollout_of_the_worst_calls_is_stored_within_the_bound(family, verifier, tmp_path):
    task = get_family(family).generate(2, difficulty=0.3)
    steps = 24
    setup = [Action(tool="run_command", arguments={"command": "head -c 12000000 /dev/urandom | base64 > big.py; "
                                                               "touch $(seq -f f%g.py 2000)"})] if family == "code" else []
    t = _rollout(family, task, Scripted(setup + WORST[family] * 10), verifier, max_steps=steps)
    assert t.status is RolloutStatus.TRUNCATED and t.end_reason is EndReason.STEP_LIMIT and t.reward is not None
    store = TrajectoryStore(tmp_path / "s.db")
    store.create_run("r15", purpose="train", config={})
    assert store.add(t, task)
    with sqlite3.connect(tmp_path / "s.db") as c:
        rows = c.execute("SELECT length(arguments), length(observation), length(tool) FROM steps").fetchall()
        (diff,) = c.execute("SELECT coalesce(length(final_diff), 0) FROM rollouts").fetchone()
    assert len(rows) == steps
    assert max(r[0] for r in rows) <= STEP_BOUND["arguments"] and max(r[1] for r in rows) <= STEP_BOUND["observation"]
    assert max(r[2] for r in rows) <= 64 and diff <= 200_100
    over = [s for s in t.steps if isinstance(s.action.arguments, str) and "over the cap" in s.action.arguments]
    assert over and all(len(s.action.arguments) < 1_200 for s in over)  # a refused 1 MB call keeps a short prefix
    total = sum(r[0] + r[1] for r in rows)
    print(f"{family}: {steps} steps stored in {total} characters (bound {steps * sum(STEP_BOUND.values())})")


# -- Gymnasium and the trainer hook never raise on a bad completion ----------------------------------
BAD_COMPLETIONS = [None, 12345, 3.5, [], {}, [None, 7], "[" * 100_000, "{" * 100_000, "x" * MB,
                   '{"tool": "get_status", "arguments": [1, 2]}', '{"tool": "get_record", "arguments": ' + "[" * 5000 + "]" * 5000 + "}",
                   '{"tool": "' + "x" * MB + '", "arguments": {}}', '{"tool": 5}', '{"name": "get_status", "arguments": "{"}',
                   [{"role": "assistant", "tool_calls": "not a list"}],
                   [{"role": "assistant", "tool_calls": [1, None, {"function": "x"}, {"function": {"name": 5, "arguments": 7}}]}],
                   {"tool_calls": [{"function": {"name": "submit", "arguments": "{"}}]},
                   [{"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "get_record",
                                                                                     "arguments": {"entity": "orders", "id": 2**70}}}]}],
                   '{"tool": "refund_payment", "arguments": {"payment_id": 1, "amount_cents": 1e999, "reason": "\\ud800"}}']


def test_gymnasium_step_never_raises_on_a_bad_action():
    import gymnasium

    from gymsmith.gym import env_id

    gym_id = env_id("ops", get_family("ops").version)
    env = gymnasium.make(f"gymsmith.gym:{gym_id}", max_steps=len(BAD_COMPLETIONS), disable_env_checker=True)
    env.reset(seed=3)
    for i, completion in enumerate(BAD_COMPLETIONS):
        obs, reward, terminated, truncated, info = env.step(completion)
        assert isinstance(obs, str) and not terminated and info["error"] is not None
        if truncated:
            assert i == len(BAD_COMPLETIONS) - 1 and info["end_reason"] == "step_limit" and not info["accepted"]
        else:
            assert reward == 0.0
    env.close()


def test_grpo_reward_never_raises_on_a_bad_completion(ops):
    from gymsmith.trainers import grpo_reward

    task = ops.generate(3, kind="fulfil", difficulty=0.3, fidelity=0.0).model_dump_json()
    reward = grpo_reward()
    try:
        scores = reward([None] * len(BAD_COMPLETIONS), BAD_COMPLETIONS, task=[task] * len(BAD_COMPLETIONS))
        null = reward([None], ["The task is complete."], task=[task])[0]
    finally:
        reward.close()
    assert len(scores) == len(BAD_COMPLETIONS) and all(0.0 <= s <= null for s in scores)
    assert all(d["end_reason"] in ("submitted", "step_limit") for d in reward.last_details)
