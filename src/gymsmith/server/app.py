"""`gymsmith serve`: environments as sessions over HTTP and a WebSocket. The verifier stays here; only
rewards go back to the client. Each session is one `runner.episode.Episode`, limited (`max_steps`, `time_limit_s`),
ended and verified as `gymsmith run` does it: the reward comes once, in the response of the call that ended it.

Security: a bearer token is required whenever the server binds beyond loopback (and may be required on
loopback too); each session has its own key, so only the client that opened it can drive it; bodies are
validated against the schema of the families served (`schema.py`; 422 with the reason in one line); idle
sessions expire and their environments are closed; past `max_sessions` a new session is refused with 429 (and a Retry-After) and
the limit in the message. Every error body is `{"detail": "<one line>"}` (`ErrorMessage`), and every status a
route can answer is in the OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from fastapi import Body, Depends, FastAPI, Header, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError

from gymsmith.envs.base import MAX_ARGUMENTS_CHARS
from gymsmith.core.errors import GymsmithError, NotGeneratedError, is_infrastructure
from gymsmith.core.types import Action, EndReason, Observation, Reward, Split, TaskSpec, ToolSpec
from gymsmith.registry import DEFAULT_HELDOUT_FRACTION, as_generated, get_family, list_families, split_of
from gymsmith.runner.episode import DEFAULT_MAX_STEPS, Episode
from gymsmith.runner.lane import Lane
from gymsmith.server.schema import ErrorMessage, reset_body
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.service import VerifierService


MAX_BODY_BYTES = 4 << 20  # a request body (a task sent in full to open a session)
# a step's body or WebSocket message: a step's arguments are at most MAX_ARGUMENTS_CHARS characters, each at most 6 bytes
# as JSON (a \uXXXX escape), so no valid step is refused; parsing costs the event loop time by the message's size (a
# hundred-and-fifty-ninth attacker's 4 MiB of empty objects took 0.48 s to parse, and made another client's steps 1-2 s)
MAX_STEP_BYTES = 6 * MAX_ARGUMENTS_CHARS + (64 << 10)
# a step (a body or a WebSocket message) with more JSON objects and arrays, or a body opening a session with more JSON
# values, is refused before it is parsed (`_json_count`): no tool's arguments, and no family's task (a few hundred
# values), come near them
MAX_STEP_VALUES = 1 << 16
MAX_OPEN_VALUES = 1 << 12  # one validation error per value at most: 4,096 cost about 0.1 s
# a string, or an unterminated one to the end: every match attempt succeeds, so the scan is linear (with the closing
# quote required, each quote of a text of escaped quotes began an attempt that failed at its end: a
# hundred-and-sixty-sixth attacker's 44 KB body held the event loop 4.8 s, quadratic)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?')
# connections (and requests in progress) uvicorn serves at once; past it a new one is answered 503 and closed, so idle
# connections cannot take the file descriptors a session's tools need (a hundred-and-sixty-fourth attacker's 1,100 idle
# connections at a 1,024-descriptor limit: an honest client's submit failed "Too many open files")
MAX_CONNECTIONS = 512
# for uvicorn.run / uvicorn.Config: the WebSocket protocol refuses a longer message as it arrives (its default is
# 16 MiB), and takes no compressed messages (with permessage-deflate, the same attacker's 4 MiB message cost 4 kB to send)
UVICORN_LIMITS: dict[str, Any] = {"ws_max_size": MAX_STEP_BYTES, "ws_per_message_deflate": False,
                                  "limit_concurrency": MAX_CONNECTIONS}


class ServerSettings(BaseModel):
    host: str = "127.0.0.1"
    port: int = 8700
    token: str | None = Field(default=None, description="Bearer token; required when host is not loopback.")
    max_sessions: int = Field(default=16, ge=1)
    idle_timeout_s: float = Field(default=600.0, gt=0)
    policy: str = DEFAULT_POLICY
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, description="Step limit per session's episode.")
    time_limit_s: float | None = Field(default=None, gt=0, description="Seconds an episode may last; None: no limit "
                                       "(the client's model sets the pace; idle sessions still expire).")
    store: str | None = Field(default=None, description="Trajectory store in which task ids are looked up.")
    families: list[str] | None = Field(default=None, description="Families served; None: every registered one.")
    allow_heldout: bool = Field(default=False, description="Serve held-out tasks too (an evaluation server); by "
                                "default a session on a held-out task is refused (403): held-out tasks never train.")
    heldout_fraction: float = Field(default=DEFAULT_HELDOUT_FRACTION, ge=0.0, lt=1.0,
                                    description="The split's held-out fraction (a stable hash of the task id).")

    def requires_token(self) -> bool:
        return self.token is not None or not is_loopback(self.host)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


# -- request and response bodies (these are the OpenAPI schema; POST /sessions's is in schema.py) ----------
class StepRequest(BaseModel):
    tool: str = Field(description="Tool to call.")
    arguments: dict[str, Any] | str = Field(default_factory=dict, description="Arguments object, or its raw JSON text.")


class SessionCreated(BaseModel):
    session_id: str
    session_key: str = Field(description="Send as X-Session-Key on every call for this session.")
    task_id: str
    task: TaskSpec
    tools: list[ToolSpec]
    observation: Observation


class StepResponse(BaseModel):
    observation: Observation
    done: bool = Field(description="The episode is over (submitted, a limit, or the environment failed on the call).")
    reward: Reward | None = Field(default=None, description="The verifier's reward, in the response of the call that "
                                  "ended the episode only.")
    end_reason: EndReason | None = Field(default=None, description="Why the episode ended, once it has.")


class SessionState(BaseModel):
    session_id: str
    task_id: str
    steps: int
    done: bool
    state_hash: str
    idle_s: float


T = TypeVar("T")


class _Session:
    def __init__(self, episode: Episode, key: str, lane: Lane):
        self.episode, self.task, self.env, self.key, self.lane = episode, episode.task, episode.env, key, lane
        self.last_used = time.monotonic()
        self.lock = threading.Lock()  # held by the one call of the session in progress (a step, a state read, a close)
        self.websocket = False  # one WebSocket per session at a time (SessionManager.attach)


class SessionManager:
    """Sessions by id. Thread-safe; every environment belongs to exactly one session, and runs on its thread."""

    def __init__(self, settings: ServerSettings):
        self.settings = settings
        self.sessions: dict[str, _Session | None] = {}  # None: a session being opened
        self.lock = threading.Lock()
        # tasks are made one at a time: making one costs what its knobs ask (ops at its largest knobs, 0.55 s of CPU),
        # and many at once took the interpreter from every other client's calls (a hundred-and-sixty-fourth attacker's
        # 15 opens at once: another client's steps 11 -> 426 ms on average)
        self.making = threading.Lock()
        self.verifier = VerifierService(workers=2)

    def open(self, req: Any) -> tuple[str, _Session, Observation]:
        """Open a session for a body of `schema.reset_body`. Raises HTTPException 404 (task id not in the store),
        409 (a task the family does not generate), 429 (session limit), GymsmithError (the generator refused)."""
        family = get_family(req.family)
        with self.lock:  # the place first: making a task can take a minute (a cold code task), and must not queue
            # past the limit (a hundred-and-fiftieth attacker's 40 opens of fresh code seeds at the limit waited 900 s
            # for their 429 and held the server's threads meanwhile)
            if len(self.sessions) >= self.settings.max_sessions:
                raise HTTPException(429, f"session limit reached ({self.settings.max_sessions} open); close one or retry later",
                                    headers={"Retry-After": str(max(1, int(self.settings.idle_timeout_s)))})
            sid = secrets.token_hex(8)
            self.sessions[sid] = None  # holds the place while the task and its environment are made
        lane, episode = Lane("gymsmith-session"), None
        try:
            with self.making:
                if req.task is not None:
                    task = self._served(family, req.task)
                elif req.task_id:
                    task = self._lookup(req.task_id)
                else:
                    task = family.generate(req.seed, **req.knobs.model_dump(exclude_none=True))
            if task.family != family.name:
                raise HTTPException(409, f"task {task.id} is of family {task.family!r}, not {req.family!r}")
            if not self.settings.allow_heldout and \
                    split_of(task.id, heldout_fraction=self.settings.heldout_fraction) is not Split.TRAIN:
                # a hundred-and-sixty-second attacker opened a held-out task from its seed and was paid for it: a
                # trainer on this server would have trained on what `gymsmith eval` measures
                raise HTTPException(403, f"task {task.id} is in the held-out split (held-out fraction "
                                         f"{self.settings.heldout_fraction:g}), which never trains; this server serves "
                                         "train tasks only (an evaluation server: gymsmith serve --allow-heldout)")
            episode = Episode(env=lane.run(family.make_env), task=task, verifier=self.verifier,
                              policy=self.settings.policy, max_steps=self.settings.max_steps,
                              time_limit_s=self.settings.time_limit_s or math.inf)
            session = _Session(episode, secrets.token_urlsafe(24), lane)
            observation = lane.run(episode.reset, req.episode_seed)
        except BaseException:  # nothing of a session that did not open stays: its place, its environment, its thread
            with self.lock:
                self.sessions.pop(sid, None)
            if episode is not None:
                with contextlib.suppress(Exception):
                    lane.run(episode.env.close)
            lane.close()
            raise
        with self.lock:
            self.sessions[sid] = session
        return sid, session, observation

    @staticmethod
    def _served(family: Any, task: TaskSpec) -> TaskSpec:
        """`task` if it is what `family` generates from its seed and knobs (this server plays no start state or
        tools it did not make); else 409 naming why (`registry.as_generated`)."""
        try:
            return as_generated(family, task)
        except NotGeneratedError as exc:
            raise HTTPException(409, str(exc)) from None

    def _lookup(self, task_id: str) -> TaskSpec:
        found = TrajectoryStore(self.settings.store, create=False).find_task(task_id) if self.settings.store else None
        if found is None:
            raise HTTPException(404, f"task id {task_id!r} is not in the server's store "
                                     f"({self.settings.store or 'none configured: start with --store'}); "
                                     "send the task itself, or seed and knobs")
        return found

    def get(self, sid: str, key: str | None) -> _Session:
        session = self.sessions.get(sid)  # None too while it opens: its id is not yet returned to anyone
        if session is None:
            raise HTTPException(404, f"no session {sid!r} (it may have expired after "
                                     f"{self.settings.idle_timeout_s:g} s idle)")
        if key is None or not secrets.compare_digest(key, session.key):
            raise HTTPException(403, f"session {sid!r} belongs to another client (X-Session-Key missing or wrong)")
        session.last_used = time.monotonic()
        return session

    async def call(self, sid: str, session: _Session, work: Callable[[], T]) -> T:
        """Run `work` on the session's lane, one call of a session at a time, awaited without holding any of the
        server's threads. Raises HTTPException 409 while another call of the session is in progress (a client sends
        its next call after the last one's response: a hundred-and-fiftieth attacker's 45 concurrent steps on one
        session held every worker thread, and 6 WebSockets every WebSocket, so other clients got no answer), 404 once
        the session is closed, and 503 (closing the session) when its environment fails: an infrastructure failure,
        no reward, as `gymsmith run` records it."""
        if not session.lock.acquire(blocking=False):
            raise HTTPException(409, f"session {sid!r} has a call in progress; send the next one after its response")
        try:
            if self.sessions.get(sid) is not session:
                raise HTTPException(404, f"no session {sid!r} (it was closed)")
            try:
                future = session.lane.submit(work)
            except RuntimeError:  # its lane was shut down: closed meanwhile
                raise HTTPException(404, f"no session {sid!r} (it was closed)") from None
            try:
                return await asyncio.wrap_future(future)
            except Exception as exc:  # noqa: BLE001 - sorted below: only an infrastructure failure is ours to answer
                if not is_infrastructure(exc):
                    raise
                failure = exc
        finally:
            session.last_used = time.monotonic()
            session.lock.release()
        await asyncio.to_thread(self.close, sid)  # waits for the environment's close, off the event loop
        raise HTTPException(503, "the environment failed (an infrastructure error, no reward): "
                                 f"{(str(failure).splitlines() or [type(failure).__name__])[0][:300]}; the session is "
                                 "closed")

    async def step(self, sid: str, session: _Session, req: StepRequest) -> StepResponse:
        """One call of the session's episode (`runner.episode`: limited, ended and verified as `gymsmith run` does
        it). The reward is in the response of the call that ended the episode, once; later calls are refused as
        `episode_over`. Raises as `call` does."""
        def play() -> StepResponse:
            episode = session.episode
            ended_before = episode.outcome is not None
            result, outcome = episode.play(Action(tool=req.tool, arguments=req.arguments))
            return StepResponse(observation=result.observation, done=episode.over,
                                reward=outcome.reward if outcome is not None and not ended_before else None,
                                end_reason=episode.reason)
        return await self.call(sid, session, play)

    async def state(self, sid: str, session: _Session) -> SessionState:
        def read() -> SessionState:
            return SessionState(session_id=sid, task_id=session.task.id, steps=len(session.episode.steps),
                                done=session.episode.over, state_hash=session.env.state_hash(), idle_s=0.0)
        return await self.call(sid, session, read)

    def attach(self, session: _Session) -> bool:
        """Take the session's one WebSocket place; False if another WebSocket holds it (a session's calls are one at a
        time, so a second socket only adds messages to read: a hundred-and-fifty-seventh attacker's 6 sockets on one
        session, each sending 15 MB messages, slowed another client's steps 23 times)."""
        with self.lock:
            taken, session.websocket = session.websocket, True
        return not taken

    def detach(self, session: _Session) -> None:
        with self.lock:
            session.websocket = False

    def close(self, sid: str) -> None:
        """Forget the session at once (later calls: 404), and close its environment after its call in progress; returns
        once it is closed."""
        with self.lock:
            session = self.sessions.pop(sid, None)
        if session is not None:
            session.lane.submit(session.env.close)  # queued behind the call in progress, on the environment's thread
            session.lane.close()  # and waited for

    def expire(self) -> list[str]:
        """Close the sessions idle for longer than the idle timeout (a session with a call in progress is not idle)."""
        now = time.monotonic()
        stale = [sid for sid, s in list(self.sessions.items())
                 if s is not None and not s.lock.locked() and now - s.last_used > self.settings.idle_timeout_s]
        for sid in stale:
            self.close(sid)
        return stale

    def shutdown(self) -> None:
        for sid in list(self.sessions):
            self.close(sid)
        self.verifier.close()


