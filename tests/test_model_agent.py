"""The model agent against a real OpenAI-compatible HTTP server on loopback (no LLM can run here: the server
plays a scripted policy, the ops witness, and injects every fault kind)."""

import json

import pytest

from gymsmith.agents.model import ModelAgent, ModelAgentConfig, ModelEndpointError
from gymsmith.agents.scripted_server import FAULT_KINDS, ScriptedChatServer, WitnessPolicy
from gymsmith.core import NO_TOOL_CALL, ActionErrorKind, Observation, RolloutStatus, Split
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run, run_rollout
from gymsmith.store import TrajectoryStore
from gymsmith.verifier import VerifierService


def _plans(tasks):
    return {t.goal: generate_world(t.seed, t.knobs).witness for t in tasks}


def _config(server, **over):
    settings = dict(base_url=server.base_url, model="scripted", api_key_env=None, timeout_s=0.5, backoff_s=0.01,
                    max_retries=3)
    return ModelAgentConfig(**{**settings, **over})


def _refused_only_while_the_endpoint_answered(rows) -> None:
    """A rollout of a faulty endpoint ends as the agent's failure only where a call failed every attempt, the last
    not a rate limit or a failure to connect, while the endpoint answered a one-token request (the injected faults
    are random per attempt, so this happens on some runs): reward 0, the reason stored. (The observations carry run
    times, so which calls meet which faults differs between runs.)"""
    for r in rows:
        if r["status"] == "truncated":
            assert r["end_reason"] == "agent_failure" and r["reward"] == 0.0
            assert "ModelRequestRefused" in r["end_detail"] and "while it answered a one-token request" in r["end_detail"]


def test_every_fault_kind_and_no_rollout_lost(tmp_path):
    tasks = build_taskset(TaskSetSpec(family="ops", count=20, split="train", base_seed=21))
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), fault_rate=0.25, seed=5, slow_s=0.8) as server:
        store = TrajectoryStore(tmp_path / "m.db")
        config = RunConfig(run_id="model", taskset=TaskSetSpec(family="ops", count=20), agents=["model"],
                           model=_config(server), max_steps=400, retries=0)
        out = run(config, store, tasks=tasks)
    assert set(server.fault_counts) == set(FAULT_KINDS), server.fault_counts
    rows = store.rollout_rows(["model"])
    assert len(rows) == 20 and len({r["task_id"] for r in rows}) == 20
    assert {r["status"] for r in rows} <= {"completed", "error", "truncated"}
    _refused_only_while_the_endpoint_answered(rows)
    completed = [t for t in out if t.status is RolloutStatus.COMPLETED]
    assert len(completed) >= 14
    assert all(t.reward.accepted for t in completed)  # the faults cost steps, not correctness
    errors = [t for t in out if t.status is RolloutStatus.ERROR]
    assert all("no usable reply" in t.error and t.reward is None for t in errors)
    steps = [s for t in out for s in t.steps]
    kinds = {s.observation.error.kind for s in steps if s.observation.error}
    assert {ActionErrorKind.MALFORMED_JSON, ActionErrorKind.UNKNOWN_TOOL, ActionErrorKind.NO_TOOL_CALL} <= kinds
    infos = [s.agent_info for s in steps if s.agent_info]
    assert infos and all(i["latency_ms"] > 0 and i["prompt_tokens"] > 0 for i in infos)
    assert any(i["retries"] > 0 for i in infos) and any(i.get("tool_calls_in_reply") == 2 for i in infos)
    stored = store.trajectory(completed[0].rollout_id)
    assert [s.agent_info for s in stored.steps] == [s.agent_info for s in completed[0].steps]


