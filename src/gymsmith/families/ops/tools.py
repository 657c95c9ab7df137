"""The ops tools: their JSON schemas (what the model reads) and their business rules.

Every tool takes the open database and validated arguments and returns a JSON-able result, or raises
ToolRefusal with a message the agent can act on. Mutating tools run in one transaction: a refused
call changes nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Annotated, Any

from gymsmith.core.types import ActionErrorKind
from gymsmith.envs.base import ToolRefusal, preview
from gymsmith.envs.toolkit import Param, Toolbox
from gymsmith.families.ops import caller
from gymsmith.families.ops.generator import MAX_DAYS_PER_WEEK, day_date
from gymsmith.families.ops.schema import money

ENTITIES = {
    "customers": "customers", "orders": "orders", "products": "products", "suppliers": "suppliers",
    "purchase_orders": "purchase_orders", "payments": "payments", "staff": "staff", "shifts": "shifts",
    "shift_needs": "shift_needs", "warehouses": "warehouses", "inventory": "inventory",
}
OPERATORS = ("eq", "lte", "gte", "contains")
MAX_PAGE = 50
MAX_ID = 2**31 - 1  # every integer argument is bounded (docs/episodes.md): none reaches SQLite out of its range
MAX_FILTERS = 8
MAX_FILTER_TEXT = 200


ID = Annotated[int, Param(minimum=1, maximum=MAX_ID)]
TOOLS = Toolbox()  # every tool below, in the order the model reads them


def refuse(message: str) -> ToolRefusal:
    return ToolRefusal(ActionErrorKind.RULE_VIOLATION, message)


def _row(conn: sqlite3.Connection, table: str, record_id: int) -> dict[str, Any]:
    cur = conn.execute(f"SELECT * FROM {table} WHERE id = ?", (record_id,))
    row = cur.fetchone()
    if row is None:
        raise ToolRefusal(ActionErrorKind.NOT_FOUND, f"no {table[:-1] if table.endswith('s') else table} with id {record_id}")
    return dict(zip([c[0] for c in cur.description], row))


def _today(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT day FROM clock").fetchone()[0]


def _budget(conn: sqlite3.Connection, category: str) -> tuple[int, int]:
    return conn.execute("SELECT limit_cents, spent_cents FROM budgets WHERE category = ?", (category,)).fetchone()


def _spend(conn: sqlite3.Connection, category: str, cents: int) -> None:
    limit, spent = _budget(conn, category)
    if spent + cents > limit:
        raise refuse(f"{category} budget exceeded: this costs {money(cents)} but only {money(limit - spent)} remains")
    conn.execute("UPDATE budgets SET spent_cents = spent_cents + ? WHERE category = ?", (cents, category))


def _paid(conn: sqlite3.Connection, order_id: int) -> int:
    return conn.execute("SELECT COALESCE(SUM(CASE kind WHEN 'charge' THEN amount_cents ELSE -amount_cents END), 0) "
                        "FROM payments WHERE order_id = ?", (order_id,)).fetchone()[0]


# -- read tools --------------------------------------------------------------------------------------
@TOOLS.tool(read_only=True)
def get_status(conn: sqlite3.Connection) -> dict[str, Any]:
    """Today's simulated date, budgets remaining and open work counts."""
    day = _today(conn)
    budgets = {c: {"limit": money(lim), "spent": money(sp), "remaining_cents": lim - sp}
               for c, lim, sp in conn.execute("SELECT category, limit_cents, spent_cents FROM budgets ORDER BY category")}
    counts = dict(conn.execute("SELECT status, COUNT(*) FROM orders GROUP BY status ORDER BY status").fetchall())
    return {"day": day, "date": day_date(day), "budgets": budgets, "orders_by_status": counts}


