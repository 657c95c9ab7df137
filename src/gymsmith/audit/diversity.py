"""Trajectory diversity: do rollouts of the same task explore, or collapse onto a few paths?

A path is the rollout's sequence of tool names with their arguments normalised (numbers and strings
replaced by their type), so two rollouts that do the same thing to different records count as one
path. Final states are compared by their state hash.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from typing import Any

from pydantic import BaseModel

from gymsmith.store.sql import TrajectoryStore

COLLAPSE_SHARE = 0.8  # warn when the most common path takes at least this share of a task's rollouts
MIN_ROLLOUTS = 4      # fewer rollouts of a task say nothing about its diversity


class DiversityRow(BaseModel):
    family: str
    agent: str
    tasks: int
    rollouts: int
    mean_distinct_paths: float
    mean_distinct_final_states: float
    mean_path_entropy_bits: float
    collapsed_tasks: int
    warning: str | None = None


def _shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


def normalised_call(tool: str, arguments: str) -> str:
    try:
        shaped = _shape(json.loads(arguments))
    except json.JSONDecodeError:
        shaped = "malformed"
    return f"{tool}{json.dumps(shaped, sort_keys=True)}"


def entropy_bits(counts: Counter) -> float:
    total = sum(counts.values())
    return -sum(c / total * math.log2(c / total) for c in counts.values() if c)


def diversity(store: TrajectoryStore, run_ids: list[str] | None = None) -> list[DiversityRow]:
    """Per family and agent: distinct paths and final states per task, path entropy, collapsed tasks."""
    meta = store.scored_rows(run_ids)
    calls = store.step_calls(m["rollout_id"] for m in meta)
    groups: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for m in meta:
        path = " > ".join(normalised_call(tool, arguments) for tool, arguments in calls.get(m["rollout_id"], ()))
        groups[(m["family"], m["agent"])][m["task_id"]].append((path, m["final_state_hash"]))
    out = []
    for (family, agent), tasks in sorted(groups.items()):
        eligible = {t: rs for t, rs in tasks.items() if len(rs) >= MIN_ROLLOUTS}
        if not eligible:
            out.append(DiversityRow(family=family, agent=agent, tasks=len(tasks), rollouts=sum(map(len, tasks.values())),
                                    mean_distinct_paths=0, mean_distinct_final_states=0, mean_path_entropy_bits=0,
                                    collapsed_tasks=0, warning=f"fewer than {MIN_ROLLOUTS} rollouts per task: "
                                                               "run with more seeds to measure diversity"))
            continue
        distinct_paths, distinct_finals, entropies, collapsed = [], [], [], 0
        for rs in eligible.values():
            counts = Counter(p for p, _ in rs)
            distinct_paths.append(len(counts))
            distinct_finals.append(len({f for _, f in rs}))
            entropies.append(entropy_bits(counts))
            collapsed += counts.most_common(1)[0][1] / len(rs) >= COLLAPSE_SHARE
        n = len(eligible)
        warning = (f"{collapsed} of {n} tasks collapsed: one path takes >= {COLLAPSE_SHARE:.0%} of their rollouts"
                   if collapsed > n / 2 else None)
        out.append(DiversityRow(family=family, agent=agent, tasks=n, rollouts=sum(map(len, eligible.values())),
                                mean_distinct_paths=round(sum(distinct_paths) / n, 3),
                                mean_distinct_final_states=round(sum(distinct_finals) / n, 3),
                                mean_path_entropy_bits=round(sum(entropies) / n, 3), collapsed_tasks=collapsed,
                                warning=warning))
    return out
