"""An httpx transport for a thousand concurrent calls to one model endpoint: asyncio streams, HTTP/1.1 by h11.

httpx's default transport (httpcore) scans its whole pool for every request it queues or finishes, so with
hundreds of connections open each call costs time in proportion to them (measured: 64 rollouts of 11 calls
took 22 s against 5.5 s of model time; benchmarks/model_bound.py). Here an idle connection is popped from a
list per host and pushed back when its response has been read: constant work per call.

Timeouts (httpx's per-request `timeout` extension): `connect` bounds opening a connection, `pool` waiting for
one of the `max_connections`, `read` the whole wait for the response after the request is sent (a server
that trickles bytes cannot hold a call for longer). Failures raise httpx's own exceptions (ConnectTimeout,
ReadTimeout, PoolTimeout, ConnectError, ReadError, RemoteProtocolError), so callers handle them as any httpx
failure. A kept-alive connection the server has closed meanwhile is replaced once, transparently.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import defaultdict
from typing import Any

import h11
import httpx

READ_CHUNK = 65536


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.h11 = h11.Connection(our_role=h11.CLIENT)

    async def exchange(self, request: httpx.Request, body: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send `request` and read the whole response: (status, headers, body). Raises h11 or OS errors."""
        target = request.url.raw_path
        self.writer.write(self.h11.send(h11.Request(method=request.method, target=target, headers=request.headers.raw))
                          + self.h11.send(h11.Data(data=body)) + self.h11.send(h11.EndOfMessage()))
        await self.writer.drain()
        response, chunks = None, []
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.reader.read(READ_CHUNK)
                self.h11.receive_data(data)  # b"" is the end of the stream: h11 then raises or ends the message
                continue
            if isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                chunks.append(bytes(event.data))
            elif isinstance(event, h11.EndOfMessage):
                return response.status_code, list(response.headers), b"".join(chunks)
            elif isinstance(event, h11.ConnectionClosed):
                raise h11.RemoteProtocolError("the server closed the connection before the response ended")

    def reusable(self) -> bool:
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False

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
        timeout: dict[str, Any] = request.extensions.get("timeout") or {}
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.max_connections)
        try:  # asyncio.timeout, not wait_for: wait_for makes a task per call (measured: a third of the client's time)
            async with asyncio.timeout(timeout.get("pool")):
                await self._slots.acquire()
        except TimeoutError:
            raise httpx.PoolTimeout(f"no free connection within {timeout.get('pool')} s", request=request) from None
        try:
            body = await request.aread()
            key = (request.url.raw_scheme, request.url.raw_host, request.url.port or
                   (443 if request.url.scheme == "https" else 80))
            for attempt in range(2):
                reused = attempt == 0 and bool(self._idle[key])
                conn = self._idle[key].pop() if reused else await self._connect(request, key, timeout.get("connect"))
                try:
                    async with asyncio.timeout(timeout.get("read")):
                        status, headers, content = await conn.exchange(request, body)
                except TimeoutError:
                    conn.close()
                    raise httpx.ReadTimeout(f"no response within {timeout.get('read')} s", request=request) from None
                except (h11.ProtocolError, OSError) as exc:
                    conn.close()
                    if reused and attempt == 0:  # a kept-alive connection the server had closed: once more, fresh
                        continue
                    kind = httpx.RemoteProtocolError if isinstance(exc, h11.ProtocolError) else httpx.ReadError
                    raise kind(f"{type(exc).__name__}: {exc}", request=request) from None
                except BaseException:  # cancelled mid-call: the connection's state is unknown
                    conn.close()
                    raise
                if conn.reusable():
                    self._idle[key].append(conn)
                else:
                    conn.close()
                return httpx.Response(status, headers=headers, content=content, request=request)
            raise AssertionError("unreachable")
        finally:
            self._slots.release()

    async def _connect(self, request: httpx.Request, key: tuple[bytes, bytes, int], timeout: float | None) -> _Connection:
        tls = None
        if request.url.scheme == "https":
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