@TOOLS.tool(read_only=True)
def search_records(conn: sqlite3.Connection, entity: Annotated[str, Param(enum=sorted(ENTITIES))],
                   filters: Annotated[dict[str, Any] | None, Param(
                       maxProperties=MAX_FILTERS, propertyNames={"maxLength": 64},
                       additionalProperties={"type": ["string", "integer", "number"], "maxLength": MAX_FILTER_TEXT,
                                             "minimum": -MAX_ID, "maximum": MAX_ID})] = None,
                   limit: Annotated[int, Param(minimum=1, maximum=MAX_PAGE)] = 20,
                   offset: Annotated[int, Param(minimum=0, maximum=1_000_000)] = 0) -> dict[str, Any]:
    """List records of one entity with optional filters and pagination. Filter keys are field names, optionally
    suffixed __lte, __gte or __contains (e.g. {"status": "pending", "due_day__lte": 5})."""
    table = ENTITIES[entity]
    fields = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
    where, params = [], []
    for key, value in (filters or {}).items():
        name, _, op = key.partition("__")
        op = op or "eq"
        if name not in fields or op not in OPERATORS:
            raise ToolRefusal(ActionErrorKind.INVALID_ARGUMENTS,
                              f"bad filter {preview(key)} for {entity}: fields are {fields}, suffixes __lte, __gte, __contains")
        if op == "contains":
            where.append(f"LOWER(CAST({name} AS TEXT)) LIKE ?")
            params.append(f"%{str(value).lower()}%")
        else:
            where.append(f"{name} {'=' if op == 'eq' else '<=' if op == 'lte' else '>='} ?")
            params.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    order = "day, warehouse_id" if table == "shift_needs" else "warehouse_id, product_id" if table == "inventory" else "id"
    total = conn.execute(f"SELECT COUNT(*) FROM {table}{clause}", params).fetchone()[0]
    cur = conn.execute(f"SELECT * FROM {table}{clause} ORDER BY {order} LIMIT ? OFFSET ?", [*params, limit, offset])
    names = [c[0] for c in cur.description]
    return {"entity": entity, "total": total, "offset": offset, "rows": [dict(zip(names, r)) for r in cur.fetchall()]}


@TOOLS.tool(read_only=True)
def get_record(conn: sqlite3.Connection, entity: Annotated[str, Param(enum=sorted(set(ENTITIES) - {"inventory", "shift_needs"}))],
               id: ID) -> dict[str, Any]:  # noqa: A002 - schema name
    """One record by id, with related facts (an order's balance due, a supplier's product)."""
    record = _row(conn, ENTITIES[entity], id)
    if entity == "orders":
        paid = _paid(conn, id)
        record.update(paid_cents=paid, balance_due_cents=max(0, record["total_cents"] - paid))
    return record


@TOOLS.tool(read_only=True)
def check_inventory(conn: sqlite3.Connection, product_id: ID) -> dict[str, Any]:
    """Stock of one product per warehouse: on hand, reserved, available, and incoming POs."""
    product = _row(conn, "products", product_id)
    stock = [{"warehouse_id": w, "on_hand": h, "reserved": r, "available": h - r} for w, h, r in conn.execute(
        "SELECT warehouse_id, on_hand, reserved FROM inventory WHERE product_id = ? ORDER BY warehouse_id", (product_id,))]
    incoming = [{"po_id": i, "warehouse_id": w, "quantity": q, "arrival_day": a, "status": s} for i, w, q, a, s in conn.execute(
        "SELECT id, warehouse_id, quantity, arrival_day, status FROM purchase_orders "
        "WHERE product_id = ? AND status IN ('open', 'delayed') ORDER BY id", (product_id,))]
    return {"product_id": product_id, "sku": product["sku"], "stock": stock, "incoming": incoming}


# -- mutating tools ----------------------------------------------------------------------------------
@TOOLS.tool
def allocate_stock(conn: sqlite3.Connection, order_id: ID, warehouse_id: ID) -> dict[str, Any]:
    """Reserve an order's whole quantity in one warehouse (order must be pending)."""
    order = _row(conn, "orders", order_id)
    _row(conn, "warehouses", warehouse_id)
    if order["status"] != "pending":
        raise refuse(f"order {order_id} is {order['status']}; only pending orders can be allocated")
    inv = conn.execute("SELECT on_hand, reserved FROM inventory WHERE warehouse_id = ? AND product_id = ?",
                       (warehouse_id, order["product_id"])).fetchone()
    available = inv[0] - inv[1] if inv else 0
    if available < order["quantity"]:
        raise refuse(f"warehouse {warehouse_id} has {available} available of product {order['product_id']}; "
                     f"order {order_id} needs {order['quantity']}")
    conn.execute("UPDATE inventory SET reserved = reserved + ? WHERE warehouse_id = ? AND product_id = ?",
                 (order["quantity"], warehouse_id, order["product_id"]))
    conn.execute("UPDATE orders SET status = 'allocated', warehouse_id = ? WHERE id = ?", (warehouse_id, order_id))
    return {"order_id": order_id, "status": "allocated", "warehouse_id": warehouse_id}


