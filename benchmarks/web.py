"""Web-family costs, each against its baseline in the same run. Prints one JSON line per result.

- `web_reset`: a rollout's reset - our way (a new browser context on the worker's running Chromium, the
  site's database restored in memory, the login page opened and observed) versus launching a new
  Chromium per rollout and doing the same in it.
- `web_vs_browsergym`: reset, and a step with its observation (typing into the username field, then
  clicking "Log in"), through our environment and through BrowserGym's open-ended task on the same local
  site. BrowserGym (`browsergym-core` from PyPI) runs in its own virtual environment (its pins are its
  own), created on first use under ~/.cache/gymsmith/browsergym-venv; its `chromium.launch` is wrapped to
  pass Debian's Chromium, since Playwright's own builds cannot be downloaded here. If it cannot be
  installed, the line says so instead of a ratio.
- `web_steps_per_s`: oracle steps per second over whole rollouts (one worker).

Usage: python benchmarks/web.py [--quick] [--no-browsergym]
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from gymsmith.core.types import Action
from gymsmith.families.web.browser import LAUNCH_ARGS, chromium_path
from gymsmith.families.web.env import SNAPSHOT_JS
from gymsmith.families.web.oracle import WebOracle
from gymsmith.families.web.server import SiteServer
from gymsmith.families.web.world import AGENT_USER, pristine_image
from gymsmith.registry import get_family

QUICK = "--quick" in sys.argv
FAMILY = get_family("web")
VENV = Path.home() / ".cache/gymsmith/browsergym-venv"


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def element(obs, name: str) -> int:
    return next(e["id"] for e in obs.data["elements"] if e["name"] == name or e["label"] == name)


def bench_reset(repeats: int) -> None:
    task = FAMILY.generate(3, difficulty=0.5, variation=0.0)
    env = FAMILY.make_env()
    env.reset(task, seed=0)  # the worker's Chromium and site server start once
    ours, fresh = [], []
    image = pristine_image(task.seed, task.knobs)[0]
    chromium = env.browser.browser_type  # the same Playwright: one sync instance per thread
    for _ in range(repeats):
        t = time.perf_counter()
        env.reset(task, seed=0)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        browser = chromium.launch(executable_path=chromium_path(), headless=True, args=LAUNCH_ARGS)
        env.server.site.load(image)
        context = browser.new_context(base_url=env.server.origin)
        page = context.new_page()
        page.goto("/login")
        page.evaluate(SNAPSHOT_JS)
        browser.close()
        fresh.append(time.perf_counter() - t)
    env.close()
    o, f = statistics.median(ours) * 1000, statistics.median(fresh) * 1000
    emit(bench="web_reset", ours_ms=round(o, 1), new_browser_ms=round(f, 1), ratio=round(f / o, 1), target_ratio=2.0, repeats=repeats)


def ours_reset_and_step(repeats: int) -> dict[str, float]:
    task = FAMILY.generate(3, difficulty=0.5, variation=0.0)
    env = FAMILY.make_env()
    env.reset(task, seed=0)
    resets, steps = [], []
    for _ in range(repeats):
        t = time.perf_counter()
        obs = env.reset(task, seed=0)
        resets.append(time.perf_counter() - t)
        t = time.perf_counter()
        obs = env.step(Action(tool="type", arguments={"element": element(obs, "username"), "text": AGENT_USER})).observation
        steps.append(time.perf_counter() - t)
        t = time.perf_counter()
        env.step(Action(tool="click", arguments={"element": element(obs, "Log in")}))
        steps.append(time.perf_counter() - t)
    env.close()
    return {"reset_ms": statistics.median(resets) * 1000, "step_ms": statistics.median(steps) * 1000}


BROWSERGYM_SCRIPT = r'''
import json, re, sys, time, statistics
from playwright.sync_api._generated import BrowserType
chromium, url, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
_launch = BrowserType.launch
def launch(self, *args, **kwargs):  # Playwright's own builds cannot be downloaded: use Debian's Chromium
    kwargs.setdefault("executable_path", chromium)
    return _launch(self, *args, **kwargs)
BrowserType.launch = launch
import gymnasium as gym
import browsergym.core  # registers browsergym/openended
from browsergym.utils.obs import flatten_axtree_to_str
env = gym.make("browsergym/openended", task_kwargs={"start_url": url}, wait_for_user_message=False, headless=True,
               disable_env_checker=True)
def bid(obs, role, name):
    text = flatten_axtree_to_str(obs["axtree_object"])
    m = re.search(r"\[(\w+)\] " + role + r" '" + re.escape(name) + "'", text)
    return m.group(1)
resets, steps = [], []
env.reset(seed=0)
for i in range(repeats):
    t = time.perf_counter(); obs, _ = env.reset(seed=i); resets.append(time.perf_counter() - t)
    t = time.perf_counter(); obs, *_ = env.step(f"fill('{bid(obs, 'textbox', 'Username')}', 'support')"); steps.append(time.perf_counter() - t)
    t = time.perf_counter(); obs, *_ = env.step(f"click('{bid(obs, 'button', 'Log in')}')"); steps.append(time.perf_counter() - t)
env.close()
print(json.dumps({"reset_ms": statistics.median(resets) * 1000, "step_ms": statistics.median(steps) * 1000,
                  "browsergym": __import__("importlib.metadata").metadata.version("browsergym-core")}))
'''


def browsergym_python() -> tuple[str | None, str]:
    """The interpreter of BrowserGym's own virtual environment (made on first use), or None and why not."""
    python = VENV / "bin/python"
    if not python.exists() or subprocess.run([str(python), "-c", "import browsergym.core"], capture_output=True).returncode:
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "browsergym-core"], capture_output=True, text=True)
        if done.returncode:
            return None, f"pip install browsergym-core failed: {done.stderr.strip()[-300:]}"
    return str(python), ""


