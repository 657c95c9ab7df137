"""One headless Chromium per worker process, driven through Playwright; a fresh context per rollout.

Playwright's own browser builds cannot be downloaded here, so it runs Debian's Chromium through
`executable_path` (GYMSMITH_CHROMIUM, else `chromium` on PATH). Each context may only talk to the site's
origin: every other request is aborted by the browser and recorded in `BlockedLog`.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from typing import cast

from playwright.sync_api import Browser, BrowserContext, Playwright, Route, ViewportSize, sync_playwright

from gymsmith.core.errors import InfrastructureError

VIEWPORT: ViewportSize = {"width": 1280, "height": 900}
LAUNCH_ARGS = ["--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


class BrowserUnavailable(InfrastructureError, RuntimeError):
    """Chromium or Playwright cannot start here (the message says what to install), or the browser died under a
    rollout. An infrastructure failure: raised out of `step`, the rollout is an error, never the agent's 0."""


def chromium_path() -> str:
    """The Chromium executable to drive. Raises BrowserUnavailable when there is none."""
    path = os.environ.get("GYMSMITH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path or not os.access(path, os.X_OK):
        raise BrowserUnavailable("no Chromium found: run `make setup` (apt-get install chromium) or set GYMSMITH_CHROMIUM "
                                 "to a Chromium executable; `playwright install` is not needed")
    return path


_local = threading.local()  # Playwright's sync API is bound to the thread that started it


@dataclass
class _Shared:
    pid: int
    playwright: Playwright
    browser: Browser
    users: int = 0


def acquire_browser() -> Browser:
    """This thread's Chromium, launched on first use (again if it crashed, or in a forked child).

    Every call must be paired with `release_browser()`: the last release stops Chromium and Playwright, so
    nothing keeps running (Playwright's sync API also blocks asyncio in its thread while it runs).
    Raises BrowserUnavailable when Chromium cannot start.
    """
    shared = getattr(_local, "shared", None)
    if shared is None or shared.pid != os.getpid() or not shared.browser.is_connected():
        users = shared.users if shared is not None and shared.pid == os.getpid() else 0
        if users:  # it crashed under its users: they get the new one
            _stop(cast(_Shared, shared))  # users only come from one
        pw: Playwright = sync_playwright().start()
        try:
            browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=LAUNCH_ARGS)
        except BrowserUnavailable:
            pw.stop()
            raise
        except Exception as exc:  # noqa: BLE001 - Playwright's launch errors are plain Errors
            pw.stop()
            raise BrowserUnavailable(f"Chromium did not start: {str(exc).splitlines()[0]}") from None
        _local.shared = shared = _Shared(pid=os.getpid(), playwright=pw, browser=browser, users=users)
    shared.users += 1
    return shared.browser


def release_browser() -> None:
    """Give back one `acquire_browser()`; the last one stops this thread's Chromium."""
    shared = getattr(_local, "shared", None)
    if shared is None or shared.pid != os.getpid():
        return  # nothing of ours (a parent's browser is not a forked child's to stop)
    shared.users -= 1
    if shared.users <= 0:
        _stop(shared)
        _local.shared = None


def _stop(shared: _Shared) -> None:
    try:
        shared.browser.close()
    except Exception:  # noqa: BLE001 - already gone
        pass
    try:
        shared.playwright.stop()
    except Exception:  # noqa: BLE001 - already gone
        pass


@dataclass
class BlockedLog:
    """Requests the context refused because they left the site's origin, in order."""

    requests: list[dict[str, str]] = field(default_factory=list)

    def add(self, url: str, kind: str) -> None:
        self.requests.append({"url": url, "type": kind})


def new_context(browser: Browser, origin: str, blocked: BlockedLog) -> BrowserContext:
    """A fresh context (no cookies, no cache, no history) that can reach `origin` only."""
    context = browser.new_context(viewport=VIEWPORT, base_url=origin, service_workers="block",
                                           java_script_enabled=True, locale="en-US", timezone_id="UTC")

    def refuse(route: Route) -> None:
        blocked.add(route.request.url, route.request.resource_type)
        route.abort("blockedbyclient")

    # a regular expression is matched inside the browser driver, so allowed requests never wait on Python
    context.route(re.compile(rf"^(?!{re.escape(origin)}/)"), refuse)
    context.set_default_timeout(5000)
    return context
