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
(`BrowserUnavailable`), never the agent's error observation; so is a call from another thread than the one that
started the environment's browser (Playwright's sync API is bound to it: a harness that moves an environment between
threads has failed, and the agent's step is not the one to score 0 for it).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Literal, cast, get_args
from urllib.parse import urlsplit

from playwright.sync_api import Browser, BrowserContext, Page
from playwright.sync_api import Error as PlaywrightError

from gymsmith.core.errors import StaleTaskError
from gymsmith.core.types import ActionError, ActionErrorKind, Observation, TaskSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, ToolRefusal, preview
from gymsmith.envs.toolkit import Param, Toolbox
from gymsmith.families.web.browser import BlockedLog, BrowserUnavailable, acquire_browser, new_context, release_browser
from gymsmith.families.web.schema import WORLD
from gymsmith.families.web.server import SiteServer
from gymsmith.families.web.skin import skin_of
from gymsmith.families.web.world import pristine_image

log = logging.getLogger(__name__)
QUIET_WINDOW_S = 0.2  # at the end, the page must have had no request in flight for this long (a form submitted by a
# key press is sent 20-65 ms after the press returns)
SNAPSHOT_JS = Path(__file__).with_name("snapshot.js").read_text()
Key = Literal["Enter", "Tab", "Escape", "Backspace", "ArrowUp", "ArrowDown", "ArrowLeft", "ArrowRight", "PageUp",
              "PageDown", "Home", "End", "Space"]
KEYS: tuple[str, ...] = get_args(Key)
TEXT_ROLES = ("textbox",)
NOT_FOUND, INVALID, RULE = ActionErrorKind.NOT_FOUND, ActionErrorKind.INVALID_ARGUMENTS, ActionErrorKind.RULE_VIOLATION

MAX_ELEMENT = 100_000
MAX_PATH_CHARS = 2_048
MAX_TEXT_CHARS = 4_000
MAX_OPTION_CHARS = 500
Element = Annotated[int, Param(minimum=1, maximum=MAX_ELEMENT, description="The element's number, as in [12] in the page text.")]
TOOLS = Toolbox()  # the tools below (after WebEnvironment), in the order the model reads them


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
        self.owner: int | None = None  # the thread whose browser this is (`acquire_browser` is per thread)

    def _on_owner_thread(self) -> None:
        """Raise BrowserUnavailable (an infrastructure failure) when called from another thread than the browser's."""
        if self.owner is not None and self.owner != threading.get_ident():
            raise BrowserUnavailable(f"the web environment was called from thread {threading.get_ident()}, but its browser "
                                     f"belongs to thread {self.owner} (Playwright's sync API is bound to the thread "
                                     "that started it): run each environment's calls on one thread")

    # -- lifecycle --------------------------------------------------------------------------------
    def _reset(self, task: TaskSpec, seed: int) -> Observation:
        image, digest = pristine_image(task.seed, task.knobs)
        StaleTaskError.check(task.id, task.start_state.digest, digest, "site")
        self._on_owner_thread()
        if self.server is None:
            self.server = SiteServer()
        if self.browser is None or not self.browser.is_connected():
            if self.browser is not None:
                release_browser()
            self.browser = acquire_browser()
            self.owner = threading.get_ident()
        self._close_context()
        self.server.site.load(image, skin=skin_of(task.seed, task.knobs.get("variation", 0.0)))
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
            self.browser = self.owner = None
        if self.server is not None:
            self.server.close()
            self.server = None

    # -- observations -----------------------------------------------------------------------------
    def path(self) -> str:
        parts = urlsplit(cast(Page, self.page).url)
        return parts.path + (f"?{parts.query}" if parts.query else "")

    def _observe(self, problem: tuple[ActionErrorKind, str] | None = None) -> Observation:
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

    def _element(self, number: int, roles: tuple[str, ...], verb: str) -> Any:
        """The locator of element `number` of the last observation; ToolRefusal if there is none or it is not one of
        `roles`."""
        info = self.elements.get(number)
        if info is None:
            top = max(self.elements) if self.elements else 0
            raise ToolRefusal(NOT_FOUND, f"element {number} does not exist on this page (its elements are numbered 1 to "
                                         f"{top})" if top else f"element {number} does not exist: this page has no "
                                                              "interactive elements")
        if info["role"] not in roles:
            raise ToolRefusal(INVALID, f"element {number} is a {info['role']} ({info['label']!r}); {verb} works on "
                                       f"{' or '.join(roles)} elements only")
        return cast(Page, self.page).locator(f'[data-gsid="{number}"]')

    # -- tools ------------------------------------------------------------------------------------
    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        """Run tool `name` (`TOOLS`); a refusal (`ToolRefusal`) or an action the page could not take is an error
        observation showing the page as it is."""
        assert self.page is not None, "reset() must be called before step()"
        self._on_owner_thread()
        try:
            result = TOOLS.functions[name](self, **arguments)
            if isinstance(result, Observation):
                return result
            problem = None
        except ToolRefusal as refusal:
            problem = refusal.kind, refusal.message
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

    # -- state ------------------------------------------------------------------------------------
    def settle(self) -> None:
        """The episode is over: wait until the page has been quiet for QUIET_WINDOW_S (a request the last action
        started is sent and answered), close the agent's browser context (a request it has not sent by then never
        will be), let the server answer every request that reached it, then freeze the site (`Site.freeze`: every
        later write is refused). The final snapshot then reads the state the site ends in. A key press returns before the form it
        submits is sent, so a write could land 20-65 ms after a snapshot taken at once: an independent attacker
        undid the goal that way after it was scored (accepted 12 of 12) and hid forbidden writes (5-6 of 8)."""
        self._on_owner_thread()
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


