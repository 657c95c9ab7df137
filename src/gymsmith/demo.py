"""`gymsmith demo`: the end-to-end slice on the built-in families, on the embedded defaults.

ops: 200 train + 50 held-out tasks x oracle, greedy, random, null. code: 20 train + 5 held-out tasks x
oracle, random, null and two red-team agents, in real bubblewrap sandboxes with the warm verifier. web:
10 train + 2 held-out tasks x oracle, random, null and two red-team agents, in a real headless Chromium.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel
from rich.console import Console

from gymsmith.core.types import RolloutStatus
from gymsmith.registry import TaskSetSpec
from gymsmith.report.html import write_summary_html
from gymsmith.runner.local import RunConfig, SummaryRow, summarize
from gymsmith.store.sql import TrajectoryStore


class DemoFamily(BaseModel):
    family: str
    agents: list[str]
    train_tasks: int
    heldout_tasks: int


def demo_families(train_tasks: int, heldout_tasks: int) -> list[DemoFamily]:
    """The demo's families; code runs at a tenth of the ops size (its rollouts run real sandboxes and test runs),
    web at a twentieth (each of its steps is a real browser action)."""
    return [DemoFamily(family="ops", agents=["oracle", "greedy", "random", "null"], train_tasks=train_tasks,
                       heldout_tasks=heldout_tasks),
            DemoFamily(family="code", agents=["oracle", "random", "null", "exploit:hardcode_outputs", "exploit:patch_runner"],
                       train_tasks=max(1, train_tasks // 10), heldout_tasks=max(1, heldout_tasks // 10)),
            DemoFamily(family="web", agents=["oracle", "random", "null", "exploit:skip_confirmation", "exploit:over_broad"],
                       train_tasks=max(1, train_tasks // 20), heldout_tasks=max(1, heldout_tasks // 20))]


def expectations(family: str, overall: dict[str, float]) -> list[tuple[str, bool]]:
    """The demo's sanity claims about one family's scripted agents, each with whether it held."""
    nan = float("nan")
    o, n, r = overall.get("oracle", nan), overall.get("null", nan), overall.get("random", nan)
    claims = [(f"{family}: oracle accepted on every task (100%)", o == 1.0), (f"{family}: null never accepted (0%)", n == 0.0),
              (f"{family}: random accepted below 10%", r < 0.10)]
    if "greedy" in overall:
        claims.append((f"{family}: greedy strictly between null and oracle", n < overall["greedy"] < o))
    claims += [(f"{family}: {a} never accepted", overall[a] == 0.0) for a in sorted(overall) if a.startswith("exploit:")]
    return claims


def run_demo(*, store: str, train_tasks: int, heldout_tasks: int, html_path: Path,
             execute: Callable[[RunConfig, str], TrajectoryStore], print_summary: Callable[[list[SummaryRow], str], None],
             console: Console) -> bool:
    """Run the demo, print the tables and verdicts, write the HTML summary; returns whether every claim held.

    The command line passes how to run a config into the store (`execute`, with its progress bar), how to show a
    summary table and where to print, so the demo does not import the command line (it imports the demo)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    knobs = {"difficulty": [0.0, 1.0]}
    all_rows, notes, ok = [], [], True
    for spec in demo_families(train_tasks, heldout_tasks):
        started = time.time()
        # one run with its held-out pair, so train vs held-out divergence is measured within it
        train = RunConfig(run_id=f"demo-{spec.family}-{stamp}", purpose="train", agents=spec.agents,
                          paired_heldout=spec.heldout_tasks,
                          taskset=TaskSetSpec(family=spec.family, count=spec.train_tasks, split="train", knobs=knobs))
        s = execute(train, store)
        rows = s.rollout_rows([train.run_id])
        print_summary(summarize(rows, by_bin=True), f"{spec.family}: by split, agent and difficulty bin")
        scored = [r for r in rows if r["status"] != RolloutStatus.ERROR]
        overall = {a: sum(bool(r["accepted"]) for r in scored if r["agent"] == a) / max(1, sum(r["agent"] == a for r in scored))
                   for a in spec.agents}
        errors = len(rows) - len(scored)
        console.print(f"{spec.family} acceptance over all tasks: " + ", ".join(f"{a} {overall[a]:.0%}" for a in spec.agents)
                      + f"  ({len(rows)} rollouts, {errors} errors, {time.time() - started:.0f} s)")
        null_rewards = [r["reward"] for r in scored if r["agent"] == "null"]
        checks = expectations(spec.family, overall) + [(f"{spec.family}: no infrastructure errors", errors == 0)]
        if null_rewards:
            checks.append((f"{spec.family}: doing nothing earns nothing (null reward 0 on every task)", max(null_rewards) == 0.0))
        for claim, held in checks:
            console.print(f"  [{'green' if held else 'red'}]{'PASS' if held else 'FAIL'}[/] {claim}")
        notes += [f"{claim}: {'holds' if held else 'FAILS'}" for claim, held in checks]
        ok &= all(held for _, held in checks)
        all_rows += [{**r, "agent": f"{spec.family}/{r['agent']}"} for r in rows]
    path = write_summary_html(summarize(all_rows, by_bin=True), html_path, title="gymsmith demo — ops, code and web families",
                              notes=notes)
    console.print(f"stored in {store}; HTML summary: {path}")
    return ok
