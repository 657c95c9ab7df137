"""The store owns its schema: which version a database is at, and upgrades to this release's (Alembic).

Every schema change is a hand-written Alembic revision in `store/migrations/versions` (revision "sNN" is schema NN,
`schema.SCHEMA_VERSION` the newest). `migrate(engine)` brings any store up to it, keeping every row:

- a store made by this or a later schema-tracking release carries its revision in Alembic's `alembic_version`
  table; one of a *newer* release than this one is refused (StoreError), never written;
- a store made before the store used Alembic (schemas 1-10, upgraded column by column then) has no such table:
  its version is the one before the first whose column it lacks (`MARKERS`), it is stamped so, and upgraded from
  there;
- an empty database gets this release's tables at once, stamped with the newest revision (what the revisions from
  schema 1 build; a test checks that the two agree).

Several processes open one store at once (a run's workers): the upgrade runs under a lock (a lock file beside a
SQLite file; a transaction-scoped advisory lock on PostgreSQL), reads the version again under it, and every
revision is idempotent (a table or column already there is left alone).
"""

from __future__ import annotations

import fcntl
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from gymsmith.core.errors import StoreError
from gymsmith.store.schema import SCHEMA_VERSION, metadata

log = logging.getLogger(__name__)

MIGRATIONS = Path(__file__).with_name("migrations")
HEAD = f"s{SCHEMA_VERSION:02d}"
# a column each schema version added: a store made before Alembic is at the version before the first one it lacks
MARKERS = {2: ("steps", "agent_info"), 3: ("rollouts", "fingerprint"), 4: ("rollouts", "final_diff"),
           5: ("rollouts", "violations"), 6: ("rollouts", "end_reason"), 7: ("steps", "progress"),
           8: ("rollouts", "group_id"), 9: ("check_results", "status"), 10: ("rollouts", "error_kind")}
_PG_LOCK = 0x67796D73  # pg_advisory_xact_lock key for upgrades of a gymsmith store ("gyms")


def revision_version(revision: str) -> int:
    """The schema version of an Alembic revision of ours ("s07" -> 7). Raises ValueError for another name."""
    if len(revision) == 3 and revision[0] == "s" and revision[1:].isdigit():
        return int(revision[1:])
    raise ValueError(f"revision {revision!r}: expected sNN")


def schema_version(conn: Connection) -> int:
    """The schema version of the database behind `conn`: 0 when it holds no store; its Alembic revision's; for a
    store made before Alembic, the version before the first whose marker column it lacks. Raises StoreError for a revision that
    is not one of ours."""
    found = inspect(conn)
    if found.has_table("alembic_version"):
        revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        if revision is not None:
            try:
                return revision_version(revision)
            except ValueError:
                raise StoreError(f"the store's schema revision {revision!r} is not a gymsmith one (expected sNN)") from None
    if not found.has_table("runs"):
        return 0
    columns = {table: {c["name"] for c in found.get_columns(table)} for table in found.get_table_names()}
    missing = [v for v, (table, column) in MARKERS.items() if column not in columns.get(table, ())]
    return min(missing) - 1 if missing else max(MARKERS)  # the revisions are idempotent: redoing one costs nothing


def migrate(engine: Engine) -> int:
    """Upgrade the store behind `engine` to SCHEMA_VERSION; returns the version it was at (SCHEMA_VERSION when there
    was nothing to do). Raises StoreError if the store's schema is newer than this release's; database errors
    propagate."""
    with engine.connect() as conn:
        before = schema_version(conn)
    _refuse_newer(before, engine)
    if before == SCHEMA_VERSION:
        return before
    with _upgrade_lock(engine), engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK})
        before = schema_version(conn)  # again, under the lock: another process may have upgraded it meanwhile
        _refuse_newer(before, engine)
        if before == 0:
            _create(conn)
        elif before < SCHEMA_VERSION:
            _run(conn, before)
    return before


def _create(conn: Connection) -> None:
    """A new store: the tables as `schema.metadata` declares them, stamped HEAD (what the revisions from schema 1
    build, `tests/test_store_migrations.py` checks; this way is ten times faster, and stores are made often)."""
    metadata.create_all(conn)
    conn.execute(text("CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32) NOT NULL, "
                      "CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"))
    conn.execute(text("DELETE FROM alembic_version"))
    conn.execute(text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": HEAD})


def _refuse_newer(version: int, engine: Engine) -> None:
    if version > SCHEMA_VERSION:
        raise StoreError(f"the store at {engine.url.render_as_string(hide_password=True)} has schema {version}, newer "
                         f"than this gymsmith's {SCHEMA_VERSION}; open it with the release that wrote it, or a later one")


def _run(conn: Connection, before: int) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    if before > 0 and not inspect(conn).has_table("alembic_version"):
        command.stamp(config, f"s{before:02d}")  # a store from before Alembic: at the version its columns say
    log.info("upgrading the store from schema %s to %s", before, SCHEMA_VERSION)
    command.upgrade(config, HEAD)


@contextmanager
def _upgrade_lock(engine: Engine) -> Iterator[None]:
    """Exclusive among processes upgrading one SQLite file (a lock file beside it); PostgreSQL locks in `migrate`."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        yield
        return
    with open(Path(database).with_name(Path(database).name + ".upgrade-lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
