"""The web environment: a real Chromium on a local ShopDesk, one fresh browser context and database per rollout.

Reset restores the task's pristine database image into the site (a memcpy), closes the last context and
opens a new one at the login page. Every observation is the page's URL path, title and a text snapshot
in which each interactive element has a numbered id; tools act on those ids. An action the page cannot
take (an id that does not exist, typing into a link, a path outside the site) is an error observation
that shows the page as it is, and the rollout goes on.

Arguments are bounded by the schemas below and by the shared validation (docs/episodes.md). `goto` takes a
path on this site only: a scheme, a host, a backslash (which browsers read as a slash, so `/\\host` would
leave the site) or a control character (which URL parsers drop) is refused before the browser sees it; the context
blocks every request to another origin anyway. A dead browser or a crashed page is an infrastructure failure
(`BrowserUnavailable`), never the agent's error observation.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from playwright.sync_api import Browser, BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError

from gymsmith.core.errors import StaleTaskError
from gymsmith.core.types import ActionError, ActionErrorKind, Observation, TaskSpec, ToolSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, preview
from gymsmith.families.web.browser import BlockedLog, BrowserUnavailable, acquire_browser, new_context, release_browser
from gymsmith.families.web.schema import WORLD
from gymsmith.families.web.server import SiteServer
from gymsmith.families.web.world import pristine_image

log = logging.getLogger(__name__)
QUIET_WINDOW_S = 0.2  # at the end, the page must have had no request in flight for this long (a form submitted by a
# key press is sent 20-65 ms after the press returns)
SNAPSHOT_JS = Path(__file__).with_name("snapshot.js").read_text()
KEYS = ("Enter", "Tab", "Escape", "Backspace", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp", "PageDown",
        "Home", "End", "Space")
TEXT_ROLES = ("textbox",)
Problem = tuple[ActionErrorKind, str]  # why an action had no effect
NOT_FOUND, INVALID, RULE = ActionErrorKind.NOT_FOUND, ActionErrorKind.INVALID_ARGUMENTS, ActionErrorKind.RULE_VIOLATION


def _tool(name: str, description: str, properties: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> ToolSpec:
    return ToolSpec(name=name, description=description,
                    parameters={"type": "object", "properties": properties or {}, "required": list(required), "additionalProperties": False})


MAX_ELEMENT = 100_000
MAX_PATH_CHARS = 2_048
MAX_TEXT_CHARS = 4_000
MAX_OPTION_CHARS = 500
ELEMENT = {"type": "integer", "minimum": 1, "maximum": MAX_ELEMENT, "description": "The element's number, as in [12] in the page text."}
TOOL_SPECS = (
    _tool("goto", "Open a page of the site by its path, e.g. /orders?page=2.",
          {"path": {"type": "string", "minLength": 1, "maxLength": MAX_PATH_CHARS}}, ("path",)),
    _tool("click", "Click an element (link, button, checkbox).", {"element": ELEMENT}, ("element",)),
    _tool("type", "Replace the text of a text field with `text`.",
          {"element": ELEMENT, "text": {"type": "string", "maxLength": MAX_TEXT_CHARS}}, ("element", "text")),
    _tool("select", "Choose an option of a drop-down by its visible text.",
          {"element": ELEMENT, "option": {"type": "string", "maxLength": MAX_OPTION_CHARS}}, ("element", "option")),
    _tool("press", f"Press a key in the focused element; one of {', '.join(KEYS)}.", {"key": {"type": "string", "enum": list(KEYS)}}, ("key",)),
    _tool("scroll", "Scroll the page.", {"direction": {"type": "string", "enum": ["up", "down"]}}, ("direction",)),
    _tool("back", "Go back to the previous page."),
    _tool("submit", "Finish the task; say what you did.", {"note": {"type": "string", "maxLength": 2000}}),
)


class WebEnvironment(ToolEnvironment):
    """One site server and one browser context per environment; `screenshots` saves a PNG per observation."""

    def __init__(self, *, screenshots: Path | None = None) -> None:
        super().__init__()
        self.server: SiteServer | None = None
        self.browser: Browser | None = None
        self.context: BrowserContext | None = None
        self.page: Page | None = None  # set by reset; the observations and tools run only after it
        self.blocked = BlockedLog()
        self.elements: dict[int, dict[str, Any]] = {}
        self.screenshots = Path(screenshots) if screenshots else None
        self.shots = 0
        self.crashed = False
        self.in_flight, self.last_request = 0, time.monotonic()  # the page's requests (`settle` waits for quiet)

    # -- lifecycle --------------------------------------------------------------------------------
    def _reset(self, task: TaskSpec, seed: int) -> Observation:
        image, digest = pristine_image(task.seed, task.knobs)
        StaleTaskError.check(task.id, task.start_state.digest, digest, "site")
        if self.server is None:
            self.server = SiteServer()
        if self.browser is None or not self.browser.is_connected():
            if self.browser is not None:
                release_browser()
            self.browser = acquire_browser()
        self._close_context()
        self.server.site.load(image)
        self.blocked = BlockedLog()
        self.context = new_context(self.browser, self.server.origin, self.blocked)
        self.in_flight, self.last_request = 0, time.monotonic()
        self.context.on("request", self._request_started)
        self.context.on("requestfinished", self._request_ended)
        self.context.on("requestfailed", self._request_ended)
        self.page = self.context.new_page()
        self.crashed = False
        self.page.on("crash", self._on_crash)
        self.page.goto("/login")
        self.shots = 0
        obs = self._observe()
        return Observation(text=f"Goal: {task.goal}\n\n{obs.text}", data={**obs.data, "goal": task.goal})

    def _on_crash(self, _page: Any) -> None:
        self.crashed = True

    def _request_started(self, _request: Any) -> None:
        self.in_flight += 1
        self.last_request = time.monotonic()

    def _request_ended(self, _request: Any) -> None:
        self.in_flight -= 1
        self.last_request = time.monotonic()

    def _quiet(self, window_s: float = QUIET_WINDOW_S, timeout_s: float = 5.0) -> None:
        """Wait until the page has had no request in flight for `window_s` (at most `timeout_s`): a request an
        action started (a key press returns before the form it submits is sent) is sent and answered."""
        page = self.page
        if page is None:
            return
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                page.wait_for_timeout(20)  # lets the browser's events (requests started and ended) arrive
                if self.in_flight <= 0 and time.monotonic() - self.last_request >= window_s:
                    return
        except PlaywrightError:
            self._check_alive()

    def _close_context(self) -> None:
        if self.context is not None:
            try:
                self.context.close()
            except PlaywrightError:
                pass  # the browser went away; a new one starts with the next context
            self.context = self.page = None

    def close(self) -> None:
        self._close_context()
        if self.browser is not None:
            release_browser()
            self.browser = None
        if self.server is not None:
            self.server.close()
            self.server = None

    # -- observations -----------------------------------------------------------------------------
    def path(self) -> str:
        parts = urlsplit(cast(Page, self.page).url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def _observe(self, problem: Problem | None = None) -> Observation:
        page = cast(Page, self.page)
        try:
            page.wait_for_load_state("load")
            snap = page.evaluate(SNAPSHOT_JS)  # text, ids and title in one round trip
        except PlaywrightError as exc:  # e.g. the page navigated away while we looked
            self._check_alive()
            snap = {"text": f"(the page could not be read: {_first_line(exc)})", "elements": [], "title": ""}
        title = snap["title"]
        self.elements = {e["id"]: e for e in snap["elements"]}
        data = {"url": self.path(), "title": title, "elements": snap["elements"], "blocked": len(self.blocked.requests)}
        if self.screenshots is not None:
            self.screenshots.mkdir(parents=True, exist_ok=True)
            shot = self.screenshots / f"{self.shots:04d}.png"
            page.screenshot(path=str(shot))
            data["screenshot"] = str(shot)
            self.shots += 1
        text = f"URL: {data['url']}\nTitle: {title}\n\n{snap['text']}"
        if problem is None:
            return Observation(text=text, data=data)
        kind, message = problem
        return Observation(text=f"ERROR ({kind.value}): {message}\n\n{text}", data=data, error=ActionError(kind=kind, message=message))

    def _element(self, number: int, roles: tuple[str, ...], verb: str) -> tuple[Any, dict] | Problem:
        """(locator, description) of element `number` of the last observation, or the problem with it."""
        info = self.elements.get(number)
        if info is None:
            top = max(self.elements) if self.elements else 0
            return NOT_FOUND, (f"element {number} does not exist on this page (its elements are numbered 1 to {top})" if top
                               else f"element {number} does not exist: this page has no interactive elements")
        if info["role"] not in roles:
            return INVALID, f"element {number} is a {info['role']} ({info['label']!r}); {verb} works on {' or '.join(roles)} elements only"
        return cast(Page, self.page).locator(f'[data-gsid="{number}"]'), info

    # -- tools ------------------------------------------------------------------------------------
    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        assert self.page is not None, "reset() must be called before step()"
        if name == "submit":
            return Observation(text="Submitted.", data={"note": arguments.get("note", "")})
        try:
            problem = getattr(self, f"_tool_{name}")(**arguments)
        except PlaywrightError as exc:
            self._check_alive()
            problem = INVALID, f"{name} failed: {_first_line(exc)}"
        return self._observe(problem)

    def _check_alive(self) -> None:
        """Raise BrowserUnavailable (an infrastructure failure) when the browser or the page is gone: nothing the
        agent's tools can do ends them, so a dead one must not read as the agent's error observation."""
        if self.browser is None or not self.browser.is_connected():
            raise BrowserUnavailable("the browser process died during the rollout")
        if self.page is None or self.page.is_closed() or self.crashed:
            raise BrowserUnavailable("the page crashed or was closed during the rollout")

    def _tool_goto(self, path: str) -> Problem | None:
        if "\\" in path or any(not ch.isprintable() for ch in path):  # URL parsers drop tabs and newlines anywhere
            return INVALID, (f"goto takes a path such as /orders?page=2; {preview(path)} has a backslash or a control "
                             "character (percent-encode them: %5C, %09, ...)")
        parts = urlsplit(path)
        if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//"):
            return RULE, f"goto takes a path on this site such as /orders; {preview(path)} is outside the site"
        cast(Page, self.page).goto(path)
        return None

    def _tool_click(self, element: int) -> Problem | None:
        found = self._element(element, ("link", "button", "checkbox", "radio"), "click")
        if not isinstance(found[1], dict):
            return found
        # A click at the element's centre, as a person would; the snapshot numbered visible elements only, so
        # Playwright's wait for the element to be still for two frames (~35 ms a click here) is skipped.
        found[0].click(force=True)
        return None

    def _tool_type(self, element: int, text: str) -> Problem | None:
        found = self._element(element, TEXT_ROLES, "type")
        if not isinstance(found[1], dict):
            return found
        found[0].fill(text)
        return None

    def _tool_select(self, element: int, option: str) -> Problem | None:
        found = self._element(element, ("select",), "select")
        if not isinstance(found[1], dict):
            return found
        if option not in found[1]["options"]:
            return INVALID, f"element {element} has no option {option!r}; its options are {found[1]['options']}"
        found[0].select_option(label=option)
        return None

    def _tool_press(self, key: str) -> Problem | None:
        cast(Page, self.page).keyboard.press(" " if key == "Space" else key)
        return None

    def _tool_scroll(self, direction: str) -> Problem | None:
        cast(Page, self.page).mouse.wheel(0, 600 if direction == "down" else -600)
        return None

    def _tool_back(self) -> Problem | None:
        page = cast(Page, self.page)
        before = page.url
        if page.go_back() is None and page.url == before:
            return RULE, "there is no previous page to go back to"
        if not page.url.startswith(cast(SiteServer, self.server).origin + "/"):  # before the first page: the blank start page
            page.go_forward()
            return RULE, "there is no previous page of the site to go back to"
        return None

    # -- state ------------------------------------------------------------------------------------
    def settle(self) -> None:
        """The episode is over: wait until the page has been quiet for QUIET_WINDOW_S (a request the last action
        started is sent and answered), close the agent's browser context (a request it has not sent by then never
        will be), let the server answer every request that reached it, then freeze the site (`Site.freeze`: every
        later write is refused). The final snapshot then reads the state the site ends in. A key press returns before the form it
        submits is sent, so a write could land 20-65 ms after a snapshot taken at once: an independent attacker
        undid the goal that way after it was scored (accepted 12 of 12) and hid forbidden writes (5-6 of 8)."""
        self._quiet()  # what the last action started is sent and answered, as it would be without the end
        self._close_context()
        if self.server is not None:
            if not self.server.drain():
                log.warning("the site still served requests 5 s after the browser closed; freezing it anyway")
            self.server.site.freeze()

    def state_hash(self) -> str:
        assert self.server is not None, "reset() must be called first"
        return _image_digest(self.server.site.image())

    def final_state(self, directory: Path) -> FinalState:
        assert self.server is not None, "reset() must be called first"
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / "final.sqlite"
        image = self.server.site.image()  # one snapshot: the file and its digest are of the same state
        path.write_bytes(image)
        os.chmod(path, 0o444)
        return FinalState(kind="sqlite", path=str(path), digest=_image_digest(image))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _image_digest(image: bytes) -> str:
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(image)
        return WORLD.digest(conn)
    finally:
        conn.close()
