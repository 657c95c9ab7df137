"""An agent backed by any OpenAI-compatible chat-completions endpoint with tool calling (vLLM, SGLang, hosted).

What real models do is handled, never raised out of `act`: malformed tool-call JSON and unknown tools go
to the environment, which answers with error observations; a reply with no tool call is recorded as a
NO_TOOL_CALL action; several tool calls in one reply are executed in order before the model is asked
again; a conversation past `max_context_chars` is truncated by the declared policy. HTTP 429, 5xx,
timeouts and dropped connections are retried with exponential backoff; when retries run out the agent
raises ModelEndpointError, which the runner records as an infrastructure error, not as a low reward. A request
refused for its content (HTTP 400, 413, 422: past the model's context) after the rollout's first reply is the
conversation's doing, and so the agent's: ModelRequestRefused, a failure with reward 0, never an error (a policy
that floods its context would otherwise have its failures dropped, or retried until one succeeds). So is any other
refusal, and a call that still times out or fails (5xx, a dropped connection, an unreadable body) after every retry,
from the rollout's first request on, when the endpoint then answers a one-token request within `check_s()` (a
quarter of `timeout_s`, at least a second): the endpoint is up and its queue short, and what it could not answer,
or answered with an error, was this conversation, whose every reply is the policy's own generation (a policy that
generates until `max_tokens` slower than `timeout_s` allows, or whose output breaks the server: an eighty-fifth
attacker's first replies made the server answer 500, and its failing samples left the means and the export). A
task whose prompt alone the endpoint refuses is so too: reward 0, its detail naming the refusal. Rate limits (429)
and failures to connect are always the endpoint's. Where the endpoint does not answer a seeded request the same
twice (asked once per endpoint), a retry would be a fresh sample of the policy, so such a failure is the
conversation's at once, not retried. A server's
finish reason, token ids and logprobs are kept only when they are what they claim (`tokens.read_turn`).

For training, each reply's first step carries the turn in `step_info["turn"]` (`tokens.ModelTurn`: the exact
messages sent, the reply, finish reason and, where the server gives them, token ids and logprobs). The agent
asks for as much as `token_info` allows; with "auto" it starts with vLLM's fields and, when a server refuses one
(HTTP 400 naming it), sends the request again one level lower and keeps that level for the endpoint.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import time
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from gymsmith.agents.endpoint import validate_base_url
from gymsmith.agents.tokens import LEVEL_ORDER, TOKEN_LEVELS, TokenContext, chain_prompt, read_turn, refused_field
from gymsmith.core.errors import ModelEndpointError, ModelRequestRefused  # in core: the runner classifies them
from gymsmith.core.types import NO_TOOL_CALL, Action, AgentRole, Observation, TaskSpec

log = logging.getLogger(__name__)

DEFAULT_SYSTEM_PROMPT = (
    "You are an agent operating a software environment through tools. Work step by step: call exactly the "
    "tools you need, read each result, and recover from errors. When the task is complete, call submit.\n\n"
    "Task:\n{goal}"
)
TRUNCATION_NOTE = "[{n} earlier messages were removed to fit the context limit]"
_LEVELS: dict[tuple[str, str], str] = {}  # (endpoint, model) -> the token level it accepted, for token_info "auto"


class ModelAgentConfig(BaseModel):
    """How to reach the model and how to sample from it."""

    base_url: str = Field(description="Endpoint root, e.g. http://127.0.0.1:8000/v1 for vLLM.")
    model: str
    api_key_env: str | None = Field(default="OPENAI_API_KEY", description="Environment variable holding the key.")
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 1024
    timeout_s: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    backoff_s: float = Field(default=0.5, ge=0, description="First retry delay; doubles each retry.")
    max_context_chars: int = Field(default=120_000, ge=1000,
                                   description="Truncation policy: past this many characters, the oldest turns after "
                                               "the task message are dropped (whole turns, so tool calls keep their "
                                               "results) and replaced by a note.")
    system_prompt: str | None = Field(default=None, description="Overrides the family's template ({goal} is filled in).")
    token_info: Literal["auto", "vllm", "vllm_ids", "logprobs", "off"] = Field(
        default="auto", description="What to ask for per reply (agents.tokens.TOKEN_LEVELS): vllm: logprobs, token "
        "ids and prompt ids; vllm_ids: the same without prompt_logprobs; logprobs: the OpenAI field only; off: "
        "nothing. auto: vllm, stepping down a level each time the server refuses a field.")

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        return validate_base_url(value)

    def check_s(self) -> float:
        """How quickly the endpoint must answer a one-token request for a failed call to be the conversation's:
        a quarter of `timeout_s`, at least a second (a one-token reply waits on the server's queue, as every reply
        does: one slow to come means the load, not the conversation, held the call)."""
        return min(self.timeout_s, max(1.0, self.timeout_s / 4))

    def longest_call_s(self) -> float:
        """The longest one model call of the agent can take: every attempt, the backoff between them, a check after
        each and at the end, and a seed probe (three requests) after each (`ModelAgent._seeded`)."""
        return (self.timeout_s * (self.max_retries + 1) * 4 + self.backoff_s * (2 ** self.max_retries - 1)
                + self.check_s() * (self.max_retries + 2))


class ModelAgent:
    """A model playing the agent side of a rollout. One instance runs one rollout at a time."""

    name = "model"
    role = AgentRole.MODEL

    def __init__(self, config: ModelAgentConfig, *, system_prompt: str | None = None, client: Any = None):
        """`client`: a client for `config.base_url` shared with other agents (the async rollout engine's,
        `make_client(config, connections=N)`: one connection pool for all its rollouts). The agent is then
        driven with `act_async` on that client's event loop and leaves the client open on `close`; without one
        it owns a client and a loop."""
        self.config = config
        self.template = config.system_prompt or system_prompt or DEFAULT_SYSTEM_PROMPT
        import httpx  # here, not at module level: every rollout worker imports this module, few talk to a model

        self._httpx = httpx
        self._loop = None if client is not None else asyncio.new_event_loop()
        self._client = client if client is not None else make_client(config)
        self.step_info: dict[str, Any] | None = None

    # -- agent protocol -------------------------------------------------------------------------
    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        self.seed = seed
        self.tools = [t.to_openai() for t in task.tools]
        self.messages: list[dict[str, Any]] = [
            {"role": "system", "content": self.template.format(goal=task.goal)},
            {"role": "user", "content": observation.text},
        ]
        self.queue: list[dict[str, Any]] = []  # tool calls of the last reply not yet executed
        self.awaiting: dict[str, Any] | None = None  # the call whose observation comes next
        self.truncated_messages = 0
        self.replies = 0  # answered this rollout: a request refused after one is the conversation's (REFUSED_REQUEST)
        self._token_context: TokenContext = ([], 0)  # the last turn's prompt and completion ids (tokens.chain_prompt)
        # each message's compact JSON, encoded once: messages are only ever appended, never changed, and the
        # conversation is sent whole on every call (encoding it again each time was most of the engine's CPU)
        self._encoded: list[str] = []
        self._tools_json = _dumps(self.tools)

    def act(self, observation: Observation) -> Action:
        if self._needs_reply(observation):
            if self._loop is None:
                raise RuntimeError("this ModelAgent shares an async client (the async engine's): call act_async")
            return self._take_reply(*self._loop.run_until_complete(self._complete()))
        return self._next_call()

    async def act_async(self, observation: Observation) -> Action:
        """`act` for an agent made with a shared `client`: awaits the model on the running event loop."""
        if self._needs_reply(observation):
            return self._take_reply(*await self._complete())
        return self._next_call()

    def close(self) -> None:
        if self._loop is None:  # the client is shared: its owner closes it
            return
        self._loop.run_until_complete(self._client.aclose())
        self._loop.close()

    def _needs_reply(self, observation: Observation) -> bool:
        """Record `observation` as the answer to the last action; True when the model must be asked again."""
        if self.awaiting is not None:
            self._record_result(self.awaiting, observation)
            self.awaiting = None
        self.step_info = None
        return not self.queue

    def _take_reply(self, reply: dict[str, Any], info: dict[str, Any]) -> Action:
        self.step_info = info
        self.messages.append(reply)
        calls = reply.get("tool_calls") or []
        if not calls:
            self.awaiting = {"kind": "text"}
            return Action(tool=NO_TOOL_CALL, arguments=reply.get("content") or "")
        self.queue = list(calls)
        info["tool_calls_in_reply"] = len(calls)
        return self._next_call()

    def _next_call(self) -> Action:
        call = self.queue.pop(0)
        self.awaiting = {"kind": "tool", "id": call.get("id") or ""}
        function = call.get("function") or {}
        return Action(tool=str(function.get("name", "")), arguments=function.get("arguments") or "", call_id=call.get("id"))

    # -- conversation ---------------------------------------------------------------------------
    def _record_result(self, awaiting: dict[str, Any], observation: Observation) -> None:
        if awaiting["kind"] == "tool":
            self.messages.append({"role": "tool", "tool_call_id": awaiting["id"], "content": observation.text})
        else:
            self.messages.append({"role": "user", "content": observation.text})

    def _truncate(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Keep the system and task messages; drop whole oldest turns until the rest fits (`max_context_chars` of
        compact JSON). Returns the messages to send and their JSON."""
        for m in self.messages[len(self._encoded):]:
            self._encoded.append(_dumps(m))
        total = sum(map(len, self._encoded))
        if total <= self.config.max_context_chars:
            return self.messages, self._encoded
        head, turns = [0, 1], _turns(self.messages[2:], start=2)
        dropped = 0
        while len(turns) > 1 and total > self.config.max_context_chars:
            turn = turns.pop(0)
            dropped += len(turn)
            total -= sum(len(self._encoded[i]) for i in turn)
        self.truncated_messages = dropped
        note = {"role": "user", "content": TRUNCATION_NOTE.format(n=dropped)}
        kept = head + [i for t in turns for i in t]
        return ([self.messages[0], self.messages[1], note, *(self.messages[i] for i in kept[2:])],
                [self._encoded[0], self._encoded[1], _dumps(note), *(self._encoded[i] for i in kept[2:])])

    async def _post(self, encoded: list[str]) -> tuple[Any, str]:
        """POST the chat completion of the messages `encoded` (their JSON) with the token fields of the current
        level; with token_info "auto", one level lower each time the server refuses one of them. Returns the
        response and the level it was sent with."""
        c = self.config
        key = (c.base_url, c.model)
        level = _LEVELS.get(key, LEVEL_ORDER[0]) if c.token_info == "auto" else c.token_info
        head = '{"model":' + _dumps(c.model) + ',"messages":[' + ",".join(encoded) + '],"tools":' + self._tools_json
        while True:
            rest = {"temperature": c.temperature, "top_p": c.top_p, "max_tokens": c.max_tokens, "seed": self.seed,
                    **TOKEN_LEVELS[level]}
            body = (head + "," + _dumps(rest)[1:]).encode("utf-8")  # the same object as one dict would encode to
            response = await self._client.post("/chat/completions", content=body, headers=JSON_HEADERS)
            if c.token_info != "auto" or level == "off" or not refused_field(level, response.status_code, response.text):
                return response, level
            level = _LEVELS[key] = LEVEL_ORDER[LEVEL_ORDER.index(level) + 1]

    async def _complete(self) -> tuple[dict[str, Any], dict[str, Any]]:
        c = self.config
        messages, encoded = self._truncate()
        messages, encoded = list(messages), list(encoded)  # copies: the conversation goes on growing
        failures: list[str] = []
        for attempt in range(c.max_retries + 1):
            if attempt:
                log.info("model call to %s: retry %d of %d after %s", c.base_url, attempt, c.max_retries, failures[-1])
                await asyncio.sleep(c.backoff_s * 2 ** (attempt - 1))
            t0 = time.perf_counter()
            try:
                response, level = await self._post(encoded)
            except (self._httpx.TimeoutException, self._httpx.TransportError) as exc:
                failures.append(f"{type(exc).__name__}")
                await self._no_fresh_sample(failures)
                continue
            if response.status_code in (408, 429) or response.status_code >= 500:
                failures.append(f"HTTP {response.status_code}")
                await self._no_fresh_sample(failures)
                continue
            if response.status_code in REFUSED_REQUEST and self.replies:  # the conversation, not the endpoint
                raise ModelRequestRefused(f"{c.base_url} refused the conversation after {self.replies} replies: HTTP "
                                          f"{response.status_code}: {response.text[:300]}")
            if response.status_code != 200:
                refused = f"{c.base_url}: HTTP {response.status_code}: {response.text[:300]}"
                # any other refusal (a gateway refusing what the policy wrote with 403, 451, ...: an eighty-second
                # attacker's 6 failing rollouts of 12 vanished from means and the export; vLLM's 400 when its tool
                # parser fails on a reply), at the first request too, is the conversation's while the endpoint answers
                # a one-token request; else the endpoint's
                if await self._answers_others():
                    raise ModelRequestRefused(f"{refused}, after {self.replies} replies, while it answered a one-token "
                                              f"request within {c.check_s():g} s: the endpoint refused this conversation")
                raise ModelEndpointError(refused)
            try:
                data = response.json()
                message = data["choices"][0]["message"]
                if not isinstance(message, dict):
                    raise TypeError("message")
            except (ValueError, KeyError, IndexError, TypeError):
                failures.append("unreadable response body")
                await self._no_fresh_sample(failures)
                continue
            usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
            info = {"latency_ms": round((time.perf_counter() - t0) * 1000, 2), "retries": attempt,
                    "retry_causes": failures, "prompt_tokens": _count(usage.get("prompt_tokens")),
                    "completion_tokens": _count(usage.get("completion_tokens")),
                    "truncated_messages": self.truncated_messages}
            reply = clean_reply(message)
            turn = dict(read_turn(data, messages, reply, level=level))
            self._token_context = chain_prompt(turn, self._token_context)
            info["turn"] = turn
            self.replies += 1
            return reply, info
        attempts = f"no usable reply after {c.max_retries + 1} attempts: {', '.join(failures)}"
        last = failures[-1]
        # a reply too slow to arrive, or one the server fails on, is the policy's generation, from the first reply on
        # (an eighty-fifth attacker's first replies made the server answer 500: 8 failing samples of 16 left the means)
        if last not in NOT_THE_CONVERSATION and await self._answers_others():
            raise ModelRequestRefused(f"{c.base_url}: {attempts}, after {self.replies} replies, while it answered a "
                                      f"one-token request within {c.check_s():g} s: this conversation's reply took "
                                      "longer than timeout_s, or the endpoint failed on it")
        raise ModelEndpointError(f"{c.base_url}: {attempts}")

    async def _no_fresh_sample(self, failures: list[str]) -> None:
        """Before a failed call is retried: where the endpoint does not answer a seeded request the same twice, a retry
        is a fresh sample of the policy, so a failure it does not share (it answers a one-token request) is this
        conversation's at once (an eighty-fifth attacker's policy broke the server on a random half of its replies:
        retried, 13 of 16 rollouts were accepted against 4 of 16). Raises ModelRequestRefused then."""
        c = self.config
        if failures[-1] in NOT_THE_CONVERSATION or c.max_retries == 0 or not await self._answers_others():
            return  # the endpoint's own trouble: retried
        if await self._seeded() is False:
            raise ModelRequestRefused(f"{c.base_url}: {failures[-1]} after {self.replies} replies, while it answered a "
                                      f"one-token request within {c.check_s():g} s; the endpoint does not answer a seeded "
                                      "request the same twice, so a retry would be a fresh sample: not retried")

    async def _seeded(self) -> bool | None:
        """Whether the endpoint samples by the request's seed (asked once per endpoint and model, then remembered):
        the same seed gives the same text, also with a longer limit (which no cache of whole requests answers), and
        another seed another text (else the text was no sample: a policy sure of its answer, or a cache). Then a
        retried call is the same sample. None where the probe was not answered (asked again at the next failure):
        the call is retried as before; a policy cannot make three short requests without tools fail."""
        c = self.config
        key = (c.base_url, c.model)
        if key in _SEEDED:
            return _SEEDED[key]
        nonce = random.SystemRandom().randrange(10 ** 9)
        messages = [{"role": "user", "content": f"Write a random word, then a random number. Reference {nonce}."}]
        texts = []
        for seed, limit in ((nonce, SEED_PROBE_TOKENS), (nonce, 2 * SEED_PROBE_TOKENS), (nonce + 1, SEED_PROBE_TOKENS)):
            body = _dumps({"model": c.model, "messages": messages, "max_tokens": limit, "temperature": 1.0,
                           "seed": seed}).encode("utf-8")
            try:
                async with asyncio.timeout(c.timeout_s):
                    response = await self._client.post("/chat/completions", content=body, headers=JSON_HEADERS)
                if response.status_code != 200:
                    return None
                text = response.json()["choices"][0]["message"].get("content")
            except (TimeoutError, self._httpx.TimeoutException, self._httpx.TransportError, ValueError, KeyError,
                    IndexError, TypeError, AttributeError):
                return None
            texts.append(text if type(text) is str else "")
        short, longer, other = texts
        # the longer text starts as the short one does (its last characters may be a token cut short)
        _SEEDED[key] = longer.startswith(short[:max(0, len(short) - 3)]) and short != other
        if not _SEEDED[key]:
            log.warning("%s (%s) does not sample by the request's seed: a model call that fails while the endpoint "
                        "answers others is the conversation's, not retried", c.base_url, c.model)
        return _SEEDED[key]

    async def _answers_others(self) -> bool:
        """Whether the endpoint answers a one-token completion of a short prompt within `check_s()` (once): then it
        is up and its queue short, and what it could not answer in time, or failed on, was this conversation."""
        c = self.config
        body = _dumps({"model": c.model, "messages": [{"role": "user", "content": "Reply with one word."}],
                       "max_tokens": 1, "temperature": 0}).encode("utf-8")
        try:
            async with asyncio.timeout(c.check_s()):
                response = await self._client.post("/chat/completions", content=body, headers=JSON_HEADERS)
        except (TimeoutError, self._httpx.TimeoutException, self._httpx.TransportError):
            return False
        return response.status_code == 200


