"""Model-bound rollouts: the async engine against the process pool, in the same run; one JSON line per result.

A fake OpenAI-compatible endpoint of our own (`gymsmith.agents.fake_endpoint`, its own process) answers every
call after a fixed latency (0.5 s and 2 s), with scripted tool calls: each ops rollout plays the first 10
actions of its task's witness (padded with get_status) and then submits, so 11 model calls per rollout.

For each latency:
- engine: N = 256 and 1,024 ops rollouts (64 and 128 tasks x 4 and 8 episode seeds) with all N in flight
  (`max_in_flight=N`), as `gymsmith run --agents model` runs them, or at most `--in-flight` at once (the engine
  starts the next rollout as one is stored; the ideal's in-flight is then that cap);
- pool: the process pool at its largest (`concurrency=64` worker processes), on a smaller N (128 by default:
  at 64 in flight a run of 1,024 would take 16 rounds of 11 calls; the rollouts/s are comparable, the N is said).
Then the code family at 64 in flight (one sandboxed run_tests, then list_files, 11 calls).

Each line: wall seconds (from the call of `run` to its return: workers', verifiers' and tasks' start-up
included; before it, as `gymsmith run` does, one request checks the endpoint), rollouts/s, the model-bound ideal (N x calls x latency / in-flight, so `of_ideal` = ideal seconds /
seconds), the most calls the endpoint had waiting at once (`endpoint_peak_in_flight`), and the peak memory of
the process tree (this process and every descendant but the endpoint, sampled from a process of its own:
`tree_sampler.py`) as the sum of RSS and of PSS (PSS
splits pages shared by forked processes among them; RSS counts them in each). `cpu_seconds` is the CPU time
(user + system) the same tree spent in the run, `cpu_ms_per_call` that per model call, and `cpu_floor_seconds`
the least wall time that CPU allows on this machine's cores (cpu_seconds / cores). The wall time splits in
three: `start_s` (until the endpoint saw the first call: workers, verifiers, tasks), `model_phase_s` (first call
to last answer) and `tail_s` (last answer to return: the last steps, verifications and store writes): on a busy machine the wall
time says more about the other work than about the runner, the CPU time does not. The time limit per rollout
is lifted (an hour), so no rollout is cut short by a slow machine (`truncated` counts any that were). The
machine's load average is printed with each line.

Usage: python benchmarks/model_bound.py [--latencies 0.5,2] [--sizes 256,1024] [--in-flight K] [--pool-n 128]
                                         [--pool-concurrency 64] [--code-n 64] [--skip-pool] [--skip-code]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from gymsmith.agents.endpoint import check_endpoint
from gymsmith.agents.fake_endpoint import FakeEndpoint
from gymsmith.agents.model import ModelAgentConfig
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.runner import RunConfig, run
from gymsmith.store import TrajectoryStore
from tree_sampler import TreeMemory, cpu_seconds

CALLS = 10  # tool calls before submit: 11 model calls per rollout
NO_LIMIT_S = 3600.0  # per rollout: a slow machine must not cut rollouts short (fewer calls would flatter the rate)


def emit(**fields) -> None:
    fields["load_avg_1m"] = round(os.getloadavg()[0], 2)
    print(json.dumps(fields), flush=True)


def ops_tasks(n: int) -> tuple[TaskSetSpec, int, dict[str, list[dict]]]:
    """The task set for n rollouts (n/4 tasks x 4 seeds up to 256, then n/8 x 8), its seeds, and the plans."""
    seeds = 4 if n <= 256 else 8
    spec = TaskSetSpec(family="ops", count=max(1, n // seeds), split="train", base_seed=170)
    plans = {t.goal: generate_world(t.seed, t.knobs).witness[:CALLS] for t in build_taskset(spec)}
    return spec, seeds, plans


def measure(label: str, endpoint: FakeEndpoint, config: RunConfig, n: int, in_flight: int, latency: float,
            workdir: Path, **extra) -> dict:
    store = TrajectoryStore(workdir / f"{config.run_id}.db")
    check_endpoint(endpoint.base_url, "fake")  # as `gymsmith run` does before a run: outside the timed span
    endpoint.stats(reset=True)
    endpoint_cpu = -(cpu_seconds(endpoint.proc.pid) or 0.0)
    with TreeMemory(exclude=endpoint.proc.pid) as memory:
        t0, wall0 = time.perf_counter(), time.time()
        run(config, store, collect=False)
        seconds, wall1 = time.perf_counter() - t0, time.time()
    phases = endpoint.stats()
    endpoint_cpu += cpu_seconds(endpoint.proc.pid) or 0.0
    rows = store.rollout_rows([config.run_id])
    ideal = n * (CALLS + 1) * latency / in_flight
    cores = os.cpu_count() or 1
    result = dict(bench="model_bound", runner=label, family=config.taskset.family, latency_s=latency, rollouts=n,
                  in_flight=in_flight, calls_per_rollout=CALLS + 1, seconds=round(seconds, 2),
                  rollouts_per_s=round(n / seconds, 2), ideal_seconds=round(ideal, 2),
                  ideal_rollouts_per_s=round(n / ideal, 2), of_ideal=round(ideal / seconds, 3),
                  endpoint_peak_in_flight=phases["peak"],
                  start_s=round(phases["first_call_at"] - wall0, 2),
                  model_phase_s=round(phases["last_reply_at"] - phases["first_call_at"], 2),
                  tail_s=round(wall1 - phases["last_reply_at"], 2),
                  peak_rss_mib=round(memory.peak_rss), peak_pss_mib=round(memory.peak_pss),
                  peak_processes=memory.peak_processes, cpu_seconds=round(memory.cpu, 1),
                  cpu_ms_per_call=round(1000 * memory.cpu / (n * (CALLS + 1)), 2),
                  cpu_floor_seconds=round(memory.cpu / cores, 1), endpoint_cpu_seconds=round(endpoint_cpu, 1),
                  stored=len(rows), completed=sum(r["status"] == "completed" for r in rows),
                  truncated=sum(r["status"] == "truncated" for r in rows),
                  accepted=sum(bool(r["accepted"]) for r in rows), errors=sum(r["status"] == "error" for r in rows),
                  **extra)
    store.close()
    emit(**result)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latencies", default="0.5,2")
    parser.add_argument("--sizes", default="256,1024")
    parser.add_argument("--in-flight", type=int, default=None,
                        help="at most this many of the engine's rollouts in flight (default: all N at once)")
    parser.add_argument("--pool-n", type=int, default=128)
    parser.add_argument("--pool-concurrency", type=int, default=64)
    parser.add_argument("--code-n", type=int, default=64)
    parser.add_argument("--skip-pool", action="store_true")
    parser.add_argument("--skip-code", action="store_true")
    args = parser.parse_args()
    latencies = [float(x) for x in args.latencies.split(",")]
    sizes = [int(x) for x in args.sizes.split(",")]

    def in_flight(n: int) -> int:
        return min(n, args.in_flight) if args.in_flight else n

    with tempfile.TemporaryDirectory(prefix="gymsmith-model-bound-") as tmp:
        workdir = Path(tmp)
        for latency in latencies:
            plans: dict[str, list[dict]] = {}
            specs = {}
            for n in sorted(set(sizes + ([args.pool_n] if not args.skip_pool else []))):
                spec, seeds, p = ops_tasks(n)
                specs[n] = (spec, seeds)
                plans.update(p)
            with FakeEndpoint(latency_s=latency, calls=CALLS, plans=plans) as endpoint:
                model = ModelAgentConfig(base_url=endpoint.base_url, model="fake", api_key_env=None)
                engine = {}
                for n in sizes:
                    spec, seeds = specs[n]
                    config = RunConfig(run_id=f"async-{latency:g}-{n}", taskset=spec, agents=["model"], seeds=seeds,
                                       model=model, engine="async", max_in_flight=in_flight(n), time_limit_s=NO_LIMIT_S)
                    engine[n] = measure("async_engine", endpoint, config, n, in_flight(n), latency, workdir)
                if args.skip_pool:
                    continue
                spec, seeds = specs[args.pool_n]
                config = RunConfig(run_id=f"pool-{latency:g}", taskset=spec, agents=["model"], seeds=seeds, model=model,
                                   engine="pool", concurrency=args.pool_concurrency, time_limit_s=NO_LIMIT_S)
                pool = measure("process_pool", endpoint, config, args.pool_n, min(args.pool_n, args.pool_concurrency),
                               latency, workdir, note=f"the pool at its largest concurrency ({args.pool_concurrency} "
                               f"worker processes) on N={args.pool_n}, smaller than the engine's N")
                for n, result in engine.items():
                    emit(bench="model_bound", compare="async_engine_vs_process_pool", latency_s=latency,
                         async_rollouts=n, pool_rollouts=args.pool_n,
                         async_rollouts_per_s=result["rollouts_per_s"], pool_rollouts_per_s=pool["rollouts_per_s"],
                         speedup=round(result["rollouts_per_s"] / pool["rollouts_per_s"], 2),
                         async_cpu_ms_per_call=result["cpu_ms_per_call"], pool_cpu_ms_per_call=pool["cpu_ms_per_call"],
                         async_peak_pss_mib=result["peak_pss_mib"], pool_peak_pss_mib=pool["peak_pss_mib"])
        if not args.skip_code:
            code_bench(args.code_n, workdir)


def code_bench(n: int, workdir: Path, latency: float = 0.5) -> None:
    """The code family at n in flight: one sandboxed run_tests per rollout, then list_files; hidden tests verify."""
    spec = TaskSetSpec(family="code", count=max(1, n // 4), split="train", base_seed=171)
    plans = {t.goal: [{"tool": "run_tests", "arguments": {}}] for t in build_taskset(spec)}
    with FakeEndpoint(latency_s=latency, calls=CALLS, plans=plans, pad_tool="list_files") as endpoint:
        model = ModelAgentConfig(base_url=endpoint.base_url, model="fake", api_key_env=None)
        config = RunConfig(run_id=f"code-{n}", taskset=spec, agents=["model"], seeds=4, model=model, engine="async",
                           max_in_flight=n, time_limit_s=NO_LIMIT_S)
        measure("async_engine", endpoint, config, n, n, latency, workdir)


if __name__ == "__main__":
    main()