# -- the tools (the first parameter is the environment; docstrings are what the model reads) ------------------------
@TOOLS.tool
def goto(env: WebEnvironment, path: Annotated[str, Param(minLength=1, maxLength=MAX_PATH_CHARS)]) -> None:
    """Open a page of the site by its path, e.g. /orders?page=2."""
    if "\\" in path or any(not ch.isprintable() for ch in path):  # URL parsers drop tabs and newlines anywhere
        raise ToolRefusal(INVALID, f"goto takes a path such as /orders?page=2; {preview(path)} has a backslash or a "
                                   "control character (percent-encode them: %5C, %09, ...)")
    parts = urlsplit(path)
    if parts.scheme or parts.netloc or not path.startswith("/") or path.startswith("//"):
        raise ToolRefusal(RULE, f"goto takes a path on this site such as /orders; {preview(path)} is outside the site")
    cast(Page, env.page).goto(path)


@TOOLS.tool
def click(env: WebEnvironment, element: Element) -> None:
    """Click an element (link, button, checkbox)."""
    # A click at the element's centre, as a person would; the snapshot numbered visible elements only, so
    # Playwright's wait for the element to be still for two frames (~35 ms a click here) is skipped.
    env._element(element, ("link", "button", "checkbox", "radio"), "click").click(force=True)


@TOOLS.tool(name="type")
def type_text(env: WebEnvironment, element: Element, text: Annotated[str, Param(maxLength=MAX_TEXT_CHARS)]) -> None:
    """Replace the text of a text field with `text`."""
    env._element(element, TEXT_ROLES, "type").fill(text)


@TOOLS.tool
def select(env: WebEnvironment, element: Element, option: Annotated[str, Param(maxLength=MAX_OPTION_CHARS)]) -> None:
    """Choose an option of a drop-down by its visible text."""
    locator = env._element(element, ("select",), "select")
    options = env.elements[element]["options"]
    if option not in options:
        raise ToolRefusal(INVALID, f"element {element} has no option {option!r}; its options are {options}")
    locator.select_option(label=option)


@TOOLS.tool
def press(env: WebEnvironment, key: Key) -> None:
    """Press a key in the focused element; one of Enter, Tab, Escape, Backspace, ArrowUp, ArrowDown, ArrowLeft,
    ArrowRight, PageUp, PageDown, Home, End, Space."""
    cast(Page, env.page).keyboard.press(" " if key == "Space" else key)


@TOOLS.tool
def scroll(env: WebEnvironment, direction: Literal["up", "down"]) -> None:
    """Scroll the page."""
    cast(Page, env.page).mouse.wheel(0, 600 if direction == "down" else -600)


@TOOLS.tool
def back(env: WebEnvironment) -> None:
    """Go back to the previous page."""
    page = cast(Page, env.page)
    before = page.url
    if page.go_back() is None and page.url == before:
        raise ToolRefusal(RULE, "there is no previous page to go back to")
    if not page.url.startswith(cast(SiteServer, env.server).origin + "/"):  # before the first page: the blank start page
        page.go_forward()
        raise ToolRefusal(RULE, "there is no previous page of the site to go back to")


@TOOLS.tool
def submit(env: WebEnvironment, note: Annotated[str, Param(maxLength=2000)] = "") -> Observation:
    """Finish the task; say what you did."""
    return Observation(text="Submitted.", data={"note": note})


TOOL_SPECS = TOOLS.tool_specs()



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