ERRORS = {400: "The body is not JSON.", 401: "Bearer token missing or wrong (when the server requires one).",
          403: "The X-Session-Key does not open this session; or the task asked for is in the held-out split (a server "
          "started without --allow-heldout serves train tasks only).", 404: "No such session (or expired), or task id not in "
          "the server's store.", 409: "The task given is not one this server's family generates.",
          422: "The request does not match the schema, or the generator refused the knobs.",
          429: "Session limit reached; close one or retry later (see Retry-After).",
          413: f"The body is longer than {MAX_BODY_BYTES:,} bytes ({MAX_STEP_BYTES:,} for a step).",
          503: "The session's environment failed (an infrastructure error, no reward); the session is closed."}
BUSY = "Another call of this session is in progress; send the next call after its response."


# how a client goes on from a new session (and how a stateful fuzzer finds real sessions to drive)
_SESSION = {"session_id": "$response.body#/session_id", "header.x-session-key": "$response.body#/session_key"}
SESSION_LINKS = {"Step": {"operationId": "step_sessions__session_id__step_post", "parameters": _SESSION},
                 "State": {"operationId": "state_sessions__session_id__get", "parameters": _SESSION},
                 "Close": {"operationId": "close_sessions__session_id__delete", "parameters": _SESSION}}


