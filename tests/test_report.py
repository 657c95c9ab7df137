"""The HTML report and the viewer, opened in a real headless Chromium (Debian's, through Playwright)."""

import socket
import threading
import time

import pytest
import uvicorn
from playwright.sync_api import sync_playwright

from gymsmith.registry import TaskSetSpec
from gymsmith.report.full import write_report
from gymsmith.report.viewer import create_viewer
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = TrajectoryStore(tmp_path_factory.mktemp("rep") / "r.db")
    run(RunConfig(run_id="tr", taskset=TaskSetSpec(family="ops", count=10), agents=["oracle", "greedy", "random"]), s)
    run(RunConfig(run_id="ev", purpose="eval", taskset=TaskSetSpec(family="ops", count=5, split="heldout"),
                  agents=["oracle", "greedy"]), s)
    return s


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def _open(browser, url):
    page = browser.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return page, errors


def test_report_renders_without_console_errors(store, browser, tmp_path):
    path = write_report(store, ["tr", "ev"], tmp_path / "report.html")
    page, errors = _open(browser, path.as_uri())
    assert errors == []
    assert page.locator("table.summary tbody tr").count() >= 5
    assert page.locator("svg.hist").count() >= 4  # reward distributions by split and agent
    for section in ("summary", "distributions", "divergence", "diversity", "flags", "trajectories"):
        assert page.locator(f"section#{section}").count() == 1
    assert page.locator("section.trajectory").count() == 40
    shot = tmp_path / "report.png"
    page.screenshot(path=str(shot), full_page=False)
    assert shot.stat().st_size > 10_000
    page.close()


def test_viewer_pages(store, browser):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_viewer(store), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        page, errors = _open(browser, f"http://127.0.0.1:{port}/")
        page.click("text=tr")
        assert "Run tr" in page.content()
        page.locator("a[href^='/rollouts/']").first.click()
        assert page.locator("section.trajectory").count() == 1 and errors == []
        missing = page.goto(f"http://127.0.0.1:{port}/rollouts/nope")
        assert missing.status == 404
        page.close()
    finally:
        server.should_exit = True
        thread.join(10)


def test_report_of_an_unknown_run(store, tmp_path):
    with pytest.raises(ValueError, match="no rollouts stored for runs"):
        write_report(store, ["nope"], tmp_path / "x.html")
