"""An httpx transport for a thousand concurrent calls to one model endpoint: asyncio streams and HTTP/1.1.

httpx's default transport (httpcore) scans its whole pool for every request it queues or finishes, so with
hundreds of connections open each call costs time in proportion to them (measured: 64 rollouts of 11 calls
took 22 s against 5.5 s of model time; benchmarks/model_bound.py). Here an idle connection is popped from a
list per host and pushed back when its response has been read: constant work per call. The protocol is the
part of HTTP/1.1 a JSON API uses, written out (h11 cost a fifth of the time of a call): a request with a
Content-Length body; a response with a Content-Length or chunked body (or one ending with the connection),
1xx responses skipped, `Connection: close` honoured.

`PooledClient` is the part of `httpx.AsyncClient` a model agent uses (`post(path, json=...)`, `aclose()`) on
this transport without httpx's per-request work (parsing and merging URLs, cookies, auth and redirect
handling: measured, a third of the engine's time per model call at 256 calls in flight); it returns
`httpx.Response`s and raises httpx's exceptions, so the agent handles its replies and failures unchanged.

Timeouts (httpx's per-request `timeout` extension): `connect` bounds opening a connection, `pool` waiting for
one of the `max_connections`, `read` the whole wait for the response after the request is sent (a server
that trickles bytes cannot hold a call for longer). Failures raise httpx's own exceptions (ConnectTimeout,
ReadTimeout, PoolTimeout, ConnectError, ReadError, RemoteProtocolError), so callers handle them as any httpx
failure. A kept-alive connection the server has closed meanwhile is replaced once, transparently.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections import defaultdict
from typing import Any

import httpx

MAX_HEAD = 1 << 16  # status line and headers of a response
MAX_BODY = 1 << 30


class ProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response this transport reads."""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.keep = True  # whether the connection can carry another request after this response

    async def exchange(self, method: bytes, head: bytes, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send a request (`head`: its request line and headers, each ending in CRLF, without Content-Length) and
        read the whole response: (status, headers, body). Raises ProtocolError, OSError,
        asyncio.IncompleteReadError (the server closed the connection mid-response)."""
        self.writer.write(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await self.writer.drain()
        while True:
            status, headers = await self._head()
            if status >= 200:
                break  # 1xx: an interim response, the real one follows
        fields = {name.lower(): value for name, value in headers}
        if fields.get(b"connection", b"").lower() == b"close":
            self.keep = False
        if status in (204, 304) or method == b"HEAD":
            return status, headers, b""
        if b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            return status, headers, await self._chunked()
        if b"content-length" in fields:
            try:
                length = int(fields[b"content-length"])
            except ValueError:
                raise ProtocolError(f"bad Content-Length {fields[b'content-length']!r}") from None
            if not 0 <= length <= MAX_BODY:
                raise ProtocolError(f"Content-Length {length} out of range")
            return status, headers, await self.reader.readexactly(length)
        self.keep = False  # the body ends with the connection
        return status, headers, await self.reader.read(MAX_BODY)

    async def _head(self) -> tuple[int, list[tuple[bytes, bytes]]]:
        try:
            raw = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise ProtocolError("response head too long") from None
        lines = raw[:-4].split(b"\r\n")
        parts = lines[0].split(b" ", 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
            raise ProtocolError(f"not an HTTP/1.x status line: {lines[0][:100]!r}")
        if parts[0] == b"HTTP/1.0":
            self.keep = False
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise ProtocolError(f"bad header line {line[:100]!r}")
            headers.append((name.strip(), value.strip()))
        return int(parts[1]), headers

    async def _chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            size_line = await self.reader.readuntil(b"\r\n")
            try:
                size = int(size_line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_line[:40]!r}") from None
            if size == 0:
                while await self.reader.readuntil(b"\r\n") != b"\r\n":  # trailers, up to the empty line
                    pass
                return b"".join(chunks)
            total += size
            if total > MAX_BODY:
                raise ProtocolError("chunked body too large")
            chunks.append((await self.reader.readexactly(size + 2))[:-2])

    def close(self) -> None:
        self.writer.close()


class StreamTransport(httpx.AsyncBaseTransport):
    """At most `max_connections` connections at once (per transport), kept alive and reused per host.
    Bound to the event loop it is first used on."""

    def __init__(self, *, max_connections: int = 100):
        self.max_connections = max_connections
        self._idle: dict[tuple[bytes, bytes, int], list[_Connection]] = defaultdict(list)
        self._slots: asyncio.Semaphore | None = None
        self._ssl: ssl.SSLContext | None = None

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        head = [b"%s %s HTTP/1.1\r\n" % (request.method.encode("ascii"), request.url.raw_path)]
        head += [name + b": " + value + b"\r\n" for name, value in request.headers.raw
                 if name.lower() not in (b"content-length", b"transfer-encoding")]
        key = (request.url.raw_scheme, request.url.raw_host,
               request.url.port or (443 if request.url.scheme == "https" else 80))
        status, headers, content = await self.exchange(key, request.method.encode("ascii"), b"".join(head),
                                                       await request.aread(), request.extensions.get("timeout") or {},
                                                       request)
        return httpx.Response(status, headers=headers, content=content, request=request)

    async def exchange(self, key: tuple[bytes, bytes, int], method: bytes, head: bytes, body: bytes,
                       timeout: dict[str, Any], request: httpx.Request | None = None
                       ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """One request to `key` (scheme, host, port) on a pooled connection: (status, headers, body). `head` is
        the request line and headers (see `_Connection.exchange`); `timeout` httpx's dict (connect, read, pool).
        Raises httpx's PoolTimeout, ConnectTimeout, ConnectError, ReadTimeout, ReadError, RemoteProtocolError."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        try:  # asyncio.timeout, not wait_for: wait_for makes a task per call (measured: a third of the client's time)
            async with asyncio.timeout(timeout.get("pool")):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(f"no free connection within {timeout.get('pool')} s", request=request) from None
        try:
            for attempt in range(2):
                reused = attempt == 0 and bool(self._idle[key])
                conn = self._idle[key].pop() if reused else await self._connect(request, key, timeout.get("connect"))
                try:
                    async with asyncio.timeout(timeout.get("read")):
                        status, headers, content = await conn.exchange(method, head, body)
                except TimeoutError:
                    conn.close()
                    raise httpx.ReadTimeout(f"no response within {timeout.get('read')} s", request=request) from None
                except (ProtocolError, asyncio.IncompleteReadError, OSError) as exc:
                    conn.close()
                    if reused and attempt == 0:  # a kept-alive connection the server had closed: once more, fresh
                        continue
                    kind = httpx.ReadError if isinstance(exc, OSError) else httpx.RemoteProtocolError
                    raise kind(f"{type(exc).__name__}: {exc}", request=request) from None
                except BaseException:  # cancelled mid-call: the connection's state is unknown
                    conn.close()
                    raise
                if conn.keep:
                    self._idle[key].append(conn)
                else:
                    conn.close()
                return status, headers, content
            raise AssertionError("unreachable")
        finally:
            self._slots.release()

    async def _connect(self, request: httpx.Request | None, key: tuple[bytes, bytes, int],
                       timeout: float | None) -> _Connection:
        tls = None
        if key[0] == b"https":
            tls = self._ssl = self._ssl or ssl.create_default_context()
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(key[1].decode("ascii"), key[2], ssl=tls, limit=1 << 24)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect within {timeout} s", request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from None
        return _Connection(reader, writer)

    async def aclose(self) -> None:
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
        self._idle.clear()


