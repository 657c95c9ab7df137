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
    a.reset(seed=1, knobs={"fidelity": 0.0})  # no simulated outage in the way of the step below, whatever the task id
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

    created = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 4, "knobs": {"fidelity": 0.0}}).json()
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


def _code_session(url):
    """A code session (real sandbox) whose `run_command` can hold the session's call for as long as it sleeps."""
    remote = RemoteEnvironment(url, family="code")
    remote.reset(seed=3, knobs={"difficulty": 0.0})
    return remote


def test_a_sessions_calls_are_one_at_a_time_and_hold_no_other_clients_up():
    """A hundred-and-fiftieth attacker sent 45 concurrent slow steps to its own session: each waited on the session's
    lock holding one of the server's 40 worker threads, and other clients' steps and opens got no answer (0 of 7);
    6 WebSockets did the same to every WebSocket. A session's call in progress now makes another call of it a 409 at
    once, calls are awaited on the session's own thread, and another client's steps are answered meanwhile."""
    with Running(max_sessions=4, idle_timeout_s=60) as s:
        slow, other = _code_session(s.url), RemoteEnvironment(s.url, family="ops")
        other.reset(seed=1, knobs={"fidelity": 0.0})
        headers = {"X-Session-Key": slow._key}
        url = f"{s.url}/sessions/{slow.session_id}"
        with ThreadPoolExecutor(1) as pool:
            sleeping = pool.submit(httpx.post, f"{url}/step", json={"tool": "run_command", "arguments": {
                "command": "sleep 8"}}, headers=headers, timeout=60)
            deadline, session = time.monotonic() + 10, s.app.state.manager.sessions[slow.session_id]
            while not session.lock.locked():  # until the sleep is in progress (a call of ours would take the lock)
                assert time.monotonic() < deadline and not sleeping.done()
                time.sleep(0.05)
            replies = [httpx.post(f"{url}/step", json={"tool": "run_command", "arguments": {"command": "true"}},
                                  headers=headers, timeout=10) for _ in range(45)]
            assert {r.status_code for r in replies} == {409} and "in progress" in replies[0].json()["detail"]
            assert httpx.get(url, headers=headers, timeout=10).status_code == 409
            assert other.step(Action(tool="get_status")).observation.error is None  # answered meanwhile
            assert not sleeping.done()
            assert sleeping.result().status_code == 200
        assert httpx.get(url, headers=headers, timeout=10).status_code == 200  # then the session goes on
        slow.close()
        other.close()


def test_a_session_busy_past_the_idle_timeout_holds_no_other_expiry_up():
    """The reaper closed stale sessions one by one, each after its call in progress: one 50 s step kept 5 idle
    sessions from expiring (the same attacker; 0 of 5 after 20 s). A session with a call in progress is not idle,
    and the others expire on time."""
    with Running(max_sessions=4, idle_timeout_s=1.0) as s:
        slow = _code_session(s.url)
        idle = [RemoteEnvironment(s.url, family="ops") for _ in range(2)]
        for remote in idle:
            remote.reset(seed=1)
        manager = s.app.state.manager
        with ThreadPoolExecutor(1) as pool:
            sleeping = pool.submit(httpx.post, f"{s.url}/sessions/{slow.session_id}/step", json={
                "tool": "run_command", "arguments": {"command": "sleep 12"}},
                headers={"X-Session-Key": slow._key}, timeout=60)
            deadline = time.time() + 9
            while len(manager.sessions) > 1 and time.time() < deadline:
                time.sleep(0.2)
            assert list(manager.sessions) == [slow.session_id] and not sleeping.done()
            assert sleeping.result().status_code == 200


def test_the_session_limit_is_checked_before_a_task_is_made(monkeypatch):
    """Opening a session made its task first (a cold code task takes 10-70 s) and checked the limit after: at the limit,
    40 opens of fresh code seeds held the server's threads for 900 s before any 429 (the same attacker). The place
    is now taken first: at the limit, a 429 comes without a task being made."""
    from gymsmith.families.code import CodeFamily

    with Running(max_sessions=1, idle_timeout_s=60) as s:
        first = RemoteEnvironment(s.url, family="ops")
        first.reset(seed=1)
        made = []
        original = CodeFamily.generate
        monkeypatch.setattr(CodeFamily, "generate", lambda self, *a, **k: made.append(a) or original(self, *a, **k))
        reply = httpx.post(f"{s.url}/sessions", json={"family": "code", "seed": 12345}, timeout=30)
        assert reply.status_code == 429 and made == []
        first.close()


