"""Seeded generation of a site's content and of one goal on it.

`generate_world(seed, knobs)` is pure: the same seed and knobs give the same rows, goal and expectations,
so the environment, the oracle and the verifier each rebuild it instead of sharing state. Dates are on
the site's fixed calendar (TODAY), so nothing depends on when a rollout runs.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from typing import Any

from gymsmith.families.ops.names import FIRST, LAST, PRODUCTS
from gymsmith.families.web.schema import WORLD

TODAY = dt.date(2026, 3, 16)
KINDS = ("address", "refund", "tickets")
AGENT_USER, AGENT_PASSWORD = "support", "desk-2291"  # the agent's account: the goal states its password
STAFF_USER, ADMIN_USER = "jordan", "admin"  # the other accounts: their passwords exist only in the running site
STAFF_REPLY = "Sorted on our side; closing this ticket."
TAGS = ("shipping", "billing", "returns", "account", "damaged")
SUBJECTS = {"shipping": ("Where is my parcel?", "Delivery is late", "Tracking not updating"),
            "billing": ("Charged twice", "Invoice request", "Wrong VAT on invoice"),
            "returns": ("How do I return an item?", "Return label missing", "Refund for return"),
            "account": ("Cannot log in", "Change my email", "Close my account"),
            "damaged": ("Item arrived broken", "Box was crushed", "Missing parts")}
STREETS = ("Elm Street", "Harbour Road", "Mill Lane", "Station Road", "Kastanienallee", "Rue des Lilas", "Oak Avenue",
           "Keizersgracht", "Market Square", "Linden Way")
CITIES = {"United States": ("Springfield", "Portland", "Madison"), "Germany": ("Leipzig", "Bremen", "Mainz"),
          "France": ("Lyon", "Nantes", "Lille"), "Netherlands": ("Utrecht", "Delft", "Haarlem"),
          "United Kingdom": ("Leeds", "Bristol", "York")}
COUNTRIES = tuple(CITIES)


def postcode(country: str, rng: random.Random) -> str:
    """A postcode in the country's format (the site validates these formats)."""
    if country == "Netherlands":
        return f"{rng.randint(1000, 9999)} {rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}{rng.choice('ABCDEFGHJKLMNPRSTVWXZ')}"
    if country == "United Kingdom":
        return f"{rng.choice(('LS', 'BS', 'YO'))}{rng.randint(1, 9)} {rng.randint(1, 9)}{rng.choice('ABDEFGHJLN')}{rng.choice('PQRSTUWXYZ')}"
    return f"{rng.randint(10000, 99999):05d}"


def near_names(name: str, k: int, taken: set[str], rng: random.Random) -> list[str]:
    """Up to `k` names one edit away from `name` (a dropped, doubled or changed letter), none in `taken`."""
    first, last = name.split(" ", 1)
    out: list[str] = []
    for _ in range(200):
        if len(out) >= k:
            break
        part, other = (first, last) if rng.random() < 0.5 else (last, first)
        i = rng.randrange(1, len(part))
        op = rng.choice(("drop", "double", "swap"))
        if op == "drop":
            new = part[:i] + part[i + 1:]
        elif op == "double":
            new = part[:i] + part[i] + part[i:]
        else:
            new = part[:i] + rng.choice("aeiouny") + part[i + 1:]
        candidate = f"{new} {other}" if part is first else f"{other} {new}"
        if len(new) > 1 and candidate != name and candidate not in taken and candidate not in out:
            out.append(candidate)
    return out


def day(offset: int) -> str:
    return (TODAY - dt.timedelta(days=offset)).isoformat()


@dataclass
class World:
    kind: str
    goal: str
    rows: dict[str, list[dict[str, Any]]]
    expected: dict[str, Any]
    metadata: dict[str, Any] = field(default_factory=dict)


