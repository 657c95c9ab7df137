"""A family's world as one SQLite database: its schema, building a database from generated rows, the content
digest, the diff of two states, read-only snapshots and the cache of pristine images.

The ops back office and the web site are both such worlds; a new family whose state is a database declares
its tables once (`SqliteWorld`) and gets these for free, the same way in every family (before, each family
had its own copy, and the two digests used different algorithms).

A state's identity is its content, not its file: `digest` hashes every table's rows in primary-key order, so
two databases with the same rows have the same digest whatever their page layout, and `diff` compares rows
by primary key.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from gymsmith.core.hashing import canonical_json

Rows = Mapping[str, Sequence[Mapping[str, Any]]]  # table -> rows (column -> value)
Diff = dict[str, dict[str, list]]  # table -> {"added": [row], "removed": [row], "changed": [(old, new)]}
Contents = dict[str, tuple[tuple[str, ...], tuple[tuple, ...]]]  # table -> (column names, rows in primary-key order)


class SqliteWorld:
    """The schema of a family's database. `tables`: name -> column definitions (the body of CREATE TABLE), in
    the order they are created, digested and diffed; `indexes`: CREATE INDEX statements; `primary_keys`: the
    key columns of tables whose key is not `id`; `not_diffed`: tables `diff` leaves out (e.g. a call log that
    the checks read another way)."""

    def __init__(self, tables: Mapping[str, str], *, indexes: Iterable[str] = (),
                 primary_keys: Mapping[str, tuple[str, ...]] | None = None, not_diffed: Iterable[str] = ()):
        self.tables = dict(tables)
        self.indexes = tuple(indexes)
        self.primary_keys = dict(primary_keys or {})
        self.not_diffed = frozenset(not_diffed)
        unknown = (set(self.primary_keys) | self.not_diffed) - set(self.tables)
        if unknown:
            raise ValueError(f"tables {sorted(unknown)} are not in the schema; expected some of {sorted(self.tables)}")
        # a pristine image is read once per process: every verification of its task diffs against it
        self.image_contents = lru_cache(maxsize=256)(self._image_contents)

    def primary_key(self, table: str) -> tuple[str, ...]:
        return self.primary_keys.get(table, ("id",))

    def create(self, rows: Rows) -> sqlite3.Connection:
        """A new in-memory database holding `rows`; a column a row leaves out is NULL, a key no column has is
        ignored. Raises KeyError naming an unknown table."""
        unknown = sorted(set(rows) - set(self.tables))
        if unknown:
            raise KeyError(f"unknown tables {unknown}; expected some of {sorted(self.tables)}")
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=MEMORY")
        conn.execute("BEGIN")
        for table, ddl in self.tables.items():
            conn.execute(f"CREATE TABLE {table} ({ddl})")
        for statement in self.indexes:
            conn.execute(statement)
        for table, table_rows in rows.items():
            if not table_rows:
                continue
            names = [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]
            conn.executemany(f"INSERT INTO {table} ({','.join(names)}) VALUES ({','.join('?' for _ in names)})",
                             [tuple(r.get(n) for n in names) for r in table_rows])
        conn.execute("COMMIT")
        return conn

    def dump(self, conn: sqlite3.Connection) -> dict[str, list[tuple]]:
        """Every table's rows in primary-key order: the canonical content of a state."""
        return {table: conn.execute(f"SELECT * FROM {table} ORDER BY {', '.join(self.primary_key(table))}").fetchall()
                for table in self.tables}

    def digest(self, conn: sqlite3.Connection) -> str:
        """Content hash of the database, independent of its page layout (equal rows, equal digest)."""
        h = hashlib.sha256()
        for table, rows in self.dump(conn).items():
            h.update(table.encode())
            h.update(json.dumps(rows, separators=(",", ":")).encode())
        return h.hexdigest()[:32]

    def rows(self, conn: sqlite3.Connection, table: str) -> dict[tuple, dict[str, Any]]:
        """{primary key tuple: row} of one table."""
        cur = conn.execute(f"SELECT * FROM {table}")
        return self.keyed(table, tuple(c[0] for c in cur.description), cur.fetchall())

    def keyed(self, table: str, names: Sequence[str], rows: Iterable[tuple]) -> dict[tuple, dict[str, Any]]:
        """{primary key tuple: row} of `table` from its column names and rows (e.g. one of `contents`)."""
        at = [list(names).index(k) for k in self.primary_key(table)]
        return {tuple(r[i] for i in at): dict(zip(names, r)) for r in rows}

    def contents(self, conn: sqlite3.Connection) -> Contents:
        """Every table's column names and rows in primary-key order, read once for `diff_contents` and `same`."""
        out: Contents = {}
        for table in self.tables:
            cur = conn.execute(f"SELECT * FROM {table} ORDER BY {', '.join(self.primary_key(table))}")
            out[table] = (tuple(c[0] for c in cur.description), tuple(cur.fetchall()))
        return out

    def _image_contents(self, image: bytes) -> Contents:
        conn = load_image(image)
        try:
            return self.contents(conn)
        finally:
            conn.close()

    @staticmethod
    def same(a: Contents, b: Contents) -> bool:
        """Whether two states hold the same rows, values of the same types (1, 1.0 and '1' differ), as `digest`
        tells them apart."""
        return a == b and repr(a) == repr(b)

    def diff(self, before: sqlite3.Connection, after: sqlite3.Connection) -> Diff:
        """Per table that differs (but `not_diffed`): rows added, removed and changed ((old, new) pairs), each in
        primary-key order."""
        return self.diff_contents(self.contents(before), self.contents(after))

    def diff_contents(self, before: Contents, after: Contents) -> Diff:
        """`diff` of two states already read (`contents`, `image_contents`)."""
        out: Diff = {}
        for table in self.tables:
            if table in self.not_diffed or before[table] == after[table]:  # the same rows: nothing to pair up
                continue
            old, new = self.keyed(table, *before[table]), self.keyed(table, *after[table])
            added = [new[k] for k in sorted(new.keys() - old.keys())]
            removed = [old[k] for k in sorted(old.keys() - new.keys())]
            changed = [(old[k], new[k]) for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]
            if added or removed or changed:
                out[table] = {"added": added, "removed": removed, "changed": changed}
        return out

    def image_cache(self, generate_rows: Callable[[int, dict[str, Any]], Rows],
                    maxsize: int = 256) -> Callable[[int, dict[str, Any]], tuple[bytes, str]]:
        """`pristine_image(seed, knobs) -> (SQLite image, digest)` for a family whose generator gives the start
        rows of a task: each task's image is built once, then served from an LRU cache of `maxsize` tasks."""
        @lru_cache(maxsize=maxsize)
        def build(seed: int, knobs_json: str) -> tuple[bytes, str]:
            conn = self.create(generate_rows(seed, json.loads(knobs_json)))
            try:
                return conn.serialize(), self.digest(conn)
            finally:
                conn.close()

        def pristine_image(seed: int, knobs: dict[str, Any]) -> tuple[bytes, str]:
            return build(seed, canonical_json(knobs))
        return pristine_image


def open_snapshot(path: str) -> sqlite3.Connection:
    """Open a final-state snapshot file read-only (the verifier never writes to it, and nothing else may)."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def load_image(image: bytes) -> sqlite3.Connection:
    """A private in-memory copy of a serialized database."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    conn.deserialize(image)
    return conn
