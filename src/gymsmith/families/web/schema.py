"""The site's SQLite schema, built from generated rows, and the canonical digest of its content.

Passwords, sessions and confirmation tokens live in the server's memory, not here (passwords are drawn
from the OS's CSPRNG per rollout, `site.Site.load`): the database holds business state only, the same
for the same seed and the same actions, so the checks can require that nothing but the intended rows
changed and the digest never carries a secret. `audit` is part of that state: the server writes one row
per change it makes, with the account of the session that made it (`actor`, never taken from a form),
so the checks can tell who changed what, and in which order.
"""

from __future__ import annotations

import hashlib
import sqlite3
from typing import Any

TABLES: dict[str, str] = {
    "users": "id INTEGER PRIMARY KEY, username TEXT UNIQUE NOT NULL, role TEXT NOT NULL",
    "customers": "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL",
    "orders": ("id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id), placed_on TEXT NOT NULL, "
               "total_cents INTEGER NOT NULL, status TEXT NOT NULL, ship_line1 TEXT NOT NULL, ship_line2 TEXT NOT NULL, "
               "ship_city TEXT NOT NULL, ship_postcode TEXT NOT NULL, ship_country TEXT NOT NULL"),
    "order_items": "id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, product TEXT NOT NULL, quantity INTEGER NOT NULL, price_cents INTEGER NOT NULL",
    "charges": "id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, amount_cents INTEGER NOT NULL, charged_on TEXT NOT NULL, status TEXT NOT NULL",
    "refunds": ("id INTEGER PRIMARY KEY, charge_id INTEGER NOT NULL, amount_cents INTEGER NOT NULL, reason TEXT NOT NULL, "
                "created_on TEXT NOT NULL, created_by TEXT NOT NULL"),
    "tickets": "id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, subject TEXT NOT NULL, tag TEXT NOT NULL, opened_on TEXT NOT NULL, status TEXT NOT NULL",
    "messages": "id INTEGER PRIMARY KEY, ticket_id INTEGER NOT NULL, author TEXT NOT NULL, body TEXT NOT NULL, sent_on TEXT NOT NULL",
    # one row per change the server made: who (the session's account), what (an ACTIONS key), on which row, when
    "audit": "id INTEGER PRIMARY KEY, actor TEXT NOT NULL, action TEXT NOT NULL, target_id INTEGER NOT NULL, on_day TEXT NOT NULL",
}
ACTIONS = {"order.address": "orders", "charge.refund": "charges", "ticket.reply": "tickets", "ticket.close": "tickets"}  # -> target table

Rows = dict[str, list[dict[str, Any]]]


def create_database(rows: Rows) -> sqlite3.Connection:
    """An in-memory database holding `rows` ({table: [row dict, ...]}). Raises KeyError for an unknown table."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    for table, ddl in TABLES.items():
        conn.execute(f"CREATE TABLE {table} ({ddl})")
    for table, items in rows.items():
        if table not in TABLES:
            raise KeyError(f"unknown table {table!r}; expected one of {sorted(TABLES)}")
        for row in items:
            cols = ", ".join(row)
            conn.execute(f"INSERT INTO {table} ({cols}) VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    return conn


def table_rows(conn: sqlite3.Connection, table: str) -> dict[int, dict[str, Any]]:
    """{id: row} of one table."""
    cur = conn.execute(f"SELECT * FROM {table} ORDER BY id")
    names = [c[0] for c in cur.description]
    return {r[0]: dict(zip(names, r)) for r in cur.fetchall()}


def state_digest(conn: sqlite3.Connection) -> str:
    """A hash of every row of every table in id order: equal content, equal digest, whatever the file bytes."""
    h = hashlib.sha256()
    for table in TABLES:
        h.update(table.encode())
        for row in conn.execute(f"SELECT * FROM {table} ORDER BY id"):
            h.update(repr(row).encode())
    return h.hexdigest()


def diff_states(before: sqlite3.Connection, after: sqlite3.Connection) -> dict[str, dict[str, list]]:
    """Per table: rows added, removed, and changed as (old, new) pairs."""
    out: dict[str, dict[str, list]] = {}
    for table in TABLES:
        old, new = table_rows(before, table), table_rows(after, table)
        added = [new[k] for k in sorted(new.keys() - old.keys())]
        removed = [old[k] for k in sorted(old.keys() - new.keys())]
        changed = [(old[k], new[k]) for k in sorted(old.keys() & new.keys()) if old[k] != new[k]]
        if added or removed or changed:
            out[table] = {"added": added, "removed": removed, "changed": changed}
    return out