class _Builder:
    """Accumulates rows with sequential ids per table (orders start at 1001, charges at 5001)."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.rows: dict[str, list[dict[str, Any]]] = {t: [] for t in ("users", "customers", "orders", "order_items", "charges",
                                                                    "refunds", "tickets", "messages", "audit")}
        self.next_id = {"orders": 1001, "charges": 5001, "tickets": 301}
        self.background_closed = False  # a tickets task's desk: every background ticket closed (`_tickets`)

    def add(self, table: str, **row: Any) -> int:
        rid = self.next_id.get(table, 1)
        self.next_id[table] = rid + 1
        self.rows[table].append({"id": rid, **row})
        return rid

    def customer(self, name: str) -> int:
        return self.add("customers", name=name, email=f"{name.lower().replace(' ', '.')}@example.com")

    def order(self, customer_id: int, placed: str, *, country: str | None = None, duplicate: bool = False) -> int:
        rng = self.rng
        country = country or rng.choice(COUNTRIES)
        items = [(rng.choice(PRODUCTS), rng.randint(1, 4), rng.randint(5, 120) * 100 + rng.choice((0, 50, 99))) for _ in range(rng.randint(1, 3))]
        total = sum(q * p for _, q, p in items)
        oid = self.add("orders", customer_id=customer_id, placed_on=placed, total_cents=total,
                       status=rng.choice(("paid", "paid", "shipped", "delivered")),
                       ship_line1=f"{rng.randint(1, 180)} {rng.choice(STREETS)}", ship_line2=rng.choice(("", "", f"Apt {rng.randint(1, 40)}")),
                       ship_city=rng.choice(CITIES[country]), ship_postcode=postcode(country, rng), ship_country=country)
        for product, qty, price in items:
            self.add("order_items", order_id=oid, product=product, quantity=qty, price_cents=price)
        self.add("charges", order_id=oid, amount_cents=total, charged_on=placed, status="captured")
        if duplicate:
            self.add("charges", order_id=oid, amount_cents=total, charged_on=placed, status="captured")
        return oid


def generate_world(seed: int, knobs: dict[str, Any]) -> World:
    """The site and goal of task (`seed`, `knobs`). Knobs: kind, records, distractors, validation_trap, n_tickets."""
    rng = random.Random(f"web:{seed}")
    b = _Builder(rng)
    # accounts only: no password is generated here, so none follows from the seed (site.Site.load draws them)
    b.add("users", username=AGENT_USER, role="support")
    b.add("users", username=STAFF_USER, role="support")
    b.add("users", username=ADMIN_USER, role="admin")
    names = [f"{first} {last}" for first in FIRST for last in LAST]
    rng.shuffle(names)
    n_customers = max(12, knobs["records"] // 3)
    base_names = names[:n_customers]
    customers = {name: b.customer(name) for name in base_names}
    taken = set(base_names)
    # the goal's customer and its decoys, each with customers one letter away: each drawn from its group of names
    # (a name of the lists and its one-letter edits), so that neither spelling nor being the group's centre tells it
    look_alikes = {}
    for root in base_names[:1 + DECOYS]:
        group = [root, *near_names(root, knobs["distractors"], taken, rng)]
        taken.update(group)
        for v in group[1:]:
            customers[v] = b.customer(v)
        holder = rng.choice(group)
        look_alikes[holder] = [v for v in group if v != holder]
    target_name = next(iter(look_alikes))
    kind = knobs["kind"]
    builders = {"address": _address, "refund": _refund, "tickets": _tickets}
    goal, expected = builders[kind](b, rng, knobs, customers, target_name, look_alikes)
    # background records: the rest of the shop, in every table, of every customer alike: the goal's customer once had
    # none, so its few records marked it (a hundred-and-seventy-sixth attacker, reading nothing of the goal: 86 of 100
    # refund tasks, 99 of 100 address tasks). No customer gets a second order on a day it already ordered, so "the
    # order X placed on D" stays one order
    everyone = list(customers.values())
    ordered = {(o["customer_id"], o["placed_on"]) for o in b.rows["orders"]}
    while len(b.rows["orders"]) < knobs["records"]:
        customer, placed = rng.choice(everyone), day(rng.randint(0, 120))
        if (customer, placed) not in ordered:
            ordered.add((customer, placed))
            b.order(customer, placed, duplicate=rng.random() < 0.03)
    _background_tickets(b, rng, everyone, knobs)
    _scatter(b.rows, expected, rng)
    goal = goal.replace("{order_id}", str(expected.get("order_id")))
    expected["kind"] = kind
    return World(kind=kind, goal=goal + f"\n\nLog in to the ShopDesk back office as '{AGENT_USER}' with password '{AGENT_PASSWORD}'.",
                 rows=b.rows, expected=expected, metadata={"kind": kind, "records": knobs["records"]})


# Customers whose records have the goal's shape, besides the goal's own: each with as many look-alikes, and (for an
# address or refund goal) an order of that kind with the look-alikes' orders on its day. With the goal's customer
# alone built so, a script reading nothing of the goal found it as the one name others were a letter away from, or
# as the unrefunded duplicate on the day of the refunded ones (right on 79 and 76 of 100 refund tasks). The property
# (`test_web_env.py::test_the_goals_customer_is_not_told_by_the_shape_of_the_data`): under what the site shows of a
# customer (its name's spelling, its orders and tickets, an order's address), the goal's record is one of at least
# three alike, and only the goal's text tells which.
DECOYS = 2

SCATTERED = ("orders", "charges", "tickets")  # the tables whose ids the site shows
# the rows that name a scattered table's id: (table, column, the table it names, for audit rows: their action's prefix)
_REFERENCES = (("order_items", "order_id", "orders", None), ("charges", "order_id", "orders", None),
               ("refunds", "charge_id", "charges", None), ("messages", "ticket_id", "tickets", None),
               ("audit", "target_id", "charges", "charge."), ("audit", "target_id", "tickets", "ticket."),
               ("audit", "target_id", "orders", "order."))


def _scatter(rows: dict[str, list[dict[str, Any]]], expected: dict[str, Any], rng: random.Random) -> None:
    """Deal each SCATTERED table's ids out again in a seeded order, so an id says nothing of which record the goal
    means. The goal's records were made first, so they held the first ids on every task (order #1001 and charge #5002
    for a refund, order #1003 for an address, tickets from #301): a hundred-and-sixty-eighth attacker's script that
    opened /orders/1001/charges/5002/refund without reading the goal was accepted on 9 of 9 tasks. An order's charges
    keep their order of creation (a duplicate still follows the charge it repeats); nothing else reads an id's order
    (the goal's tickets were opened on distinct days). The ids stay the same set."""
    for table in SCATTERED:
        table_rows = rows[table]
        ids = [r["id"] for r in table_rows]
        dealt = ids[:]
        rng.shuffle(dealt)
        new_id = dict(zip(ids, dealt))
        if table == "charges":
            by_order: dict[int, list[int]] = {}
            for r in table_rows:
                by_order.setdefault(r["order_id"], []).append(r["id"])
            for made in by_order.values():
                new_id.update(zip(made, sorted(new_id[i] for i in made)))
        for r in table_rows:
            r["id"] = new_id[r["id"]]
        table_rows.sort(key=lambda r: r["id"])
        for child, column, named, action in _REFERENCES:
            if named == table:
                for r in rows[child]:
                    if action is None or r["action"].startswith(action):
                        r[column] = new_id[r[column]]
        for key, value in expected.items():
            if key in _EXPECTED_IDS.get(table, ()):
                expected[key] = sorted(new_id[v] for v in value) if isinstance(value, list) else new_id[value]


_EXPECTED_IDS = {"orders": ("order_id",), "charges": ("charge_id", "kept_charge_id"), "tickets": ("close", "reply_to")}


def _in_seeded_order(rng, look_alikes):
    """The goal's customer and its decoys in a seeded order, so that nothing made in order of creation (a refund's or
    an audit entry's id) tells which is the goal's."""
    return rng.sample(list(look_alikes.items()), len(look_alikes))


def _address(b, rng, knobs, customers, target_name, look_alikes):
    trap = bool(knobs["validation_trap"])
    country = rng.choice(COUNTRIES)  # the new address's
    made = {}
    for name, variants in _in_seeded_order(rng, look_alikes):  # the goal's customer and its decoys alike
        when = day(rng.randint(3, 60))
        for offset in rng.sample(range(61, 120), 2):  # the same customer on other days
            b.order(customers[name], day(offset))
        # each decoy's order stands to the new address as the goal's does (the same country, or with the trap
        # another country and a second line to clear): else the new address alone told the goal's order apart
        old_country = rng.choice([c for c in COUNTRIES if c != country]) if trap else country
        made[name] = when, b.order(customers[name], when, country=old_country)
        if trap:
            b.rows["orders"][-1]["ship_line2"] = f"Apt {rng.randint(1, 40)}"  # the new address has none: it must be cleared
        for v in variants:  # near-identical names on the same day, each with a history of its own as the target has:
            # the target was the one of that day with orders on other days (a hundred-and-seventy-first attacker's
            # script reading only the new address was accepted on 12 of 12 tasks)
            b.order(customers[v], when)
            for offset in rng.sample(range(61, 120), 2):
                b.order(customers[v], day(offset))
    when, target = made[target_name]
    new = {"ship_line1": f"{rng.randint(1, 180)} {rng.choice(STREETS)}", "ship_line2": "",
           "ship_city": rng.choice(CITIES[country]), "ship_postcode": postcode(country, rng), "ship_country": country}
    goal = (f"Change the shipping address of the order that {target_name} placed on {when} to: "
            f"{new['ship_line1']}, {new['ship_postcode']} {new['ship_city']}, {new['ship_country']} (no second address line).")
    return goal, {"customer": target_name, "placed_on": when, "order_id": target, "address": new}


def _refund(b, rng, knobs, customers, target_name, look_alikes):
    made = {}
    for name, variants in _in_seeded_order(rng, look_alikes):  # the goal's customer and its decoys alike
        when = day(rng.randint(1, 40))
        made[name] = b.order(customers[name], when, duplicate=True)
        for v in variants:  # look-alike customers with a double charge that is already refunded
            b.order(customers[v], when, duplicate=True)
            dup = b.rows["charges"][-1]
            dup["status"] = "refunded"
            b.add("refunds", charge_id=dup["id"], amount_cents=dup["amount_cents"], reason="duplicate", created_on=when, created_by=ADMIN_USER)
            b.add("audit", actor=ADMIN_USER, action="charge.refund", target_id=dup["id"], on_day=when)
    target = made[target_name]
    charges = [c["id"] for c in b.rows["charges"] if c["order_id"] == target]
    goal = (f"{target_name} was charged twice for order #{{order_id}}. Refund the duplicate charge (the later of the two "
            f"identical charges) with the reason 'Duplicate charge'. Do not refund anything else.")
    return goal, {"customer": target_name, "order_id": target, "charge_id": charges[-1], "kept_charge_id": charges[0],
                  "reason": "duplicate"}


def _tickets(b, rng, knobs, customers, target_name, look_alikes):
    """Every tag of the desk is built alike and the goal's tag is drawn once all are: the goal's tag alone built so
    had the most open tickets (right on 59 of 100 tasks by that count alone) and its customers marked it, so that a
    hundred-and-seventy-sixth attacker's script, reading nothing of the tag or the date, closed the goal's tickets on
    83 of 100 tasks. Within a tag, the open tickets are opened on days drawn alike over four months, and the date
    falls between the k-th oldest and the next: a date 10-30 days back with the tickets to close spread before it,
    the newer ones after it and the tag's other tickets closed only before it showed where the cut was, and a
    hundred-and-seventy-seventh attacker's script reading the tag but not the date closed the goal's tickets on 86 of
    100 tasks. Only the count k is left to guess without the date: one of three around the knob's."""
    pool = list(customers.values())
    built = {}
    for tag in rng.sample(TAGS, len(TAGS)):
        # one of three counts around the knob's: the site's size tells the difficulty, which sets the knob, and the
        # tickets to close are the tag's oldest open ones, so their exact number closed them without reading the date
        # (the hundred-and-seventy-sixth attacker, reading the tag but not the date: 200 of 200)
        k = max(1, knobs["n_tickets"] - 1) + rng.randint(0, 2)  # one of three counts around the knob's
        # newer open ones (kept open): as many as the goal's were always there (n_tickets = distractors + 1), so "the
        # older half of the tag's open tickets" closed the goal's without reading its date (a hundred-and-seventy-first
        # attacker: accepted 15 of 15); drawn apart from k
        newer = rng.randint(0, 3 * knobs["distractors"] + 3)
        ages = sorted(rng.sample(range(1, 121), k + newer), reverse=True)  # days back, the oldest first; distinct
        opened = [_ticket(b, rng, rng.choice(pool), tag, day(age), "open") for age in ages]
        cutoff = day(rng.randint(ages[k] if newer else 0, ages[k - 1] - 1))  # after the k-th oldest, by the next
        for _ in range(knobs["distractors"] + 1):  # older and newer ones already closed
            _ticket(b, rng, rng.choice(pool), tag, day(rng.randint(0, 120)), "closed")
        built[tag] = cutoff, opened[:k]
    b.background_closed = True
    tag = rng.choice(TAGS)
    cutoff, close_ids = built[tag]
    newest = close_ids[-1]  # the k-th oldest: the most recently opened of them
    reply = rng.choice(("Thanks for your patience: this is resolved now.", "We have sorted this out; closing the ticket.",
                        "Resolved on our side. Write back if anything is still wrong."))
    goal = (f"Close every open ticket tagged '{tag}' that was opened before {cutoff}. Before closing the most recently "
            f"opened of them, reply to it with exactly this text: {reply}")
    return goal, {"tag": tag, "cutoff": cutoff, "close": sorted(close_ids), "reply_to": newest, "reply": reply}


def _ticket(b, rng, customer_id, tag, opened, status) -> int:
    tid = b.add("tickets", customer_id=customer_id, subject=rng.choice(SUBJECTS[tag]), tag=tag, opened_on=opened, status=status)
    b.add("messages", ticket_id=tid, author="customer", body=f"Hello, {rng.choice(SUBJECTS[tag]).lower()} Order ref {rng.randint(1001, 1400)}.",
          sent_on=opened)
    if status == "closed":  # another member of staff answered and closed it, as the audit says
        answered = min(TODAY, dt.date.fromisoformat(opened) + dt.timedelta(days=1)).isoformat()
        b.add("messages", ticket_id=tid, author=STAFF_USER, body=STAFF_REPLY, sent_on=answered)
        b.add("audit", actor=STAFF_USER, action="ticket.reply", target_id=tid, on_day=answered)
        b.add("audit", actor=STAFF_USER, action="ticket.close", target_id=tid, on_day=answered)
    return tid


def _background_tickets(b, rng, customers, knobs):
    """The rest of the help desk, every tag among them: one the goal names was missing here, which told it (the tag
    whose open tickets were twice its closed ones was the goal's on 361 of 540 tasks). On a tickets task they are all
    closed (`_Builder.background_closed`): an open one before the goal's date would be the goal's to close, and one
    closed only before it showed the date."""
    for _ in range(max(8, knobs["records"] // 4)):
        tag, opened = rng.choice(TAGS), day(rng.randint(0, 120))
        status = "closed" if b.background_closed else rng.choice(("open", "open", "closed"))
        _ticket(b, rng, rng.choice(customers), tag, opened, status)


def _start_rows(seed: int, knobs: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    return generate_world(seed, knobs).rows


pristine_image = WORLD.image_cache(_start_rows)  # (seed, knobs) -> (SQLite image, digest), built once per task
