"""`gymsmith mcp` driven by the `mcp` package's own stdio client."""

import json
import sys
import time

import anyio
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import get_family


# these tests are not about the split: their tasks are served whichever it is (test_a_held_out_task_is_refused...)
SPLIT = ("--allow-heldout",)


async def _drive(args, calls):
    params = StdioServerParameters(command=sys.executable, args=["-m", "gymsmith.cli", "mcp", *args, *SPLIT])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            results = [await session.call_tool(name, arguments) for name, arguments in calls]
            return init, listed, results


def test_oracle_through_mcp_is_rewarded(tmp_path):
    task = get_family("ops").generate(9, difficulty=0.3, fidelity=0.0)
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    calls = [(a["tool"], a["arguments"]) for a in generate_world(task.seed, task.knobs).witness] + [("submit", {})]
    init, listed, results = anyio.run(_drive, ["ops", "--task", str(path)], calls)
    assert task.goal[:40] in (init.instructions or "")
    assert {t.name for t in listed.tools} == {t.name for t in task.tools}
    ship = next(t for t in listed.tools if t.name == "ship_order")
    assert ship.input_schema["required"] == ["order_id"]
    final = results[-1]
    assert not final.is_error and final.structured_content["reward"]["accepted"] is True
    assert "reward: 1.0 (accepted: True)" in final.content[0].text


def test_bad_calls_and_null_submit(tmp_path):
    calls = [("ship_order", {"order_id": "x"}), ("frobnicate", {}), ("submit", {})]
    _, _, results = anyio.run(_drive, ["ops", "--seed", "4"], calls)
    assert results[0].is_error and "invalid_arguments" in json.dumps(results[0].structured_content)
    assert results[1].is_error and "unknown tool" in results[1].content[0].text
    assert results[2].structured_content["reward"]["accepted"] is False


def test_task_by_id_from_the_store(tmp_path):
    from gymsmith.registry import TaskSetSpec
    from gymsmith.runner import RunConfig, run
    from gymsmith.store import TrajectoryStore

    db = str(tmp_path / "s.db")
    [t] = run(RunConfig(run_id="x", taskset=TaskSetSpec(family="ops", count=1), agents=["null"]), TrajectoryStore(db))
    init, listed, results = anyio.run(_drive, ["ops", "--task", t.task_id, "--store", db], [("submit", {})])
    assert results[0].structured_content["reward"]["accepted"] is False and listed.tools


def test_an_oversized_bad_argument_is_not_echoed_back():
    """Issue 20 item 6: a 100 kB bad argument was echoed three times (a 300 kB reply). The session's reply
    (text and structured content) stays small whatever the argument's size; the session itself, no stdio."""
    import json

    from gymsmith.mcp_server import TaskSession
    from gymsmith.registry import get_family

    session = TaskSession(get_family("ops").generate(3))
    try:
        for name, arguments in (("get_record", {"entity": "x" * 100_000, "id": 1}), ("no_such_tool", {"a": "y" * 100_000})):
            reply = session.call(name, arguments)
            assert reply.is_error
            assert len(reply.content[0].text) < 2_000 and len(json.dumps(reply.structured_content)) < 4_000
    finally:
        session.close()


async def _play(args, task, agent):
    """Drive `agent` through `gymsmith mcp` over stdio, each action chosen from the last tool result's observation
    (the first from a `goto /login`: the page a reset shows)."""
    from gymsmith.core.types import Action, Observation

    params = StdioServerParameters(command=sys.executable, args=["-m", "gymsmith.cli", "mcp", *args, *SPLIT])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            first = await session.call_tool("goto", {"path": "/login"})
            observation = Observation.model_validate(first.structured_content["observation"])
            agent.reset(task, observation, seed=0)
            for _ in range(100):
                action: Action = agent.act(observation)
                result = await session.call_tool(action.tool, action.arguments)
                assert not result.is_error, result.content[0].text[:300]
                if "reward" in result.structured_content:
                    return result.structured_content["reward"]
                observation = Observation.model_validate(result.structured_content["observation"])
    raise AssertionError("the episode did not end in 100 calls")


def test_a_web_task_through_mcp_runs_its_browser_off_the_event_loop(tmp_path):
    """The web family over MCP, a real Chromium: Playwright's sync API refuses to run inside an event loop, and the
    server answered every call from its loop (`gymsmith mcp web` exited at start). The oracle is accepted."""
    web = get_family("web")
    task = web.generate(21, difficulty=0.4)
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    reward = anyio.run(_play, ["web", "--task", str(path)], task, web.agents()["oracle"]())
    assert reward["accepted"] is True and reward["value"] == 1.0


