"""A real OpenAI-compatible chat-completions server on loopback that plays a scripted policy and injects faults.

For testing model-agent harnesses without a model: it speaks HTTP like vLLM or a hosted API, and on
request it misbehaves the way real endpoints and models do — malformed tool-call JSON, unknown tools,
text with no tool call, several tool calls at once, HTTP 500 and 429, slow replies, dropped connections.
Faults are drawn per request from a Random seeded by (seed, conversation, turn, attempt), so the same
conversation meets the same faults however many clients share the server; `fault_counts` says what happened.

With `vllm=True` it also answers vLLM's token fields (`logprobs`, `return_tokens_as_token_ids`, `return_token_ids`,
`prompt_logprobs`) with the token ids of `toy_template`; `refuse` names request fields it rejects with HTTP 400, as
servers that do not offer them do.
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import Counter
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

FAULT_KINDS = ("malformed_json", "unknown_tool", "text_only", "multi", "http_500", "http_429", "slow", "drop")
Policy = Callable[[list[dict[str, Any]], int], list[dict[str, Any]]]  # (messages, n calls wanted) -> tool calls


class WitnessPolicy:
    """Plays known action lists. The task is recognised by a text that occurs in the opening messages (its goal,
    or, where goals repeat across tasks, its first observation); progress is the witness actions whose calls
    already succeeded (matched by tool and arguments), so retries and out-of-order results stay on track."""

    def __init__(self, plans: dict[str, list[dict[str, Any]]]):
        self.plans = plans  # recognising text -> [{"tool": ..., "arguments": {...}}, ...]

    def __call__(self, messages: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        first = next((m["content"] for m in messages if m["role"] == "user"), "") or ""
        plan = next((p for key, p in self.plans.items() if key in system or key in first), [])
        calls = {c["id"]: _key(c["function"]["name"], c["function"]["arguments"])
                 for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        succeeded = Counter(calls.get(m.get("tool_call_id")) for m in messages
                            if m["role"] == "tool" and not str(m.get("content", "")).startswith("ERROR ("))
        todo = []
        for action in plan:
            key = _key(action["tool"], action["arguments"])
            if succeeded[key]:
                succeeded[key] -= 1
            else:
                todo.append(action)
        return (todo + [{"tool": "submit", "arguments": {}}])[:n]


def _key(tool: str, arguments: Any) -> tuple[str, str]:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return (tool, arguments)
    return (tool, json.dumps(arguments, sort_keys=True))


class ScriptedChatServer:
    """`with ScriptedChatServer(policy, fault_rate=0.2) as server:` then point a model agent at `server.base_url`."""

    def __init__(self, policy: Policy | None = None, *, fault_rate: float = 0.0, faults: tuple[str, ...] = FAULT_KINDS,
                 seed: int = 0, slow_s: float = 2.0, text_reply: Callable[[list[dict[str, Any]]], str] | None = None,
                 models: tuple[str, ...] = ("scripted",), vllm: bool = False, refuse: tuple[str, ...] = (),
                 calls_per_reply: int = 1, context_chars: int | None = None, finish_reason: Any = None,
                 conversation_fault: tuple[str, int] | None = None, check_delay_s: float = 0.0,
                 seeded: bool | Literal["constant"] = True):
        """`policy` plays tool calls; `text_reply(messages)` instead answers with plain text (e.g. a judge).
        `models`: the model names served (listed by GET /models; any other name gets HTTP 404, as from vLLM).
        `calls_per_reply`: tool calls per reply (the policy's next ones) when no fault says otherwise.
        `context_chars`: a request whose messages' JSON is longer gets HTTP 400 "maximum context length", as vLLM
        answers a prompt past the model's context. `finish_reason`: sent in every reply instead of the usual one
        (any JSON value: what a misbehaving server might send). `conversation_fault`: (kind, k) makes every request
        of a conversation with at least k replies in it fail, on every attempt: "slow" answers after `slow_s` (a
        reply generated to its token limit), "http_500" fails (a server that breaks on what the model wrote),
        "http_504" is a gateway's timeout, "http_403" a gateway refusing the content, "flaky_500" fails a random half
        of the attempts (a policy whose sampled replies break the server half the time); a request without tools (a
        one-token check, a seed probe) is answered with a short text, after `check_delay_s` (a queue it waits in):
        the same text for the same messages and seed, as a seeded vLLM samples, or with `seeded=False` a new one
        each time (a server that ignores the seed), or with `seeded="constant"` one text for every request (a cache
        of whole requests, or a model sure of its answer)."""
        if (policy is None) == (text_reply is None):
            raise ValueError("give exactly one of policy (tool calls) or text_reply (plain text)")
        self.text_reply = text_reply
        unknown = set(faults) - set(FAULT_KINDS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; expected some of {FAULT_KINDS}")
        self.policy, self.fault_rate, self.faults, self.slow_s = policy, fault_rate, faults, slow_s
        self.seed, self.models = seed, models
        self.vllm, self.refuse, self.calls_per_reply = vllm, refuse, calls_per_reply
        self.context_chars, self.finish_reason = context_chars, finish_reason
        if conversation_fault is not None and conversation_fault[0] not in ("slow", "http_500", "http_504", "http_403",
                                                                             "flaky_500"):
            raise ValueError(f"conversation_fault {conversation_fault!r}: expected ('slow', 'http_500', 'http_504', "
                             "'http_403' or 'flaky_500', k)")
        self.seeded = seeded
        self.conversation_fault, self.check_delay_s = conversation_fault, check_delay_s
        self.refused: Counter[str] = Counter()  # requests refused, by the field named
        self.attempts: Counter[tuple[str, int]] = Counter()
        self.lock = threading.Lock()
        self.fault_counts: Counter[str] = Counter()
        self.requests = 0
        self.texts = 0  # text replies given (requests without tools)
        self.flaky_draws = 0
        self._ids = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with server.lock:
                    server.requests += 1
                if self.path.rstrip("/") != "/v1/models":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                self._send(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "gymsmith"}
                                                            for m in server.models]})

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if body.get("model") not in server.models:
                    with server.lock:
                        server.requests += 1
                    return self._send(404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}})
                refused = [f for f in server.refuse if f in body]
                if refused:
                    with server.lock:
                        server.requests += 1
                        server.refused[refused[0]] += 1
                    return self._send(400, {"error": {"message": f"Unrecognized request argument supplied: {refused[0]}",
                                                      "type": "invalid_request_error"}})
                size = len(json.dumps(body.get("messages", [])))
                if server.context_chars is not None and size > server.context_chars:
                    with server.lock:
                        server.requests += 1
                    return self._send(400, {"error": {"message": f"This model's maximum context length is "
                                                      f"{server.context_chars // 4} tokens. However, you requested "
                                                      f"{size // 4} tokens.", "type": "BadRequestError"}})
                if server.conversation_fault is not None and body.get("tools"):
                    kind, k = server.conversation_fault
                    flaky = kind == "flaky_500" and server._draw_flaky(body.get("messages", []))
                    if sum(1 for m in body.get("messages", []) if m.get("role") == "assistant") >= k and \
                            (kind != "flaky_500" or flaky):
                        with server.lock:
                            server.requests += 1
                            server.fault_counts[f"conversation_{kind}"] += 1
                        if kind == "slow":
                            time.sleep(server.slow_s)
                            return self._send(200, server._reply(body, None))
                        if kind == "http_504":
                            return self._send(504, {"error": {"message": "gateway timeout"}})
                        if kind == "http_403":
                            return self._send(403, {"error": {"message": "refused by the gateway's content rules"}})
                        return self._send(500, {"error": {"message": "the server failed on this conversation"}})
                if not body.get("tools") and server.check_delay_s:
                    time.sleep(server.check_delay_s)
                fault = server._draw(body.get("messages", []))
                if fault == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if fault == "slow":
                    time.sleep(server.slow_s)
                if fault in ("http_500", "http_429"):
                    code = 500 if fault == "http_500" else 429
                    return self._send(code, {"error": {"message": f"injected {code}"}})
                if not body.get("tools") and server.text_reply is None:  # a policy's server: a check, a seed probe
                    return self._send(200, server._text(body))
                self._send(200, server._reply(body, fault))

            def _send(self, code: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (a slow reply)
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def _draw(self, messages: list[dict[str, Any]]) -> str | None:
        conversation = json.dumps(messages[:2], sort_keys=True)  # system prompt and task: one per rollout
        key = (conversation, len(messages))
        with self.lock:
            self.requests += 1
            attempt = self.attempts[key]
            self.attempts[key] += 1
            rng = random.Random(f"{self.seed}:{conversation}:{len(messages)}:{attempt}")
            if rng.random() >= self.fault_rate:
                return None
            fault = rng.choice(self.faults)
            self.fault_counts[fault] += 1
            return fault

    def _draw_flaky(self, messages: list[dict[str, Any]]) -> bool:
        with self.lock:
            self.flaky_draws += 1
            return random.Random(f"{self.seed}:flaky:{json.dumps(messages, sort_keys=True)}:{self.flaky_draws}").random() < 0.5

    def _text(self, body: dict[str, Any]) -> dict[str, Any]:
        """A short text reply: fixed by the messages and seed where the server is seeded, else new each time."""
        with self.lock:
            self.texts += 1
            salt = "" if self.seeded else str(self.texts)
        key = "" if self.seeded == "constant" else f"{json.dumps(body.get('messages'), sort_keys=True)}:{body.get('seed')}"
        word = hashlib.sha256(f"{key}:{salt}".encode())
        return {"id": f"chatcmpl-text-{self.texts}", "object": "chat.completion", "model": body.get("model", "scripted"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": f"blue fox {word.hexdigest()[:6]}"},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 8, "completion_tokens": 4, "total_tokens": 12}}

    def _call(self, action: dict[str, Any], arguments: str | None = None) -> dict[str, Any]:
        with self.lock:
            self._ids += 1
            call_id = f"call_{self._ids}"
        return {"id": call_id, "type": "function",
                "function": {"name": action["tool"], "arguments": arguments if arguments is not None else json.dumps(action["arguments"])}}

    def _reply(self, body: dict[str, Any], fault: str | None) -> dict[str, Any]:
        messages = body.get("messages", [])
        if self.text_reply is not None:
            message: dict[str, Any] = {"role": "assistant", "content": self.text_reply(messages)}
        elif fault == "text_only":
            message = {"role": "assistant", "content": "I will think about this first."}
        elif self.policy is not None:  # the constructor takes exactly one of policy and text_reply
            actions = self.policy(messages, 2 if fault == "multi" else self.calls_per_reply)
            calls = [self._call(a) for a in actions]
            if fault == "malformed_json":
                calls = [self._call(actions[0], json.dumps(actions[0]["arguments"])[:-1])]
            elif fault == "unknown_tool":
                calls = [self._call({"tool": "frobnicate", "arguments": {}})]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
        prompt = sum(len(json.dumps(m)) for m in messages) // 4
        response = {"id": f"chatcmpl-{self.requests}", "object": "chat.completion", "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "message": message,
                                 "finish_reason": self.finish_reason if self.finish_reason is not None else
                                 "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": prompt, "completion_tokens": 20, "total_tokens": prompt + 20}}
        if self.vllm:
            _token_fields(body, response)
        return response

    def __enter__(self) -> "ScriptedChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def _token_fields(body: dict[str, Any], response: dict[str, Any]) -> None:
    """Add what vLLM returns for the token fields `body` asks for, with `toy_template`'s ids and logprobs."""
    from gymsmith.agents import toy_template as tt

    choice = response["choices"][0]
    prompt, completion = tt.prompt_ids(body.get("messages", [])), tt.completion_ids(choice["message"])
    response["usage"].update(prompt_tokens=len(prompt), completion_tokens=len(completion),
                             total_tokens=len(prompt) + len(completion))
    if body.get("logprobs"):
        as_ids = body.get("return_tokens_as_token_ids")
        choice["logprobs"] = {"content": [{"token": f"token_id:{i}" if as_ids else tt.decode([i]),
                                           "logprob": tt.logprob(i, n), "bytes": None, "top_logprobs": []}
                                          for n, i in enumerate(completion)]}
    if body.get("return_token_ids"):
        response["prompt_token_ids"], choice["token_ids"] = prompt, completion
    if body.get("prompt_logprobs") is not None:  # the first position has no logprob, so no id
        response["prompt_logprobs"] = [None] + [{str(i): {"logprob": tt.logprob(i, n), "rank": 1,
                                                          "decoded_token": tt.decode([i])}}
                                                for n, i in enumerate(prompt[1:], 1)]