def clean_reply(message: dict[str, Any]) -> dict[str, Any]:
    """The assistant message as the conversation keeps it: its text and its tool calls, in the protocol's fields and
    types only (text as a str, a call as {"id", "type", "function": {"name", "arguments"}}, arguments as JSON text).
    What else a server sends is not kept: a ninety-first attacker's server added a key of 40,000
    empty lists to each call, three bytes each in the JSON the record's bound counts and 64 in memory (315 MiB held
    at a 16 MiB estimate)."""
    content = message.get("content")
    if content is not None and type(content) is not str:  # a list of parts, a number: kept as its JSON
        content = json.dumps(content, ensure_ascii=False, default=str)
    reply: dict[str, Any] = {"role": "assistant", "content": content}
    calls = message.get("tool_calls")
    if isinstance(calls, list) and calls:
        kept = []
        for call in calls:
            call = call if isinstance(call, dict) else {}
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            name, arguments = function.get("name"), function.get("arguments")
            if arguments is not None and type(arguments) is not str:  # a server that sends the arguments as an object
                arguments = json.dumps(arguments, ensure_ascii=False, default=str)
            kept.append({"id": call["id"] if type(call.get("id")) is str else "", "type": "function",
                         "function": {"name": name if type(name) is str else "", "arguments": arguments or ""}})
        reply["tool_calls"] = kept
    return reply