def test_every_fault_kind_on_code_and_no_rollout_lost(tmp_path):
    """The same on the code family: real sandboxes; the scripted model plays run_tests, read_file and the fix as
    a diff. Code goals repeat across tasks, so each task is recognised by its first observation. The tasks are
    test_code_agents.py's first eight (on disk by then: new ones draw their hidden variants, 110 s cold in CI106)."""
    from gymsmith.families.code.env import code_task
    from gymsmith.families.code.repo import unified_diff
    from gymsmith.registry import get_family

    spec = TaskSetSpec(family="code", count=8, split="train", base_seed=500, knobs={"difficulty": [0.0, 1.0]})
    tasks = build_taskset(spec)
    env = get_family("code").make_env()
    try:
        openings = [env.reset(t, seed=0).text for t in tasks]
    finally:
        env.close()
    assert len(set(openings)) == len(tasks)
    plans = {}
    for text, task in zip(openings, tasks):
        ct = code_task(task)
        diff = unified_diff({m: ct.files[m] for m in ct.buggy_modules}, {m: ct.reference[m] for m in ct.buggy_modules})
        plans[text] = [{"tool": "run_tests", "arguments": {}},
                       {"tool": "read_file", "arguments": {"path": ct.buggy_modules[0]}},
                       {"tool": "apply_diff", "arguments": {"diff": diff}},
                       {"tool": "run_tests", "arguments": {}}]
    with ScriptedChatServer(WitnessPolicy(plans), fault_rate=0.5, seed=2, slow_s=0.8) as server:
        store = TrajectoryStore(tmp_path / "c.db")
        config = RunConfig(run_id="model-code", taskset=spec, agents=["model"], model=_config(server), max_steps=60,
                           retries=0)
        out = run(config, store, tasks=tasks)
    assert set(server.fault_counts) == set(FAULT_KINDS), server.fault_counts
    rows = store.rollout_rows(["model-code"])
    assert len(rows) == len(tasks) and len({r["task_id"] for r in rows}) == len(tasks)
    assert {r["status"] for r in rows} <= {"completed", "error", "truncated"}
    _refused_only_while_the_endpoint_answered(rows)
    completed = [t for t in out if t.status is RolloutStatus.COMPLETED]
    assert len(completed) >= len(tasks) // 2
    assert all(t.reward.accepted for t in completed)  # the faults cost steps, not correctness
    assert all("no usable reply" in t.error and t.reward is None for t in out if t.status is RolloutStatus.ERROR)
    kinds = {s.observation.error.kind for t in out for s in t.steps if s.observation.error}
    assert {ActionErrorKind.MALFORMED_JSON, ActionErrorKind.UNKNOWN_TOOL, ActionErrorKind.NO_TOOL_CALL} & kinds


def test_endpoint_down_is_an_infrastructure_error(ops):
    with ScriptedChatServer(WitnessPolicy({}), fault_rate=1.0, faults=("http_500",)) as server:
        agent = ModelAgent(_config(server, max_retries=2))
        task = ops.generate(1)
        with VerifierService() as v:
            t = run_rollout(env=ops.make_env(), agent=agent, task=task, split=Split.TRAIN, seed=0, run_id="x",
                            verifier=v, policy="sparse", max_steps=10, time_limit_s=30)
        agent.close()
    assert t.status is RolloutStatus.ERROR and t.reward is None
    assert "no usable reply after 3 attempts: HTTP 500, HTTP 500, HTTP 500" in t.error
    # the 3 attempts, after each failed one and at the end the one-token request that tells a down endpoint (not
    # answered: retried, then an error) from a failing reply
    assert server.requests == 3 + 3 + 1


def test_act_raises_endpoint_error_for_the_runner(ops):
    with ScriptedChatServer(WitnessPolicy({}), fault_rate=1.0, faults=("drop",)) as server:
        agent = ModelAgent(_config(server, max_retries=1))
        agent.reset(ops.generate(1), Observation(text="start"), seed=0)
        with pytest.raises(ModelEndpointError, match="RemoteProtocolError"):
            agent.act(Observation(text="start"))
        agent.close()


def test_text_reply_and_parallel_calls_become_steps(ops):
    task = ops.generate(2, kind="billing", difficulty=0.1, fidelity=0.0)
    with ScriptedChatServer(WitnessPolicy(_plans([task]))) as server:
        agent = ModelAgent(_config(server))
        env = ops.make_env()
        obs = env.reset(task, seed=0)
        agent.reset(task, obs, seed=0)
        server.fault_rate, server.faults = 1.0, ("text_only",)
        a = agent.act(obs)
        assert a.tool == NO_TOOL_CALL and "think" in a.arguments
        r = env.step(a)
        assert r.observation.error.kind is ActionErrorKind.NO_TOOL_CALL
        server.faults = ("multi",)
        first = agent.act(r.observation)
        assert agent.step_info["tool_calls_in_reply"] == 2
        requests = server.requests
        second = agent.act(env.step(first).observation)  # from the same reply: no new request
        assert server.requests == requests and second.tool == "submit"
        assert agent.messages[-1]["role"] == "tool" and agent.messages[-1]["tool_call_id"] == first.call_id
        agent.close()


