"""Serve a Site on loopback with uvicorn, in a background thread of the process that owns the environment.

The environment swaps the site's database in memory (`Site.load`), so no control endpoint exists that an
agent could call. The port is the kernel's choice (bound before uvicorn starts), so parallel workers never
collide.
"""

from __future__ import annotations

import socket
import threading
import time

import uvicorn

from gymsmith.families.web.site import Site, create_app


class SiteServer:
    """A running ShopDesk at `origin` (http://127.0.0.1:PORT). Use as a context manager or call close()."""

    def __init__(self, site: Site | None = None, *, start_timeout_s: float = 15.0):
        self.site = site or Site()
        # proto must be IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY on accepted sockets only then, and without it
        # every keep-alive response waits ~40 ms for the client's delayed ACK (Nagle)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(self.site), log_level="error", access_log=False, lifespan="off",
                                loop="asyncio", http="httptools", ws="none")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name=f"shopdesk-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the ShopDesk server did not start on {self.origin} within {start_timeout_s:g} s")
            time.sleep(0.005)

    def drain(self, timeout_s: float = 5.0) -> bool:
        """Wait until no connection is open and no request is being served (every request that reached the server
        has been answered); whether that happened within `timeout_s`."""
        state = self._server.server_state
        deadline = time.monotonic() + timeout_s
        while state.connections or state.tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True

    def close(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> "SiteServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
