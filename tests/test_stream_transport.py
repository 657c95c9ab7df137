"""`agents.stream_transport.StreamTransport` against real HTTP servers on loopback: uvicorn (Content-Length and
chunked bodies, keep-alive) and a raw asyncio server that closes kept-alive connections or answers too late."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest

from gymsmith.agents.stream_transport import PooledClient, StreamTransport


async def _app(scope, receive, send):
    """JSON with a Content-Length at /json, the same chunked at /chunked, and `Connection: close` at /close."""
    if scope["type"] != "http":
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    auth = dict(scope["headers"]).get(b"authorization", b"").decode()
    payload = json.dumps({"path": scope["path"], "echo": json.loads(body or b"null"), "auth": auth}).encode()
    headers = [(b"content-type", b"application/json")]
    if scope["path"] == "/chunked":
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        for i in range(0, len(payload), 7):
            await send({"type": "http.response.body", "body": payload[i:i + 7], "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["path"] == "/close":
        headers.append((b"connection", b"close"))
    headers.append((b"content-length", str(len(payload)).encode()))
    await send({"type": "http.response.start", "status": 201 if scope["path"] == "/close" else 200, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


@pytest.fixture()
def uvicorn_url():
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(_app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    server.should_exit = True
    thread.join(10)


def test_bodies_by_length_chunked_and_close_over_kept_alive_connections(uvicorn_url):
    async def main():
        transport = StreamTransport(max_connections=4)
        async with httpx.AsyncClient(base_url=uvicorn_url, transport=transport) as client:
            replies = await asyncio.gather(*(client.post(path, json={"i": i})
                                             for i in range(12) for path in ("/json", "/chunked", "/close")))
            idle = sum(len(conns) for conns in transport._idle.values())
        return replies, idle

    replies, idle = asyncio.run(main())
    assert [(r.status_code, r.json()["path"], r.json()["echo"]) for r in replies] == [
        (201 if path == "/close" else 200, path, {"i": i}) for i in range(12) for path in ("/json", "/chunked", "/close")]
    assert 1 <= idle <= 4  # kept-alive connections went back to the pool (never more than max_connections)


def test_pooled_client_posts_under_the_base_path_with_its_headers(uvicorn_url):
    async def main():
        client = PooledClient(base_url=uvicorn_url + "/v1/", headers={"Authorization": "Bearer k"}, max_connections=3)
        try:
            return await asyncio.gather(*(client.post("/chunked" if i % 2 else "/json", json={"é": i}) for i in range(9)))
        finally:
            await client.aclose()

    replies = asyncio.run(main())
    assert [r.json() for r in replies] == [{"path": "/v1/chunked" if i % 2 else "/v1/json", "echo": {"é": i},
                                            "auth": "Bearer k"} for i in range(9)]


async def _raw_server(handler):
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"


def test_a_kept_alive_connection_closed_by_the_server_is_replaced_and_a_late_answer_times_out():
    answered = []

    async def one_per_connection(reader, writer):  # answers one request, then closes without saying so
        await reader.readuntil(b"\r\n\r\n")
        answered.append(1)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.close()

    async def never(reader, writer):
        await asyncio.sleep(30)

    async def main():
        server, url = await _raw_server(one_per_connection)
        slow, slow_url = await _raw_server(never)
        async with server, slow, httpx.AsyncClient(transport=StreamTransport(max_connections=2)) as client:
            texts = []
            for _ in range(3):  # each after the previous connection was closed by the server
                texts.append((await client.post(url + "/x", content=b"{}")).text)
                await asyncio.sleep(0.1)
            with pytest.raises(httpx.ReadTimeout):
                await client.post(slow_url + "/x", content=b"{}", timeout=httpx.Timeout(5, read=0.2))
        return texts

    assert asyncio.run(main()) == ["ok", "ok", "ok"] and len(answered) == 3
