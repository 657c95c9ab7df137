"""Tasks from registered repositories: validate many, and what a verification costs against a fresh pytest.

Validation (per repository): tasks for seeds 0..N-1 (difficulty spread over [0, 1]) are generated; each
distinct start state is rolled out with the oracle and the null agent through the real environment, sandbox
and verifier service. A task is *validated* when the oracle is accepted and the null agent is not. Prints one
JSON line per repository: tasks generated, distinct, validated, failures, seconds per generated task (mutant
search, cached on disk after the first run) and per validation (two rollouts with their verifications).

Cost per verification (`--compare K`): on K validated tasks, alternately, the verifier's check of the fixed
state (`families.code.checks.verify`: the affected files' call checks in the repository's warm call server)
and, as the baseline, a fresh `python -m pytest` of the package's whole suite in a new sandbox with the same
layer. One JSON line per repository with both medians and their ratio.

Usage: python benchmarks/repo_tasks.py [SPEC ...] [--tasks N] [--first-seed S] [--workers W] [--compare K]
                                      [--record FILE]
(SPECs default to every registered repository; $GYMSMITH_REPOS selects the repos dir.)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def _validate(spec: str, seeds: list[int], total: int, first: int = 0) -> dict:
    from gymsmith.agents.base import NullAgent
    from gymsmith.core.types import Split
    from gymsmith.families.code.oracle import CodeOracle
    from gymsmith.registry import get_family
    from gymsmith.runner.rollout import run_rollout
    from gymsmith.verifier import VerifierService

    family = get_family("code")
    env = family.make_env()
    out = {"generated": 0, "tasks": {}, "digests": {}, "failures": [], "generate_s": 0.0, "validate_s": 0.0, "skipped": 0}
    seen: set[str] = set()
    try:
        with VerifierService() as verifier:
            for seed in seeds:
                t0 = time.perf_counter()
                try:
                    task = family.generate(seed, source=spec, difficulty=round((seed - first) / max(1, total - 1), 4))
                except RuntimeError as exc:  # too few usable bugs for this many
                    out["skipped"] += 1
                    out["failures"].append(f"seed {seed}: {exc}")
                    continue
                out["generate_s"] += time.perf_counter() - t0
                out["generated"] += 1
                if task.start_state.digest in seen:
                    continue
                seen.add(task.start_state.digest)
                t0 = time.perf_counter()
                rewards = {}
                for agent in (CodeOracle(), NullAgent()):
                    r = run_rollout(env=env, agent=agent, task=task, split=Split.TRAIN, seed=0, run_id="bench",
                                    verifier=verifier, policy="progress_gated", max_steps=30, time_limit_s=300)
                    rewards[agent.name] = r.reward
                out["validate_s"] += time.perf_counter() - t0
                oracle, null = rewards["oracle"], rewards["null"]
                ok = oracle is not None and oracle.accepted and null is not None and not null.accepted
                out["tasks"][task.id] = ok
                out["digests"][task.id] = task.start_state.digest
                if not ok:
                    out["failures"].append(f"{task.id}: oracle {oracle and oracle.accepted} null {null and null.accepted}")
                print(f"{spec} seed {seed}: {'validated' if ok else 'FAILED'} ({len(out['tasks'])} distinct so far)",
                      file=sys.stderr, flush=True)  # progress: a cold mutant catalog takes minutes per task
    finally:
        env.close()
    return out


def _compare(spec: str, k: int) -> dict:
    from gymsmith.families.code.checks import verify
    from gymsmith.families.code.env import code_task
    from gymsmith.families.code.repo import write_tree
    from gymsmith.families.code.repotasks import load_repo
    from gymsmith.registry import get_family
    from gymsmith.verifier.pytest_runner import fresh_pytest

    repo = load_repo(spec)
    family = get_family("code")
    tests = [t for t in repo.manifest.test_files if not t.endswith("conftest.py")]
    ours, fresh = [], []
    for seed in range(k):
        task = family.generate(seed, source=spec, difficulty=0.3)
        ct = code_task(task)
        fixed = {**ct.files, **{m: ct.reference[m] for m in ct.buggy_modules}}
        with tempfile.TemporaryDirectory() as d:
            write_tree(Path(d), fixed)
            t0 = time.perf_counter()
            result = verify(task, Path(d))
            ours.append(time.perf_counter() - t0)
            assert not result.gate_failures and not result.violations, result
        t0 = time.perf_counter()
        fresh_pytest({**repo.files, "pytest.ini": "[pytest]\npythonpath = .\n"}, tests, timeout=600, runtime=repo.runtime)
        fresh.append(time.perf_counter() - t0)
    a, b = statistics.median(ours), statistics.median(fresh)
    return {"repository": spec, "arm": "cost_per_verification", "verifications": k, "call_checks_median_s": round(a, 4),
            "fresh_pytest_whole_suite_median_s": round(b, 4), "ratio_fresh_over_ours": round(b / a, 1)}


def main() -> None:
    from gymsmith.repos import list_repos

    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="*")
    ap.add_argument("--tasks", type=int, default=150)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds first-seed .. first-seed + tasks - 1 (to add "
                    "to an earlier run: difficulty is spread over [0, 1] across this run's seeds)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--compare", type=int, default=0)
    ap.add_argument("--record", help="append one JSON line per distinct task (id, validated) to this file, so that "
                    "runs over other seeds can be counted together without counting a task twice")
    args = ap.parse_args()
    specs = args.specs or [m.spec for m in list_repos()]
    totals = {"generated": 0, "distinct": 0, "validated": 0, "validate_s": 0.0}
    for spec in specs:
        started = time.perf_counter()
        seeds = list(range(args.first_seed, args.first_seed + args.tasks))
        chunks = [seeds[i::args.workers] for i in range(args.workers)]
        with ProcessPoolExecutor(args.workers) as pool:
            parts = list(pool.map(_validate, [spec] * len(chunks), chunks, [args.tasks] * len(chunks),
                                  [args.first_seed] * len(chunks)))
        tasks = {tid: ok for p in parts for tid, ok in p["tasks"].items()}
        if args.record:
            with open(args.record, "a") as f:
                digests = {tid: d for p in parts for tid, d in p["digests"].items()}
                f.writelines(json.dumps({"repository": spec, "task": tid, "digest": digests[tid], "validated": ok}) + "\n"
                             for tid, ok in tasks.items())
        generated = sum(p["generated"] for p in parts)
        validate_s = sum(p["validate_s"] for p in parts)
        row = {"repository": spec, "arm": "validation", "seeds": args.tasks, "first_seed": args.first_seed, "generated": generated,
               "distinct": len(tasks), "validated": sum(tasks.values()), "skipped": sum(p["skipped"] for p in parts),
               "generate_s_per_task": round(sum(p["generate_s"] for p in parts) / max(1, generated), 3),
               "validate_s_per_task": round(validate_s / max(1, len(tasks)), 3),
               "wall_s": round(time.perf_counter() - started, 1),
               "failures": [f for p in parts for f in p["failures"]][:5]}
        print(json.dumps(row), flush=True)
        totals["generated"] += generated
        totals["distinct"] += len(tasks)
        totals["validated"] += row["validated"]
        totals["validate_s"] += validate_s
        if args.compare:
            print(json.dumps(_compare(spec, args.compare)), flush=True)
    print(json.dumps({"arm": "total", "repositories": len(specs), **totals,
                      "validate_s_per_task": round(totals["validate_s"] / max(1, totals["distinct"]), 3)}), flush=True)


if __name__ == "__main__":
    main()