def test_context_truncation_keeps_task_and_whole_turns(ops):
    with ScriptedChatServer(WitnessPolicy({})) as server:
        agent = ModelAgent(_config(server, max_context_chars=3000))
        task = ops.generate(3)
        agent.reset(task, Observation(text="start"), seed=0)
        obs = Observation(text="x" * 500)
        for _ in range(12):
            agent.act(obs)
        body, encoded = agent._truncate()
        agent.close()
    assert encoded == [json.dumps(m, separators=(",", ":"), ensure_ascii=False) for m in body]  # what is sent is this
    assert body[0]["role"] == "system" and body[1]["content"] == "start"
    assert "earlier messages were removed" in body[2]["content"]
    assert sum(len(json.dumps(m)) for m in body) <= 3000 + 1000  # the last turn is always kept whole
    ids = {c["id"] for m in body if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    assert all(m["tool_call_id"] in ids for m in body if m["role"] == "tool")  # no orphaned tool results
    assert agent.step_info["truncated_messages"] > 0


def test_model_agent_needs_an_endpoint(tmp_path):
    with pytest.raises(ValueError, match="agent 'model' needs an endpoint"):
        run(RunConfig(run_id="m", taskset=TaskSetSpec(family="ops", count=1), agents=["model"]),
            TrajectoryStore(tmp_path / "unused.db"))


def _flooder(messages, n):
    """A policy that floods its own context: every reply asks for twenty pages of fifty records."""
    if sum(1 for m in messages if m["role"] == "assistant") >= 3:
        return [{"tool": "submit", "arguments": {}}]
    return [{"tool": "search_records", "arguments": {"entity": "orders", "limit": 50}}] * 20


def test_a_conversation_past_the_models_context_is_the_agents_failure_not_an_error(tmp_path):
    """An independent attacker's agent sent one reply of many tool calls, so that the next request overflowed the
    server's context (HTTP 400, as vLLM answers): stored as an infrastructure error, its failures were left out of
    means and exports and retried until a clean attempt succeeded. A request refused after the rollout's first
    reply is the conversation's doing: the agent's failure, reward 0, not retried. Refused at the first request while
    the endpoint answers a one-token request, it is too (vLLM answers 400 when its tool parser fails on a first reply),
    its detail naming the refusal: a task the model's context cannot hold scores 0, never an error left out of means."""
    tasks = build_taskset(TaskSetSpec(family="ops", count=3, split="train", base_seed=41))
    store = TrajectoryStore(tmp_path / "c.db")
    with ScriptedChatServer(_flooder, calls_per_reply=20, context_chars=6_000) as server:
        config = RunConfig(run_id="flood", taskset=TaskSetSpec(family="ops", count=3, split="train", base_seed=41),
                           agents=["model"], model=_config(server), retries=2)
        run(config, store, tasks=tasks)
        requests = server.requests
    rows = store.rollout_rows(["flood"])
    assert len(rows) == 3 and all(r["status"] == "truncated" and r["end_reason"] == "agent_failure" for r in rows)
    assert all(r["reward"] == 0.0 and "ModelRequestRefused" in r["end_detail"] for r in rows)
    assert "maximum context length" in rows[0]["end_detail"]
    assert requests == 3 * 2  # per rollout: the first reply and the refused request, never a retried attempt
    with ScriptedChatServer(_flooder, context_chars=200) as server:  # the task alone is past it, a short prompt not
        config = RunConfig(run_id="tiny", taskset=TaskSetSpec(family="ops", count=1, split="train", base_seed=41),
                           agents=["model"], model=_config(server), retries=0)
        run(config, store, tasks=tasks[:1])
    [row] = store.rollout_rows(["tiny"])
    assert row["status"] == "truncated" and row["end_reason"] == "agent_failure" and row["reward"] == 0.0
    assert "HTTP 400" in row["end_detail"] and "after 0 replies" in row["end_detail"]



def _endless_flooder(messages, n):
    """A policy that never submits and asks for the largest pages it can, n calls a reply."""
    return [{"tool": "search_records", "arguments": {"entity": "orders", "limit": 50}}] * n


def test_a_policy_that_floods_what_the_engine_holds_fails_at_its_records_bound(tmp_path):
    """An independent attacker's policy (30 calls of 50 records a reply, 300 steps) made the async engine hold
    14-48 MiB per rollout, past what its in-flight default assumed. A rollout's record is bounded
    (`RunConfig.max_record_mib`, token ids and logprobs included): past it the rollout is the agent's failure,
    reward 0, stored like any other; an honest policy under the same bound is untouched."""
    spec = TaskSetSpec(family="ops", count=2, split="train", base_seed=43)
    tasks = build_taskset(spec)
    store = TrajectoryStore(tmp_path / "r.db")
    with ScriptedChatServer(_endless_flooder, calls_per_reply=30, vllm=True) as server:
        config = RunConfig(run_id="flood", taskset=spec, agents=["model"], model=_config(server, timeout_s=5),
                           max_record_mib=1)
        out = run(config, store, tasks=tasks)
    assert len(out) == 2 and all(t.end_reason.value == "agent_failure" and t.reward.value == 0.0 for t in out)
    assert all("max_record_bytes" in t.end_detail and len(t.steps) < 60 for t in out)
    assert all(any(s.agent_info and s.agent_info.get("turn", {}).get("prompt_ids") for s in t.steps) for t in out)
    rows = store.rollout_rows(["flood"])
    assert len(rows) == 2 and all(r["status"] == "truncated" and r["reward"] == 0.0 for r in rows)
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), vllm=True) as server:
        config = RunConfig(run_id="honest", taskset=spec, agents=["model"], model=_config(server, timeout_s=5),
                           max_record_mib=1)
        honest = run(config, store, tasks=tasks)
    assert all(t.end_reason.value == "submitted" and t.reward.accepted for t in honest)