def test_a_websocket_step_on_a_closed_session_is_answered_not_dropped(server):
    """A session closed (DELETE, or the idle reaper) under an open WebSocket: its next step raised on the server
    ("cannot schedule new futures after shutdown") and the connection dropped without a word (the same attacker).
    It is answered with the 404, then closed with code 4404."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    created = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 4}).json()
    url = server.url.replace("http://", "ws://") + f"/sessions/{created['session_id']}/ws"
    with connect(url, additional_headers={"X-Session-Key": created["session_key"]}) as ws:
        httpx.delete(f"{server.url}/sessions/{created['session_id']}", headers={"X-Session-Key": created["session_key"]})
        ws.send(json.dumps({"tool": "get_status", "arguments": {}}))
        reply = json.loads(ws.recv(timeout=10))
        assert reply["status"] == 404 and "closed" in reply["error"]
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
        assert closed.value.rcvd.code == 4404


def _raw(url: str, head: str) -> str:
    """The first bytes of the server's answer to a request head sent alone (its body never follows)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(head.encode())
        return sock.recv(4096).decode("latin-1")


def test_a_body_is_read_only_from_an_authorised_client_and_only_so_long():
    """A hundred-and-fifty-fifth attacker's unauthenticated 100 MB bodies were read and parsed before the token was
    checked: 3 GB of the server's memory, the authorised client's steps 28 s late. A session route now answers a
    request without the token with a 401, and one declaring a body over MAX_BODY_BYTES with a 413, before reading any
    of it (the body here never arrives: the answer comes anyway)."""
    from gymsmith.server.app import MAX_BODY_BYTES, MAX_STEP_BYTES

    with Running(token="s3cret", max_sessions=2) as s:
        big = MAX_BODY_BYTES * 25
        head = f"POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {big}\r\n"
        assert _raw(s.url, head + "\r\n").startswith("HTTP/1.1 401")
        assert _raw(s.url, head + "Authorization: Bearer s3cret\r\n\r\n").startswith("HTTP/1.1 413")
        step = (f"POST /sessions/any/step HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                f"Content-Length: {MAX_STEP_BYTES + 1}\r\nAuthorization: Bearer s3cret\r\n\r\n")
        assert _raw(s.url, step).startswith("HTTP/1.1 413")  # a step's bound is its own, below a task's
        ok = httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": 1},
                        headers={"Authorization": "Bearer s3cret"}, timeout=30)
        assert ok.status_code == 201, ok.text