class PooledClient:
    """`post(path, json=...)` and `aclose()` of an `httpx.AsyncClient` for one endpoint, on a StreamTransport of
    `max_connections` (module docstring). `base_url` like httpx's; `headers` sent with every request; `timeout`
    in seconds for connecting, waiting for a connection and waiting for the response (each)."""

    def __init__(self, *, base_url: str, headers: dict[str, str] | None = None, timeout: float = 60.0,
                 max_connections: int = 100):
        url = httpx.URL(base_url.rstrip("/"))
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url {base_url!r}: expected http(s)://host[:port][/path]")
        self.transport = StreamTransport(max_connections=max_connections)
        self.timeout = {"connect": timeout, "read": timeout, "write": timeout, "pool": timeout}
        self._key = (url.raw_scheme, url.raw_host, url.port or (443 if url.scheme == "https" else 80))
        self._prefix = url.raw_path.rstrip(b"/")
        host = url.raw_host + (b":%d" % url.port if url.port else b"")
        fixed = {"Host": host.decode("ascii"), "Accept": "application/json", "Content-Type": "application/json",
                 "User-Agent": "gymsmith", **(headers or {})}
        self._headers = b"".join(f"{k}: {v}\r\n".encode("latin-1") for k, v in fixed.items())

    async def post(self, path: str, *, json: Any = None, content: bytes | None = None,
                   headers: dict[str, str] | None = None) -> httpx.Response:
        """POST `json` (encoded compactly), or `content` already encoded as JSON, to the base URL's path + `path`;
        the whole response, as httpx's. `headers` is accepted for httpx's signature: this client always sends
        its own (JSON, and the key it was made with)."""
        body = content if content is not None else _dumps(json).encode("utf-8")
        head = b"POST " + self._prefix + path.encode("ascii") + b" HTTP/1.1\r\n" + self._headers
        status, received, answer = await self.transport.exchange(self._key, b"POST", head, body, self.timeout)
        return httpx.Response(status, headers=received, content=answer)

    async def aclose(self) -> None:
        await self.transport.aclose()


_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