def test_a_gateway_refusing_what_the_policy_wrote_is_the_agents_failure(tmp_path):
    """An eighty-second attacker put a gateway answering 403 to content it refuses in front of the model, and had its
    policy write that content on the tasks it gave up on: 6 failing rollouts of 12 became infrastructure errors,
    left out of the means and the trainer export (mean reward of the rest 1.0 against 0.5). A refusal of any status,
    at the first request as after it (the first reply is the policy's too), is the conversation's while the endpoint
    answers a one-token request."""
    spec = TaskSetSpec(family="ops", count=2, split="train", base_seed=44)
    tasks = build_taskset(spec)
    store = TrajectoryStore(tmp_path / "g.db")
    for run_id, k in (("after", 1), ("first", 0)):
        with ScriptedChatServer(WitnessPolicy(_plans(tasks)), conversation_fault=("http_403", k)) as server:
            run(RunConfig(run_id=run_id, taskset=spec, agents=["model"], model=_config(server, timeout_s=5), retries=0),
                store, tasks=tasks)
    after, first = store.rollout_rows(["after"]), store.rollout_rows(["first"])
    assert len(after) == 2 and all(r["end_reason"] == "agent_failure" and r["reward"] == 0.0 and "HTTP 403" in
                                   r["end_detail"] for r in after)
    assert len(first) == 2 and all(r["end_reason"] == "agent_failure" and r["reward"] == 0.0 and "HTTP 403" in
                                   r["end_detail"] for r in first)

@pytest.mark.parametrize("finish", [{"why": "stop"}, "s" * 40, 10**20, "st\u00f6p\ud800", ["stop"]])
def test_a_finish_reason_that_is_not_one_is_not_stored_and_breaks_no_run(tmp_path, finish):
    """An attacker's server sent a finish reason the store's column could not hold (a dict, a long text, a huge
    integer, a lone surrogate): the rollouts written with it in one transaction were all lost and the run stopped,
    on every resume too. What the model server sends is kept only if it is what it claims: here, None."""
    tasks = build_taskset(TaskSetSpec(family="ops", count=4, split="train", base_seed=42))
    store = TrajectoryStore(tmp_path / "f.db")
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), finish_reason=finish) as server:
        config = RunConfig(run_id="finish", taskset=TaskSetSpec(family="ops", count=4, split="train", base_seed=42),
                           agents=["model"], seeds=2, model=_config(server, timeout_s=5))
        out = run(config, store, tasks=tasks)
    rows = store.rollout_rows(["finish"])
    assert len(rows) == 8 and all(r["status"] == "completed" for r in rows)
    turns = [s.agent_info["turn"] for t in out for s in t.steps if s.agent_info and "turn" in s.agent_info]
    assert turns and all(turn["finish_reason"] is None for turn in turns)
    back = store.trajectory(out[0].rollout_id)
    assert [s.agent_info["turn"]["finish_reason"] for s in back.steps if s.agent_info and "turn" in s.agent_info] \
        == [None] * len([s for s in out[0].steps if s.agent_info and "turn" in s.agent_info])


