"""The egress proxy: the only way out of a sandbox, and only to listed `host:port` pairs.

It listens on a unix socket that is mounted into the sandbox (the sandbox has no network of its own).
It speaks enough HTTP proxy protocol for ordinary clients: `CONNECT host:port` (tunnels, e.g. HTTPS) and
absolute-form requests (`GET http://host:port/path`). Anything not on the allowlist gets a 403 and is
recorded in `events`, as is every allowed connection.
"""

from __future__ import annotations

import os
import socket
import tempfile
import threading
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from pydantic import BaseModel

from gymsmith.sandbox.forward import pump


class EgressEvent(BaseModel):
    time: float
    target: str
    allowed: bool
    detail: str = ""


def parse_allow(entry: str) -> tuple[str, int]:
    """'host:port' -> (host, port). Raises ValueError naming the entry and the expected form."""
    host, sep, port = entry.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"egress allowlist entry {entry!r} is not of the form HOST:PORT (e.g. 127.0.0.1:8080)")
    return host.strip("[]").lower(), int(port)


class EgressProxy:
    """A filtering proxy on a unix socket, served by daemon threads until `close()`."""

    def __init__(self, allow: Sequence[str]):
        self.allow = [f"{h}:{p}" for h, p in map(parse_allow, allow)]
        self._allowed = {parse_allow(a) for a in allow}
        self.events: list[EgressEvent] = []
        self._dir = tempfile.mkdtemp(prefix="gymsmith-egress-")
        self.socket_path = os.path.join(self._dir, "egress.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.socket_path)
        os.chmod(self.socket_path, 0o777)  # the sandbox's uid must be able to connect
        self._server.listen(64)
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name="gymsmith-egress", daemon=True).start()

    def _record(self, target: str, allowed: bool, detail: str = "") -> None:
        with self._lock:
            self.events.append(EgressEvent(time=time.time(), target=target, allowed=allowed, detail=detail))

    def refused(self) -> list[EgressEvent]:
        with self._lock:
            return [e for e in self.events if not e.allowed]

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            client.settimeout(30)
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            header, _, rest = head.partition(b"\r\n\r\n")
            request_line = header.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            if len(parts) != 3:
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                return
            method, target, version = parts
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                forward = None
            else:
                url = urlsplit(target)
                host, port = url.hostname or "", str(url.port or (443 if url.scheme == "https" else 80))
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                lines = header.split(b"\r\n")[1:]
                lines = [ln for ln in lines if not ln.lower().startswith((b"proxy-connection:", b"proxy-authorization:"))]
                forward = b"\r\n".join([f"{method} {path} {version}".encode(), *lines]) + b"\r\n\r\n" + rest
            key = (host.strip("[]").lower(), int(port) if port.isdigit() else -1)
            label = f"{key[0]}:{key[1]}"
            if key not in self._allowed:
                self._record(label, False, f"{method} refused: not on the allowlist")
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
                               + f"gymsmith egress: {label} is not on this sandbox's allowlist\n".encode())
                return
            try:
                upstream = socket.create_connection(key, timeout=10)
            except OSError as exc:
                self._record(label, True, f"{method} failed: {exc}")
                client.sendall(b"HTTP/1.1 502 Bad Gateway\r\nConnection: close\r\n\r\n")
                return
            self._record(label, True, method)
            with upstream:
                if forward is None:
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if rest:
                        upstream.sendall(rest)
                else:
                    upstream.sendall(forward)
                _splice(client, upstream)

    def close(self) -> None:
        self._closed = True
        try:
            self._server.close()
        finally:
            for name in os.listdir(self._dir):
                os.unlink(os.path.join(self._dir, name))
            os.rmdir(self._dir)


def _splice(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes (the same relay the in-sandbox forwarder uses)."""
    t = threading.Thread(target=pump, args=(b, a), daemon=True)
    t.start()
    pump(a, b)
    t.join(timeout=30)
