"""`gymsmith serve` over real HTTP (uvicorn on a loopback port) and a real WebSocket."""

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest
from referencing import Registry, Resource

from gymsmith.core import Action, Split
from gymsmith.registry import get_family
from gymsmith.runner import run_rollout
from gymsmith.server import RemoteEnvironment, RemoteError, ServerSettings, create_app
from gymsmith.verifier import VerifierService

from conftest import Running


@pytest.fixture(scope="module")
def server():
    with Running(max_sessions=3, idle_timeout_s=60) as s:
        yield s


def _task():
    return get_family("ops").generate(5, difficulty=0.4)


def test_same_reward_over_http_as_locally(server):
    task = _task()
    ops = get_family("ops")
    with VerifierService() as v:
        local = run_rollout(env=ops.make_env(), agent=ops.agents()["oracle"](), task=task, split=Split.TRAIN, seed=0,
                            run_id="l", verifier=v, policy="shaped_gated", max_steps=300, time_limit_s=60)
    remote = RemoteEnvironment(server.url, family="ops")
    observation = remote.reset(task, episode_seed=0)
    assert observation == local.reset_observation
    agent = ops.agents()["oracle"]()
    agent.reset(task, observation, seed=0)
    done, obs = False, observation
    while not done:
        result = remote.step(agent.act(obs))
        obs, done = result.observation, result.done
    assert remote.reward.value == local.reward.value == 1.0 and remote.reward.accepted
    assert remote.state_hash() == local.final_state_hash
    remote.close()


def test_sessions_belong_to_their_client(server):
    a, b = RemoteEnvironment(server.url, family="ops"), RemoteEnvironment(server.url, family="ops")
    a.reset(seed=1)
    b.reset(seed=2)
    own = b.session_id
    b.session_id = a.session_id  # b tries to drive a's session with its own key
    with pytest.raises(RemoteError, match="HTTP 403: session .* belongs to another client"):
        b.step(Action(tool="get_status"))
    assert a.step(Action(tool="get_status")).observation.error is None
    a.close()
    b.session_id = own
    b.close()


@pytest.mark.parametrize("body, line", [
    ({}, "body: field 'family' is required"),
    ({"family": "ops", "seed": "seven"}, "body.ops.seed: Input should be a valid integer"),
    ({"family": "ops", "knobs": {"difficulty": 4}}, "body.ops.knobs.difficulty: Input should be less than or equal to 1"),
    ({"family": "ops", "knobs": {"colour": 1}}, "body.ops.knobs.colour: Extra inputs are not permitted"),
    ({"family": "opz"}, "body: Input tag 'opz' found using 'family' does not match any of the expected tags"),
    ({"family": "ops", "episode_seed": False}, "body.ops.episode_seed: Value error, expected a number, got the boolean false"),
])
def test_malformed_bodies_get_422_with_the_reason(server, body, line):
    """One line naming the field and what was expected (the schema says so: `detail` is a string)."""
    r = httpx.post(f"{server.url}/sessions", json=body)
    assert r.status_code == 422 and r.json()["detail"].startswith(line), r.json()


def test_a_task_the_family_does_not_generate_is_refused_with_409(server):
    task = _task()
    edited = task.model_copy(update={"goal": "Do something else."})
    r = httpx.post(f"{server.url}/sessions", json={"family": "ops", "task": edited.model_dump(mode="json", exclude={"id"})})
    assert r.status_code == 409 and "is not what ops" in r.json()["detail"], r.json()
    r = httpx.post(f"{server.url}/sessions", json={"family": "ops", "task": task.model_dump(mode="json")})
    assert r.status_code == 201, r.json()
    httpx.delete(f"{server.url}/sessions/{r.json()['session_id']}", headers={"X-Session-Key": r.json()["session_key"]})


def test_session_limit_and_bad_tool_calls(server):
    clients = [RemoteEnvironment(server.url, family="ops") for _ in range(3)]
    for i, c in enumerate(clients):
        c.reset(seed=10 + i)
    extra = RemoteEnvironment(server.url, family="ops")
    with pytest.raises(RemoteError, match=r"HTTP 429: session limit reached \(3 open\)"):
        extra.reset(seed=20)
    refused = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 21})
    assert refused.status_code == 429 and int(refused.headers["retry-after"]) >= 1  # a limit the client can wait out
    r = clients[0].step(Action(tool="ship_order", arguments='{"order_id": '))
    assert r.observation.error.kind.value == "malformed_json" and not r.done
    for c in clients:
        c.close()
    extra.reset(seed=20)  # room again once sessions close
    extra.close()


def test_openapi_matches_the_responses(server):
    spec = httpx.get(f"{server.url}/openapi.json").json()
    registry = Registry().with_resource("openapi", Resource.opaque(spec))

    def check(path, method, status, payload):
        schema = spec["paths"][path][method]["responses"][str(status)]["content"]["application/json"]["schema"]
        resolver_schema = {"$ref": "openapi#" + schema["$ref"][1:]} if "$ref" in schema else schema
        jsonschema.Draft202012Validator(resolver_schema, registry=registry).validate(payload)

    created = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 3})
    assert created.status_code == 201
    check("/sessions", "post", 201, created.json())
    broken = {k: v for k, v in created.json().items() if k != "session_id"}
    with pytest.raises(jsonschema.ValidationError, match="'session_id' is a required property"):
        check("/sessions", "post", 201, broken)  # the check itself can fail
    sid, key = created.json()["session_id"], created.json()["session_key"]
    step = httpx.post(f"{server.url}/sessions/{sid}/step", json={"tool": "get_status"}, headers={"X-Session-Key": key})
    check("/sessions/{session_id}/step", "post", 200, step.json())
    state = httpx.get(f"{server.url}/sessions/{sid}", headers={"X-Session-Key": key})
    check("/sessions/{session_id}", "get", 200, state.json())
    bad = httpx.post(f"{server.url}/sessions", json={})
    check("/sessions", "post", 422, bad.json())
    assert httpx.delete(f"{server.url}/sessions/{sid}", headers={"X-Session-Key": key}).status_code == 204


