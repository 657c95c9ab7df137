"""The site's SQLite schema (built from generated rows, digested and diffed by `envs.sqlite_world`).

Passwords, sessions and confirmation tokens live in the server's memory, not here (passwords are drawn
from the OS's CSPRNG per rollout, `site.Site.load`): the database holds business state only, the same
for the same seed and the same actions, so the checks can require that nothing but the intended rows
changed and the digest never carries a secret. `audit` is part of that state: the server writes one row
per change it makes, with the account of the session that made it (`actor`, never taken from a form),
so the checks can tell who changed what, and in which order.
"""

from __future__ import annotations

from gymsmith.envs.sqlite_world import SqliteWorld

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

WORLD = SqliteWorld(TABLES)  # building, digesting and diffing the site's database: `envs.sqlite_world`