class BodyGuard:
    """Before the app parses a body: a request to a session route without the bearer token the server requires is a
    401, and a body longer than MAX_BODY_BYTES (MAX_STEP_BYTES for a step), declared or counted as it arrives, or with
    more JSON values than MAX_OPEN_VALUES (objects and arrays than MAX_STEP_VALUES for a step), a 413. A
    hundred-and-fifty-fifth attacker's unauthenticated 100 MB bodies were read and parsed before the token check: 3 GB
    of the server's memory, and the authorised client's steps waited 28 s."""

    def __init__(self, app: Any, settings: ServerSettings) -> None:
        self.app, self.settings = app, settings

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/sessions"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if self.settings.requires_token() and not _bearer_ok(headers.get("authorization"), self.settings.token):
            await _refuse(send, 401, "missing or wrong bearer token (Authorization: Bearer ...)",
                          [(b"www-authenticate", b"Bearer")])
            return
        step = scope["path"].endswith("/step")
        bound = MAX_STEP_BYTES if step else MAX_BODY_BYTES
        declared = headers.get("content-length", "")
        if declared.isdigit() and int(declared) > bound:
            await _refuse(send, 413, f"the body has {int(declared):,} bytes; at most {bound:,} are read")
            return
        body = bytearray()
        while True:  # the whole body, bounded, before the app parses any of it
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > bound:
                await _refuse(send, 413, f"the body has more than {bound:,} bytes")
                return
            if not message.get("more_body", False):
                break
        # what parsing and validating a body costs grows with its values, not its bytes: a hundred-and-sixty-second
        # attacker's `"tools": [0, 0, ...]` in a 4 MB body to open a session held the event loop 76 s (one validation
        # error per item, each made a dict), and 1.6 MB of empty objects to a step 0.27 s
        many = (_json_count(bytes(body), "{[", MAX_STEP_VALUES) > MAX_STEP_VALUES if step
                else _json_count(bytes(body), "{[,", MAX_OPEN_VALUES) > MAX_OPEN_VALUES)
        if many:
            limit = f"{MAX_STEP_VALUES:,} JSON objects and arrays" if step else f"{MAX_OPEN_VALUES:,} JSON values"
            await _refuse(send, 413, f"the body has more than {limit}")
            return
        replayed = False

        async def replay() -> Any:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}
        await self.app(scope, replay, send)