def test_a_chunked_body_over_the_bound_is_a_413():
    """A body sent in chunks (no length declared) is counted as it arrives; past MAX_BODY_BYTES the read stops. A
    hundred-and-fifty-seventh attacker's got a 400 ("error parsing the body": FastAPI caught the refusal inside its
    body read and answered its own way) where the docs promise a 413."""
    from gymsmith.server.app import MAX_BODY_BYTES

    def chunks():
        for _ in range(MAX_BODY_BYTES // (1 << 20) + 2):
            yield b" " * (1 << 20)
    with Running(max_sessions=1) as s:
        reply = httpx.post(f"{s.url}/sessions", content=chunks(), headers={"Content-Type": "application/json"})
        assert reply.status_code == 413 and "more than" in reply.json()["detail"]
        assert httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": 1}).status_code == 201


def test_a_body_of_many_values_is_refused_before_it_is_parsed():
    """What parsing and validating a body costs grows with its values: a hundred-and-sixty-second attacker's
    `{"family": "ops", "task": {"tools": [0, 0, ...]}}` (one validation error per item, each made a dict on the event
    loop) held every client 76 s with 4 MB, and 1.6 MB of empty objects in a step 0.27 s. A body opening a session
    with more than MAX_OPEN_VALUES JSON values, or a step with more than MAX_STEP_VALUES objects and arrays, is a 413
    before it is parsed; the same bytes in a text are parsed and answered."""
    from gymsmith.server.app import MAX_OPEN_VALUES, MAX_STEP_VALUES

    with Running(max_sessions=1) as s:
        many = '{"family": "ops", "task": {"tools": [' + "0," * MAX_OPEN_VALUES + "0]}}"
        reply = httpx.post(f"{s.url}/sessions", content=many, headers={"Content-Type": "application/json"})
        assert reply.status_code == 413 and "JSON values" in reply.json()["detail"], reply.text
        # counting is linear: a text of escaped quotes, unterminated, made each quote begin a scan to the end (a
        # hundred-and-sixty-sixth attacker's 44 KB body: 4.8 s; 400 KB of it would take minutes), answered in time
        escapes = '{"family": "ops", "task": "' + "," * MAX_OPEN_VALUES + '\\"' * 200_000
        assert httpx.post(f"{s.url}/sessions", content=escapes, headers={"Content-Type": "application/json"},
                          timeout=60).status_code in (400, 413, 422)
        in_a_text = json.dumps({"family": "ops", "task": {"goal": "0," * MAX_OPEN_VALUES}})
        assert httpx.post(f"{s.url}/sessions", content=in_a_text,
                          headers={"Content-Type": "application/json"}).status_code == 422
        created = httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": 4, "knobs": {"fidelity": 0.0}}).json()
        headers = {"X-Session-Key": created["session_key"], "Content-Type": "application/json"}
        objects = '{"tool": "get_status", "arguments": {"x": [' + "{}," * MAX_STEP_VALUES + "{}]}}"
        reply = httpx.post(f"{s.url}/sessions/{created['session_id']}/step", content=objects, headers=headers)
        assert reply.status_code == 413 and "objects and arrays" in reply.json()["detail"], reply.text
        step = httpx.post(f"{s.url}/sessions/{created['session_id']}/step", headers=headers,
                          content=json.dumps({"tool": "get_status", "arguments": {}}))
        assert step.status_code == 200 and step.json()["observation"]["error"] is None


@pytest.mark.parametrize("uvicorn_limits", [True, False], ids=["as-served", "app-alone"])
def test_a_websocket_message_over_the_bound_is_refused_unparsed(uvicorn_limits):
    """WebSocket messages skipped the body bound (uvicorn's own is 16 MiB): the same attacker's 10 MB message was
    parsed, then answered as a bad step. `gymsmith serve` starts uvicorn with the step bound (the protocol refuses the
    message as it arrives, close 1009) and without compression (a hundred-and-fifty-ninth attacker's 4 MiB of empty
    objects cost 4 kB to send and 0.5 s of the event loop to parse), and the app refuses one over it before parsing
    it, where it runs without those limits (a 413, close 1009). The longest valid step passes; the session goes on
    through another socket."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from gymsmith.envs.base import MAX_ARGUMENTS_CHARS
    from gymsmith.server.app import MAX_STEP_BYTES, MAX_STEP_VALUES

    with Running(uvicorn_limits=uvicorn_limits, max_sessions=1) as s:
        created = httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": 4}).json()
        url = s.url.replace("http://", "ws://") + f"/sessions/{created['session_id']}/ws"
        headers = {"X-Session-Key": created["session_key"]}
        # the longest valid step's message is under the bound: arguments of MAX_ARGUMENTS_CHARS characters, escaped
        longest = json.dumps({"tool": "get_status", "arguments": {"x": "\u00e9" * (MAX_ARGUMENTS_CHARS - 10)}})
        assert len(longest) < MAX_STEP_BYTES
        with connect(url, additional_headers=headers, max_size=None, compression="deflate") as ws:
            if uvicorn_limits:  # served: no compressed messages (a message costs its sender its size)
                assert ws.response.headers.get("Sec-WebSocket-Extensions") is None
            ws.send(longest)
            assert "observation" in json.loads(ws.recv(timeout=20))
            # many objects parse slowly (1.6 MB of `{}`: 0.28 s of the event loop): refused unparsed, the socket kept
            ws.send('{"tool": "get_status", "arguments": {"x": [' + "{}," * MAX_STEP_VALUES + "{}]}}")
            assert json.loads(ws.recv(timeout=20))["status"] == 413
            braces = json.dumps({"tool": "get_status", "arguments": {"x": "{" * (MAX_STEP_VALUES + 1)}})
            ws.send(braces)  # as many braces inside a text: no objects, parsed and answered
            assert "observation" in json.loads(ws.recv(timeout=20))
        big = json.dumps({"tool": "get_status", "arguments": {"x": "a" * (MAX_STEP_BYTES + 10)}})
        with connect(url, additional_headers=headers, max_size=None) as ws, \
                pytest.raises(ConnectionClosed) as closed:  # served: the protocol closes before the app sees it
            ws.send(big)
            if not uvicorn_limits:
                assert json.loads(ws.recv(timeout=20))["status"] == 413  # the app's answer, before its close
            ws.recv(timeout=20)
        # served, the close may come while the client still sends the message: its connection is then reset unread
        if closed.value.rcvd is not None or not uvicorn_limits:
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009
        with connect(url, additional_headers=headers) as ws:
            ws.send(json.dumps({"tool": "get_status", "arguments": {}}))
            assert "observation" in json.loads(ws.recv(timeout=20))


def test_a_session_has_one_websocket_at_a_time(server):
    """The same attacker opened 6 WebSockets on one session and flooded them: each message was read on the event
    loop though the session plays one call at a time. A second socket on a session is answered 409 and closed with 4409 while
    the first is open; once it closes, another may open."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    created = httpx.post(f"{server.url}/sessions", json={"family": "ops", "seed": 4}).json()
    url = server.url.replace("http://", "ws://") + f"/sessions/{created['session_id']}/ws"
    headers = {"X-Session-Key": created["session_key"]}
    try:
        with connect(url, additional_headers=headers) as first:
            with connect(url, additional_headers=headers) as second, pytest.raises(ConnectionClosed) as closed:
                assert json.loads(second.recv(timeout=10))["status"] == 409
                second.recv(timeout=10)
            assert closed.value.rcvd.code == 4409
            first.send(json.dumps({"tool": "get_status", "arguments": {}}))
            assert "observation" in json.loads(first.recv(timeout=10))
        with connect(url, additional_headers=headers) as again:
            again.send(json.dumps({"tool": "get_status", "arguments": {}}))
            assert "observation" in json.loads(again.recv(timeout=10))
    finally:
        httpx.delete(f"{server.url}/sessions/{created['session_id']}", headers=headers)


def test_an_infrastructure_failure_is_a_503_that_closes_the_session(monkeypatch):
    """An infrastructure failure under a step was a 422 (an InfrastructureError is a GymsmithError) and the session
    stayed open. It is now a 503 naming it, the session is closed, and no reward is paid (the environment's failure
    is simulated: nothing here makes a real one on demand)."""
    from gymsmith.core.errors import InfrastructureError
    from gymsmith.families.ops.env import OpsEnvironment

    with Running(max_sessions=2) as s:
        remote = RemoteEnvironment(s.url, family="ops")
        remote.reset(seed=1, knobs={"fidelity": 0.0})

        def broken(self, name, arguments):
            raise InfrastructureError("the database file vanished")
        monkeypatch.setattr(OpsEnvironment, "_call", broken)
        with pytest.raises(RemoteError, match="HTTP 503: the environment failed .*database file vanished"):
            remote.step(Action(tool="get_status"))
        assert s.app.state.manager.sessions == {}
        with pytest.raises(RemoteError, match="HTTP 404"):
            remote.step(Action(tool="get_status"))


def test_a_held_out_task_is_refused_unless_the_server_is_for_evaluation():
    """A hundred-and-sixty-second attacker opened ops seed 5 (a held-out task) from its seed alone, played it and was
    paid 1.0: a trainer on the server would train on what `gymsmith eval` measures. A session on a held-out task is now
    refused with a 403 naming the split, however the task is asked for (seed, task, task id), unless the server is
    started with --allow-heldout; train tasks open."""
    from gymsmith.registry import split_of

    ops = get_family("ops")
    split = {s: split_of(ops.generate(s).id) for s in range(20)}
    held, train = next(s for s in split if split[s] is Split.HELDOUT), next(s for s in split if split[s] is Split.TRAIN)
    with Running(allow_heldout=False, max_sessions=2) as s:
        refused = httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": held})
        assert refused.status_code == 403 and "held-out split" in refused.json()["detail"], refused.text
        task = json.loads(ops.generate(held).model_dump_json())
        assert httpx.post(f"{s.url}/sessions", json={"family": "ops", "task": task}).status_code == 403
        opened = httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": train})
        assert opened.status_code == 201, opened.text
    with Running(allow_heldout=True, max_sessions=1) as s:
        assert httpx.post(f"{s.url}/sessions", json={"family": "ops", "seed": held}).status_code == 201


def test_idle_connections_past_the_limit_get_503_not_the_servers_descriptors():
    """A hundred-and-sixty-fourth attacker held 1,100 idle connections (a request line each, never finished) against a
    server at a 1,024-descriptor limit: every other client's requests failed, and an honest client's submit came back
    as a tool error ("Too many open files") inside its episode. uvicorn now serves at most MAX_CONNECTIONS at once and
    answers past it with a 503 (nothing reaches a session); once they close, every client is served. Not covered:
    the held connections still deny service (docs: a reverse proxy with header timeouts beyond loopback)."""
    import socket
    from urllib.parse import urlsplit

    from gymsmith.server.app import MAX_CONNECTIONS

    with Running(max_sessions=1) as s:
        parts = urlsplit(s.url)
        held = []
        try:
            for _ in range(MAX_CONNECTIONS + 8):
                sock = socket.create_connection((parts.hostname, parts.port), timeout=10)
                sock.sendall(b"GET / HTTP/1.1\r\n")
                held.append(sock)
            deadline = time.time() + 20  # the server takes the held connections as its loop gets to them
            while httpx.get(f"{s.url}/openapi.json", timeout=20).status_code != 503:
                assert time.time() < deadline, "a request past the connection limit was served"
                time.sleep(0.2)
        finally:
            for sock in held:
                sock.close()
        deadline = time.time() + 20
        while httpx.get(f"{s.url}/openapi.json", timeout=20).status_code != 200:
            assert time.time() < deadline, "the server did not recover once the connections closed"
            time.sleep(0.2)
