"""The trajectory store: round trips, duplicates, WAL, Parquet export, bad locations."""

import sqlite3

import pyarrow.parquet as pq
import pytest

from gymsmith.core import StoreError
from gymsmith.registry import TaskSetSpec
from gymsmith.runner import RunConfig, run
from gymsmith.store import PARQUET_SCHEMA, TrajectoryStore, export_parquet


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    db = tmp_path_factory.mktemp("store") / "s.db"
    store = TrajectoryStore(db)
    trajectories = run(RunConfig(run_id="s1", taskset=TaskSetSpec(family="ops", count=6), agents=["greedy", "random"]), store)
    return db, store, trajectories


def test_round_trip(filled):
    _, store, trajectories = filled
    assert len(trajectories) == 12
    for t in trajectories:
        back = store.trajectory(t.rollout_id)
        assert back.model_dump() == t.model_dump()


def test_duplicates_are_refused_and_nothing_is_lost(filled, ops):
    _, store, trajectories = filled
    t = trajectories[0]
    assert store.add(t, ops.generate(0)) is False
    assert len(store.rollout_rows(["s1"])) == 12


def test_sqlite_uses_wal(filled):
    db, _, _ = filled
    with sqlite3.connect(db) as c:
        assert c.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_parquet_export_has_the_documented_schema(filled, tmp_path):
    _, store, trajectories = filled
    out = tmp_path / "out" / "rollouts.parquet"
    assert export_parquet(store, out) == 12
    table = pq.read_table(out)
    assert table.schema.equals(PARQUET_SCHEMA)
    rows = table.to_pylist()
    by_id = {t.rollout_id: t for t in trajectories}
    for r in rows:
        t = by_id[r["rollout_id"]]
        assert len(r["steps"]) == len(t.steps) and r["reward"] == t.reward.value
        assert {c["name"] for c in r["components"]} == set(t.reward.components)
    assert not (out.parent / "rollouts.parquet.partial").exists()


def test_bad_locations(tmp_path):
    with pytest.raises(StoreError, match="cannot open store 'nosuchdb://x'"):
        TrajectoryStore("nosuchdb://x")
    with pytest.raises(StoreError, match="no rollout 'missing'"):
        TrajectoryStore(tmp_path / "e.db").trajectory("missing")


def test_run_purpose_cannot_change(tmp_path):
    store = TrajectoryStore(tmp_path / "p.db")
    assert store.create_run("r", purpose="train", config={}) is True
    assert store.create_run("r", purpose="train", config={}) is False
    with pytest.raises(StoreError, match="exists as a train run"):
        store.create_run("r", purpose="eval", config={})


def test_a_store_from_schema_1_is_upgraded_in_place(tmp_path, filled):
    """A store written before steps had `agent_info` (schema 1) and rollouts `error_kind` (schema 10) opens, gains
    the columns and keeps its rollouts."""
    db, _, _ = filled
    old = tmp_path / "old.db"
    with sqlite3.connect(db) as src, sqlite3.connect(old) as dst:
        src.backup(dst)  # a file copy would miss what is still in the WAL
    with sqlite3.connect(old) as c:
        c.execute("ALTER TABLE steps DROP COLUMN agent_info")
        c.execute("ALTER TABLE rollouts DROP COLUMN error_kind")
        c.execute("DROP TABLE alembic_version")  # stores of those schemas were made before the store used Alembic
        assert "agent_info" not in [r[1] for r in c.execute("PRAGMA table_info(steps)")]
    store = TrajectoryStore(old)
    rows = store.rollout_rows()
    assert len(rows) == 12 and all(r["error_kind"] is None for r in rows)
    with sqlite3.connect(old) as c:
        assert "agent_info" in [r[1] for r in c.execute("PRAGMA table_info(steps)")]
        assert "error_kind" in [r[1] for r in c.execute("PRAGMA table_info(rollouts)")]


