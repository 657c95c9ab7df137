"""A fake OpenAI-compatible chat-completions endpoint with a fixed latency per call, in a process of its own.

For measuring and testing model-bound runs without a model: every call is answered after exactly `latency_s`
(the time a model server would take), from an asyncio server that holds thousands of connections at once, so
the latency is the endpoint's and the throughput is the client's. The replies are scripted tool calls: each
rollout (recognised by its system prompt) plays its plan, the first `calls` actions of it padded with calls of
a tool without arguments (`--pad`, default ops' `get_status`), then `submit` — so every rollout makes
`calls + 1` model calls.

A call without tools (a client's check that the endpoint answers, as `gymsmith run` makes before a run) is
answered at once with text, and counted nowhere.

With `--barrier K` the first K calls are all held until K of them are waiting at once (then answered
together, after the latency): a client that cannot keep K calls in flight never gets past them, which a
test can tell apart from a slow machine without timing anything.

Run: ``python -m gymsmith.agents.fake_endpoint --latency 0.5 --calls 10 [--plans FILE] [--barrier K]``; it
prints ``READY <port>`` on stdout once it listens on 127.0.0.1. From Python, `FakeEndpoint` starts and stops
it. GET /stats answers {"requests": calls answered, "open": connections open, "peak": most calls waiting at
once, "barrier_passed": whether the barrier (if any) was reached, "first_call_at" and "last_reply_at": the
wall clock (`time.time()`) of the first tool call and of the last answer, or null}; GET /stats/reset the same,
then starts "peak" again from the calls waiting now and forgets both times.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, cast

PAD_TOOL = "get_status"  # an ops tool that takes no arguments and changes nothing


class _Script:
    """Which tool call answers a conversation: its plan's next action, by how many replies it already has."""

    def __init__(self, plans: dict[str, list[dict[str, Any]]], calls: int, pad: str = PAD_TOOL):
        self.plans, self.calls, self.pad = plans, calls, pad
        self._by_prompt: dict[str, list[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    def reply(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        system = next((m.get("content") or "" for m in messages if m.get("role") == "system"), "")
        plan = self._by_prompt.get(system)
        if plan is None:
            found = next((p for key, p in self.plans.items() if key in system), [])
            plan = self._by_prompt[system] = (found[:self.calls] + [{"tool": self.pad, "arguments": {}}] * self.calls
                                              )[:self.calls] + [{"tool": "submit", "arguments": {}}]
        turn = sum(1 for m in messages if m.get("role") == "assistant")
        action = plan[min(turn, len(plan) - 1)]
        call = {"id": f"call_{next(self._ids)}", "type": "function",
                "function": {"name": action["tool"], "arguments": json.dumps(action["arguments"])}}
        return {"id": f"chatcmpl-{call['id']}", "object": "chat.completion", "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                             "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": len(messages) * 50, "completion_tokens": 20,
                          "total_tokens": len(messages) * 50 + 20}}


def _text_reply(request: dict[str, Any]) -> dict[str, Any]:
    return {"id": "chatcmpl-probe", "object": "chat.completion", "model": request.get("model", "fake"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class _Server:
    def __init__(self, script: _Script, latency_s: float, barrier: int):
        self.script, self.latency_s, self.barrier = script, latency_s, barrier
        self.requests = self.open = self.waiting = self.peak = 0
        self.first_call_at: float | None = None  # wall clock (time.time()) of the first tool call since a reset
        self.last_reply_at: float | None = None  # and of the last answer: the model phase of a run
        self.released = asyncio.Event()
        if barrier <= 0:
            self.released.set()

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.first_call_at is None:
            self.first_call_at = time.time()
        self.waiting += 1
        self.peak = max(self.peak, self.waiting)
        try:
            if self.waiting >= self.barrier:
                self.released.set()
            await self.released.wait()
            await asyncio.sleep(self.latency_s)
        finally:
            self.waiting -= 1
        self.requests += 1
        self.last_reply_at = time.time()
        return self.script.reply(request)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        try:
            while True:  # HTTP/1.1 keep-alive: requests one after another on this connection
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path = (lines[0].split(" ") + ["", ""])[:2]
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                body = await reader.readexactly(int(headers.get("content-length") or 0))
                payload: dict[str, Any]
                if method == "GET" and path.endswith(("/stats", "/stats/reset")):
                    status, payload = 200, {"requests": self.requests, "open": self.open, "peak": self.peak,
                                            "barrier_passed": self.released.is_set(),
                                            "first_call_at": self.first_call_at, "last_reply_at": self.last_reply_at}
                    if path.endswith("/reset"):
                        self.peak = self.waiting
                        self.first_call_at = self.last_reply_at = None
                elif method == "POST" and path.endswith("/chat/completions"):
                    request = json.loads(body or b"{}")
                    status, payload = 200, await self.answer(request) if request.get("tools") else _text_reply(request)
                else:
                    status, payload = 404, {"error": {"message": f"no route {method} {path}"}}
                data = json.dumps(payload).encode()
                writer.write(f"HTTP/1.1 {status} {'OK' if status == 200 else 'Not Found'}\r\nContent-Type: "
                             f"application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode() + data)
                await writer.drain()
        except ConnectionError:
            return
        finally:
            self.open -= 1
            writer.close()


async def _serve(script: _Script, latency_s: float, port: int, barrier: int) -> None:
    server = _Server(script, latency_s, barrier)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", port, backlog=4096)
    print(f"READY {listener.sockets[0].getsockname()[1]}", flush=True)
    async with listener:
        await listener.serve_forever()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, required=True, help="Seconds before each call is answered.")
    parser.add_argument("--calls", type=int, default=10, help="Tool calls per rollout before submit.")
    parser.add_argument("--plans", type=Path, help='JSON {"text in the system prompt": [{"tool":, "arguments":}]}.')
    parser.add_argument("--pad", default=PAD_TOOL, help="The tool (without arguments) that pads a plan to --calls.")
    parser.add_argument("--barrier", type=int, default=0, help="Hold the first calls until this many wait at once.")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    plans = json.loads(args.plans.read_text()) if args.plans else {}
    try:
        import uvloop  # the endpoint stands for a model server: the faster it answers, the more it measures the client

        uvloop.install()
    except ImportError:
        pass
    try:
        asyncio.run(_serve(_Script(plans, args.calls, args.pad), args.latency, args.port, args.barrier))
    except KeyboardInterrupt:
        pass


class FakeEndpoint:
    """`with FakeEndpoint(latency_s=0.5, calls=10) as ep:` then point a model agent at `ep.base_url`.

    `plans` (optional) maps a text found in a rollout's system prompt (its task's goal) to its actions; they are
    written to `plans_path` (a temporary file when None). `barrier` and `pad_tool` (--pad): see the module
    docstring. Raises
    RuntimeError when the process does not start."""

    def __init__(self, *, latency_s: float, calls: int = 10, plans: dict[str, list[dict[str, Any]]] | None = None,
                 plans_path: Path | None = None, barrier: int = 0, pad_tool: str = PAD_TOOL):
        self.latency_s, self.calls, self.plans, self.plans_path = latency_s, calls, plans, plans_path
        self.barrier, self.pad_tool = barrier, pad_tool
        self.proc: subprocess.Popen | None = None
        self.base_url = ""

    def __enter__(self) -> "FakeEndpoint":
        import tempfile

        command = [sys.executable, "-m", "gymsmith.agents.fake_endpoint", "--latency", str(self.latency_s),
                   "--calls", str(self.calls), "--barrier", str(self.barrier), "--pad", self.pad_tool]
        if self.plans:
            if self.plans_path is None:
                self._tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
                self.plans_path = Path(self._tmp.name)
                self._tmp.close()
            self.plans_path.write_text(json.dumps(self.plans))
            command += ["--plans", str(self.plans_path)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        out = cast(IO[str], self.proc.stdout)  # opened with PIPE
        line = out.readline()
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"the fake endpoint did not start (said {line!r}, exit code {self.proc.wait()})")
        self.base_url = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        return self

    def stats(self, *, reset: bool = False) -> dict[str, Any]:
        """What GET /stats answers (module docstring); with `reset`, "peak" starts again afterwards."""
        import httpx

        return httpx.get(self.base_url + ("/stats/reset" if reset else "/stats"), timeout=10).json()

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            cast(IO[str], self.proc.stdout).close()


if __name__ == "__main__":
    main()
