"""Reset + 100 steps on ops: snapshot restore (ours) against a deep-copy reset, measured side by side.

Ours: the pristine SQLite image is built once per task; a reset deserializes it into the open connection.
Baseline: the way in-memory simulators commonly reset — keep the pristine state as Python objects and
`copy.deepcopy` it for every episode; to run the same tools on it, the copy is loaded into SQLite.
Both then take the same 100 steps (the greedy agent's first 100 calls on the task). `ceiling` is the
ratio a reset costing nothing would reach: above it no reset strategy can go, because the steps are
common to both arms. A second ratio compares our reset alone with `copy.deepcopy` alone
(no load), the floor any deep-copy reset pays. Prints one JSON line per (task size, comparison).
"""

from __future__ import annotations

import copy
import json
import statistics
import sys
import time

from gymsmith.core.types import Action
from gymsmith.families.ops.env import OpsEnvironment
from gymsmith.families.ops.generator import generate_world
from gymsmith.families.ops import tools
from gymsmith.families.ops.schema import WORLD
from gymsmith.registry import get_family

REPEATS = 25
STEPS = 100


def _actions(task) -> list[Action]:
    """The first 100 calls the greedy agent makes on `task` (reads and writes as a real agent mixes them),
    recorded once and replayed identically in both arms; if it stops early, its reads are repeated."""
    from gymsmith.families.ops.greedy import OpsGreedy

    env, agent = OpsEnvironment(), OpsGreedy()
    obs = env.reset(task, seed=0)
    agent.reset(task, obs, seed=0)
    out: list[Action] = []
    while len(out) < STEPS:
        action = agent.act(obs)
        if action.tool == "submit":
            break
        out.append(action)
        obs = env.step(action).observation
    reads = [a for a in out if a.tool in ("get_status", "search_records", "get_record", "check_inventory")]
    while len(out) < STEPS:
        out.append(reads[len(out) % len(reads)])
    return out


class DeepCopyEnv(OpsEnvironment):
    """The same environment, reset by deep-copying the pristine Python state and loading the copy."""

    def __init__(self, pristine_rows):
        super().__init__()
        self.pristine_rows = pristine_rows

    def _reset(self, task, seed):
        rows = copy.deepcopy(self.pristine_rows)
        if self.conn is not None:
            self.conn.close()
        self.conn = WORLD.create(rows)
        from gymsmith.families.ops.env import FaultModel

        self.task, self.faults = task, FaultModel(task, seed)
        return tools.dashboard(self.conn, task.metadata, task.difficulty)  # the same first observation as ours


def _episode(env, task, actions) -> float:
    t0 = time.perf_counter()
    env.reset(task, seed=0)
    for a in actions:
        env.step(a)
    return time.perf_counter() - t0


def _median(fn) -> float:
    fn()  # warm-up
    return statistics.median(fn() for _ in range(REPEATS))


def main() -> int:
    family = get_family("ops")
    sizes = [("small", dict(difficulty=0.2)), ("default-hard", dict(difficulty=1.0)),
             ("history-2k", dict(difficulty=1.0, distractors=2000)),
             ("history-10k", dict(difficulty=1.0, distractors=10000)),
             ("history-20k", dict(difficulty=1.0, distractors=20000))]
    for label, knobs in sizes:
        task = family.generate(1, kind="fulfil", fidelity=0.0, **{k: v for k, v in knobs.items()})
        rows = generate_world(task.seed, task.knobs).rows
        n_rows = sum(len(v) for v in rows.values())
        actions = _actions(task)
        ours, base = OpsEnvironment(), DeepCopyEnv(rows)
        t_ours = _median(lambda: _episode(ours, task, actions))
        t_base = _median(lambda: _episode(base, task, actions))

        def steps_only():
            ours.reset(task, seed=0)
            t0 = time.perf_counter()
            for a in actions:
                ours.step(a)
            return time.perf_counter() - t0

        t_steps = _median(steps_only)
        print(json.dumps({"benchmark": "ops_reset_plus_100_steps", "size": label, "rows": n_rows,
                          "ours_ms": round(t_ours * 1000, 3), "baseline_deepcopy_ms": round(t_base * 1000, 3),
                          "ratio": round(t_base / t_ours, 2), "ceiling": round(t_base / t_steps, 2),
                          "steps_ms": round(t_steps * 1000, 3), "target": ">= 10x"}), flush=True)

        def reset_ours():
            t0 = time.perf_counter()
            ours.reset(task, seed=0)
            return time.perf_counter() - t0

        def deepcopy_only():
            t0 = time.perf_counter()
            copy.deepcopy(rows)
            return time.perf_counter() - t0

        r_ours, r_copy = _median(reset_ours), _median(deepcopy_only)
        print(json.dumps({"benchmark": "ops_reset_only", "size": label, "rows": n_rows,
                          "ours_ms": round(r_ours * 1000, 4), "baseline_deepcopy_only_ms": round(r_copy * 1000, 4),
                          "ratio": round(r_copy / r_ours, 2)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
