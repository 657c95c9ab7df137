"""The ops back office as SQLite: its tables (building, digesting and diffing databases: `envs.sqlite_world`)."""

from __future__ import annotations

from gymsmith.envs.sqlite_world import SqliteWorld

# Days are integers on a simulated clock: day 0 is `clock.start_date`, the Monday the task begins.
# Negative days are history. Money is in integer cents. No wall-clock time appears anywhere.
TABLES: dict[str, str] = {
    "clock": "id INTEGER PRIMARY KEY CHECK (id = 1), day INTEGER NOT NULL, start_date TEXT NOT NULL",
    "budgets": "category TEXT PRIMARY KEY, limit_cents INTEGER NOT NULL, spent_cents INTEGER NOT NULL",
    "warehouses": "id INTEGER PRIMARY KEY, name TEXT NOT NULL",
    "customers": "id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT NOT NULL, card_on_file INTEGER NOT NULL",
    "products": "id INTEGER PRIMARY KEY, sku TEXT NOT NULL UNIQUE, name TEXT NOT NULL, price_cents INTEGER NOT NULL",
    "inventory": ("warehouse_id INTEGER NOT NULL, product_id INTEGER NOT NULL, on_hand INTEGER NOT NULL, "
                  "reserved INTEGER NOT NULL, PRIMARY KEY (warehouse_id, product_id)"),
    "suppliers": ("id INTEGER PRIMARY KEY, name TEXT NOT NULL, product_id INTEGER NOT NULL, "
                  "unit_cost_cents INTEGER NOT NULL, lead_days INTEGER NOT NULL, active INTEGER NOT NULL"),
    "purchase_orders": ("id INTEGER PRIMARY KEY, supplier_id INTEGER NOT NULL, product_id INTEGER NOT NULL, "
                        "warehouse_id INTEGER NOT NULL, quantity INTEGER NOT NULL, cost_cents INTEGER NOT NULL, "
                        "placed_day INTEGER NOT NULL, arrival_day INTEGER NOT NULL, status TEXT NOT NULL"),
    "orders": ("id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, product_id INTEGER NOT NULL, "
               "quantity INTEGER NOT NULL, total_cents INTEGER NOT NULL, placed_day INTEGER NOT NULL, "
               "due_day INTEGER NOT NULL, status TEXT NOT NULL, warehouse_id INTEGER, shipped_day INTEGER"),
    "payments": ("id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL, customer_id INTEGER NOT NULL, kind TEXT NOT NULL, "
                 "amount_cents INTEGER NOT NULL, day INTEGER NOT NULL, refund_of INTEGER, reason TEXT"),
    "staff": ("id INTEGER PRIMARY KEY, name TEXT NOT NULL, max_hours_week INTEGER NOT NULL, "
              "hourly_cents INTEGER NOT NULL, unavailable_days TEXT NOT NULL"),
    "shift_needs": "day INTEGER NOT NULL, warehouse_id INTEGER NOT NULL, staff_needed INTEGER NOT NULL, PRIMARY KEY (day, warehouse_id)",
    "shifts": "id INTEGER PRIMARY KEY, staff_id INTEGER NOT NULL, day INTEGER NOT NULL, warehouse_id INTEGER NOT NULL, hours INTEGER NOT NULL",
    # A billing task's customer on the line (`caller`): what they know, hidden from the agent (no tool reads it);
    # one row, or none when no one is on the line. The conversation: each message_user call's two lines.
    "caller": ("id INTEGER PRIMARY KEY CHECK (id = 1), customer_id INTEGER NOT NULL, email TEXT NOT NULL, "
               "name TEXT NOT NULL, order_id INTEGER NOT NULL, product TEXT NOT NULL, placed_date TEXT NOT NULL, "
               "amount_cents INTEGER NOT NULL, knows_order INTEGER NOT NULL, confirm INTEGER NOT NULL, voice TEXT NOT NULL"),
    "conversation": ("id INTEGER PRIMARY KEY, activity_id INTEGER NOT NULL, sender TEXT NOT NULL, text TEXT NOT NULL, "
                     "disclosed TEXT NOT NULL, agreed_cents INTEGER"),
    # The log of mutating tool calls; part of the state (so replays compare it) but ignored by collateral checks.
    "activity": "id INTEGER PRIMARY KEY, day INTEGER NOT NULL, tool TEXT NOT NULL, arguments TEXT NOT NULL",
}
INDEXES = (
    "CREATE INDEX orders_by_customer ON orders (customer_id)",
    "CREATE INDEX orders_by_due ON orders (status, due_day)",
    "CREATE INDEX payments_by_order ON payments (order_id)",
    "CREATE INDEX payments_by_customer ON payments (customer_id)",
    "CREATE INDEX suppliers_by_product ON suppliers (product_id)",
    "CREATE INDEX shifts_by_staff_day ON shifts (staff_id, day)",
    "CREATE INDEX po_by_status ON purchase_orders (status, arrival_day)",
)
PRIMARY_KEYS: dict[str, tuple[str, ...]] = {
    "clock": ("id",), "budgets": ("category",), "inventory": ("warehouse_id", "product_id"),
    "shift_needs": ("day", "warehouse_id"),
}
START_DATE = "2026-03-02"  # a Monday; day N is START_DATE + N days


def money(cents: int) -> str:
    """An amount of integer cents as the back office shows it: "$1,234.50"."""
    return f"${cents / 100:,.2f}"

WORLD = SqliteWorld(TABLES, indexes=INDEXES, primary_keys=PRIMARY_KEYS,
                    not_diffed={"activity"})  # the log of calls: checked by replaying it, not as business state
