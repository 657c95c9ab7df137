"""The store owns its schema (issue 19 item 4): Alembic revisions from schema 1, stores of every earlier schema
upgraded in place with their rows kept, on SQLite and on a real PostgreSQL server; a store from a newer release is
refused, unchanged; processes opening one old store at once all get it upgraded."""

from __future__ import annotations

import multiprocessing
import sqlite3

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

from gymsmith.core.errors import StoreError
from gymsmith.store.migrate import MIGRATIONS, migrate, schema_version
from gymsmith.store.schema import SCHEMA_VERSION
from gymsmith.store.sql import TrajectoryStore, store_url


def _build(url: str, version: int) -> None:
    """A store at `version` as the release of that schema left it: the revisions up to it, no Alembic table."""
    engine = create_engine(store_url(url))
    with engine.begin() as conn:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        config.attributes["connection"] = conn
        command.upgrade(config, f"s{version:02d}")
        conn.execute(text("DROP TABLE alembic_version"))
    engine.dispose()


def _fill(url: str) -> None:
    """A run, a rollout, its step and a reward component, in the columns every schema has."""
    engine = create_engine(store_url(url))
    with engine.begin() as c:
        c.execute(text("INSERT INTO runs VALUES ('old', 1.0, 'train', '0.0.1', '{}')"))
        c.execute(text("INSERT INTO rollouts (rollout_id, run_id, task_id, family, family_version, split, difficulty, agent, "
                       "seed, status, reward, accepted, policy, n_steps, invalid_actions, final_state_hash, error, "
                       "package_version, started_at, finished_at, task, reset_observation, gate_failures) VALUES "
                       "('r1', 'old', 't1', 'ops', '3.1.0', 'train', 0.5, 'oracle', 7, 'completed', 1.0, true, "
                       "'shaped_gated', 1, 0, 'h', NULL, '0.0.1', 1.0, 2.0, '{}', '{\"text\": \"hi\"}', '[]')"))
        c.execute(text("INSERT INTO steps (rollout_id, idx, tool, arguments, observation, error_kind, duration_ms) "
                       "VALUES ('r1', 0, 'submit', '{}', '{\"text\": \"done\"}', NULL, 1.5)"))
        c.execute(text("INSERT INTO reward_components VALUES ('r1', 'goal', 1.0, 1.0, 'all shipped')"))
    engine.dispose()


def _shape(url: str) -> dict:
    """Tables, their columns (name, nullable), primary keys, indexes and unique constraints."""
    engine = create_engine(store_url(url))
    found = inspect(engine)
    shape = {t: ({(c["name"], c["nullable"], type(c["type"]).__name__.lower()[:4]) for c in found.get_columns(t)},
                 tuple(found.get_pk_constraint(t)["constrained_columns"]),
                 {(i["name"], tuple(i["column_names"])) for i in found.get_indexes(t)},
                 {tuple(u["column_names"]) for u in found.get_unique_constraints(t)})
             for t in found.get_table_names() if t != "alembic_version"}
    engine.dispose()
    return shape


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request, tmp_path):
    """A URL of an empty database of the backend: a SQLite file, or a fresh database on the session's server."""
    counter = getattr(database, "n", 0) + 1
    database.n = counter
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    server = request.getfixturevalue("postgres_url")
    name = f"migrations{counter}"
    admin = create_engine(store_url(server), isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f"DROP DATABASE IF EXISTS {name}"))
        c.execute(text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/" + name


def test_the_revisions_build_what_the_schema_declares(database, tmp_path):
    """From schema 1, the revisions build exactly the tables a new store gets from `schema.metadata`."""
    _build(database, SCHEMA_VERSION)
    TrajectoryStore(database).close()  # stamps it
    new = str(tmp_path / "new.db") if database.endswith(".db") else None
    if new is None:  # compare with a new store on the same backend
        new = database.rsplit("/", 1)[0] + "/" + database.rsplit("/", 1)[1] + "_new"
        admin = create_engine(store_url(database.rsplit("/", 1)[0] + "/postgres"), isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f"DROP DATABASE IF EXISTS {new.rsplit('/', 1)[1]}"))
            c.execute(text(f"CREATE DATABASE {new.rsplit('/', 1)[1]}"))
        admin.dispose()
    TrajectoryStore(new).close()
    assert _shape(database) == _shape(new)


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_store_of_every_earlier_schema_is_upgraded_and_keeps_its_rows(database, version):
    _build(database, version)
    _fill(database)
    engine = create_engine(store_url(database))
    with engine.connect() as c:
        assert schema_version(c) == version
    engine.dispose()
    store = TrajectoryStore(database)
    with store.engine.connect() as c:
        assert schema_version(c) == SCHEMA_VERSION
    (row,) = store.rollout_rows(["old"])
    assert (row["rollout_id"], row["reward"], row["error_kind"], row["group_id"]) == ("r1", 1.0, None, None)
    t = store.trajectory("r1")
    assert t.reward.value == 1.0 and t.reward.components["goal"].detail == "all shipped"
    assert [s.action.tool for s in t.steps] == ["submit"] and t.steps[0].progress is None
    assert store.create_run("new", purpose="train", config={})  # and it takes new runs
    store.close()


def test_a_store_from_a_newer_release_is_refused_and_left_unchanged(tmp_path):
    db = str(tmp_path / "newer.db")
    TrajectoryStore(db).close()
    with sqlite3.connect(db) as c:
        c.execute(f"UPDATE alembic_version SET version_num = 's{SCHEMA_VERSION + 1:02d}'")
        c.execute("ALTER TABLE runs ADD COLUMN from_the_future TEXT")
    before = _shape(db)
    with pytest.raises(StoreError, match=f"has schema {SCHEMA_VERSION + 1}, newer than this gymsmith's {SCHEMA_VERSION}"):
        TrajectoryStore(db)
    assert _shape(db) == before
    with sqlite3.connect(db) as c:
        c.execute("UPDATE alembic_version SET version_num = 'abc123'")
    with pytest.raises(StoreError, match="not a gymsmith one"):
        TrajectoryStore(db)


def _open(db: str) -> int:
    store = TrajectoryStore(db)
    rows = len(store.rollout_rows(["old"]))
    store.close()
    return rows


def test_processes_opening_one_old_store_at_once_all_get_it_upgraded(tmp_path):
    db = str(tmp_path / "shared.db")
    _build(db, 3)
    _fill(db)
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        assert pool.map(_open, [db] * 8) == [1] * 8
    engine = create_engine(store_url(db))
    with engine.connect() as c:
        assert schema_version(c) == SCHEMA_VERSION
    engine.dispose()


def test_opening_a_current_store_changes_nothing(tmp_path):
    db = str(tmp_path / "current.db")
    TrajectoryStore(db).close()
    engine = create_engine(store_url(db))
    assert migrate(engine) == SCHEMA_VERSION
    engine.dispose()