async def _submit_together(args, calls, n):
    params = StdioServerParameters(command=sys.executable, args=["-m", "gymsmith.cli", "mcp", *args, *SPLIT])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for name, arguments in calls:
                await session.call_tool(name, arguments)
            results = []

            async def submit():
                results.append(await session.call_tool("submit", {}))
            async with anyio.create_task_group() as group:
                for _ in range(n):
                    group.start_soon(submit)
            return results


def test_calls_in_flight_together_are_paid_once(tmp_path):
    """A hundred-and-fiftieth attacker sent 5 submits at once over one MCP session after the witness: each result
    carried the reward (25 of 25 over 5 episodes; one at a time, 5 of 25). Whether the episode had ended is now read
    with the play, on the environment's lane: one result carries the reward, the others are `episode_over`."""
    task = get_family("ops").generate(9, difficulty=0.3, fidelity=0.0)
    path = tmp_path / "task.json"
    path.write_text(task.model_dump_json())
    witness = [(a["tool"], a["arguments"]) for a in generate_world(task.seed, task.knobs).witness]
    results = anyio.run(_submit_together, ["ops", "--task", str(path)], witness, 5)
    paid = [r for r in results if "reward" in (r.structured_content or {})]
    assert len(results) == 5 and len(paid) == 1 and paid[0].structured_content["reward"]["accepted"] is True


def test_calls_queued_when_the_session_ends_are_dropped():
    """A hundred-and-fifty-fifth attacker queued 50 `sleep 2` commands and closed its stdin: the process ran every one
    (98 s) before it exited. Ending the session now drops the calls not yet started; the one running finishes (a real
    code sandbox)."""
    from concurrent.futures import ThreadPoolExecutor

    from gymsmith.mcp_server import TaskSession

    session = TaskSession(get_family("code").generate(3, difficulty=0.0))
    with ThreadPoolExecutor(8) as pool:
        calls = [pool.submit(session.call, "run_command", {"command": "sleep 1"}) for _ in range(8)]
        while not session.episode.steps and not any(c.done() for c in calls):
            time.sleep(0.05)  # the first call is running
        session.close()
        outcomes = [c.exception(timeout=30) for c in calls]
    assert 1 <= len(session.episode.steps) <= 2 and sum(e is not None for e in outcomes) >= 6, outcomes


def test_a_held_out_task_is_refused_unless_the_server_is_for_evaluation():
    """Held-out tasks never train: `gymsmith mcp` served any task (a hundred-and-sixty-second attacker was paid for a
    held-out task through `gymsmith serve`, the same rule). A held-out task is refused with a one-line error and exit
    2 unless `--allow-heldout` (an evaluation); a train task is served."""
    import subprocess

    from gymsmith.registry import split_of
    from gymsmith.core.types import Split

    held = next(s for s in range(50) if split_of(get_family("ops").generate(s).id) is Split.HELDOUT)
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "mcp", "ops", "--seed", str(held)], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "held-out split" in out.stderr and "--allow-heldout" in out.stderr, out.stderr


def test_a_task_sent_in_full_is_played_only_as_its_family_makes_it(tmp_path):
    """A hundred-and-sixty-fourth attacker gave a held-out task one more metadata key: its id (a hash of its JSON) fell in
    the train split, and `gymsmith mcp --task` served it and paid 1.0 (65 of the 65 held-out tasks among ops seeds
    0-299 have such a twin). A task sent in full is now served only if it is what its family generates from its seed
    and knobs, as `gymsmith serve` requires; the unedited task is served as its split allows."""
    import subprocess

    from gymsmith.core.types import Split
    from gymsmith.registry import split_of

    ops = get_family("ops")
    held = next(t for t in (ops.generate(s) for s in range(50)) if split_of(t.id) is Split.HELDOUT)
    twin = {k: v for k, v in json.loads(held.model_dump_json()).items() if k != "id"}  # the id made from the content
    twin["metadata"] = {**twin["metadata"], "note": 0}
    path = tmp_path / "twin.json"
    path.write_text(json.dumps(twin))
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "mcp", "ops", "--task", str(path)], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "is not what ops" in out.stderr, out.stderr
    # a hundred-and-sixty-sixth attacker's twin also said `"source": "repository"`, which exempted it (any family)
    twin["metadata"] = {**twin["metadata"], "source": "repository"}
    path.write_text(json.dumps(twin))
    out = subprocess.run([sys.executable, "-m", "gymsmith.cli", "mcp", "ops", "--task", str(path)], capture_output=True,
                         text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 2 and "is not what ops" in out.stderr, out.stderr