@pytest.mark.parametrize("kind, after", [("slow", 1), ("http_500", 1), ("http_504", 0), ("slow", 0), ("http_500", 0)])
def test_a_reply_the_endpoint_cannot_give_in_time_is_the_agents_failure_while_it_answers_others(tmp_path, kind, after):
    """A seventy-fourth attacker's policy failed, then generated to its token limit more slowly than the call's
    timeout allowed: every retry timed out, the rollout was stored as an infrastructure error, dropped from means and
    the export, and retried until an attempt succeeded (acceptance 9/16 became 16/16). After the rollout's first
    reply, a call that still fails with 5xx (the server breaking on what the model wrote) while the endpoint answers
    a one-token request quickly is the conversation's failure: reward 0, not retried; so is a timeout (ours, or a
    gateway's 504: a seventy-fifth attacker's first reply behind a proxy) and a 5xx from the first reply on (an
    eighty-fifth attacker's first replies broke the server: 8 failing samples of 16 left the means and the export)."""
    tasks = build_taskset(TaskSetSpec(family="ops", count=3, split="train", base_seed=43))
    store = TrajectoryStore(tmp_path / "s.db")
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), conversation_fault=(kind, after), slow_s=1.5) as server:
        config = RunConfig(run_id="slow", taskset=TaskSetSpec(family="ops", count=3, split="train", base_seed=43),
                           agents=["model"], model=_config(server, max_retries=1), retries=2)
        run(config, store, tasks=tasks)
        faults = server.fault_counts[f"conversation_{kind}"]
    rows = store.rollout_rows(["slow"])
    assert len(rows) == 3 and all(r["status"] == "truncated" and r["end_reason"] == "agent_failure" for r in rows)
    assert all(r["reward"] == 0.0 and "ModelRequestRefused" in r["end_detail"] for r in rows)
    assert "while it answered a one-token request" in rows[0]["end_detail"]
    assert faults == 3 * 2  # two attempts per rollout, one rollout attempt each: nothing retried beyond the call's


def test_a_reply_held_up_while_the_endpoint_is_slow_to_answer_anything_stays_the_endpoints(tmp_path):
    """The other side of the rule: a seventy-fifth attacker's honest policy, on a server whose queue held every
    request (its one-token check too, answered in 1.45 s of a 2 s timeout), was scored as failing. A reply that does
    not come while a one-token request also waits longer than a quarter of the timeout (at least a second) is the
    load's: an infrastructure error, as before."""
    tasks = build_taskset(TaskSetSpec(family="ops", count=2, split="train", base_seed=43))
    store = TrajectoryStore(tmp_path / "q.db")
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), conversation_fault=("slow", 0), slow_s=2.5,
                            check_delay_s=1.45) as server:  # the attacker's figures: timeout 2 s, a check in 1.45 s
        config = RunConfig(run_id="queue", taskset=TaskSetSpec(family="ops", count=2, split="train", base_seed=43),
                           agents=["model"], model=_config(server, max_retries=1, timeout_s=2.0), retries=0)
        run(config, store, tasks=tasks)
    rows = store.rollout_rows(["queue"])
    assert len(rows) == 2 and all(r["status"] == "error" and r["error_kind"] == "model_endpoint" for r in rows)
    assert all(r["end_reason"] == "infrastructure" for r in rows)