def test_workers_do_not_pay_for_pyarrow_until_an_export():
    """Every worker process imports the runner and the store; pyarrow (~0.1 s) only loads for an export."""
    import subprocess
    import sys

    code = ("import sys, gymsmith.runner, gymsmith.store as s; print('pyarrow' in sys.modules); "
            "s.PARQUET_SCHEMA; print('pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


def test_the_memory_location_is_an_in_memory_store_not_a_file(tmp_path, monkeypatch):
    """`:memory:` is SQLite's name for an in-memory database; it made a file named ':memory:' in the working
    directory (and its upgrade lock) before."""
    monkeypatch.chdir(tmp_path)
    store = TrajectoryStore(":memory:")
    try:
        assert store.shared_location is None and store.rollout_rows() == []
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == []


def test_a_rollout_that_cannot_be_stored_fails_alone_in_a_batch(filled, postgres_url):
    """Rollouts that end together are written in one transaction (`add_many`); one that the database refuses (here
    an agent name past its column on PostgreSQL) must not take the others with it: an independent attacker's
    poisoned reply lost every rollout of its batch and stopped the run. Each is then written on its own; the one
    refused gets its exception back, the others are stored, and one already stored is reported as such."""
    _, _, trajectories = filled
    from gymsmith.registry import get_family

    ops = get_family("ops")
    tasks = {t.task_id: ops.generate(0) for t in trajectories}  # the task row's JSON only; any task does
    store = TrajectoryStore(postgres_url)
    store.create_run("batch", purpose="train", config={})
    batch = [t.model_copy(update={"run_id": "batch", "rollout_id": f"batch-{i}"}) for i, t in enumerate(trajectories[:4])]
    batch[1].agent = "a" * 70  # agents.name is String(64)
    assert store.add(batch[3], tasks[batch[3].task_id]) is True  # already stored before the batch
    results = store.add_many([(t, tasks[t.task_id]) for t in batch])
    assert results[0] is True and results[2] is True and results[3] is False
    assert isinstance(results[1], Exception) and "too long" in str(results[1])
    assert {r["rollout_id"] for r in store.rollout_rows(["batch"])} == {"batch-0", "batch-2", "batch-3"}
    assert store.add_many([(t, tasks[t.task_id]) for t in (batch[0], batch[2])]) == [False, False]  # a resume


# what escaping makes longer: a NUL (4 characters), a lone surrogate (6), a non-ASCII letter (up to 10)
GROWING = ["\x00", "\ud800", "é", "\U0001f600"]


def test_stored_text_fits_its_field_whatever_escaping_does():
    """Every capped text field is within its cap after the escapes, the note of a cut included, and each cap fits
    its column where the column is bounded (a hundred-and-thirty-fourth attacker: 20 NULs in a tool name became 102
    characters in a VARCHAR(64), and PostgreSQL refused the rollout)."""
    from gymsmith.store.schema import metadata
    from gymsmith.store.sql import MAX_TEXT_CHARS, _text

    bounded = {c.name: c.type.length for t in metadata.tables.values() for c in t.columns
               if c.name in MAX_TEXT_CHARS and getattr(c.type, "length", None)}
    assert bounded == {"tool": 64} and all(MAX_TEXT_CHARS[name] <= length for name, length in bounded.items())
    for field, cap in MAX_TEXT_CHARS.items():
        for ch in [*GROWING, "x"]:
            for n in (cap // 4, cap, cap + 1):
                stored = _text(ch * n, field)
                assert len(stored) <= cap and "\x00" not in stored, (field, ch, n)
                stored.encode("utf-8")  # valid Unicode
    assert _text("x" * 64, "tool") == "x" * 64 and _text("submit", "tool") == "submit"


def test_a_tool_name_that_grows_when_escaped_is_stored_on_postgresql(filled, postgres_url):
    """End to end on a real PostgreSQL server: rollouts whose tool names grow when escaped are stored, each step's
    name within its column, and read back."""
    _, _, trajectories = filled
    from gymsmith.registry import get_family

    task = get_family("ops").generate(0)
    store = TrajectoryStore(postgres_url)
    try:
        store.create_run("grow", purpose="train", config={})
        batch = []
        for i, (ch, t) in enumerate(zip(GROWING, [t for t in trajectories if t.steps])):
            t = t.model_copy(deep=True)
            t.run_id, t.rollout_id = "grow", f"grow-{i}"
            t.steps[0].action = t.steps[0].action.model_copy(update={"tool": ch * 20})
            batch.append((t, task))
        assert store.add_many(batch) == [True] * len(GROWING)
        for i, _ in enumerate(GROWING):
            back = store.trajectory(f"grow-{i}")
            assert 0 < len(back.steps[0].action.tool) <= 64
    finally:
        store.close()
