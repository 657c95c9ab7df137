"""The trajectory store: SQLite by default (WAL), any SQLAlchemy URL otherwise. One transaction per rollout."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, overload

from pydantic import BaseModel
from sqlalchemy import create_engine, delete, event, func, insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, DatabaseError, IntegrityError

import gymsmith
from gymsmith.core.errors import StoreError
from gymsmith.core.types import Action, EndReason, ErrorKind, Observation, Reward, RewardComponent, RolloutStatus, Step, TaskSpec, Trajectory
from gymsmith.store.migrate import migrate
from gymsmith.store.schema import (
    check_fingerprints,
    check_results,
    fingerprints,
    reward_components,
    rollouts,
    runs,
    steps,
    turns,
)
from gymsmith.store.turns import decode_turns, encode_turns, split_turn

DEFAULT_STORE = "runs/gymsmith.db"
_CHUNK = 500  # ids per IN (...) query
MAX_TEXT_CHARS = {"tool": 64, "arguments": 300_000, "error": 20_000, "end_detail": 20_000, "final_diff": 1_000_000,
                  "agent_info": 20_000, "progress_error": 2_000}  # what one field of a stored rollout may hold (docs/episodes.md)


@overload
def _text(value: str, field: str) -> str: ...
@overload
def _text(value: None, field: str) -> None: ...
def _text(value: str | None, field: str) -> str | None:
    """`value` as any SQL backend stores it: valid Unicode, no NUL byte (PostgreSQL refuses one), and at most the
    field's cap in characters, counted after the escapes and with the note of a cut inside it: escaping makes text
    longer (a NUL becomes 4 characters, a lone surrogate 6), so a value within the cap before it could pass a bounded
    column after it, and PostgreSQL refused the rollout (a hundred-and-thirty-fourth attacker: a tool name of 20 NULs
    kept a model's failing samples out of the store and stopped the run)."""
    if value is None:
        return None
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    limit = MAX_TEXT_CHARS[field]
    if len(value) <= limit:
        return value
    note = f"\n[... {len(value)} characters, cut by the store]"
    return (value[:max(0, limit - len(note))] + note)[:limit]


def _json(value: object, field: str) -> str:
    try:
        text = json.dumps(value, default=repr)
    except (ValueError, TypeError, RecursionError) as exc:
        text = json.dumps({"unserialisable": f"{type(exc).__name__}"})
    return _text(text, field)


def store_url(location: str | Path) -> str:
    """A SQLAlchemy URL for `location`: a URL is kept, a plain path becomes a SQLite file URL."""
    raw = str(location)
    if raw.startswith(("postgresql://", "postgres://")):  # use psycopg 3 (the `postgres` extra), not psycopg2
        return "postgresql+psycopg://" + raw.split("://", 1)[1]
    if "://" in raw:
        return raw
    if raw == ":memory:":  # SQLite's name for an in-memory database (sqlite_file agrees), never a file of that name
        return "sqlite://"
    path = Path(raw).expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def sqlite_file(location: str | Path) -> Path | None:
    """The file of a SQLite store at `location` (None for another database, or an in-memory one)."""
    raw = str(location)
    if raw.startswith("sqlite:///"):
        rest = raw.removeprefix("sqlite:///")
        return None if rest in ("", ":memory:") else Path(rest)
    return None if "://" in raw or raw == ":memory:" else Path(raw).expanduser()


class RunInfo(BaseModel):
    run_id: str
    created_at: float
    purpose: str
    package_version: str
    rollouts: int
    errors: int


class TrajectoryStore:
    """Stores trajectories; safe for several writer processes on one SQLite file (WAL, busy timeout)."""

    def __init__(self, location: str | Path = DEFAULT_STORE, *, create: bool = True):
        """Open (with `create`, make when missing) the store at `location`. Without `create`, a SQLite file that
        does not exist is refused rather than made empty (a mistyped path must not look like an empty store).
        Raises StoreError naming the location: no such file, not a database, or not a database URL."""
        path = sqlite_file(location)
        if not create and path is not None and not path.exists():
            raise StoreError(f"no such store file {str(location)!r}; expected an existing store (the default is "
                             f"{DEFAULT_STORE}, made by gymsmith run, eval or check)")
        url = store_url(location)
        try:
            self.engine: Engine = create_engine(url, future=True, pool_pre_ping=True)
        except (ArgumentError, ImportError) as exc:
            raise StoreError(f"cannot open store {location!r}: {exc}; expected a file path or a database URL "
                             "such as sqlite:///runs/gymsmith.db") from None
        if self.engine.dialect.name == "sqlite":
            event.listen(self.engine, "connect", _sqlite_pragmas)
        try:
            migrate(self.engine)
        except DatabaseError as exc:  # also a file that is not a database (SQLite: "file is not a database")
            raise StoreError(f"cannot open store {location!r}: {exc.orig}") from None
        self.location = url

    @property
    def shared_location(self) -> str | None:
        """A URL another process on this machine can open to write into this same store; None for in-memory SQLite.

        Worker processes write their own rollouts through it (see `gymsmith.runner.run`)."""
        if self.engine.dialect.name == "sqlite" and self.engine.url.database in (None, "", ":memory:"):
            return None
        return self.location

    # -- writing --------------------------------------------------------------------------------
    def create_run(self, run_id: str, *, purpose: str, config: dict[str, Any]) -> bool:
        """Record a run; returns False if it already exists (a resume). Raises StoreError on a purpose clash."""
        with self.engine.begin() as conn:
            existing = conn.execute(select(runs.c.purpose).where(runs.c.run_id == run_id)).scalar()
            if existing is not None:
                if existing != purpose:
                    raise StoreError(f"run {run_id!r} exists as a {existing} run; cannot reuse it for {purpose}")
                return False
            conn.execute(insert(runs).values(run_id=run_id, created_at=time.time(), purpose=purpose,
                                             package_version=gymsmith.__version__, config=json.dumps(config, sort_keys=True)))
        return True

    def add(self, t: Trajectory, task: TaskSpec) -> bool:
        """Write one finished rollout with its steps and components in a single transaction.

        Returns False (and writes nothing) if this rollout id is already stored, unless it is stored as an
        infrastructure error (status 'error'): a retried rollout then replaces it, in the same transaction
        (`RunConfig.retry_errors`).
        """
        rows = _Rows.of(t, task, {})
        try:
            with self.engine.begin() as conn:
                rows.write(conn)
        except IntegrityError:
            return self._replace_error(t.rollout_id, rows.write)
        return True

    def add_many(self, items: Sequence[tuple[Trajectory, TaskSpec]]) -> list[bool | Exception]:
        """`add` for each (trajectory, task) of `items`, all in one transaction when none of them is stored yet
        and all can be (rollouts that end together: one statement per table instead of one per rollout and table).
        Otherwise nothing of that transaction is kept and each is written as `add` writes it, in a transaction of
        its own, so that a rollout that cannot be stored fails alone. Returns, in order, what `add` returned for
        each, or the exception it raised."""
        tasks: dict[str, str] = {}  # a task's JSON once per batch (a group's samples share their task)
        try:
            rows = [_Rows.of(t, task, tasks) for t, task in items]
            with self.engine.begin() as conn:
                _Rows.write_all(conn, rows)
        except Exception:  # noqa: BLE001 - stored already (a resume, a retry), or one cannot be stored: each alone
            return [self._add_or_failure(t, task) for t, task in items]
        return [True] * len(items)

    def _add_or_failure(self, t: Trajectory, task: TaskSpec) -> bool | Exception:
        try:
            return self.add(t, task)
        except Exception as exc:  # noqa: BLE001 - returned to its own caller: the rest of the batch is not its
            return exc

    def _replace_error(self, rollout_id: str, write) -> bool:
        """Replace the stored rollout `rollout_id` by what `write(conn)` inserts, in one transaction, if it is stored
        as an infrastructure error (a retry's result supersedes the error; nothing else is ever overwritten)."""
        try:
            with self.engine.begin() as conn:
                status = conn.execute(select(rollouts.c.status).where(rollouts.c.rollout_id == rollout_id)).scalar()
                if status != RolloutStatus.ERROR:
                    return False
                for table in (turns, steps, reward_components, rollouts):
                    conn.execute(delete(table).where(table.c.rollout_id == rollout_id))
                write(conn)
        except IntegrityError:  # another writer replaced it at the same moment
            return False
        return True

    # -- reading --------------------------------------------------------------------------------
    def completed_keys(self, run_id: str, *, errors: bool = True) -> set[tuple[str, str, int]]:
        """(task_id, agent, seed) of every rollout of `run_id` already stored; without `errors`, leaving out those
        stored as infrastructure errors (to run them again)."""
        query = select(rollouts.c.task_id, rollouts.c.agent, rollouts.c.seed).where(rollouts.c.run_id == run_id)
        if not errors:
            query = query.where(rollouts.c.status != RolloutStatus.ERROR.value)
        with self.engine.connect() as conn:
            return {tuple(r) for r in conn.execute(query)}

    def stored_ids(self, rollout_ids: Iterable[str]) -> set[str]:
        """Those of `rollout_ids` that are stored."""
        ids = list(rollout_ids)
        if not ids:
            return set()
        with self.engine.connect() as conn:
            return set(conn.execute(select(rollouts.c.rollout_id).where(rollouts.c.rollout_id.in_(ids))).scalars())

    def runs(self) -> list[RunInfo]:
        with self.engine.connect() as conn:
            counts = {r.run_id: (r.n, r.errors) for r in conn.execute(
                select(rollouts.c.run_id, func.count().label("n"),
                       func.sum((rollouts.c.status == RolloutStatus.ERROR.value).cast(type_=rollouts.c.n_steps.type)).label("errors"))
                .group_by(rollouts.c.run_id))}
            return [RunInfo(run_id=r.run_id, created_at=r.created_at, purpose=r.purpose, package_version=r.package_version,
                            rollouts=counts.get(r.run_id, (0, 0))[0], errors=int(counts.get(r.run_id, (0, 0))[1] or 0))
                    for r in conn.execute(select(runs).order_by(runs.c.created_at))]

    def run_exists(self, run_id: str) -> bool:
        with self.engine.connect() as conn:
            return conn.execute(select(runs.c.run_id).where(runs.c.run_id == run_id)).first() is not None

    def run_config(self, run_id: str) -> dict[str, Any] | None:
        """The config `run_id` was recorded with (`create_run`), as stored; None if there is no such run."""
        with self.engine.connect() as conn:
            body = conn.execute(select(runs.c.config).where(runs.c.run_id == run_id)).scalar()
        return None if body is None else json.loads(body)

    def rollout_rows(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Flat rollout rows (no steps), optionally for some runs only."""
        query = select(rollouts).order_by(rollouts.c.run_id, rollouts.c.started_at)
        if run_ids is not None:
            query = query.where(rollouts.c.run_id.in_(list(run_ids)))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def scored_rows(self, run_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Flat rows of the rollouts that have a reward (every status but error), optionally for some runs only."""
        query = select(rollouts).where(rollouts.c.status != RolloutStatus.ERROR.value)
        if run_ids:
            query = query.where(rollouts.c.run_id.in_(list(run_ids)))
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def step_calls(self, rollout_ids: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
        """Each rollout's (tool, arguments as stored) per step, in order; rollouts without steps are left out."""
        calls: dict[str, list[tuple[str, str]]] = {}
        ids = list(rollout_ids)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                for r in conn.execute(select(steps.c.rollout_id, steps.c.tool, steps.c.arguments)
                                      .where(steps.c.rollout_id.in_(ids[start:start + _CHUNK]))
                                      .order_by(steps.c.rollout_id, steps.c.idx)):
                    calls.setdefault(r.rollout_id, []).append((r.tool, r.arguments))
        return calls

    def step_observations(self, rollout_ids: Iterable[str]) -> dict[str, list[str]]:
        """Each rollout's step observations (Observation JSON as stored), in order; rollouts without steps are left
        out (a rollout's reset observation is in its row)."""
        seen: dict[str, list[str]] = {}
        ids = list(rollout_ids)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                for r in conn.execute(select(steps.c.rollout_id, steps.c.observation)
                                      .where(steps.c.rollout_id.in_(ids[start:start + _CHUNK]))
                                      .order_by(steps.c.rollout_id, steps.c.idx)):
                    seen.setdefault(r.rollout_id, []).append(r.observation)
        return seen

    def component_sums(self, rollout_ids: Iterable[str]) -> dict[str, tuple[float, float]]:
        """Each rollout's (sum of value x weight, sum of weights) over its reward components; without any, left out."""
        sums: dict[str, tuple[float, float]] = {}
        ids = list(rollout_ids)
        with self.engine.connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                for c in conn.execute(select(reward_components.c.rollout_id, reward_components.c.value,
                                             reward_components.c.weight)
                                      .where(reward_components.c.rollout_id.in_(ids[start:start + _CHUNK]))):
                    total, weight = sums.get(c.rollout_id, (0.0, 0.0))
                    sums[c.rollout_id] = (total + c.value * c.weight, weight + c.weight)
        return sums

    # -- `gymsmith check`'s history -------------------------------------------------------------------
    def record_check(self, check_id: str, *, family: str, family_version: str, fingerprint: str,
                     outcomes: Iterable[tuple[str, bool, str, str]]) -> None:
        """Store one check of `family`: the environment fingerprint it ran on and its outcomes, each (name, passed,
        detail, status), in one transaction."""
        now = time.time()
        with self.engine.begin() as conn:
            conn.execute(insert(check_fingerprints).values(check_id=check_id, family=family, created_at=now,
                                                            fingerprint=fingerprint))
            conn.execute(insert(check_results), [dict(check_id=check_id, name=name, family=family,
                                                      family_version=family_version, created_at=now, run_id=check_id,
                                                      passed=passed, detail=detail, status=status)
                                                 for name, passed, detail, status in outcomes])

    def last_check_fingerprint(self, family: str) -> str | None:
        """The environment fingerprint the last stored check of `family` ran on (None before any)."""
        with self.engine.connect() as conn:
            return conn.execute(select(check_fingerprints.c.fingerprint).where(check_fingerprints.c.family == family)
                                .order_by(check_fingerprints.c.created_at.desc()).limit(1)).scalar()

    def check_rows(self, family: str | None = None) -> list[dict[str, Any]]:
        """Stored check results, newest first (`status` NULL in rows from before schema 9)."""
        query = select(check_results).order_by(check_results.c.created_at.desc(), check_results.c.name)
        if family:
            query = query.where(check_results.c.family == family)
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(query)]

    def trajectory(self, rollout_id: str) -> Trajectory:
        """The full stored trajectory. Raises StoreError if there is no such rollout."""
        with self.engine.connect() as conn:
            r = conn.execute(select(rollouts).where(rollouts.c.rollout_id == rollout_id)).mappings().first()
            if r is None:
                raise StoreError(f"no rollout {rollout_id!r} in {self.location}")
            step_rows = conn.execute(select(steps).where(steps.c.rollout_id == rollout_id).order_by(steps.c.idx)).mappings()
            comps = conn.execute(select(reward_components).where(reward_components.c.rollout_id == rollout_id)).mappings()
            turn_of = decode_turns(conn.execute(select(turns).where(turns.c.rollout_id == rollout_id)).mappings())
            components = {c["name"]: RewardComponent(value=c["value"], weight=c["weight"], detail=c["detail"]) for c in comps}
            trajectory_steps = [Step(index=s["idx"], action=_action(s["tool"], s["arguments"]),
                                     observation=Observation.model_validate_json(s["observation"]),
                                     duration_ms=s["duration_ms"],
                                     agent_info=_with_turn(s["agent_info"], turn_of.get(s["idx"])),
                                     progress=s["progress"], step_reward=s["step_reward"],
                                     progress_error=s["progress_error"])
                                for s in step_rows]
        reward = None
        if r["reward"] is not None:
            reward = Reward(components=components, accepted=bool(r["accepted"]), value=r["reward"], policy=r["policy"],
                            gate_failures=json.loads(r["gate_failures"]), violations=json.loads(r["violations"] or "[]"))
        return Trajectory(rollout_id=r["rollout_id"], run_id=r["run_id"], task_id=r["task_id"], family=r["family"],
                          family_version=r["family_version"], split=r["split"], difficulty=r["difficulty"], seed=r["seed"],
                          agent=r["agent"], package_version=r["package_version"],
                          reset_observation=Observation.model_validate_json(r["reset_observation"]),
                          steps=trajectory_steps, reward=reward, status=r["status"], error=r["error"],
                          error_kind=ErrorKind(r["error_kind"]) if r["error_kind"] else None,
                          end_reason=EndReason(r["end_reason"]) if r["end_reason"] else None, end_detail=r["end_detail"],
                          invalid_actions=r["invalid_actions"], final_state_hash=r["final_state_hash"],
                          fingerprint=r["fingerprint"], final_diff=r["final_diff"], start_progress=r["start_progress"],
                          group_id=r["group_id"],
                          started_at=r["started_at"], finished_at=r["finished_at"])

    def task_of(self, rollout_id: str) -> TaskSpec:
        """The TaskSpec a stored rollout ran. Raises StoreError if there is no such rollout."""
        with self.engine.connect() as conn:
            body = conn.execute(select(rollouts.c.task).where(rollouts.c.rollout_id == rollout_id)).scalar()
        if body is None:
            raise StoreError(f"no rollout {rollout_id!r} in {self.location}")
        return TaskSpec.model_validate_json(body)

    def find_task(self, task_id: str) -> TaskSpec | None:
        """A TaskSpec by id, from any stored rollout of it (None if the store has never run it)."""
        with self.engine.connect() as conn:
            body = conn.execute(select(rollouts.c.task).where(rollouts.c.task_id == task_id).limit(1)).scalar()
        return TaskSpec.model_validate_json(body) if body else None

    def record_fingerprint(self, fingerprint: dict[str, Any]) -> None:
        """Keep the full fingerprint once per digest (rollouts store only the digest)."""
        with self.engine.connect() as conn:
            if conn.execute(select(fingerprints.c.digest).where(fingerprints.c.digest == fingerprint["digest"])).first():
                return
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(fingerprints).values(digest=fingerprint["digest"], family=fingerprint["family"],
                                                         first_seen=time.time(), body=json.dumps(fingerprint)))
        except IntegrityError:  # another writer stored it first
            pass

    def fingerprint(self, digest: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            body = conn.execute(select(fingerprints.c.body).where(fingerprints.c.digest == digest)).scalar()
        return json.loads(body) if body else None

    def close(self) -> None:
        self.engine.dispose()


def _with_turn(agent_info: str | None, turn: dict[str, Any] | None) -> dict[str, Any] | None:
    """A stored step's agent_info with its turn (kept in the `turns` table) put back."""
    info = json.loads(agent_info) if agent_info else None
    if turn is not None:
        info = {**(info or {}), "turn": turn}
    return info


def _action(tool: str, arguments: str) -> Action:
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError:
        return Action(tool=tool, arguments=arguments)  # malformed JSON from the agent, kept verbatim
    return Action(tool=tool, arguments=parsed if isinstance(parsed, dict) else arguments)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.execute("PRAGMA busy_timeout=30000")
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class _Rows:
    """The rows one trajectory is stored as, in every table, ready to insert."""

    def __init__(self, rollout: dict[str, Any], steps: list[dict[str, Any]], components: list[dict[str, Any]],
                 turns: list[dict[str, Any]]):
        self.rollout, self.steps, self.components, self.turns = rollout, steps, components, turns

    @classmethod
    def of(cls, t: Trajectory, task: TaskSpec, tasks: dict[str, str]) -> "_Rows":
        """`t`'s rows; `tasks` caches task JSON by task id across the rows of one batch."""
        reward = t.reward
        if task.id not in tasks:
            tasks[task.id] = task.model_dump_json()
        task_json = tasks[task.id]
        row = dict(rollout_id=t.rollout_id, run_id=t.run_id, task_id=t.task_id, family=t.family,
                   family_version=t.family_version, split=t.split.value, difficulty=t.difficulty, agent=t.agent,
                   seed=t.seed, status=t.status.value, reward=reward.value if reward else None,
                   end_reason=t.end_reason.value if t.end_reason else None, end_detail=_text(t.end_detail, "end_detail"),
                   accepted=reward.accepted if reward else None, policy=reward.policy if reward else None,
                   n_steps=len(t.steps), invalid_actions=t.invalid_actions, final_state_hash=t.final_state_hash,
                   fingerprint=t.fingerprint,
                   error=_text(t.error, "error"), error_kind=t.error_kind.value if t.error_kind else None,
                   package_version=t.package_version, started_at=t.started_at,
                   finished_at=t.finished_at, task=task_json,
                   reset_observation=t.reset_observation.model_dump_json(),
                   gate_failures=json.dumps(reward.gate_failures if reward else []),
                   violations=json.dumps(reward.violations if reward else []), final_diff=_text(t.final_diff, "final_diff"),
                   start_progress=t.start_progress, group_id=t.group_id)
        step_rows = [dict(rollout_id=t.rollout_id, idx=s.index, tool=_text(s.action.tool, "tool"),
                          arguments=_text(s.action.arguments_text(), "arguments"),
                          observation=s.observation.model_dump_json(),
                          error_kind=s.observation.error.kind.value if s.observation.error else None,
                          duration_ms=s.duration_ms,
                          agent_info=_json(split_turn(s.agent_info)[0], "agent_info") if s.agent_info is not None else None,
                          progress=s.progress, step_reward=s.step_reward,
                          progress_error=_text(s.progress_error, "progress_error")) for s in t.steps]
        comp_rows = [dict(rollout_id=t.rollout_id, name=n, value=c.value, weight=c.weight, detail=c.detail)
                     for n, c in (reward.components.items() if reward else ())]
        return cls(row, step_rows, comp_rows, encode_turns(t.rollout_id, t.steps))

    def write(self, conn) -> None:
        _Rows.write_all(conn, [self])

    @staticmethod
    def write_all(conn, batch: Sequence[_Rows]) -> None:
        conn.execute(insert(rollouts), [r.rollout for r in batch])
        for table, field in ((steps, "steps"), (reward_components, "components"), (turns, "turns")):
            table_rows = [row for r in batch for row in getattr(r, field)]
            if table_rows:
                conn.execute(insert(table), table_rows)
