"""A lane: the one thread an environment is made, reset, stepped, read and closed on.

Servers answer requests from pools of threads (the HTTP server) or from an event loop (MCP), and an environment may
be bound to the thread that started it: Playwright's sync API is (a web call from another thread fails, and it
refuses to run inside an event loop at all). Every call of an environment served that way goes through its lane.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


class Lane:
    """One thread of its own; `run` calls on it and waits. Raises what the call raised."""

    def __init__(self, name: str = "gymsmith-env") -> None:
        self.thread = ThreadPoolExecutor(1, thread_name_prefix=name)
        self.pending: set[Future[Any]] = set()

    def submit(self, call: Callable[..., T], *args: Any) -> Future[T]:
        """`call(*args)` on the lane's thread, after every call submitted before it. Raises RuntimeError once closed."""
        future = self.thread.submit(call, *args)
        self.pending.add(future)
        future.add_done_callback(self.pending.discard)
        return future

    def cancel_pending(self) -> int:
        """Cancel the calls not yet started (the one running goes on); how many were cancelled."""
        return sum(future.cancel() for future in list(self.pending))

    def run(self, call: Callable[..., T], *args: Any) -> T:
        """`submit`, and wait: its result, or its exception."""
        return self.submit(call, *args).result()

    def close(self) -> None:
        """Stop the thread once the calls already submitted have run."""
        self.thread.shutdown(wait=True)
