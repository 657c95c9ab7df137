"""Scale-out, each against a baseline in the same run; one JSON line per comparison.

1. workers: the same rollouts with 2 workers versus 1, on the local process pool and on Ray (ops), and on
   the local pool for code rollouts (sandboxed commands and verification: heavier, more of it outside Python).
   Runs as `gymsmith run` does (collect=False: the workers store their rollouts, nothing is kept in memory).
   The timings include starting the workers, which rebuild each task's start state on first use.
   1 and 2 workers alternate, three times each; the medians and each pair's ratio are reported.
2. ray_vs_local: the same rollouts on Ray (2 actors) versus the local pool (2 processes), each pair run back to
   back: with fresh actors for every run (`run_on_ray`, what one `gymsmith run --backend ray` does), and with
   actors kept across runs (`RayRunner`, what a training loop does; its first run is reported apart).
3. store_writes: steps per second written through `TrajectoryStore.add` (one transaction per rollout)
   versus a commit per step, on SQLite and (when a server URL is given) PostgreSQL.
4. topk: the 100 best rollouts by reward out of 100,000 stored, indexed query versus reading every row.

Usage: python benchmarks/scale.py [--postgres URL]   (without a URL a temporary local server is started)
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sqlalchemy import insert, select

from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore
from gymsmith.store.schema import rollouts, steps


REPS = 3  # interleaved repetitions of each 1-versus-2 comparison; medians are reported


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def one_vs_two(label: str, run_with: Callable[[str, int], object], reps: int = REPS) -> tuple[list[float], list[float]]:
    """Wall times of `reps` runs with 1 worker and with 2, interleaved so drifting machine load hits both alike."""
    one, two = [], []
    for i in range(reps):
        one.append(_timed(lambda: run_with(f"{label}-1-{i}", 1)))
        two.append(_timed(lambda: run_with(f"{label}-2-{i}", 2)))
    return one, two


def _emit_workers(backend: str, family: str, rollouts: int, one: list[float], two: list[float]) -> None:
    m1, m2 = statistics.median(one), statistics.median(two)
    emit(benchmark="workers", backend=backend, family=family, rollouts=rollouts, reps=len(one),
         one_worker_s=round(m1, 3), two_workers_s=round(m2, 3), speedup=round(m1 / m2, 2),
         speedups=[round(a / b, 2) for a, b in zip(one, two)], target=">= 1.8x")


def code_workers(tmp: Path) -> None:
    """The same comparison on heavier rollouts: code tasks, each in a bubblewrap sandbox with a sandboxed verifier."""
    spec = TaskSetSpec(family="code", count=120, base_seed=11, knobs={"difficulty": [0.0, 1.0]})
    tasks = build_taskset(spec)
    cfg = lambda rid, n: RunConfig(run_id=rid, purpose="audit", taskset=spec, agents=["oracle", "null"],  # noqa: E731
                                   concurrency=n, processes=True)
    store = TrajectoryStore(tmp / "code-workers.db")
    run(cfg("code-warm", 1), store, tasks=tasks[:3], collect=False)
    one, two = one_vs_two("code", lambda rid, n: run(cfg(rid, n), store, tasks=tasks, collect=False))
    _emit_workers("local", "code", 2 * len(tasks), one, two)


def _emit_ray_vs_local(mode: str, local: list[float], remote: list[float], **extra) -> None:
    m_local, m_remote = statistics.median(local), statistics.median(remote)
    emit(benchmark="ray_vs_local", mode=mode, rollouts=800, reps=len(remote), local_2_processes_s=round(m_local, 3),
         ray_2_actors_s=round(m_remote, 3), slowdown=round(m_remote / m_local, 2),
         slowdowns=[round(r / lo, 2) for lo, r in zip(local, remote)], target="<= 1.3x", **extra)


def runners(tmp: Path) -> None:
    from gymsmith.runner.ray_backend import RayRunner, run_on_ray
    import ray

    tasks = build_taskset(TaskSetSpec(family="ops", count=400, base_seed=9))
    cfg = lambda rid, n: RunConfig(run_id=rid, taskset=TaskSetSpec(family="ops", count=400), agents=["greedy", "oracle"],  # noqa: E731
                                   concurrency=n, processes=True)  # 1 worker process versus 2: the same architecture
    store = TrajectoryStore(tmp / "runners.db")
    local = lambda rid, n: run(cfg(rid, n), store, tasks=tasks, collect=False)  # noqa: E731
    run(cfg("warm", 1), store, tasks=tasks[:5], collect=False)  # imports, caches, verifier start-up out of the way
    local1, local2 = one_vs_two("local", local)
    _emit_workers("local", "ops", 800, local1, local2)
    code_workers(tmp)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        run_on_ray(cfg("ray-warm", 2), store, tasks=tasks[:5], collect=False)
        fresh = lambda rid, n: run_on_ray(cfg(rid, n), store, tasks=tasks, collect=False)  # noqa: E731
        ray1, ray2 = one_vs_two("ray", fresh)
        _emit_workers("ray", "ops", 800, ray1, ray2)
        # Ray against the local pool, each pair run back to back. Fresh actors: what one `gymsmith run
        # --backend ray` pays (new processes importing Ray and gymsmith, every start state rebuilt there).
        cold_local, cold_ray = [], []
        for i in range(REPS):
            cold_local.append(_timed(lambda: local(f"cl-{i}", 2)))
            cold_ray.append(_timed(lambda: fresh(f"cr-{i}", 2)))
        _emit_ray_vs_local("fresh_actors_each_run", cold_local, cold_ray)
        # Actors kept across runs (RayRunner): what a training loop asking for experience again and again
        # pays per run, after its first (timed apart) has started the actors and built their caches.
        with RayRunner() as runner:
            first = _timed(lambda: runner.run(cfg("kr-first", 2), store, tasks=tasks, collect=False))
            kept_local, kept_ray = [], []
            for i in range(REPS):
                kept_local.append(_timed(lambda: local(f"kl-{i}", 2)))
                kept_ray.append(_timed(lambda: runner.run(cfg(f"kr-{i}", 2), store, tasks=tasks, collect=False)))
        _emit_ray_vs_local("actors_kept_across_runs", kept_local, kept_ray, first_run_s=round(first, 3))
    finally:
        ray.shutdown()


def store_writes(location: str, label: str, tmp: Path) -> None:
    src = TrajectoryStore(tmp / f"template-{label}.db")
    [template] = run(RunConfig(run_id="t", taskset=TaskSetSpec(family="ops", count=1, base_seed=3, knobs={"difficulty": 1.0, "kind": "fulfil"}),
                               agents=["oracle"]), src)
    task_json = src.rollout_rows()[0]["task"]
    from gymsmith.core import TaskSpec

    task = TaskSpec.model_validate_json(task_json)
    store = TrajectoryStore(location)
    store.create_run(f"bench-{label}", purpose="train", config={})
    n = 200
    copies = [template.model_copy(update={"rollout_id": f"{label}-{time.time_ns()}-{i}", "run_id": f"bench-{label}",
                                          "seed": 10_000 + i}) for i in range(n)]
    ours = _timed(lambda: [store.add(t, task) for t in copies])
    n_steps = n * len(template.steps)
    # baseline: the same rows, one transaction per step (what a naive logger does)
    base_copies = [template.model_copy(update={"rollout_id": f"{label}-b-{time.time_ns()}-{i}", "run_id": f"bench-{label}",
                                               "seed": 20_000 + i}) for i in range(n // 4)]

    def per_step() -> None:
        for t in base_copies:
            empty = t.model_copy(update={"steps": []})
            store.add(empty, task)
            for s in t.steps:
                with store.engine.begin() as conn:
                    conn.execute(insert(steps).values(rollout_id=t.rollout_id, idx=s.index, tool=s.action.tool,
                                                      arguments=s.action.arguments_text(),
                                                      observation=s.observation.model_dump_json(),
                                                      error_kind=None, duration_ms=s.duration_ms))

    base = _timed(per_step)
    base_steps = len(base_copies) * len(template.steps)
    emit(benchmark="store_writes", store=label, steps_per_rollout=len(template.steps),
         steps_per_s=round(n_steps / ours), baseline_commit_per_step_steps_per_s=round(base_steps / base),
         ratio=round((n_steps / ours) / (base_steps / base), 2), target=">= 5000 steps/s on SQLite")


def topk(tmp: Path) -> None:
    store = TrajectoryStore(tmp / "topk.db")
    store.create_run("topk", purpose="train", config={})
    rng = random.Random(0)
    rows = [dict(rollout_id=f"r{i}", run_id="topk", task_id=f"t{i % 5000}", family="ops", family_version="1",
                 split="train", difficulty=rng.random(), agent="a", seed=i, status="completed", reward=rng.random(),
                 accepted=False, policy="shaped_gated", n_steps=10, invalid_actions=0, final_state_hash="h", error=None,
                 package_version="0", started_at=0.0, finished_at=0.0, task="{}", reset_observation="{}",
                 gate_failures="[]") for i in range(100_000)]
    with store.engine.begin() as conn:  # bulk-loaded: this measures the query, not the loading
        conn.execute(insert(rollouts), rows)
    query = select(rollouts.c.rollout_id, rollouts.c.reward).order_by(rollouts.c.reward.desc()).limit(100)

    def indexed():
        with store.engine.connect() as conn:
            return conn.execute(query).fetchall()

    def scan():
        with store.engine.connect() as conn:
            every = conn.execute(select(rollouts.c.rollout_id, rollouts.c.reward)).fetchall()
        return sorted(every, key=lambda r: -r[1])[:100]

    indexed()
    best = min(_timed(indexed) for _ in range(5))
    base = min(_timed(scan) for _ in range(3))
    assert [r[0] for r in indexed()] == [r[0] for r in scan()]
    emit(benchmark="topk", rollouts=100_000, k=100, query_s=round(best, 5), baseline_read_all_and_sort_s=round(base, 4),
         ratio=round(base / best, 1), target="< 0.1 s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", help="PostgreSQL URL for the store-write comparison (default: a temporary server)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        runners(tmp)
        store_writes(str(tmp / "writes.db"), "sqlite", tmp)
        if args.postgres:
            store_writes(args.postgres, "postgresql", tmp)
        else:
            from gymsmith.store.local_postgres import TemporaryPostgres

            with TemporaryPostgres() as url:
                store_writes(url, "postgresql", tmp)
        topk(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