@TOOLS.tool
def release_allocation(conn: sqlite3.Connection, order_id: ID) -> dict[str, Any]:
    """Undo an allocation: the order becomes pending and its stock available."""
    order = _row(conn, "orders", order_id)
    if order["status"] != "allocated":
        raise refuse(f"order {order_id} is {order['status']}, not allocated")
    conn.execute("UPDATE inventory SET reserved = reserved - ? WHERE warehouse_id = ? AND product_id = ?",
                 (order["quantity"], order["warehouse_id"], order["product_id"]))
    conn.execute("UPDATE orders SET status = 'pending', warehouse_id = NULL WHERE id = ?", (order_id,))
    return {"order_id": order_id, "status": "pending"}


@TOOLS.tool
def capture_payment(conn: sqlite3.Connection, order_id: ID) -> dict[str, Any]:
    """Charge the balance due of an order to the customer's card on file."""
    order = _row(conn, "orders", order_id)
    customer = _row(conn, "customers", order["customer_id"])
    due = order["total_cents"] - _paid(conn, order_id)
    if due <= 0:
        raise refuse(f"order {order_id} is already fully paid")
    if order["status"] in ("shipped", "cancelled"):
        raise refuse(f"order {order_id} is {order['status']}; payments are captured before shipping")
    if not customer["card_on_file"]:
        raise refuse(f"customer {customer['id']} has no card on file; the payment cannot be captured")
    cur = conn.execute("INSERT INTO payments (order_id, customer_id, kind, amount_cents, day) VALUES (?, ?, 'charge', ?, ?)",
                       (order_id, customer["id"], due, _today(conn)))
    return {"payment_id": cur.lastrowid, "order_id": order_id, "amount_cents": due}


@TOOLS.tool
def ship_order(conn: sqlite3.Connection, order_id: ID) -> dict[str, Any]:
    """Ship an allocated, fully paid order today."""
    order = _row(conn, "orders", order_id)
    if order["status"] != "allocated":
        raise refuse(f"order {order_id} is {order['status']}; allocate its stock before shipping")
    due = order["total_cents"] - _paid(conn, order_id)
    if due > 0:
        raise refuse(f"order {order_id} is not fully paid ({money(due)} due); unpaid orders cannot ship")
    day = _today(conn)
    conn.execute("UPDATE inventory SET on_hand = on_hand - ?, reserved = reserved - ? WHERE warehouse_id = ? AND product_id = ?",
                 (order["quantity"], order["quantity"], order["warehouse_id"], order["product_id"]))
    conn.execute("UPDATE orders SET status = 'shipped', shipped_day = ? WHERE id = ?", (day, order_id))
    return {"order_id": order_id, "status": "shipped", "shipped_day": day, "on_time": day <= order["due_day"]}


@TOOLS.tool
def place_purchase_order(conn: sqlite3.Connection, supplier_id: ID, warehouse_id: ID,
                         quantity: Annotated[int, Param(minimum=1, maximum=1000)]) -> dict[str, Any]:
    """Buy stock from an active supplier for delivery to a warehouse after the supplier's lead time. Costs
    quantity x unit cost from the purchasing budget. Buy only what the task needs (no more units of a product than
    the fewest any plan that does the task must buy)."""
    supplier = _row(conn, "suppliers", supplier_id)
    _row(conn, "warehouses", warehouse_id)
    if not supplier["active"]:
        raise refuse(f"supplier {supplier_id} is not trading; choose an active supplier")
    cost = supplier["unit_cost_cents"] * quantity
    _spend(conn, "purchasing", cost)
    day = _today(conn)
    cur = conn.execute("INSERT INTO purchase_orders (supplier_id, product_id, warehouse_id, quantity, cost_cents, placed_day, "
                       "arrival_day, status) VALUES (?, ?, ?, ?, ?, ?, ?, 'open')",
                       (supplier_id, supplier["product_id"], warehouse_id, quantity, cost, day, day + supplier["lead_days"]))
    return {"po_id": cur.lastrowid, "cost_cents": cost, "arrival_day": day + supplier["lead_days"]}