def bench_browsergym(repeats: int) -> None:
    python, why = browsergym_python()
    task = FAMILY.generate(3, difficulty=0.5, variation=0.0)
    ours = ours_reset_and_step(repeats)
    if python is None:
        emit(bench="web_vs_browsergym", skipped=why, ours_reset_ms=round(ours["reset_ms"], 1), ours_step_ms=round(ours["step_ms"], 1))
        return
    with SiteServer() as server, tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as script:
        server.site.load(pristine_image(task.seed, task.knobs)[0])
        script.write(BROWSERGYM_SCRIPT)
        script.flush()
        done = subprocess.run([python, script.name, chromium_path(), f"{server.origin}/login", str(repeats)],
                              capture_output=True, text=True, timeout=1800)
    os.unlink(script.name)
    if done.returncode:
        emit(bench="web_vs_browsergym", skipped=f"BrowserGym failed: {done.stderr.strip()[-500:]}")
        return
    theirs = json.loads(done.stdout.strip().splitlines()[-1])
    emit(bench="web_vs_browsergym", ours_reset_ms=round(ours["reset_ms"], 1), browsergym_reset_ms=round(theirs["reset_ms"], 1),
         reset_ratio=round(theirs["reset_ms"] / ours["reset_ms"], 1), target_reset_ratio=5.0,
         ours_step_ms=round(ours["step_ms"], 1), browsergym_step_ms=round(theirs["step_ms"], 1),
         step_ratio=round(theirs["step_ms"] / ours["step_ms"], 1), target_step_ratio=2.0, repeats=repeats,
         browsergym=theirs["browsergym"])


def bench_steps_per_s(n_tasks: int) -> None:
    env = FAMILY.make_env()
    steps, started = 0, None
    for seed in range(n_tasks):
        task = FAMILY.generate(100 + seed, difficulty=seed / max(1, n_tasks - 1))
        obs = env.reset(task, seed=0)
        started = started or time.perf_counter()
        agent = WebOracle()
        agent.reset(task, obs, seed=0)
        done = False
        while not done:
            result = env.step(agent.act(obs))
            obs, done = result.observation, result.done
            steps += 1
    elapsed = time.perf_counter() - started
    env.close()
    emit(bench="web_steps_per_s", steps=steps, seconds=round(elapsed, 2), steps_per_s=round(steps / elapsed, 1), tasks=n_tasks)


def main() -> None:
    bench_reset(5 if QUICK else 20)
    if "--no-browsergym" not in sys.argv:
        bench_browsergym(5 if QUICK else 20)
    bench_steps_per_s(3 if QUICK else 12)


if __name__ == "__main__":
    main()
