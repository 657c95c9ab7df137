"""The ops environment: a back office in SQLite, reset from a pristine image, with seeded API faults."""

from __future__ import annotations

import json
import os
import random
import sqlite3
from pathlib import Path
from typing import Any

from gymsmith.core.errors import StaleTaskError
from gymsmith.core.types import ActionErrorKind, Observation, TaskSpec
from gymsmith.envs.base import FinalState, ToolEnvironment, error_observation, image_digest
from gymsmith.families.ops import tools
from gymsmith.families.ops.generator import generate_world
from gymsmith.families.ops.schema import WORLD

FAULT_RATE_AT_FULL_FIDELITY = 0.2  # share of calls that fail transiently when fidelity = 1


def _start_rows(seed: int, knobs: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return generate_world(seed, knobs).rows


pristine_image = WORLD.image_cache(_start_rows)  # (seed, knobs) -> (SQLite image, digest), built once per task


def _task_image(task: TaskSpec) -> bytes:
    image, digest = pristine_image(task.seed, task.knobs)
    StaleTaskError.check(task.id, task.start_state.digest, digest)
    return image


REPLICA_LAG = "served by a lagging replica: this answer may predate your latest changes; read again before acting on it"


class FaultModel:
    """Seeded back-office failures: transient errors, rate limits and stale reads.

    Draws come from a Random seeded by (task id, episode seed), so a rollout's faults are reproducible.
    Faults happen before a tool runs, so a failed call never has a partial effect.
    """

    def __init__(self, task: TaskSpec, seed: int):
        self.rate = FAULT_RATE_AT_FULL_FIDELITY * float(task.knobs.get("fidelity") or 0.0)
        self.rng = random.Random(f"faults:{task.id}:{seed}")
        self._last_reads: dict[str, Any] = {}

    def failure(self, tool: str) -> Observation | None:
        if tool == "submit" or self.rate == 0.0:
            return None
        r = self.rng.random()
        if r < self.rate * 0.6:
            return error_observation(ActionErrorKind.TRANSIENT, f"{tool}: upstream service unavailable (503); retry the call")
        if r < self.rate:
            return error_observation(ActionErrorKind.RATE_LIMITED, f"{tool}: rate limit reached (429); retry the call")
        return None

    def read(self, key: str, fresh: dict[str, Any]) -> dict[str, Any]:
        """Return `fresh`, or (sometimes) the previous answer to the same read, as a lagging replica would, marked
        as such (REPLICA_LAG): unmarked, a stale answer after the agent's own change was indistinguishable from the
        state, and an honest agent that read back its work and acted on it (one more shift where the roster read
        short, one more unit where the inventory read empty) was scored 0 for a change beyond the need on 27-57% of
        tasks at difficulty 0.5-1 (a hundred-and-eightieth attacker)."""
        stale = self._last_reads.get(key)
        self._last_reads[key] = fresh
        if stale is not None and self.rate and self.rng.random() < self.rate * 0.5:
            return {**stale, "replica_lag": REPLICA_LAG}
        return fresh


class OpsEnvironment(ToolEnvironment):
    """Reset restores the task's pristine SQLite image into one in-memory connection (a memcpy, not a rebuild)."""

    def __init__(self) -> None:
        super().__init__()
        self.conn: sqlite3.Connection | None = None
        self.task: TaskSpec | None = None
        self.faults: FaultModel | None = None

    def _reset(self, task: TaskSpec, seed: int) -> Observation:
        image = _task_image(task)
        if self.conn is None:
            self.conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.conn.deserialize(image)
        self.conn.execute("PRAGMA journal_mode=MEMORY")
        self.task, self.faults = task, FaultModel(task, seed)
        board = tools.dashboard(self.conn, task.metadata, task.difficulty)
        return Observation(text=f"{task.goal}\n\nDashboard: {json.dumps(board, sort_keys=True)}",
                           data={"goal": task.goal, "dashboard": board})

    def _call(self, name: str, arguments: dict[str, Any]) -> Observation:
        assert self.conn is not None and self.faults is not None, "reset() must be called before step()"
        failure = self.faults.failure(name)
        if failure is not None:
            return failure
        result = tools.call_tool(self.conn, name, arguments)
        if name in tools.READ_ONLY and self.faults.rate:  # a lagging replica may serve an answer from before the last writes
            result = self.faults.read(f"{name}:{json.dumps(arguments, sort_keys=True)}", result)
        return Observation(text=json.dumps(result, sort_keys=True), data=result)

    def state_hash(self) -> str:
        assert self.conn is not None, "reset() must be called first"
        return WORLD.digest(self.conn)

    def final_state(self, directory: Path) -> FinalState:
        assert self.conn is not None, "reset() must be called first"
        return FinalState(kind="sqlite", path=_write_snapshot(self.conn.serialize(), directory), digest=self.state_hash())

    # `StateImages`: the database is the whole state, and the snapshot is its serialized bytes
    def state_image(self) -> bytes:
        assert self.conn is not None, "reset() must be called first"
        return self.conn.serialize()

    def image_snapshot(self, image: bytes, directory: Path) -> FinalState:
        return FinalState(kind="sqlite", path=_write_snapshot(image, directory), digest=image_digest(image))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _write_snapshot(image: bytes, directory: Path) -> str:
    """The snapshot file of a database image, read-only, in `directory` (replacing one written there before); its
    path. Written under another name and renamed into place: a reader never sees half of it."""
    directory.mkdir(parents=True, exist_ok=True)
    path, partial = directory / "final.sqlite", directory / "final.sqlite.partial"
    partial.write_bytes(image)
    os.chmod(partial, 0o444)
    os.replace(partial, path)
    return str(path)
