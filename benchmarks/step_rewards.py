"""What per-step rewards cost: the same rollouts with `step_rewards` off (the baseline) and on, per family.

For each family, each (task, agent) is run once to warm the caches (start state, verifier), then off and on
(in alternating order) in one process with one environment and one verifier process, so both arms see the same
caches and machine load. Prints one JSON line per family: rollouts, steps, verifications per rollout in each
arm, the time spent valuing states (`ProgressMeter.value`: state hash, snapshot, verification) per step and per
added verification, and the wall-clock difference between the arms per step (noisier: it also holds the
variance of everything else). The extra verifications are V(s0) and one per step that changed the state; a step
that changed nothing costs a state hash. Usage: python benchmarks/step_rewards.py [FAMILY ...] [--tasks N]
"""

from __future__ import annotations

import argparse
import json
import os
import time

from gymsmith.core.types import Split
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner import run_rollout
from gymsmith.verifier import progress
from gymsmith.verifier.service import VerifierService

AGENTS = {"ops": ["oracle", "greedy", "random"], "code": ["oracle", "random"], "web": ["oracle", "random"]}


class CountingVerifier(VerifierService):
    calls = 0

    def verify(self, *args, **kwargs):
        self.calls += 1
        return super().verify(*args, **kwargs)


VALUING = {"seconds": 0.0, "values": 0}
_value = progress.ProgressMeter.value


def _timed_value(self):
    t0 = time.perf_counter()
    try:
        return _value(self)
    finally:
        VALUING["seconds"] += time.perf_counter() - t0
        VALUING["values"] += 1


progress.ProgressMeter.value = _timed_value


def measure(family_name: str, tasks: int, max_steps: int) -> dict:
    family = get_family(family_name)
    env = family.make_env()
    arms = {False: {"seconds": 0.0, "steps": 0, "calls": 0}, True: {"seconds": 0.0, "steps": 0, "calls": 0}}
    rollouts = 0
    VALUING.update(seconds=0.0, values=0)
    with CountingVerifier() as verifier:
        verifier.start()
        for task in build_taskset(TaskSetSpec(family=family_name, count=tasks, base_seed=900,
                                              knobs={"difficulty": [0.2, 0.8]})):
            for agent in AGENTS.get(family_name, ["oracle", "random"]):
                if agent not in family.agents():
                    continue
                rollouts += 1
                for on in (None, *((False, True) if rollouts % 2 else (True, False))):  # None: the warm-up
                    calls, t0 = verifier.calls, time.perf_counter()
                    t = run_rollout(env=env, agent=family.agents()[agent](), task=task, split=Split.TRAIN, seed=0,
                                    run_id="bench", verifier=verifier, policy="shaped_gated", max_steps=max_steps,
                                    time_limit_s=600.0, step_rewards=bool(on))
                    if on is None:
                        continue
                    arm = arms[on]
                    arm["seconds"] += time.perf_counter() - t0
                    arm["steps"] += len(t.steps)
                    arm["calls"] += verifier.calls - calls
    env.close()
    off, on = arms[False], arms[True]
    added_calls = on["calls"] - off["calls"]
    return {"benchmark": "step_rewards", "family": family_name, "rollouts": rollouts, "steps": on["steps"],
            "steps_off": off["steps"], "verifications_per_rollout_off": round(off["calls"] / rollouts, 2),
            "verifications_per_rollout_on": round(on["calls"] / rollouts, 2),
            "seconds_off": round(off["seconds"], 2), "seconds_on": round(on["seconds"], 2),
            "valuing_ms_per_step": round(1000 * VALUING["seconds"] / max(1, on["steps"]), 1),
            "valuing_ms_per_added_verification": round(1000 * VALUING["seconds"] / max(1, added_calls), 1),
            "wall_ms_added_per_step": round(1000 * (on["seconds"] - off["seconds"]) / max(1, on["steps"]), 1),
            "load_average": round(os.getloadavg()[0], 1), "cpus": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("families", nargs="*", default=["ops", "code", "web"])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--max-steps", type=int, default=60)
    args = parser.parse_args()
    for name in args.families:
        print(json.dumps(measure(name, args.tasks, args.max_steps)), flush=True)


if __name__ == "__main__":
    main()
