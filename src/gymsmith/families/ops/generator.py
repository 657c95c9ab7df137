"""Seeded generation of ops worlds: start-state rows, goal, and (verifier-only) witness and expectations.

Generation is constructive: each generator first decides a solution, then builds the constraints
around it (budgets from the solution's cost plus slack, shift needs from a feasible roster), so every
task is solvable by construction and the witness proves it. The witness and the expectations never
enter the TaskSpec; the verifier and the privileged oracle rebuild them from the seed.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from gymsmith.core.hashing import canonical_json
from gymsmith.families.ops import caller, names, planning, rostering
from gymsmith.families.ops.schema import START_DATE, money

KINDS = ("fulfil", "resource", "staff", "billing")
FULFIL_FLAGS = ("unpaid", "cheap_is_slow", "split_stock", "tight_deadlines")
STAFF_FLAGS = ("availability", "two_sites", "part_time", "wage_spread")
BILLING_FLAGS = ("similar_names", "split_payment", "prior_refund", "lookalike_duplicate")
SHIFT_HOURS = 8
MAX_DAYS_PER_WEEK = 5


@dataclass
class World:
    """A generated task. `rows`, `goal` and `metadata` are agent-side; `witness` and `expected` are not."""

    kind: str
    rows: dict[str, list[dict[str, Any]]]
    goal: str
    metadata: dict[str, Any]
    witness: list[dict[str, Any]] = field(repr=False)
    expected: dict[str, Any] = field(repr=False)


def day_date(day: int) -> str:
    return (_dt.date.fromisoformat(START_DATE) + _dt.timedelta(days=day)).isoformat()


class _Rows:
    """Accumulates rows with per-table id counters starting at distinct offsets (ids look like real ones)."""

    START = {"customers": 101, "products": 1, "suppliers": 11, "purchase_orders": 5001, "orders": 1001,
             "payments": 70001, "staff": 201, "shifts": 9001, "warehouses": 1}

    def __init__(self) -> None:
        self.rows: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self._next = dict(self.START)

    def add(self, table: str, **values: Any) -> dict[str, Any]:
        if table in self._next and "id" not in values:
            values["id"] = self._next[table]
            self._next[table] += 1
        self.rows[table].append(values)
        return values


def _flags(rng: random.Random, pool: tuple[str, ...], count: int) -> set[str]:
    return set(rng.sample(pool, min(count, len(pool))))


def _person(rng: random.Random, used: set[str]) -> str:
    for attempt in range(200):
        name = f"{rng.choice(names.FIRST)} {rng.choice(names.LAST)}"
        if attempt >= 50:  # the pool of plain names is spent (large worlds): add a double-barrelled surname
            name = f"{name}-{rng.choice(names.LAST)}{'' if attempt < 100 else rng.randint(2, 99)}"
        if name not in used:
            used.add(name)
            return name
    raise RuntimeError("ran out of distinct names")  # pragma: no cover - 200 tries over ~10^6 names


def _email(rng: random.Random, name: str) -> str:
    first, last = name.lower().replace("ö", "o").split(" ", 1)
    return f"{first}.{last.replace(' ', '').replace('-', '')}{rng.randint(1, 99)}@example.com"


def _clock_and_warehouses(b: _Rows, rng: random.Random, n_warehouses: int) -> list[int]:
    """Every world starts on day 0 with `n_warehouses` warehouses; returns their ids."""
    b.add("clock", id=1, day=0, start_date=START_DATE)
    return [b.add("warehouses", name=w)["id"] for w in rng.sample(names.WAREHOUSES, n_warehouses)]


def _act(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments}


# ---------------------------------------------------------------------------------------------------
# fulfil / resource: ship due orders on time within a purchasing budget (optionally after a delay)
# ---------------------------------------------------------------------------------------------------
def _fulfilment(rng: random.Random, k: dict[str, Any], delayed: bool) -> World:
    b = _Rows()
    n, horizon = k["n_orders"], k["horizon"]
    flags = _flags(rng, FULFIL_FLAGS, k["constraints"])
    n_wh = 3 if "split_stock" in flags else 2
    prior_spent = rng.randint(20, 200) * 1000
    warehouses = _clock_and_warehouses(b, rng, n_wh)  # budgets are written last, once the witness cost is known
    used_names: set[str] = set()

    n_products = max(1, (n + 1) // 2)
    n_distractor_products = k["distractors"] // 25
    product_names = rng.sample(names.PRODUCTS, min(len(names.PRODUCTS), n_products + n_distractor_products))
    products = [b.add("products", sku=f"SKU-{rng.randint(10000, 99999)}-{i}", name=pn,
                      price_cents=rng.randint(8, 90) * 100) for i, pn in enumerate(product_names)]
    targets_p = products[:n_products]

    # Target orders.
    unpaid_ids: list[int] = []
    customers = []
    targets = []
    for i in range(n):
        name = _person(rng, used_names)
        pay_later = "unpaid" in flags and rng.random() < 0.5
        c = b.add("customers", name=name, email=_email(rng, name), card_on_file=1)
        customers.append(c)
        p = targets_p[i % n_products]
        qty = rng.randint(1, 6)
        due = rng.randint(1, max(1, horizon // 3)) if "tight_deadlines" in flags else rng.randint(1, horizon)
        o = b.add("orders", customer_id=c["id"], product_id=p["id"], quantity=qty, total_cents=qty * p["price_cents"],
                  placed_day=-rng.randint(1, 6), due_day=due, status="pending", warehouse_id=None, shipped_day=None)
        targets.append(o)
        if pay_later:
            unpaid_ids.append(o["id"])
        else:
            b.add("payments", order_id=o["id"], customer_id=c["id"], kind="charge", amount_cents=o["total_cents"],
                  day=o["placed_day"], refund_of=None, reason=None)

    demand: defaultdict[int, int] = defaultdict(int)
    min_due: dict[int, int] = {}
    max_due: dict[int, int] = {}
    for o in targets:
        demand[o["product_id"]] += o["quantity"]
        min_due[o["product_id"]] = min(min_due.get(o["product_id"], 99), o["due_day"])
        max_due[o["product_id"]] = max(max_due.get(o["product_id"], -99), o["due_day"])
    short = {p["id"] for p in targets_p if rng.random() < 0.5}
    if delayed:
        short.add(targets_p[0]["id"])

    # Stock: short products have less than their target demand in total.
    stock: dict[tuple[int, int], int] = defaultdict(int)
    for p in products:
        pid = p["id"]
        total = (rng.randint(0, demand[pid] - 1) if pid in short else demand[pid] + rng.randint(0, 3)) \
            if pid in demand else rng.randint(0, 40)
        if "split_stock" in flags:
            for _ in range(total):
                stock[(rng.choice(warehouses), pid)] += 1
        else:
            stock[(warehouses[0], pid)] += total
            if rng.random() < 0.3:
                extra = rng.randint(0, 2)
                # a short product stays short in all warehouses together: with this extra it was covered on some
                # tasks, and a resource goal then told the agent to re-source a purchase no plan needs (a
                # hundred-and-seventy-fifth attacker's literal re-sourcing scored 0 on 2 of 300 tasks)
                stock[(warehouses[1], pid)] += min(extra, demand[pid] - 1 - total) if pid in short else extra

    # Suppliers: a fast, dearer one that always meets the earliest due date, and a cheap one that may not.
    suppliers_by_product: dict[int, list[dict[str, Any]]] = defaultdict(list)
    sup_names = list(names.SUPPLIERS)
    rng.shuffle(sup_names)
    for p in products:
        pid, price = p["id"], p["price_cents"]
        first_due = min_due.get(pid, horizon)
        slow = "cheap_is_slow" in flags or (delayed and pid == targets_p[0]["id"])
        cheap_lead = (max_due.get(pid, horizon) + rng.randint(1, 4)) if slow else rng.randint(1, max(1, first_due))
        offers = [("fast", int(price * rng.uniform(0.75, 0.9)), rng.randint(1, max(1, min(2, first_due))), 1),
                  ("cheap", int(price * rng.uniform(0.45, 0.6)), cheap_lead, 1)]
        if k["distractors"] >= 60:
            offers.append(("inactive", int(price * 0.4), 1, 0))  # cheapest and quickest, but not trading
        for _, cost, lead, active in offers:
            s = b.add("suppliers", name=rng.choice(sup_names), product_id=pid, unit_cost_cents=max(1, cost),
                      lead_days=lead, active=active)
            suppliers_by_product[pid].append(s)

    # Distractor orders: future pending ones, already-allocated ones (reserving stock), shipped history.
    reserved: dict[tuple[int, int], int] = defaultdict(int)
    pool = customers + [b.add("customers", name=(nm := _person(rng, used_names)), email=_email(rng, nm),
                              card_on_file=rng.randint(0, 1)) for _ in range(k["distractors"] // 3)]
    for j in range(k["distractors"]):
        c, p = rng.choice(pool), rng.choice(products)
        qty = rng.randint(1, 6)
        r = rng.random()
        if r < 0.5:
            row = dict(status="pending", due_day=horizon + rng.randint(1, 15), warehouse_id=None, shipped_day=None,
                       placed_day=-rng.randint(0, 6))
        elif r < 0.6:
            w = rng.choice(warehouses)
            reserved[(w, p["id"])] += qty
            row = dict(status="allocated", due_day=horizon + rng.randint(1, 10), warehouse_id=w, shipped_day=None,
                       placed_day=-rng.randint(0, 6))
        else:
            placed = -rng.randint(8, 60)
            row = dict(status="shipped", due_day=placed + rng.randint(2, 6), warehouse_id=rng.choice(warehouses),
                       shipped_day=placed + rng.randint(1, 2), placed_day=placed)
        o = b.add("orders", customer_id=c["id"], product_id=p["id"], quantity=qty, total_cents=qty * p["price_cents"], **row)
        if row["status"] != "pending" or rng.random() < 0.6:
            b.add("payments", order_id=o["id"], customer_id=c["id"], kind="charge", amount_cents=o["total_cents"],
                  day=row["placed_day"], refund_of=None, reason=None)

    # ids as a real system issues them: orders and payments in time order, customers in no order the world was built
    # in. Built goal first, the due orders held 1001 to 1000+n and their customers 101 to 100+n on every task
    # (the same leak a hundred-and-sixty-eighth attacker used in the web family: an id told which record the goal means)
    order_ids, _ = _ids_in_time_order(b.rows, rng)
    customer_ids = _renumber(b.rows["customers"], None, rng)
    for row in (*b.rows["orders"], *b.rows["payments"]):
        row["customer_id"] = customer_ids[row["customer_id"]]
    unpaid_ids = [order_ids[i] for i in unpaid_ids]

    for w in warehouses:
        for p in products:
            key = (w, p["id"])
            if stock[key] or reserved[key] or w == warehouses[0]:
                b.add("inventory", warehouse_id=w, product_id=p["id"], on_hand=stock[key] + reserved[key],
                      reserved=reserved[key])

    # Witness: the plan that buys the fewest units any plan needs, the cheapest among those (`planning`), so
    # the hidden checks can hold every agent to that minimum. Day 0: cancel the delayed order, charge the
    # unpaid orders, place every purchase; then on day 0 and on each day a purchase arrives, ship each
    # warehouse's due orders in due-date order while its stock covers the next one.
    delayed_po = None
    day0: list[dict[str, Any]] = []
    if delayed:
        pid = targets_p[0]["id"]
        # what the stock does not cover; at least one unit (extra stock in a second warehouse can cover it all)
        shortfall = max(1, demand[pid] - sum(v for (w, p), v in stock.items() if p == pid))
        slow_sup = next(s for s in suppliers_by_product[pid] if s["lead_days"] > max_due[pid] and s["active"])
        delayed_po = b.add("purchase_orders", supplier_id=slow_sup["id"], product_id=pid, warehouse_id=warehouses[0],
                           quantity=shortfall, cost_cents=shortfall * slow_sup["unit_cost_cents"], placed_day=-3,
                           arrival_day=max_due[pid] + rng.randint(2, 5), status="delayed")
        day0.append(_act("cancel_purchase_order", po_id=delayed_po["id"]))
    plans = planning.fewest_units(targets, warehouses, stock,
                                  [s for offers in suppliers_by_product.values() for s in offers])
    cost = sum(plan.cost_cents for plan in plans.values())
    if delayed and not plans[targets_p[0]["id"]].purchases:
        raise AssertionError("the goal says to re-source the delayed purchase, and no plan needs one")
    by_due = sorted(targets, key=lambda o: (o["due_day"], o["id"]))
    day0 += [_act("capture_payment", order_id=o["id"]) for o in by_due if o["id"] in unpaid_ids]
    arrivals: dict[int, list[planning.Purchase]] = defaultdict(list)
    for pid, plan in sorted(plans.items()):
        for po in plan.purchases:
            day0.append(_act("place_purchase_order", supplier_id=po.supplier_id, warehouse_id=po.warehouse_id,
                             quantity=po.quantity))
            arrivals[po.lead_days].append(po)
    queues: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)  # (warehouse, product) -> orders
    for o in by_due:
        queues[(plans[o["product_id"]].warehouse_of[o["id"]], o["product_id"])].append(o)
    on_hand = {key: stock[key] for key in queues}
    witness, today = day0, 0
    for day in sorted({0, *arrivals}):
        while today < day:  # advance_clock moves at most 7 days a call
            step = min(7, day - today)
            witness.append(_act("advance_clock", days=step))
            today += step
        for po in arrivals.get(day, []):
            on_hand[(po.warehouse_id, po.product_id)] += po.quantity
        for key, queue in sorted(queues.items()):
            while queue and queue[0]["quantity"] <= on_hand[key]:
                o = queue.pop(0)
                if o["due_day"] < day:
                    raise AssertionError(f"witness ships order {o['id']} on day {day}, after its due day")
                on_hand[key] -= o["quantity"]
                witness += [_act("allocate_stock", order_id=o["id"], warehouse_id=key[0]), _act("ship_order", order_id=o["id"])]
    if any(queues.values()):
        raise AssertionError("the witness leaves due orders unshipped")

    # Budget: the witness cost plus slack; a delayed PO's money only comes back if it is cancelled.
    available = math.ceil(cost * (1 + k["budget_slack"])) + rng.randint(0, 5) * 100
    spent = prior_spent + (delayed_po["cost_cents"] if delayed_po else 0)
    b.rows["budgets"] = [{"category": "purchasing", "limit_cents": prior_spent + max(available, spent - prior_spent),
                          "spent_cents": spent},
                         {"category": "labour", "limit_cents": 500_000, "spent_cents": 0}]
    remaining = b.rows["budgets"][0]["limit_cents"] - spent

    due_text = f"{day_date(horizon)} (day {horizon})"
    lead = (f"Supplier purchase order #{delayed_po['id']} for {targets_p[0]['name']} has been delayed to "
            f"{day_date(delayed_po['arrival_day'])}, after orders waiting for it are due. Cancel it and buy what those orders "
            "need elsewhere, under the purchase rule below. ") if delayed_po else ""
    goal = (f"Today is {day_date(0)} (day 0). {lead}Ship every pending order that is due on or before {due_text}, "
            f"each no later than its due date. Let time pass only as far as these shipments need: never past the last "
            f"of their due dates. Buy only what these shipments need: of each product, no more units than the fewest any "
            f"plan that ships them on time must buy (stock in any warehouse counts). "
            f"Purchasing budget remaining: {money(remaining)}; do not exceed it (cheaper purchases score higher). "
            "An order ships only when it is fully paid and its whole quantity is allocated from one warehouse. "
            "Do not change orders outside that set. Call submit when you are done.")
    metadata = {"kind": "resource" if delayed else "fulfil", "horizon_day": horizon, "start_date": START_DATE}
    if delayed_po:
        metadata["delayed_po_id"] = delayed_po["id"]
    expected = {"targets": sorted(o["id"] for o in targets), "horizon_day": horizon}
    return World(metadata["kind"], dict(b.rows), goal, metadata, witness, expected)


# ---------------------------------------------------------------------------------------------------
# staff: cover a week of shift needs under labour rules and a labour budget
# ---------------------------------------------------------------------------------------------------
def _staffing(rng: random.Random, k: dict[str, Any]) -> World:
    b = _Rows()
    flags = _flags(rng, STAFF_FLAGS, k["constraints"])
    n_staff = min(12, 3 + k["n_orders"] // 2)
    n_wh = 2 if "two_sites" in flags else 1
    warehouses = _clock_and_warehouses(b, rng, n_wh)
    used: set[str] = set()
    fill = 1.0 - 0.8 * k["budget_slack"]
    roster: list[tuple[int, int, int, int]] = []  # (day, warehouse, staff_id, wage)
    staff_rows = []
    for _ in range(n_staff + k["distractors"] // 40):
        max_hours = rng.choice([40, 32, 24, 16]) if "part_time" in flags else 40
        hourly = rng.randint(15, 40) * 100 if "wage_spread" in flags else rng.randint(20, 24) * 100
        off = sorted(rng.sample(range(7), rng.randint(1, 2))) if "availability" in flags else []
        s = b.add("staff", name=_person(rng, used), max_hours_week=max_hours, hourly_cents=hourly,
                  unavailable_days=",".join(map(str, off)))
        staff_rows.append(s)
    for s in staff_rows[:n_staff]:
        days_off = {int(d) for d in s["unavailable_days"].split(",") if d}
        days = [d for d in range(7) if d not in days_off]
        cap = min(MAX_DAYS_PER_WEEK, s["max_hours_week"] // SHIFT_HOURS, len(days))
        for d in rng.sample(days, max(0, round(cap * fill))):
            roster.append((d, rng.choice(warehouses), s["id"], s["hourly_cents"] * SHIFT_HOURS))
    if not roster:  # every task needs at least one shift
        s = staff_rows[0]
        roster.append((0 if "0" not in s["unavailable_days"].split(",") else 1, warehouses[0], s["id"],
                       s["hourly_cents"] * SHIFT_HOURS))
    roster.sort()
    needs: dict[tuple[int, int], int] = defaultdict(int)
    for d, w, _, _ in roster:
        needs[(d, w)] += 1
    for d in range(7):
        for w in warehouses:
            b.add("shift_needs", day=d, warehouse_id=w, staff_needed=needs[(d, w)])
    for s in rng.sample(staff_rows, min(len(staff_rows), 1 + k["distractors"] // 20)):  # last week's shifts
        for d in rng.sample(range(-7, 0), rng.randint(1, 4)):
            b.add("shifts", staff_id=s["id"], day=d, warehouse_id=rng.choice(warehouses), hours=SHIFT_HOURS)
    wages = sum(r[3] for r in roster)
    prior = rng.randint(0, 50) * 100
    b.rows["budgets"] = [{"category": "labour", "limit_cents": prior + math.ceil(wages * (1 + k["budget_slack"] * 0.5)),
                          "spent_cents": prior},
                         {"category": "purchasing", "limit_cents": 100_000, "spent_cents": 0}]
    # The needs come from a random feasible roster; the witness is the cheapest roster that covers them, so the
    # oracle's cost is the one the checks price an agent's roster against.
    cheapest = rostering.cheapest_roster(staff_rows, needs, [], shift_hours=SHIFT_HOURS, max_days=MAX_DAYS_PER_WEEK)
    witness = [_act("assign_shift", staff_id=s.staff_id, day=s.day, warehouse_id=s.warehouse_id, hours=SHIFT_HOURS)
               for s in cheapest]
    remaining = b.rows["budgets"][0]["limit_cents"] - prior
    goal = (f"Staff the week of {day_date(0)} to {day_date(6)} (days 0-6). For every day and warehouse, bring the people "
            f"on {SHIFT_HOURS}-hour shifts up to staff_needed (see shift_needs; shifts already rostered count) and no "
            f"further: a shift beyond the need is a change the task does not ask for. Labour rules: at most one shift per "
            f"person per day, at most {MAX_DAYS_PER_WEEK} working days and max_hours_week hours per person, never on "
            f"their unavailable days. Labour budget remaining: {money(remaining)} (a cheaper roster scores higher). "
            "Do not change past shifts. "
            "Call submit when you are done.")
    metadata = {"kind": "staff", "week_days": list(range(7)), "start_date": START_DATE, "shift_hours": SHIFT_HOURS}
    expected = {"needs": [[d, w, c] for (d, w), c in sorted(needs.items())]}
    return World("staff", dict(b.rows), goal, metadata, witness, expected)


# ---------------------------------------------------------------------------------------------------
# billing: refund a duplicate charge without touching anyone else
# ---------------------------------------------------------------------------------------------------
def _billing_books(b: _Rows, rng: random.Random) -> list[dict[str, Any]]:
    """A billing world's clock, budgets and products (the products returned)."""
    _clock_and_warehouses(b, rng, 1)
    b.rows["budgets"] = [{"category": c, "limit_cents": 100_000, "spent_cents": 0} for c in ("labour", "purchasing")]
    return [b.add("products", sku=f"SKU-{rng.randint(10000, 99999)}-{i}", name=pn, price_cents=rng.randint(8, 90) * 100)
            for i, pn in enumerate(rng.sample(names.PRODUCTS, 6))]


