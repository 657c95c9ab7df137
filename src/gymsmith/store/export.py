"""Parquet export of stored rollouts: one row per rollout, steps and components nested."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import select

from gymsmith.store.schema import reward_components, steps
from gymsmith.store.sql import TrajectoryStore

STEP = pa.struct([("idx", pa.int32()), ("tool", pa.string()), ("arguments", pa.string()),
                  ("observation", pa.string()), ("error_kind", pa.string()), ("duration_ms", pa.float64()),
                  ("agent_info", pa.string()), ("progress", pa.float64()), ("step_reward", pa.float64()),
                  ("progress_error", pa.string())])
STEP_FIELDS = tuple(f.name for f in STEP)
COMPONENT = pa.struct([("name", pa.string()), ("value", pa.float64()), ("weight", pa.float64())])
SCHEMA = pa.schema([
    ("rollout_id", pa.string()), ("run_id", pa.string()), ("task_id", pa.string()), ("family", pa.string()),
    ("family_version", pa.string()), ("split", pa.string()), ("difficulty", pa.float64()), ("agent", pa.string()),
    ("seed", pa.int64()), ("status", pa.string()), ("reward", pa.float64()), ("accepted", pa.bool_()),
    ("policy", pa.string()), ("n_steps", pa.int32()), ("invalid_actions", pa.int32()),
    ("final_state_hash", pa.string()), ("fingerprint", pa.string()), ("error", pa.string()), ("end_reason", pa.string()),
    ("end_detail", pa.string()), ("package_version", pa.string()),
    ("started_at", pa.float64()), ("finished_at", pa.float64()), ("gate_failures", pa.list_(pa.string())),
    ("violations", pa.list_(pa.string())),
    ("final_diff", pa.string()), ("start_progress", pa.float64()), ("group_id", pa.string()),
    ("components", pa.list_(COMPONENT)), ("steps", pa.list_(STEP)),
])


def export_parquet(store: TrajectoryStore, path: str | Path, *, run_ids: list[str] | None = None) -> int:
    """Write the rollouts of `run_ids` (all if None) to `path`; returns the number of rows written.

    Written to a temporary file first and renamed, so an interrupted export never leaves a partial file.
    """
    rows = store.rollout_rows(run_ids)
    ids = [r["rollout_id"] for r in rows]
    by_steps: dict[str, list] = {i: [] for i in ids}
    by_comps: dict[str, list] = {i: [] for i in ids}
    with store.engine.connect() as conn:
        for chunk in range(0, len(ids), 500):
            part = ids[chunk:chunk + 500]
            for s in conn.execute(select(steps).where(steps.c.rollout_id.in_(part)).order_by(steps.c.rollout_id, steps.c.idx)).mappings():
                by_steps[s["rollout_id"]].append({k: s[k] for k in STEP_FIELDS})
            for c in conn.execute(select(reward_components).where(reward_components.c.rollout_id.in_(part))).mappings():
                by_comps[c["rollout_id"]].append({"name": c["name"], "value": c["value"], "weight": c["weight"]})
    records = []
    for r in rows:
        rec = {f.name: r.get(f.name) for f in SCHEMA if f.name not in ("gate_failures", "violations", "components", "steps")}
        rec["gate_failures"] = json.loads(r["gate_failures"])
        rec["violations"] = json.loads(r["violations"] or "[]")
        rec["components"] = by_comps[r["rollout_id"]]
        rec["steps"] = by_steps[r["rollout_id"]]
        records.append(rec)
    table = pa.Table.from_pylist(records, schema=SCHEMA)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    pq.write_table(table, tmp)
    tmp.replace(path)
    return len(records)