@TOOLS.tool
def cancel_purchase_order(conn: sqlite3.Connection, po_id: ID) -> dict[str, Any]:
    """Cancel an open or delayed purchase order; its cost returns to the budget."""
    po = _row(conn, "purchase_orders", po_id)
    if po["status"] not in ("open", "delayed"):
        raise refuse(f"purchase order {po_id} is {po['status']}; only open or delayed orders can be cancelled")
    conn.execute("UPDATE purchase_orders SET status = 'cancelled' WHERE id = ?", (po_id,))
    conn.execute("UPDATE budgets SET spent_cents = spent_cents - ? WHERE category = 'purchasing'", (po["cost_cents"],))
    return {"po_id": po_id, "status": "cancelled", "refunded_cents": po["cost_cents"]}


@TOOLS.tool
def refund_payment(conn: sqlite3.Connection, payment_id: ID, amount_cents: Annotated[int, Param(minimum=1, maximum=MAX_ID)],
                   reason: Annotated[str, Param(minLength=3, maxLength=200)]) -> dict[str, Any]:
    """Refund part or all of a charge. The amount may not exceed what is left of the charge."""
    payment = _row(conn, "payments", payment_id)
    if payment["kind"] != "charge":
        raise refuse(f"payment {payment_id} is a {payment['kind']}; only charges can be refunded")
    refunded = conn.execute("SELECT COALESCE(SUM(amount_cents), 0) FROM payments WHERE refund_of = ?", (payment_id,)).fetchone()[0]
    left = payment["amount_cents"] - refunded
    if amount_cents > left:
        raise refuse(f"payment {payment_id} has {money(left)} left to refund; {money(amount_cents)} is too much")
    cur = conn.execute("INSERT INTO payments (order_id, customer_id, kind, amount_cents, day, refund_of, reason) "
                       "VALUES (?, ?, 'refund', ?, ?, ?, ?)",
                       (payment["order_id"], payment["customer_id"], amount_cents, _today(conn), payment_id, reason))
    return {"refund_id": cur.lastrowid, "payment_id": payment_id, "amount_cents": amount_cents}


@TOOLS.tool
def assign_shift(conn: sqlite3.Connection, staff_id: ID, day: Annotated[int, Param(minimum=0, maximum=6)], warehouse_id: ID,
                 hours: Annotated[int, Param(minimum=4, maximum=10)] = 8) -> dict[str, Any]:
    """Put a staff member on a shift (this week, today or later) at a warehouse. Add only the shifts the task's needs
    call for: one beyond a slot's need is a change the task does not ask for."""
    person = _row(conn, "staff", staff_id)
    _row(conn, "warehouses", warehouse_id)
    if day < _today(conn):
        raise refuse(f"day {day} is in the past (today is day {_today(conn)})")
    if str(day) in person["unavailable_days"].split(","):
        raise refuse(f"staff {staff_id} is unavailable on day {day}")
    week = conn.execute("SELECT day, hours FROM shifts WHERE staff_id = ? AND day BETWEEN 0 AND 6", (staff_id,)).fetchall()
    if any(d == day for d, _ in week):
        raise refuse(f"staff {staff_id} already has a shift on day {day}; one shift per person per day")
    if len(week) + 1 > MAX_DAYS_PER_WEEK:
        raise refuse(f"staff {staff_id} already works {len(week)} days this week; the limit is {MAX_DAYS_PER_WEEK}")
    worked = sum(h for _, h in week)
    if worked + hours > person["max_hours_week"]:
        raise refuse(f"staff {staff_id} would work {worked + hours} hours; their limit is {person['max_hours_week']}")
    _spend(conn, "labour", hours * person["hourly_cents"])
    cur = conn.execute("INSERT INTO shifts (staff_id, day, warehouse_id, hours) VALUES (?, ?, ?, ?)",
                       (staff_id, day, warehouse_id, hours))
    return {"shift_id": cur.lastrowid, "staff_id": staff_id, "day": day, "warehouse_id": warehouse_id, "hours": hours}


@TOOLS.tool
def remove_shift(conn: sqlite3.Connection, shift_id: ID) -> dict[str, Any]:
    """Remove a shift of this week that has not started; its wages return to the budget."""
    shift = _row(conn, "shifts", shift_id)
    if shift["day"] < max(0, _today(conn)):
        raise refuse(f"shift {shift_id} is on day {shift['day']}, which has started or passed; it cannot be removed")
    hourly = _row(conn, "staff", shift["staff_id"])["hourly_cents"]
    conn.execute("DELETE FROM shifts WHERE id = ?", (shift_id,))
    conn.execute("UPDATE budgets SET spent_cents = spent_cents - ? WHERE category = 'labour'", (shift["hours"] * hourly,))
    return {"shift_id": shift_id, "removed": True}


