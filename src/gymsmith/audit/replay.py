"""Replay: re-execute a stored trajectory's actions in a fresh environment and diff against what was stored."""

from __future__ import annotations

from pydantic import BaseModel

from gymsmith.registry import get_family
from gymsmith.store.sql import TrajectoryStore


class ReplayReport(BaseModel):
    rollout_id: str
    steps_compared: int
    identical: bool
    first_difference: str | None = None
    final_state_stored: str | None
    final_state_replayed: str


def replay(store: TrajectoryStore, rollout_id: str) -> ReplayReport:
    """Reset the task with the rollout's seed, send every stored action, compare each observation and the
    final state hash. Raises StoreError if the rollout is not stored, UnknownFamilyError if its family is gone."""
    stored = store.trajectory(rollout_id)
    task = store.task_of(rollout_id)
    env = get_family(task.family).make_env()
    try:
        first = env.reset(task, seed=stored.seed)
        difference = None
        if first.model_dump() != stored.reset_observation.model_dump():
            difference = _describe("reset", stored.reset_observation.model_dump_json(), first.model_dump_json())
        for step in stored.steps:
            if difference:
                break
            observation = env.step(step.action).observation
            if observation.model_dump() != step.observation.model_dump():
                difference = _describe(f"step {step.index} ({step.action.tool})", step.observation.model_dump_json(),
                                       observation.model_dump_json())
        final = env.state_hash()
    finally:
        env.close()
    if difference is None and stored.final_state_hash is not None and final != stored.final_state_hash:
        difference = _describe("final state", stored.final_state_hash, final)
    return ReplayReport(rollout_id=rollout_id, steps_compared=len(stored.steps), identical=difference is None,
                        first_difference=difference, final_state_stored=stored.final_state_hash, final_state_replayed=final)


def _describe(where: str, stored: str, replayed: str) -> str:
    return f"{where} differs:\n  stored:   {stored[:400]}\n  replayed: {replayed[:400]}"