def test_the_rollout_deadline_covers_the_longest_model_call():
    """A seventy-fifth attacker's policy timed out on every attempt of its last call, and the engine's deadline
    (which left out the backoff between attempts and the endpoint check) cut the rollout off first: an
    infrastructure error with no end reason. The deadline now covers all of one call, and lost rollouts say why."""
    from gymsmith.runner.recovery import lost_trajectory
    from gymsmith.core import ErrorKind

    model = ModelAgentConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=None, timeout_s=10,
                             max_retries=4, backoff_s=4.5)
    config = RunConfig(run_id="d", taskset=TaskSetSpec(family="ops", count=1), agents=["model"], model=model,
                       time_limit_s=100)
    # every attempt, the backoffs, a one-token check after each attempt and at the end, a seed probe of three after each
    assert model.check_s() == 2.5 and model.longest_call_s() == 10 * 5 * 4 + 4.5 * 15 + 2.5 * (5 + 1)
    assert config.rollout_deadline() == 100 + model.longest_call_s() + 60
    task = build_taskset(TaskSetSpec(family="ops", count=1))[0]
    lost = lost_trajectory(config, task, "model", 0, "cut off", ErrorKind.ROLLOUT_TIMEOUT)
    assert lost.end_reason is not None and lost.end_reason.value == "infrastructure"


@pytest.mark.parametrize("seeded", [False, "constant", True])
def test_a_failed_call_is_no_fresh_sample_where_the_endpoint_ignores_seeds(tmp_path, seeded):
    """An eighty-fifth attacker's policy broke the server on a random half of its replies, on a server that ignores
    the request's seed: each retry was a fresh sample, so its rollouts were retried until lucky (13 of 16 accepted
    against 4 of 16). Where the endpoint answers a seeded request differently each time, a failure it does not share
    is the conversation's at once: the agent's failure, never retried. Where it is seeded, a retry is the same sample
    and the call is retried as before. An endpoint that answers every probe alike (a cache of whole requests, or a
    policy sure of its answer: a ninety-first attacker's server) shows no sampling by seed, and is not taken for one."""
    from gymsmith.agents import model as model_module

    tasks = build_taskset(TaskSetSpec(family="ops", count=4, split="train", base_seed=45))
    store = TrajectoryStore(tmp_path / "f.db")
    with ScriptedChatServer(WitnessPolicy(_plans(tasks)), conversation_fault=("flaky_500", 0), seeded=seeded) as server:
        model_module._SEEDED.pop((server.base_url, "scripted"), None)
        config = RunConfig(run_id="flaky", taskset=TaskSetSpec(family="ops", count=4, split="train", base_seed=45),
                           agents=["model"], model=_config(server, max_retries=3, timeout_s=5), retries=0)
        run(config, store, tasks=tasks)
        failed = server.fault_counts["conversation_flaky_500"]
    rows = store.rollout_rows(["flaky"])
    assert len(rows) == 4 and failed > 0
    refused = [r for r in rows if r["end_reason"] == "agent_failure"]
    if seeded is True:  # a retry is the same sample: retried (failing only once every attempt has, as before)
        assert all("after 4 attempts" in r["end_detail"] for r in refused) and failed > 4 * len(refused)
    else:
        assert len(refused) == failed  # each failure ended its rollout: no call was retried
        assert all(r["reward"] == 0.0 and "a retry would be a fresh sample" in r["end_detail"] for r in refused)
        assert all(r["accepted"] for r in rows if r["end_reason"] != "agent_failure")


def test_a_reply_is_kept_in_the_protocols_fields_and_types_only():
    """A ninety-first attacker's server added a key of 40,000 empty lists to each tool call (three bytes each in the
    JSON the record's bound counts, 64 in memory: 315 MiB held at a 16 MiB estimate) and a megabyte of text as a
    token count. The conversation keeps a reply's text and calls in the protocol's fields and types only."""
    from gymsmith.agents.model import _count, clean_reply

    message = {"role": "assistant", "content": None, "reasoning": "x" * 1000,
               "tool_calls": [{"id": "c1", "type": "function", "x": [[] for _ in range(1000)],
                               "function": {"name": "submit", "arguments": "{}", "extra": [1] * 100}},
                              {"id": 7, "function": {"name": ["odd"], "arguments": {"a": 1}}}, "junk"]}
    reply = clean_reply(message)
    assert reply == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
        {"id": "", "type": "function", "function": {"name": "", "arguments": '{"a": 1}'}},
        {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}]}
    assert clean_reply({"content": [{"type": "text", "text": "hi"}]})["content"] == '[{"type": "text", "text": "hi"}]'
    assert [_count(v) for v in (12, "x" * 10, -1, 2 ** 40, True, None)] == [12, None, None, None, None, None]
