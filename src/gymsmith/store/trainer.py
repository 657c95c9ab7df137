"""The trainer export: stored model rollouts as token sequences a GRPO/PPO trainer reads (docs/trainers.md).

A rollout's turns (`agents.tokens.ModelTurn`, kept in the `turns` table) become one row per *segment*: the first
turn's prompt ids, then every later turn's completion ids (loss mask 1, with their logprobs) and the environment's
tokens between them (loss mask 0, logprob 0.0), read off the next prompt. A turn continues the segment when its
prompt starts with the segment's prompt and completion so far; when it does not (the context was truncated, or a
chat template renders a reply other than as it was generated), it starts a new segment, so no token is ever
attributed to the wrong side. Rollouts that ended in an infrastructure error (no reward) or whose turns lack token
ids (a server without them, a scripted agent) are left out and counted.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import select

from gymsmith.agents.tokens import full_prompts
from gymsmith.core.types import RolloutStatus
from gymsmith.store.schema import steps, turns
from gymsmith.store.sql import TrajectoryStore
from gymsmith.store.turns import decode_turns
from gymsmith.verifier.progress import check_discount, step_rewards

TRAINER_SCHEMA = pa.schema([
    ("rollout_id", pa.string()), ("run_id", pa.string()), ("task_id", pa.string()), ("agent", pa.string()),
    ("split", pa.string()), ("seed", pa.int64()), ("group_id", pa.string()), ("segment", pa.int32()),
    ("prompt_ids", pa.list_(pa.int64())), ("completion_ids", pa.list_(pa.int64())),
    ("logprobs", pa.list_(pa.float64())), ("loss_mask", pa.list_(pa.int8())),
    ("reward", pa.float64()), ("accepted", pa.bool_()), ("group_advantage", pa.float64()),
    ("start_progress", pa.float64()), ("step_rewards", pa.list_(pa.float64())),
    ("turn_ends", pa.list_(pa.int32())), ("turn_steps", pa.list_(pa.int32())), ("turn_rewards", pa.list_(pa.float64())),
    ("finish_reasons", pa.list_(pa.string())), ("messages", pa.string()),
])


@dataclass
class Segment:
    """Consecutive turns whose prompts continue each other, as one token sequence."""

    prompt_ids: list[int | None]
    completion_ids: list[int | None] = field(default_factory=list)  # the environment's tokens come from a prompt
    logprobs: list[float | None] = field(default_factory=list)
    loss_mask: list[int] = field(default_factory=list)
    turn_ends: list[int] = field(default_factory=list)  # index in completion_ids just past each turn's completion
    turn_steps: list[int] = field(default_factory=list)  # the first step of each turn
    finish_reasons: list[str | None] = field(default_factory=list)
    messages: list[dict[str, Any]] = field(default_factory=list)  # the last turn's request and reply


def segments(turn_of: dict[int, dict[str, Any]]) -> list[Segment] | None:
    """The segments of a rollout's turns (step index -> turn, as stored: prompt ids cut by `prompt_kept`), or None
    if a turn lacks prompt or completion ids."""
    out: list[Segment] = []
    order = sorted(turn_of)
    for step_idx, prompt in zip(order, full_prompts([turn_of[i] for i in order])):
        t = turn_of[step_idx]
        completion = t.get("completion_ids")
        if prompt is None or completion is None:
            return None
        current = out[-1] if out else None
        sequence = current.prompt_ids + current.completion_ids if current is not None else []
        if current is not None and prompt[:len(sequence)] == sequence:
            between = prompt[len(sequence):]  # the environment's tokens: tool results, the next turn's header
            current.completion_ids += between
            current.logprobs += [0.0] * len(between)
            current.loss_mask += [0] * len(between)
        else:
            current = Segment(prompt_ids=list(prompt))
            out.append(current)
        logprobs = t.get("logprobs")
        current.completion_ids += completion
        current.logprobs += list(logprobs) if logprobs is not None and len(logprobs) == len(completion) else [None] * len(completion)
        current.loss_mask += [1] * len(completion)
        current.turn_ends.append(len(current.completion_ids))
        current.turn_steps.append(step_idx)
        current.finish_reasons.append(t.get("finish_reason"))
        current.messages = list(t.get("messages") or []) + [t.get("reply")]
    return out


def group_advantages(rows: list[dict[str, Any]], *, eps: float = 1e-6) -> dict[str, float | None]:
    """rollout id -> (reward - group mean) / (group standard deviation + eps), over the scored rollouts of each
    group (`group_id`; rows need rollout_id, group_id, status, reward). None for a rollout without a group or
    reward; 0.0 in a group of one."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("group_id") and r["status"] != RolloutStatus.ERROR and r["reward"] is not None:
            groups[r["group_id"]].append(r)
    out: dict[str, float | None] = {r["rollout_id"]: None for r in rows}
    for members in groups.values():
        rewards = [m["reward"] for m in members]
        mean = sum(rewards) / len(rewards)
        std = math.sqrt(sum((x - mean) ** 2 for x in rewards) / len(rewards))
        for m in members:
            out[m["rollout_id"]] = (m["reward"] - mean) / (std + eps)
    return out


