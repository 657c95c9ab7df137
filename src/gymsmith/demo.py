"""`gymsmith demo`: the end-to-end slice on the ops family, on the embedded defaults."""

from __future__ import annotations

import time
from pathlib import Path

from gymsmith.registry import TaskSetSpec
from gymsmith.report.html import write_summary_html
from gymsmith.runner.local import RunConfig, summarize

AGENTS = ["oracle", "greedy", "random", "null"]


def expectations(overall: dict[str, float]) -> list[tuple[str, bool]]:
    """The demo's sanity claims about the scripted agents' acceptance, each with whether it held."""
    o, g, r, n = (overall.get(a, float("nan")) for a in AGENTS)
    return [("oracle accepted on every task (100%)", o == 1.0), ("null never accepted (0%)", n == 0.0),
            ("random accepted below 10%", r < 0.10), ("greedy strictly between null and oracle", n < g < o)]


def run_demo(*, store: str, train_tasks: int, heldout_tasks: int, html_path: Path) -> bool:
    """Run the demo, print the tables and verdicts, write the HTML summary; returns whether every claim held."""
    from gymsmith.cli import console, execute, print_summary

    stamp = time.strftime("%Y%m%d-%H%M%S")
    knobs = {"difficulty": [0.0, 1.0]}
    train = RunConfig(run_id=f"demo-train-{stamp}", purpose="train", agents=AGENTS,
                      taskset=TaskSetSpec(family="ops", count=train_tasks, split="train", knobs=knobs))
    heldout = RunConfig(run_id=f"demo-eval-{stamp}", purpose="eval", agents=AGENTS,
                        taskset=TaskSetSpec(family="ops", count=heldout_tasks, split="heldout", knobs=knobs))
    started = time.time()
    s = execute(train, store)
    execute(heldout, store)
    rows = s.rollout_rows([train.run_id, heldout.run_id])
    print_summary(summarize(rows, by_bin=True), "ops: by split, agent and difficulty bin")
    scored = [r for r in rows if r["status"] != "error"]
    overall = {a: sum(bool(r["accepted"]) for r in scored if r["agent"] == a) / max(1, sum(r["agent"] == a for r in scored))
               for a in AGENTS}
    errors = len(rows) - len(scored)
    console.print("acceptance over all tasks: " + ", ".join(f"{a} {overall[a]:.0%}" for a in AGENTS)
                  + f"  ({len(rows)} rollouts, {errors} errors, {time.time() - started:.0f} s)")
    checks = expectations(overall)
    for claim, ok in checks:
        console.print(f"  [{'green' if ok else 'red'}]{'PASS' if ok else 'FAIL'}[/] {claim}")
    notes = [f"{claim}: {'holds' if ok else 'FAILS'}" for claim, ok in checks]
    path = write_summary_html(summarize(rows, by_bin=True), html_path, title="gymsmith demo — ops family", notes=notes)
    console.print(f"stored in {store}; HTML summary: {path}")
    return all(ok for _, ok in checks) and errors == 0