def _lookalikes(rng: random.Random, used: set[str], name: str) -> list[str]:
    """Three names a hurried search for `name` also finds."""
    first, last = name.split(" ", 1)
    variants = [f"{first} {last}s", f"{first}n {last}" if not first.endswith("n") else f"{first}a {last}",
                f"{first} {last}-{rng.choice(names.LAST)}"]
    used.update(variants)
    return variants


def _shipped_order(b: _Rows, rng: random.Random, products: list[dict[str, Any]], c: dict[str, Any],
                   placed: int) -> dict[str, Any]:
    p = rng.choice(products)
    qty = rng.randint(1, 4)
    return b.add("orders", customer_id=c["id"], product_id=p["id"], quantity=qty, total_cents=qty * p["price_cents"],
                 placed_day=placed, due_day=placed + 4, status="shipped", warehouse_id=1, shipped_day=placed + 2)


def _charge(b: _Rows, o: dict[str, Any], amount: int, day: int) -> dict[str, Any]:
    return b.add("payments", order_id=o["id"], customer_id=o["customer_id"], kind="charge", amount_cents=amount,
                 day=day, refund_of=None, reason=None)


DUPLICATE_DAYS = range(-45, -3)  # the days an account's orders (and every real duplicate charge) are placed on
# Customers with a real duplicate charge in a billing world, the goal's one of them: one procedure builds them all
# (`_accounts_charged_twice`) and the goal's is drawn once all are built, so no feature of the data tells it
DUPLICATE_ACCOUNTS = 4


