"""Trajectory diversity: do rollouts of the same task explore, or collapse onto a few paths?

A path is the rollout's sequence of tool names with their arguments normalised (numbers and strings
replaced by their type), so two rollouts that do the same thing to different records count as one
path. Final states are compared by their state hash.

`diversity` looks within each task (do rollouts of one task explore?); `diversity_by_kind` looks across the tasks
of each goal kind (does a family give a policy more than one corridor to memorise?), and for browser
observations counts the distinct page structures met (`page_structure`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter, defaultdict
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pydantic import BaseModel

from gymsmith.store.sql import TrajectoryStore

COLLAPSE_SHARE = 0.8  # warn when the most common path takes at least this share of a task's rollouts
MIN_ROLLOUTS = 4      # fewer rollouts of a task say nothing about its diversity
MAX_REPEAT = 4        # a page's repeated run of up to this many elements (a list's rows) counts as one
_DIGITS = re.compile(r"\d+")


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


class KindDiversityRow(BaseModel):
    """One family, agent and goal kind (the task metadata's ``kind``; ``-`` for a family without kinds)."""

    family: str
    agent: str
    kind: str
    tasks: int
    rollouts: int
    distinct_paths: int  # normalised tool-call sequences across all the kind's rollouts
    mean_distinct_final_states: float | None  # per task with at least two rollouts; None without such a task
    distinct_page_structures: int | None  # pages met (browser observations only); None without any


def _collapse_repeats(tokens: list[str]) -> list[str]:
    """Drop each immediate repeat of a run of up to MAX_REPEAT tokens, so a list of 3 rows and one of 30 match."""
    out: list[str] = []
    for token in tokens:
        out.append(token)
        for k in range(1, MAX_REPEAT + 1):
            if len(out) >= 2 * k and out[-k:] == out[-2 * k:-k]:
                del out[-k:]
                break
    return out


def page_structure(observation_json: str) -> str | None:
    """A digest of the page an observation shows, or None if it shows no page (no ``url`` and ``elements`` data).

    The structure is the URL's path and query keys, then each interactive element's role, form name and label
    (a link: its target's path), digits masked and repeated runs (a list's rows) collapsed: two pages differ in
    structure when their layout, labels, order or navigation differ, not when only their records do.
    """
    try:
        data = json.loads(observation_json).get("data") or {}
    except (json.JSONDecodeError, AttributeError):
        return None
    url, elements = data.get("url"), data.get("elements")
    if not isinstance(url, str) or not isinstance(elements, list):
        return None
    parts = urlsplit(url)
    tokens = [_DIGITS.sub("#", parts.path) + "?" + "&".join(sorted({k for k, _ in parse_qsl(parts.query)}))]
    for e in elements:
        if not isinstance(e, dict):
            continue
        if e.get("role") == "link":
            tokens.append("link " + _DIGITS.sub("#", urlsplit(str(e.get("href", ""))).path))
        else:
            tokens.append(_DIGITS.sub("#", f"{e.get('role')} {e.get('name', '')} {e.get('label', '')}"))
    body = "\n".join(_collapse_repeats(tokens))
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def _kind_of(task_json: str) -> str:
    try:
        kind = json.loads(task_json).get("metadata", {}).get("kind")
    except (json.JSONDecodeError, AttributeError):
        return "-"
    return str(kind) if kind else "-"


def diversity_by_kind(store: TrajectoryStore, run_ids: list[str] | None = None) -> list[KindDiversityRow]:
    """Per family, agent and goal kind: distinct tool-call paths across the kind's rollouts, distinct final states
    per task (tasks run more than once), and distinct page structures met (browser families)."""
    meta = store.scored_rows(run_ids)
    ids = [m["rollout_id"] for m in meta]
    calls = store.step_calls(ids)
    observations = store.step_observations(ids)
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for m in meta:
        groups[(m["family"], m["agent"], _kind_of(m["task"]))].append(m)
    out = []
    for (family, agent, kind), rows in sorted(groups.items()):
        paths = {" > ".join(normalised_call(t, a) for t, a in calls.get(m["rollout_id"], ())) for m in rows}
        finals: dict[str, set[str | None]] = defaultdict(set)
        runs_of: Counter = Counter()
        pages: set[str] = set()
        for m in rows:
            finals[m["task_id"]].add(m["final_state_hash"])
            runs_of[m["task_id"]] += 1
            for seen in (m["reset_observation"], *observations.get(m["rollout_id"], ())):
                if (page := page_structure(seen)) is not None:
                    pages.add(page)
        repeated = [len(finals[t]) for t, n in runs_of.items() if n >= 2]
        out.append(KindDiversityRow(family=family, agent=agent, kind=kind, tasks=len(runs_of), rollouts=len(rows),
                                    distinct_paths=len(paths),
                                    mean_distinct_final_states=round(sum(repeated) / len(repeated), 3) if repeated
                                    else None,
                                    distinct_page_structures=len(pages) or None))
    return out
