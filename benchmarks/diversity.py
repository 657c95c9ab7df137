"""How many corridors a family has (issue 21, "what to show"): the diversity audit across goal kinds, on the same
seeds with the family's variation off (the baseline) and on, in one run.

Arms, per family:
- web: `variation` 0 (the canonical ShopDesk on every task: the site before surface variation) against `variation`
  derived from difficulty (the default);
- ops: billing tasks without a customer (`user=none`) against billing tasks with one (`user=customer`).

Each arm runs the same task seeds (`--count` tasks, `--seeds` episode seeds each) with the oracle and the random
agent into its own store, then `gymsmith.audit.diversity.diversity_by_kind` reads it. Prints one JSON line per
(family, agent, kind): tasks and rollouts, and for each arm the distinct tool-call paths, the mean distinct final
states per task and (web) the distinct page structures met, with the ratio varied / baseline.
Usage: python benchmarks/diversity.py [web] [ops] [--count 100] [--seeds 2] [--random-steps 30] [--kind KIND]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from gymsmith.audit.diversity import KindDiversityRow, diversity_by_kind
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore

ARMS = {"web": ({"variation": 0.0}, {}), "ops": ({"kind": "billing", "user": "none"}, {"kind": "billing", "user": "customer"})}
FIGURES = ("distinct_paths", "mean_distinct_final_states", "distinct_page_structures")


def _arm(store: TrajectoryStore, family: str, knobs: dict, args: argparse.Namespace, run_id: str) -> list[KindDiversityRow]:
    base = {"difficulty": [0.0, 1.0], **({"kind": args.kind} if args.kind else {}), **knobs}
    for agent, steps in (("oracle", 300), ("random", args.random_steps)):
        t0 = time.perf_counter()
        run(RunConfig(run_id=f"{run_id}-{agent}", agents=[agent], seeds=args.seeds, max_steps=steps, concurrency=2,
                      taskset=TaskSetSpec(family=family, count=args.count, base_seed=args.base_seed,
                                          heldout_fraction=0.0, knobs=base)), store)
        print(f"# {family} {run_id} {agent}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return diversity_by_kind(store)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=["web", "ops"], choices=sorted(ARMS))
    parser.add_argument("--count", type=int, default=100, help="tasks per arm")
    parser.add_argument("--seeds", type=int, default=2, help="episode seeds per task and agent")
    parser.add_argument("--random-steps", type=int, default=30, help="the random agent's step limit")
    parser.add_argument("--base-seed", type=int, default=0)
    parser.add_argument("--kind", default=None, help="one goal kind only (ops: billing whatever is given)")
    args = parser.parse_args()
    for family in args.families:
        with tempfile.TemporaryDirectory() as tmp:
            baseline_knobs, varied_knobs = ARMS[family]
            arms = {name: {(r.agent, r.kind): r for r in _arm(TrajectoryStore(Path(tmp) / f"{name}.db"), family,
                                                                 knobs, args, name)}
                    for name, knobs in (("baseline", baseline_knobs), ("varied", varied_knobs))}
        for key in sorted(arms["baseline"].keys() | arms["varied"].keys()):
            line: dict = {"family": family, "agent": key[0], "kind": key[1]}
            for name, rows in arms.items():
                row = rows.get(key)
                line[name] = None if row is None else {"tasks": row.tasks, "rollouts": row.rollouts,
                                                        **{f: getattr(row, f) for f in FIGURES}}
            if line["baseline"] and line["varied"]:
                line["ratio"] = {f: round(line["varied"][f] / line["baseline"][f], 3) for f in FIGURES
                                 if line["baseline"][f] and line["varied"][f] is not None}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