@TOOLS.tool
def advance_clock(conn: sqlite3.Connection, days: Annotated[int, Param(minimum=1, maximum=7)]) -> dict[str, Any]:
    """Move the simulated clock forward; purchase orders due by then are received. Only when the task needs time
    to pass, and no further than it needs (never past the last due date of the orders it ships)."""
    day = _today(conn) + days
    conn.execute("UPDATE clock SET day = ?", (day,))
    received = conn.execute("SELECT id, warehouse_id, product_id, quantity FROM purchase_orders "
                            "WHERE status IN ('open', 'delayed') AND arrival_day <= ? ORDER BY id", (day,)).fetchall()
    for po_id, w, p, q in received:
        conn.execute("INSERT INTO inventory (warehouse_id, product_id, on_hand, reserved) VALUES (?, ?, ?, 0) "
                     "ON CONFLICT (warehouse_id, product_id) DO UPDATE SET on_hand = on_hand + excluded.on_hand", (w, p, q))
        conn.execute("UPDATE purchase_orders SET status = 'received' WHERE id = ?", (po_id,))
    return {"day": day, "date": day_date(day), "received_po_ids": [r[0] for r in received]}


@TOOLS.tool
def message_user(conn: sqlite3.Connection, text: Annotated[str, Param(minLength=1, maxLength=2000)]) -> dict[str, Any]:
    """Say something to the customer on the line (when the task has one) and get their reply. They answer what you
    ask: their e-mail address, their name, the order, the amount, the date; state an amount to ask them to agree."""
    if caller.facts(conn) is None:
        raise refuse("no customer is on the line in this task; message_user has no one to talk to")
    return caller.converse(conn, text)


@TOOLS.tool
def submit(conn: sqlite3.Connection, note: Annotated[str, Param(maxLength=2000)] = "") -> dict[str, Any]:
    """Declare the task finished. No further actions are accepted after this."""
    return {"submitted": True}


TOOL_SPECS = TOOLS.tool_specs()
IMPLEMENTATIONS: dict[str, Callable[..., dict[str, Any]]] = TOOLS.functions
READ_ONLY = frozenset(TOOLS.read_only)


def call_tool(conn: sqlite3.Connection, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Run tool `name`; a mutating call is one transaction, logged in `activity`, and undone if refused."""
    fn = IMPLEMENTATIONS[name]
    if name in READ_ONLY or name == "submit":
        return fn(conn, **arguments)
    conn.execute("BEGIN")
    try:
        result = fn(conn, **arguments)
        conn.execute("INSERT INTO activity (day, tool, arguments) VALUES (?, ?, ?)",
                     (_today(conn), name, json.dumps(arguments, sort_keys=True)))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


DASHBOARD_DETAIL_BELOW = 0.5  # easier tasks open on a dashboard listing the work; harder ones on counts only


def dashboard(conn: sqlite3.Connection, metadata: dict[str, Any], difficulty: float) -> dict[str, Any]:
    """What the back office's start page shows: status, warehouses, and (on easier tasks) the work queue.

    Derived from the current state and the agent-visible metadata only.
    """
    board: dict[str, Any] = {"status": get_status(conn),
                             "warehouses": [{"warehouse_id": w, "name": n} for w, n in
                                            conn.execute("SELECT id, name FROM warehouses ORDER BY id")]}
    if difficulty >= DASHBOARD_DETAIL_BELOW:
        return board
    kind = metadata["kind"]
    if kind in ("fulfil", "resource"):
        board["due_orders"] = [
            {"order_id": o, "product_id": p, "quantity": q, "due_day": d} for o, p, q, d in conn.execute(
                "SELECT id, product_id, quantity, due_day FROM orders WHERE status = 'pending' AND due_day <= ? ORDER BY id",
                (metadata["horizon_day"],))]
    elif kind == "staff":
        board["shift_needs"] = search_records(conn, "shift_needs", limit=MAX_PAGE)["rows"]
        board["staff"] = [{"staff_id": s} for (s,) in conn.execute("SELECT id FROM staff ORDER BY id")]
    elif kind == "billing" and "order_id" in metadata:
        board["ticket"] = {"order_id": metadata["order_id"], "charges": [
            {"payment_id": i, "amount_cents": a} for i, a in conn.execute(
                "SELECT id, amount_cents FROM payments WHERE order_id = ? AND kind = 'charge' ORDER BY id",
                (metadata["order_id"],))]}
    return board