def _count(value: Any) -> int | None:
    """A token count a server reports, if it is one."""
    return value if type(value) is int and 0 <= value < 1 << 31 else None


def make_client(config: ModelAgentConfig, *, connections: int | None = None) -> Any:
    """A client for `config`'s endpoint (its key, its per-call timeout): an `httpx.AsyncClient`, or with
    `connections`, one for many agents at once, `stream_transport.PooledClient` (at most that many connections;
    httpx's pool and per-request work grow with the calls in flight)."""
    import httpx

    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if connections is not None:
        from gymsmith.agents.stream_transport import PooledClient

        return PooledClient(base_url=config.base_url, headers=headers, timeout=config.timeout_s,
                            max_connections=connections)
    return httpx.AsyncClient(base_url=config.base_url.rstrip("/"), timeout=config.timeout_s, headers=headers)


def _turns(messages: list[dict[str, Any]], start: int = 0) -> list[list[int]]:
    """Group messages into turns, as indexes from `start`: an assistant message and every tool or user message
    that answers it."""
    turns: list[list[int]] = []
    for i, m in enumerate(messages, start):
        if m["role"] == "assistant" or not turns:
            turns.append([i])
        else:
            turns[-1].append(i)
    return turns


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
JSON_HEADERS = {"Content-Type": "application/json"}
# statuses an endpoint refuses a request's content with (too long for the context, too large, unprocessable): after
# the rollout's first reply, the conversation's growth is what it refuses (ModelRequestRefused: the agent's failure)
REFUSED_REQUEST = frozenset({400, 413, 422})
SEED_PROBE_TOKENS = 16  # the seed probe's shorter limit (`ModelAgent._seeded`)
_SEEDED: dict[tuple[str, str], bool] = {}  # (base_url, model) -> whether it answers a seeded request the same twice
# failures that say nothing of the conversation: the endpoint's own limits or reachability (a call's last failure of
# another kind, while the endpoint answers a one-token request in time, is the conversation's: ModelRequestRefused)
NOT_THE_CONVERSATION = frozenset({"HTTP 429", "ConnectError", "ConnectTimeout", "PoolTimeout"})