@dataclass
class TrainerExport:
    """What `export_trainer` wrote: rows (segments), the rollouts they came from, and the rollouts left out."""

    rows: int
    rollouts: int
    left_out_errors: int
    left_out_without_tokens: int


def export_trainer(store: TrajectoryStore, path: str | Path, *, run_ids: list[str] | None = None,
                   gamma: float | None = None) -> TrainerExport:
    """Write the trainer dataset of `run_ids` (all runs if None) to `path`: Parquet, or JSON lines when the name ends
    in .jsonl (one row per line, `TRAINER_SCHEMA`'s fields). Written under a temporary name and renamed.

    `gamma`, the trainer's discount: step rewards are gamma V(s_t) - V(s_t-1) per step and turn rewards gamma
    V(end of turn) - V(before it) per turn (`progress.step_rewards`), so that a discounted return still credits only
    the progress a rollout ends with (docs/trainers.md). Required when a rollout exported has per-step values (run
    with step rewards), as the live interfaces require it: rewards shaped for another discount pay part of the
    progress an agent undoes. Raises ValueError for another file name ending, a gamma outside (0, 1], or no gamma
    for rollouts with step values; nothing is written then."""
    path = Path(path)
    if path.suffix not in (".parquet", ".jsonl"):
        raise ValueError(f"trainer export {str(path)!r}: expected a file name ending in .parquet or .jsonl")
    if gamma is not None:
        check_discount(gamma, "--gamma")  # before anything is read: an export with no rollout is refused too
    rows = store.rollout_rows(run_ids)
    advantages = group_advantages(rows)
    scored = [r for r in rows if r["status"] != RolloutStatus.ERROR]
    turn_rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
    progress: dict[str, list[float | None]] = defaultdict(list)
    ids = [r["rollout_id"] for r in scored]
    with store.engine.connect() as conn:
        for chunk in range(0, len(ids), 500):
            part = ids[chunk:chunk + 500]
            for t in conn.execute(select(turns).where(turns.c.rollout_id.in_(part))).mappings():
                turn_rows[t["rollout_id"]].append(dict(t))
            for s in conn.execute(select(steps.c.rollout_id, steps.c.progress).where(steps.c.rollout_id.in_(part))
                                  .order_by(steps.c.rollout_id, steps.c.idx)):
                progress[s.rollout_id].append(s.progress)
    valued = sorted({r["run_id"] for r in scored if any(v is not None for v in progress[r["rollout_id"]])})
    if gamma is None and valued:
        raise ValueError(f"run {valued[0]!r} has step rewards: give the trainer's discount per step with --gamma "
                         "(gamma=; 1.0 if it does not discount): rewards shaped for another discount pay part of the "
                         "progress an agent undoes (docs/trainers.md, 'Per-step rewards')")
    discount = 1.0 if gamma is None else gamma
    records, used, without = [], 0, 0
    for r in scored:
        turn_of = decode_turns(turn_rows[r["rollout_id"]])
        parts = segments(turn_of) if turn_of else None
        if not parts:
            without += 1
            continue
        used += 1
        values = progress[r["rollout_id"]]
        rewards = step_rewards(r["start_progress"], values, discount)
        starts = sorted(turn_of)  # a turn's steps run up to the next turn's first step
        ends = dict(zip(starts, starts[1:] + [len(values)]))
        for n, seg in enumerate(parts):
            turn_rewards = [_turn_reward(r["start_progress"], values, a, ends[a], discount) for a in seg.turn_steps]
            records.append({
                "rollout_id": r["rollout_id"], "run_id": r["run_id"], "task_id": r["task_id"], "agent": r["agent"],
                "split": r["split"], "seed": r["seed"], "group_id": r["group_id"], "segment": n,
                "prompt_ids": seg.prompt_ids, "completion_ids": seg.completion_ids, "logprobs": seg.logprobs,
                "loss_mask": seg.loss_mask, "reward": r["reward"], "accepted": r["accepted"],
                "group_advantage": advantages[r["rollout_id"]], "start_progress": r["start_progress"],
                "step_rewards": rewards, "turn_ends": seg.turn_ends, "turn_steps": seg.turn_steps,
                "turn_rewards": turn_rewards, "finish_reasons": seg.finish_reasons, "messages": json.dumps(seg.messages)})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".partial")
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(records, schema=TRAINER_SCHEMA), tmp)
    else:
        with open(tmp, "w") as f:
            for rec in records:
                f.write(json.dumps(rec) + "\n")
    tmp.replace(path)
    return TrainerExport(rows=len(records), rollouts=used, left_out_errors=len(rows) - len(scored),
                         left_out_without_tokens=without)


def _turn_reward(start: float | None, values: list[float | None], first: int, end: int, gamma: float) -> float | None:
    """The reward of the turn whose steps are `first`..`end`-1: gamma V(after its last step) - V(before its first),
    the sum of its step rewards when gamma is 1; None when a value it spans is unknown (step rewards off, or not
    computed)."""
    before = start if first == 0 else values[first - 1]
    spanned = values[first:end]
    if before is None or not spanned or any(v is None for v in spanned):
        return None
    return gamma * spanned[-1] - before  # type: ignore[operator]  # checked above: none is None