def _json_count(raw: str | bytes, chars: str, limit: int) -> int:
    """How many of `chars` (of a JSON text's structure: "{[" its objects and arrays, "," besides its other values) `raw`
    holds outside its strings; counted exactly only where more than `limit` are found anywhere. Parsing pays most for
    objects and arrays (1.6 MB of empty objects: 0.28 s; of integers or empty strings, 0.07 s and 0.03 s), validating
    a list of a model's items for each item."""
    text = raw if isinstance(raw, str) else raw.decode("utf-8", "replace")
    rough = sum(text.count(c) for c in chars)
    if rough <= limit:
        return rough
    bare = _JSON_STRING.sub('""', text)
    return sum(bare.count(c) for c in chars)


def _message_bytes(raw: str | bytes) -> int:
    if isinstance(raw, bytes):
        return len(raw)
    # a character is at most 4 bytes in UTF-8: the encoding is paid only for text that may be over the bound
    return len(raw) if len(raw) * 4 <= MAX_STEP_BYTES else len(raw.encode("utf-8", "surrogatepass"))


def _bearer_ok(authorization: str | None, token: str | None) -> bool:
    return bool(authorization and authorization.startswith("Bearer ")
                and secrets.compare_digest(authorization[7:], token or ""))


async def _refuse(send: Any, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def validation_line(errors: Sequence[dict[str, Any]]) -> str:
    """One line for a request's validation errors: where the first is, what was expected, how many more."""
    first: dict[str, Any] = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    where = ".".join(str(part) for part in first.get("loc", ()))
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    msg = first.get("msg", "invalid")
    if first.get("type") == "union_tag_not_found":  # pydantic's words for a missing `family`
        msg = f"field {first.get('ctx', {}).get('discriminator', 'family')} is required"
    return f"{where}: {msg}{more}"[:500]


def create_app(settings: ServerSettings) -> FastAPI:
    """The FastAPI application. Raises ValueError if it would listen beyond loopback without a token, or to
    serve a family that is not registered."""
    if not is_loopback(settings.host) and not settings.token:
        raise ValueError(f"binding to {settings.host} (beyond loopback) needs a token: set GYMSMITH_TOKEN or --token-env")
    served = [f for f in list_families() if settings.families is None or f.name in settings.families]
    unknown = sorted(set(settings.families or ()) - {f.name for f in served})
    if unknown:
        raise ValueError(f"cannot serve unknown family(ies) {unknown}; registered: {[f.name for f in list_families()]}")
    manager = SessionManager(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async def reaper() -> None:
            while True:
                await asyncio.sleep(min(5.0, settings.idle_timeout_s / 2))
                await asyncio.to_thread(manager.expire)

        task = asyncio.create_task(reaper())
        yield
        task.cancel()
        await asyncio.to_thread(manager.shutdown)

    app = FastAPI(title="gymsmith", version="1", lifespan=lifespan,
                  description="gymsmith environments as sessions. Rewards come from the server-side verifier.")
    app.state.manager = manager
    app.add_middleware(BodyGuard, settings=settings)

    def authorise(authorization: str | None = Header(default=None)) -> None:
        if not settings.requires_token():
            return
        if not _bearer_ok(authorization, settings.token):
            raise HTTPException(401, "missing or wrong bearer token (Authorization: Bearer ...)",
                                headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(GymsmithError)
    async def user_error(request: Request, exc: GymsmithError):
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    @app.exception_handler(405)
    async def method_not_allowed(request: Request, exc: Exception):
        # Starlette's Allow names only the first route matching the path; list every method of the path
        allowed = sorted({m for r in app.routes if getattr(r, "methods", None) and r.matches(request.scope)[0].value
                          for m in getattr(r, "methods")})
        return JSONResponse(status_code=405, content={"detail": f"method {request.method} not allowed here; "
                            f"allowed: {', '.join(allowed)}"}, headers={"Allow": ", ".join(allowed)})

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError):
        return JSONResponse(status_code=422, content={"detail": validation_line(list(exc.errors()))})

    def errors(*codes: int, busy: bool = False) -> dict[int | str, dict[str, Any]]:
        described: dict[int | str, dict[str, Any]] = {code: {"model": ErrorMessage, "description": ERRORS[code]}
                                                       for code in (*codes, 401, 413, 422)}
        if busy:  # a session's calls are one at a time
            described[409] = {"model": ErrorMessage, "description": BUSY}
        return described

    def open_session(req) -> SessionCreated:
        """Reset: open a session on a task (given, or generated from seed and knobs)."""
        sid, s, observation = manager.open(req)
        return SessionCreated(session_id=sid, session_key=s.key, task_id=s.task.id, task=s.task,
                              tools=list(s.task.tools), observation=observation)

    # the body's type is built from the families served, so it is set here rather than written in the signature
    open_session.__annotations__["req"] = Annotated[reset_body({f.name: tuple(f.knobs) for f in served}), Body()]
    app.post("/sessions", response_model=SessionCreated, status_code=201, dependencies=[Depends(authorise)],
             responses={**errors(400, 403, 404, 409, 429), 201: {"links": SESSION_LINKS}})(open_session)

    @app.post("/sessions/{session_id}/step", response_model=StepResponse, dependencies=[Depends(authorise)],
              responses=errors(400, 403, 404, 503, busy=True))
    async def step(session_id: str, req: StepRequest, x_session_key: str | None = Header(default=None)) -> StepResponse:
        """One tool call. Bad calls come back as error observations; the reward comes with the submit."""
        return await manager.step(session_id, manager.get(session_id, x_session_key), req)

    @app.get("/sessions/{session_id}", response_model=SessionState, dependencies=[Depends(authorise)],
             responses=errors(403, 404, 503, busy=True))
    async def state(session_id: str, x_session_key: str | None = Header(default=None)) -> SessionState:
        return await manager.state(session_id, manager.get(session_id, x_session_key))

    @app.delete("/sessions/{session_id}", status_code=204, dependencies=[Depends(authorise)], responses=errors(403, 404))
    def close(session_id: str, x_session_key: str | None = Header(default=None)) -> None:
        manager.get(session_id, x_session_key)
        manager.close(session_id)

    @app.websocket("/sessions/{session_id}/ws")
    async def ws(websocket: WebSocket, session_id: str):
        """Send StepRequest JSON messages, receive StepResponse JSON. Auth: the same headers as HTTP. One WebSocket per
        session (another is answered 409 and closed with 4409); a message longer than MAX_STEP_BYTES is answered 413 and the socket
        closed with 1009, and one of more than MAX_STEP_VALUES JSON objects and arrays answered 413, before it is parsed."""
        try:
            authorise(websocket.headers.get("authorization"))
            session = manager.get(session_id, websocket.headers.get("x-session-key"))
        except HTTPException as exc:
            await websocket.close(code=4000 + exc.status_code, reason=str(exc.detail)[:120])
            return
        await websocket.accept()
        if not manager.attach(session):  # said in a message, since a refused handshake carries no reason
            detail = f"session {session_id!r} already has a WebSocket open; one per session"
            await websocket.send_json({"error": detail, "status": 409})
            await websocket.close(code=4409, reason=detail[:120])
            return
        try:
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    return
                text, data = message.get("text"), message.get("bytes")
                raw: str | bytes = text if isinstance(text, str) else data if isinstance(data, bytes) else b""
                if _message_bytes(raw) > MAX_STEP_BYTES:  # checked before parsing (uvicorn's own bound is 16 MiB)
                    await websocket.send_json({"error": f"message longer than {MAX_STEP_BYTES:,} bytes", "status": 413})
                    await websocket.close(code=1009, reason="message too big")
                    return
                if _json_count(raw, "{[", MAX_STEP_VALUES) > MAX_STEP_VALUES:  # a hundred-and-fifty-ninth attacker's
                    await websocket.send_json({"error": f"message with more than {MAX_STEP_VALUES:,} JSON objects "
                                                        "and arrays",
                                               "status": 413})
                    continue
                if session.lock.locked():  # an HTTP call of the session in progress: no parse to answer it
                    await websocket.send_json({"error": BUSY, "status": 409})
                    continue
                try:
                    req = StepRequest.model_validate_json(raw)
                except ValidationError as exc:
                    await websocket.send_json({"error": f"invalid step message: {exc.errors()[0]['msg']}"})
                    continue
                session.last_used = time.monotonic()
                try:
                    response = await manager.step(session_id, session, req)
                except HTTPException as exc:
                    await websocket.send_json({"error": str(exc.detail), "status": exc.status_code})
                    if exc.status_code in (404, 503):
                        await websocket.close(code=4000 + exc.status_code, reason=str(exc.detail)[:120])
                        return
                    continue
                await websocket.send_text(response.model_dump_json())
        except WebSocketDisconnect:
            pass
        finally:
            manager.detach(session)

    return app