def test_websocket_steps(server):
    from websockets.sync.client import connect

    created = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 4}).json()
    url = server.url.replace("http://", "ws://") + f"/sessions/{created['session_id']}/ws"
    with connect(url, additional_headers={"X-Session-Key": created["session_key"]}) as ws:
        ws.send(json.dumps({"tool": "get_status", "arguments": {}}))
        reply = json.loads(ws.recv())
        assert reply["observation"]["error"] is None and reply["done"] is False
        ws.send("not json")
        assert "invalid step message" in json.loads(ws.recv())["error"]
        ws.send(json.dumps({"tool": "submit"}))
        assert json.loads(ws.recv())["reward"]["accepted"] is False
    with pytest.raises(Exception):
        with connect(url, additional_headers={"X-Session-Key": "wrong"}) as ws:
            ws.recv()
    httpx.delete(f"{server.url}/sessions/{created['session_id']}", headers={"X-Session-Key": created["session_key"]})


def test_token_required_beyond_loopback():
    with pytest.raises(ValueError, match="needs a token"):
        create_app(ServerSettings(host="0.0.0.0"))
    with Running(host="0.0.0.0", token="s3cret") as s:  # listens on all addresses; the test talks over loopback
        assert httpx.post(f"{s.url}/sessions", json={"family": "ops"}).status_code == 401
        assert httpx.post(f"{s.url}/sessions", json={"family": "ops"},
                          headers={"Authorization": "Bearer nope"}).status_code == 401
        ok = RemoteEnvironment(s.url, family="ops", token="s3cret")
        ok.reset(seed=1)
        ok.close()


def test_idle_sessions_expire_and_leave_no_environment_behind():
    with Running(idle_timeout_s=0.5) as s:
        client = RemoteEnvironment(s.url, family="ops")
        client.reset(seed=1)
        manager = s.app.state.manager
        [session] = manager.sessions.values()
        env = session.env
        deadline = time.time() + 10
        while manager.sessions and time.time() < deadline:
            time.sleep(0.1)
        assert manager.sessions == {}
        assert env.conn is None  # the environment was closed, not just forgotten
        with pytest.raises(RemoteError, match="HTTP 404: no session .* expired"):
            client.step(Action(tool="get_status"))


def test_reset_by_task_id_from_the_servers_store(tmp_path):
    from gymsmith.registry import TaskSetSpec
    from gymsmith.runner import RunConfig, run
    from gymsmith.store import TrajectoryStore

    db = str(tmp_path / "s.db")
    [t] = run(RunConfig(run_id="x", taskset=TaskSetSpec(family="ops", count=1), agents=["null"]), TrajectoryStore(db))
    with Running(store=db) as s:
        client = RemoteEnvironment(s.url, family="ops")
        client.reset(task_id=t.task_id)
        assert client.task.id == t.task_id
        with pytest.raises(RemoteError, match="HTTP 404: task id 'ops-nope' is not in the server's store"):
            client.reset(task_id="ops-nope")


def test_concurrent_web_sessions_each_drive_their_own_browser():
    """Three web sessions stepped at the same moment from three clients, over real HTTP with a real Chromium: each
    environment's calls run on the thread that started its browser (Playwright's sync API is bound to it), so every
    oracle is accepted. Served from the server's thread pool instead, two of three sessions' steps failed with
    "Cannot switch to a different thread" and were scored as the agent's errors (attacker 147)."""
    web = get_family("web")
    tasks = [web.generate(seed, difficulty=difficulty) for seed, difficulty in ((10, 0.0), (11, 0.5), (12, 1.0))]
    barrier = threading.Barrier(len(tasks))
    rewards: dict[int, object] = {}

    def drive(i: int) -> None:
        remote = RemoteEnvironment(server_url, family="web")
        try:
            observation = remote.reset(tasks[i], episode_seed=0)
            agent = web.agents()["oracle"]()
            agent.reset(tasks[i], observation, seed=0)
            done = False
            while not done:
                action = agent.act(observation)
                try:
                    barrier.wait(timeout=60)  # step together while all three are still playing
                except threading.BrokenBarrierError:
                    pass
                result = remote.step(action)
                observation, done = result.observation, result.done
                assert observation.error is None, observation.text[:300]
            barrier.abort()  # the others go on alone
            rewards[i] = remote.reward
        finally:
            remote.close()

    with Running(max_sessions=3, idle_timeout_s=60, families=["web"]) as running:
        server_url = running.url
        with ThreadPoolExecutor(len(tasks)) as pool:
            for future in [pool.submit(drive, i) for i in range(len(tasks))]:
                future.result()
    assert all(r.accepted and r.value == 1.0 for r in rewards.values()) and len(rewards) == 3, rewards