def _account_with_a_duplicate(b: _Rows, rng: random.Random, products: list[dict[str, Any]], c: dict[str, Any],
                              n_orders: int, flags: set[str]) -> tuple[dict[str, Any], list[int]]:
    """`n_orders` past orders of customer `c`, one charged twice (its order and the two charges' ids returned), with
    the account features `flags` switch on: an order paid in two parts, an earlier duplicate already refunded."""
    placed_days = sorted(rng.sample(DUPLICATE_DAYS, n_orders))
    dup_index = rng.randrange(n_orders)
    special = [i for i in range(n_orders) if i != dup_index]
    rng.shuffle(special)
    dup_pair: list[int] = []
    dup_order = None
    for i in range(n_orders):
        o = _shipped_order(b, rng, products, c, placed_days[i])
        day = o["placed_day"]
        if i == dup_index:
            dup_pair = [_charge(b, o, o["total_cents"], day)["id"], _charge(b, o, o["total_cents"], day)["id"]]
            dup_order = o
        elif "split_payment" in flags and special and i == special[0]:
            part = rng.randint(1, o["total_cents"] // 100 - 1) * 100 if o["total_cents"] >= 200 else o["total_cents"] // 2
            _charge(b, o, part, day)
            _charge(b, o, o["total_cents"] - part, day + 1)
        elif "prior_refund" in flags and len(special) > 1 and i == special[1]:
            _charge(b, o, o["total_cents"], day)
            second = _charge(b, o, o["total_cents"], day)
            b.add("payments", order_id=o["id"], customer_id=o["customer_id"], kind="refund", amount_cents=o["total_cents"],
                  day=day + 3, refund_of=second["id"], reason="duplicate charge")
        else:
            _charge(b, o, o["total_cents"], day)
    assert dup_order is not None
    return dup_order, dup_pair


def _other_orders(b: _Rows, rng: random.Random, products: list[dict[str, Any]], c: dict[str, Any],
                  real_duplicate: bool) -> None:
    """One to three paid orders of a customer the goal does not concern, and (`real_duplicate`) one charged twice:
    a real duplicate, but not the one to refund."""
    for _ in range(rng.randint(1, 3)):
        o = _shipped_order(b, rng, products, c, rng.randint(-60, -2))
        _charge(b, o, o["total_cents"], o["placed_day"])
    if real_duplicate:  # on a day drawn as the goal's duplicate's is: its age tells the two apart no better than a coin
        o = _shipped_order(b, rng, products, c, rng.choice(DUPLICATE_DAYS))
        _charge(b, o, o["total_cents"], o["placed_day"])
        _charge(b, o, o["total_cents"], o["placed_day"])


def _accounts_charged_twice(rng: random.Random, k: dict[str, Any]) -> tuple[
        _Rows, list[dict[str, Any]], dict[str, dict[str, Any]], dict[str, tuple[dict[str, Any], list[int]]]]:
    """The books of a billing world: DUPLICATE_ACCOUNTS customers, each with as many orders over the same weeks, one
    charged twice, the same account features and look-alike names the flags switch on; other customers with
    ordinary orders. Customer ids are in a shuffled order, order and payment ids in time order. Returns (rows,
    products, {name: customer}, {holder's name: (the order charged twice, its two payment ids)}), holders in the
    order drawn.

    The goal's account was once built alone with these features, and the others with plain orders: a
    hundred-and-thirty-fifth attacker picked the caller from the data on 1000 of 1000 tasks, and a
    hundred-and-seventy-fifth, reading nothing of a billing goal, the goal's duplicate on 92 of 100 (the account with
    a split payment, an earlier refund, look-alike names, the most orders)."""
    b = _Rows()
    flags = _flags(rng, BILLING_FLAGS, k["constraints"])
    products = _billing_books(b, rng)
    used: set[str] = set()
    holders = [_person(rng, used) for _ in range(DUPLICATE_ACCOUNTS)]
    people: list[tuple[str, str | None]] = [(nm, None) for nm in holders]  # (name, the holder it looks like)
    if "similar_names" in flags:
        people += [(variant, nm) for nm in holders for variant in _lookalikes(rng, used, nm)]
    people += [(_person(rng, used), None) for _ in range(k["distractors"] // 4)]
    rng.shuffle(people)  # customer ids in no order the accounts were built in
    customers = {nm: b.add("customers", name=nm, email=_email(rng, nm), card_on_file=1) for nm, _ in people}
    n_orders = 2 + k["n_orders"] // 4
    accounts = {nm: _account_with_a_duplicate(b, rng, products, customers[nm], n_orders, flags) for nm in holders}
    for nm, like in people:
        if nm not in accounts:
            _other_orders(b, rng, products, customers[nm], "lookalike_duplicate" in flags and like is not None)
    # ids in time order, as a real system issues them: the accounts were built one after another
    _, payment_ids = _ids_in_time_order(b.rows, rng)
    return b, products, customers, {nm: (order, sorted(payment_ids[i] for i in pair)) for nm, (order, pair) in accounts.items()}


def _billing(rng: random.Random, k: dict[str, Any]) -> World:
    if k.get("user") == "customer":
        return _billing_with_caller(rng, k)
    b, _, customers, accounts = _accounts_charged_twice(rng, k)
    target_name = rng.choice(list(accounts))
    target = customers[target_name]
    dup_order, dup_pair = accounts[target_name]
    amount = dup_order["total_cents"]
    d = k["difficulty"]
    if d < 0.34:  # the order is named: no search needed
        ask = (f"Customer {target_name} was charged twice for order #{dup_order['id']} on {day_date(dup_order['placed_day'])} "
               f"({money(amount)} each time).")
        meta = {"customer_name": target_name, "order_id": dup_order["id"]}
    elif d < 0.67:  # the customer is unique by e-mail; which order is for the agent to find
        ask = (f"The customer with e-mail {target['email']} says one of their orders was charged twice around "
               f"{day_date(dup_order['placed_day'])}.")
        meta = {"customer_email": target["email"]}
    else:  # only the exact name, among look-alikes, and no date
        ask = f"Customer {target_name} says they were charged twice for the same order recently."
        meta = {"customer_name": target_name}
    goal = (f"{ask} Find the duplicate charge and refund it in full, once. Do not touch any other payment, order or "
            "customer. Call submit when you are done.")
    witness = [_act("refund_payment", payment_id=dup_pair[1], amount_cents=amount, reason="duplicate charge")]
    expected = {"duplicate_pair": dup_pair, "amount_cents": amount, "customer_id": target["id"]}
    return World("billing", dict(b.rows), goal, {"kind": "billing", "start_date": START_DATE, **meta}, witness, expected)


def _renumber(rows: list[dict[str, Any]], day: str | None, rng: random.Random) -> dict[int, int]:
    """Give `rows` new ids, from the lowest of theirs, in the order of their `day` (ties, or every row if `day` is
    None, in a seeded order); return {old id: new id}. The rows are changed in place."""
    if not rows:
        return {}
    first = min(r["id"] for r in rows)
    keyed = sorted(rows, key=lambda r: (r[day] if day is not None else 0, rng.random()))
    mapping = {r["id"]: first + i for i, r in enumerate(keyed)}
    for r in rows:
        r["id"] = mapping[r["id"]]
    return mapping


def _ids_in_time_order(rows: dict[str, list[dict[str, Any]]], rng: random.Random) -> tuple[dict[int, int], dict[int, int]]:
    """Renumber orders and payments in time order (`_renumber`), as a real system issues ids, and the payments'
    references with them; return ({old order id: new}, {old payment id: new})."""
    order_ids = _renumber(rows["orders"], "placed_day", rng)
    payment_ids = _renumber(rows["payments"], "day", rng)
    for pay in rows["payments"]:
        pay["order_id"] = order_ids[pay["order_id"]]
        pay["refund_of"] = payment_ids.get(pay["refund_of"])
    return order_ids, payment_ids


def _billing_with_caller(rng: random.Random, k: dict[str, Any]) -> World:
    """The billing world with the customer on the line (`caller`): the goal names no one, and the caller is one of
    the DUPLICATE_ACCOUNTS customers `_accounts_charged_twice` builds alike. The store's policy says what to obtain
    from the caller before acting."""
    b, products, customers, accounts = _accounts_charged_twice(rng, k)
    name = rng.choice(list(accounts))
    target = customers[name]
    dup_order, dup_pair = accounts[name]
    d, amount = k["difficulty"], dup_order["total_cents"]
    product = next(p["name"] for p in products if p["id"] == dup_order["product_id"])
    facts = caller.Facts(customer_id=target["id"], email=target["email"], name=target["name"], order_id=dup_order["id"],
                         product=product, placed_date=day_date(dup_order["placed_day"]), amount_cents=amount,
                         knows_order=d < 0.5, confirm=rng.random() < 0.25 + 0.5 * d, voice=f"{rng.getrandbits(32):08x}")
    b.rows["caller"] = [facts.row()]
    policy = ["verify the caller before you change anything on an account: ask for the e-mail address on file, and "
              "act only on the account it belongs to"]
    if facts.confirm:
        policy.append("before you refund, tell the customer the exact amount you will refund and ask for their agreement")
    goal = (f"A customer is on the line; talk to them with message_user (they answer the questions you ask). They say: "
            f"\"{facts.opening}\" Store policy: " + "; ".join(f"({i}) {p}" for i, p in enumerate(policy, 1)) + ". "
            "Find the duplicate charge and refund it in full, once. Do not touch any other payment, order or customer. "
            "Call submit when you are done.")
    witness = [_act("message_user", text="To verify your account, what is the e-mail address on file?")]
    if facts.confirm:
        witness.append(_act("message_user", text=f"I will refund {money(amount)}, the duplicate charge on order "
                                                 f"#{dup_order['id']}. Is that right?"))
    witness.append(_act("refund_payment", payment_id=dup_pair[1], amount_cents=amount, reason="duplicate charge"))
    expected = {"duplicate_pair": dup_pair, "amount_cents": amount, "customer_id": target["id"],
                "caller": {"confirm": facts.confirm}}
    return World("billing", dict(b.rows), goal, {"kind": "billing", "start_date": START_DATE, "user": "customer"},
                 witness, expected)


_GENERATORS = {
    "fulfil": lambda rng, k: _fulfilment(rng, k, delayed=False),
    "resource": lambda rng, k: _fulfilment(rng, k, delayed=True),
    "staff": _staffing,
    "billing": _billing,
}


def choose_kind(seed: int) -> str:
    """The goal kind a seed gets when the `kind` knob is not set."""
    return random.Random(f"ops-kind:{seed}").choice(KINDS)


@lru_cache(maxsize=512)
def _generate_cached(seed: int, knobs_json: str) -> World:
    knobs = json.loads(knobs_json)
    # a world with no one on the line draws from the stream it drew from before the `user` knob existed (3.2.0's),
    # so those tasks' worlds did not change with it
    drawn = {k: v for k, v in knobs.items() if not (k == "user" and v == "none")}
    rng = random.Random(f"ops:{seed}:{canonical_json(drawn)}")
    return _GENERATORS[knobs["kind"]](rng, knobs)


def generate_world(seed: int, knobs: dict[str, Any]) -> World:
    """The world for `seed` and resolved `knobs` (which must include `kind`). Deterministic; cached.

    Callers must treat the result as read-only: it is shared between callers through the cache.
    """
    return _generate_cached(seed, canonical_json(knobs))
