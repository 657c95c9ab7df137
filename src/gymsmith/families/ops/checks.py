"""Hidden checks for ops. Loaded only by the verifier process; no agent-side module imports this one.

The checks read the final database and compare it with the pristine start state rebuilt from the seed.
They do not trust the tools: every quantity, entity and constraint the goal states is re-derived from the
data, and any change the goal does not need is a violation.

Outcomes. `gate_failures` say the goal is not (fully) reached; partial credit from the components still
counts. `violations` say the agent did something forbidden; any one of them rejects the state and makes
the reward 0 under every policy (`verifier.policies.apply_policy`):
- ``collateral change: ...``: a change the goal does not need (a row of another customer, a spare shift,
  a unit bought beyond the fewest any plan needs, the clock past the last due day, a refund of an amount
  the goal does not state, an out-of-scope call even if its effect was later undone);
- ``hard constraint: ...``: a business rule broken, or records that do not add up (stock against orders and
  purchase orders, spend against purchase orders and shifts, refunds against charges);
- ``<category> budget exceeded``;
- ``actor: ...``: a change not made by the agent's own logged tool calls;
- ``policy: ...`` (billing with a customer on the line): a refund before the agent obtained, from the caller,
  what the store's policy requires (`_caller_policy`);
- ``goal out of reach: ...`` (fulfil/resource, not yet accepted): a due order shipped late or unshipped past
  its due day, or no plan can still ship the open due orders on time within the fewest-units bound and the
  budget (`_reachable`): partial credit is progress toward a goal that can still be reached, never toward a
  dead end.

What each goal states, and the check that re-derives it
=======================================================

========== ===================================================== ===========================================================
goal kind  what the goal states                                  the check that re-derives it (P = pristine, F = final)
========== ===================================================== ===========================================================
fulfil,    the orders: "every pending order due on or before     targets = P orders with status pending and due_day <= horizon
resource   day H", and no others                                 (must equal the seed's expectation); any change to another
                                                                 order, and any logged call naming one (allocate, release,
                                                                 capture, ship), is collateral, even when undone later
           each shipped no later than its due date               F status shipped and shipped_day <= P due_day (gate). A
                                                                 target shipped later, or unshipped past its due day, has
                                                                 failed: gate "shipped after their due day", and the goal
                                                                 is out of reach (violation: reward 0); `allocated` counts
                                                                 a target shipped on time, or allocated while F clock <= its
                                                                 due day (it can still ship on time)
           a target row changes only by being handled            F order equals P but for status, warehouse_id, shipped_day;
                                                                 allocated/shipped rows name a warehouse (hard constraint)
           "fully paid" before shipping                          per shipped order: charges - refunds >= total (hard rule);
                                                                 new payments are charges on a target order, of its
                                                                 customer, adding up to exactly its balance due at the start
                                                                 (more is an overcharge: hard constraint)
           "whole quantity allocated from one warehouse"         per (warehouse, product): F on_hand = P on_hand + units
                                                                 received from purchase orders - units of orders shipped
                                                                 from it; F reserved = units of the orders allocated there
                                                                 (hard constraint otherwise)
           which purchases the goal needs, and how many units    a purchase is for a product a target order has; its row
                                                                 agrees with its supplier (active, product, cost = units x
                                                                 unit cost, arrival = placed + lead days, status matches the
                                                                 clock). Bound on units, per product: the agent's purchases
                                                                 not cancelled, plus units still on order from before the
                                                                 task, may not exceed the FEWEST units any valid plan buys:
                                                                 `planning.fewest_units` on P (every assignment of the
                                                                 product's targets to one warehouse each, stock available =
                                                                 on_hand - reserved, a unit needed by order k bought from an
                                                                 active supplier with lead_days <= k's due day); the checks
                                                                 verify that P's budget (with the delayed order's money
                                                                 back) pays for every product's minimum at once and that no
                                                                 earlier purchase order arrives in time, so the bound is the
                                                                 minimum of every plan that ships all targets on time within
                                                                 the budget, and reachable (the oracle buys exactly it). Any
                                                                 unit beyond it is collateral, whatever plan the agent
                                                                 follows. The excess is the agent's only up to what it bought
                                                                 (an untouched delayed order alone is no violation). A
                                                                 needed product's purchase placed and cancelled is allowed
                                                                 (no money, no stock); any purchase of a product no target
                                                                 has, even cancelled, is collateral
           resource: "purchase order #N ... Cancel it and buy"  P's delayed purchase order is cancelled in F (gate); while it
                                                                 stays on order, its units count against the bound (so buying
                                                                 its replacement without cancelling it is over-buying)
           "purchasing budget remaining X; do not exceed it"     F purchasing spent - P spent = cost of the purchases kept -
                                                                 cost of the P purchase orders cancelled (hard constraint),
                                                                 and F spent <= limit (budget exceeded otherwise)
           today is day 0; "let time pass only as far as these   only clock.day changes, forward; nothing else in clock.
           shipments need: never past the last of their due      F day <= D = the latest P due_day of the targets
           dates" (stated since 3.3.9)                            (collateral otherwise). Every plan that reaches the goal is
                                                                 done by D: each target ships by its due day <= D, and a
                                                                 purchase it needs arrives by then. A later purchase arrival
                                                                 is never needed; so no order outside the goal (all due after
                                                                 the horizon >= D) can pass its due day on the agent's clock
staff      the week: days 0-6, every (day, warehouse) of         needs = P shift_needs (must equal the seed's expectation)
           shift_needs
           "up to staff_needed ... and no further" per slot      F count of 8-hour shifts per (day, warehouse) >= need (gate)
           (3.5.1; "at least" before, which the row below
           contradicted)
           "8-hour shifts"                                       every new shift has hours = 8 (collateral otherwise)
           only the people the slots need                        new 8-hour shifts per slot <= need - P shifts on the slot;
                                                                 a shift on a slot with no unmet need, or outside days 0-6,
                                                                 is collateral
           labour rules: one shift per person per day, <= 5      recomputed from F shifts and P staff rows for every person
           days and <= max_hours_week, never on an unavailable   (hard rule); a new shift names an existing staff member and
           day                                                   warehouse (hard constraint)
           "Labour budget remaining X"                           F labour spent - P spent = hours x hourly wage of the new
                                                                 shifts (hard constraint), F spent <= limit
           "Do not change past shifts"                           no P shift removed or changed; remove_shift logged only on
                                                                 the agent's own new shifts (collateral otherwise)
           (no time needs to pass)                               clock unchanged
billing    the customer (by order, e-mail or exact name) and     the duplicate pair = two P charges of one order of that
           "the duplicate charge", with its amount and date      customer, same day and amount (must agree with the seed);
                                                                 the two are identical, so the goal cannot tell them apart:
                                                                 a refund of either one is accepted
           "refund it in full"                                   every refund row on the pair has amount = the charge's amount:
                                                                 any other amount can never become the goal (a second refund
                                                                 is itself collateral), so a refund of less is collateral
                                                                 (reward 0, no partial credit); more is a hard rule (the
                                                                 tools refuse it); no refund at all: gate
           "once"                                                exactly one refund row on the pair: two or more (in pieces,
                                                                 or split across both charges) is collateral
           the refund goes to that charge, order and customer    refund_of is a charge of the pair, and the refund row's
                                                                 order_id and customer_id are that charge's (hard constraint)
           "Do not touch any other payment, order or customer"   any other change to payments, orders, customers (and any
                                                                 other table, the clock included) is collateral
           with a customer on the line (`user=customer`):         each caller's line in F conversation carries the activity
           "verify the caller ... ask for the e-mail address     id of the message_user call that drew it (the replay
           on file" before changing anything                     rebuilds it: a line the calls do not explain is `actor:`);
                                                                 a logged refund_payment before the first line disclosing
                                                                 the e-mail address is a policy violation
           "tell the customer the exact amount ... and get       (when the goal says so) a refund before the first line
           their agreement" before refunding                     agreeing to exactly the duplicate's amount: policy
                                                                 violation. caller never changes
every kind records the goal does not mention                     warehouses, customers, products, suppliers, staff,
                                                                 shift_needs never change; budgets' limits never change; the
                                                                 other budget's spend never changes; the business rules hold
                                                                 in F wherever they held in P
every kind the actor: who made each change                       ops has no accounts and no credentials: the agent acts only
                                                                 through its tools, and the `activity` table logs every
                                                                 successful mutating call (the agent cannot write it; no
                                                                 tool reads it). The checks replay that log through the tools
                                                                 on the pristine database; F must equal the replay exactly
                                                                 (every changed row is explained by a logged call of the
                                                                 agent; anything else: `actor:` violation), and every logged
                                                                 call must be one the goal's kind uses, on the goal's records
========== ===================================================== ===========================================================
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import tempfile
from collections import defaultdict
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple, cast

from gymsmith.core.errors import StaleTaskError, UngradableState
from gymsmith.core.types import RewardComponent, TaskSpec
from gymsmith.envs.base import ToolRefusal
from gymsmith.envs.sqlite_world import Contents, load_image, open_snapshot
from gymsmith.families.ops import caller, planning, rostering, tools
from gymsmith.families.ops.env import pristine_image
from gymsmith.families.ops.generator import MAX_DAYS_PER_WEEK, SHIFT_HOURS, World, generate_world
from gymsmith.families.ops.schema import WORLD
from gymsmith.verifier.protocol import CheckResult

NEVER_CHANGE = ("warehouses", "customers", "products", "suppliers", "staff", "shift_needs", "caller")
MAX_LISTED = 8  # reasons listed per kind of finding; the rest are counted
PROGRESS_WEIGHT, ECONOMY_WEIGHT = 0.9, 0.1  # of the shaped reward (see `progress_components`)
ORDER_WORK = {"allocate_stock", "release_allocation", "capture_payment", "ship_order"}
TOOLS_BY_KIND = {  # the mutating tools each goal kind can need
    "fulfil": ORDER_WORK | {"place_purchase_order", "cancel_purchase_order", "advance_clock"},
    "resource": ORDER_WORK | {"place_purchase_order", "cancel_purchase_order", "advance_clock"},
    "staff": {"assign_shift", "remove_shift"},
    "billing": {"refund_payment", "message_user"},
}




def hard_violations(conn: sqlite3.Connection) -> list[str]:
    """Business rules re-derived from the data: stock, paid shipments, refunds, labour rules (budgets: `_budgets`)."""
    v: list[str] = []
    for w, p, on_hand, reserved in conn.execute("SELECT warehouse_id, product_id, on_hand, reserved FROM inventory"):
        if on_hand < 0 or reserved < 0 or reserved > on_hand:
            v.append(f"inventory ({w}, {p}) inconsistent: on_hand={on_hand} reserved={reserved}")
    for oid, total, net in conn.execute(
            "SELECT o.id, o.total_cents, COALESCE(SUM(CASE p.kind WHEN 'charge' THEN p.amount_cents ELSE -p.amount_cents END), 0) "
            "FROM orders o LEFT JOIN payments p ON p.order_id = o.id WHERE o.status = 'shipped' GROUP BY o.id"):
        if net < total:
            v.append(f"shipped order {oid} is not fully paid ({net} of {total} cents)")
    for pid, amount, refunded in conn.execute(
            "SELECT c.id, c.amount_cents, SUM(r.amount_cents) FROM payments c JOIN payments r ON r.refund_of = c.id GROUP BY c.id"):
        if refunded > amount:
            v.append(f"charge {pid} over-refunded: {refunded} > {amount}")
    staff = {sid: (mx, {int(d) for d in off.split(",") if d})
             for sid, mx, off in conn.execute("SELECT id, max_hours_week, unavailable_days FROM staff")}
    week: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for sid, day, hours in conn.execute("SELECT staff_id, day, hours FROM shifts WHERE day BETWEEN 0 AND 6"):
        week[sid].append((day, hours))
    for sid, shifts in sorted(week.items()):
        mx, off = staff.get(sid, (0, set()))
        days = [d for d, _ in shifts]
        if len(days) != len(set(days)):
            v.append(f"staff {sid} has two shifts on one day")
        if len(days) > MAX_DAYS_PER_WEEK:
            v.append(f"staff {sid} works {len(days)} days")
        if sum(h for _, h in shifts) > mx:
            v.append(f"staff {sid} works {sum(h for _, h in shifts)} h > {mx} h")
        if off & set(days):
            v.append(f"staff {sid} scheduled on an unavailable day")
    return v


@lru_cache(maxsize=256)
def _start_violations(image: bytes) -> tuple[str, ...]:
    """`hard_violations` of a task's pristine database, once per task and process."""
    conn = load_image(image)
    try:
        return tuple(hard_violations(conn))
    finally:
        conn.close()


def _show(table: str, row: dict[str, Any]) -> str:
    """A row as the messages show it: its key, then its other fields."""
    key = WORLD.primary_key(table)
    return "{" + ", ".join(f"{k!r}: {row[k]!r}" for k in (*key, *(k for k in row if k not in key))) + "}"


@dataclass
class Findings:
    """What the checks found, by kind. Each list holds complete messages."""

    gate: list[str] = field(default_factory=list)
    collateral: list[str] = field(default_factory=list)
    hard: list[str] = field(default_factory=list)
    actor: list[str] = field(default_factory=list)
    budget: list[str] = field(default_factory=list)
    unreachable: list[str] = field(default_factory=list)
    policy: list[str] = field(default_factory=list)

    def change(self, table: str, kind: str, row: dict[str, Any], why: str = "") -> None:
        self.collateral.append(f"{table}: {kind} {_show(table, row)}" + (f": {why}" if why else ""))

    def violations(self) -> list[str]:
        out: list[str] = []
        for prefix, items in (("actor: ", self.actor), ("hard constraint: ", self.hard),
                              ("collateral change: ", self.collateral), ("", self.budget),
                              ("goal out of reach: ", self.unreachable), ("policy: ", self.policy)):
            out += [prefix + m for m in items[:MAX_LISTED]]
            if len(items) > MAX_LISTED:
                out.append(f"{prefix}... and {len(items) - MAX_LISTED} more")
        return out


@dataclass
class Episode:
    """Everything the checks compare: the world from the seed, both databases, their diff, the call log."""

    world: World
    pristine: sqlite3.Connection
    final: sqlite3.Connection
    diff: dict[str, dict[str, list]]
    log: list[tuple[int, str, dict[str, Any]]]  # (activity id, tool, arguments) of the calls that replayed
    found: Findings
    pristine_contents: Contents  # both databases as read once (the pristine one once per task and process)
    final_contents: Contents
    image: bytes  # the pristine database, serialized: the key of per-task caches

    def before(self, table: str) -> dict[tuple, dict[str, Any]]:
        """{primary key: row} of `table` at the start (new dicts on every call: the checks may change them)."""
        return WORLD.keyed(table, *self.pristine_contents[table])

    def after(self, table: str) -> dict[tuple, dict[str, Any]]:
        """{primary key: row} of `table` in the final state."""
        return WORLD.keyed(table, *self.final_contents[table])

    def changes(self, table: str) -> dict[str, list]:
        return self.diff.get(table, {"added": [], "removed": [], "changed": []})

    def only(self, allowed: set[str]) -> None:
        """Every table outside `allowed` (and the never-changing ones, always) must be unchanged. Budgets and
        the clock are judged by `_budgets` and `_clock`."""
        for table, d in self.diff.items():
            if table in ("budgets", "clock") or (table in allowed and table not in NEVER_CHANGE):
                continue
            for kind in ("added", "removed"):
                for row in d[kind]:
                    self.found.change(table, kind, row, "the goal does not concern this table")
            for old, new in d["changed"]:
                self.found.change(table, "changed", new, _fields_changed(old, new))


def _fields_changed(old: dict[str, Any], new: dict[str, Any]) -> str:
    return ", ".join(f"{k} {old[k]!r} -> {new[k]!r}" for k in old if old[k] != new[k])


# -- the actor: replay the agent's logged calls -------------------------------------------------------
def _replay(image: bytes, final: sqlite3.Connection, final_contents: Contents,
            found: Findings) -> list[tuple[int, str, dict[str, Any]]]:
    """Replay the `activity` log through the tools on the pristine image; the final state must be the result.

    Returns the calls that replayed, for the scope checks. Anything that does not replay, and any difference
    between the replayed and the final database, is an `actor` finding.
    """
    entries = final.execute("SELECT id, day, tool, arguments FROM activity ORDER BY id").fetchall()
    replayed = sqlite3.connect(":memory:", isolation_level=None)
    calls: list[tuple[int, str, dict[str, Any]]] = []
    try:
        replayed.deserialize(image)
        for activity_id, _, tool, raw in entries:
            if tool not in tools.IMPLEMENTATIONS or tool in tools.READ_ONLY or tool == "submit":
                found.actor.append(f"activity #{activity_id} logs {str(tool)[:40]!r}, which no agent tool writes")
                break
            try:
                arguments = json.loads(raw)
                if not isinstance(arguments, dict):
                    raise ValueError("arguments are not an object")
                tools.call_tool(replayed, tool, arguments)
            except ToolRefusal as refusal:
                found.actor.append(f"activity #{activity_id} {tool} is refused when replayed: {refusal.message}")
                break
            except Exception as exc:  # a log that does not replay is a finding, never a crash
                found.actor.append(f"activity #{activity_id} {tool} cannot be replayed: {type(exc).__name__}: {exc}"[:300])
                break
            calls.append((activity_id, tool, arguments))
        replayed_contents = WORLD.contents(replayed) if not found.actor else final_contents
        if not WORLD.same(replayed_contents, final_contents):
            unexplained = WORLD.diff_contents(replayed_contents, final_contents)
            for table, d in unexplained.items():
                for kind in ("added", "removed"):
                    found.actor += [f"not made by the agent's logged tool calls: {table}: {kind} {_show(table, row)}"
                                    for row in d[kind]]
                found.actor += [f"not made by the agent's logged tool calls: {table}: changed {_show(table, new)} "
                                f"({_fields_changed(old, new)})" for old, new in d["changed"]]
            if not unexplained:
                found.actor.append("the activity log differs from the calls that produced the state")
    finally:
        replayed.close()
    return calls


def _scope(ep: Episode, kind: str, allowed_calls: Any) -> None:
    """Every logged call must be one the goal's kind uses; `allowed_calls(tool, arguments)` says why not, or None."""
    for activity_id, tool, arguments in ep.log:
        shown = ", ".join(f"{k}={v!r}" for k, v in sorted(arguments.items()))
        if tool not in TOOLS_BY_KIND[kind]:
            ep.found.collateral.append(f"activity #{activity_id} {tool}({shown}): a {kind} goal needs no {tool}")
            continue
        why = allowed_calls(tool, arguments)
        if why:
            ep.found.collateral.append(f"activity #{activity_id} {tool}({shown}): {why}")


# -- shared: budgets and clock ------------------------------------------------------------------------
def _budgets(ep: Episode, category: str | None, spent_delta: int) -> None:
    """Limits never change; only `category`'s spend changes, by exactly `spent_delta`; spend within the limit."""
    before, after = ep.before("budgets"), ep.after("budgets")
    for key, old in sorted(before.items()):
        new = after.get(key)
        if new is None:
            ep.found.change("budgets", "removed", old)
            continue
        if new["limit_cents"] != old["limit_cents"]:
            ep.found.change("budgets", "changed", new, _fields_changed(old, new))
        if old["category"] != category:
            if new["spent_cents"] != old["spent_cents"]:
                ep.found.change("budgets", "changed", new, f"a {ep.world.kind} goal spends no {old['category']} money")
            continue
        if new["spent_cents"] - old["spent_cents"] != spent_delta:
            ep.found.hard.append(f"{category} spend rose by {new['spent_cents'] - old['spent_cents']} cents, but the "
                                 f"records it pays for cost {spent_delta}")
        if new["spent_cents"] > new["limit_cents"]:
            ep.found.budget.append(f"{category} budget exceeded (spent {new['spent_cents']} of {new['limit_cents']} cents)")
    for row in (after[k] for k in sorted(after.keys() - before.keys())):
        ep.found.change("budgets", "added", row)


def _clock(ep: Episode, may_advance: bool) -> None:
    for old, new in ep.changes("clock")["changed"]:
        if not may_advance or {k for k in old if old[k] != new[k]} != {"day"} or new["day"] < old["day"]:
            ep.found.change("clock", "changed", new, _fields_changed(old, new) + ("" if may_advance else
                                                                                   f": a {ep.world.kind} goal needs no time to pass"))


class Part(NamedTuple):
    """One kind of sub-goal of the goal: `of` of them needed (none done at the start), `done` done now."""

    name: str
    done: float
    of: int
    detail: str


def progress_components(parts: list[Part], economy: float | None = None, economy_detail: str = "") -> dict[str, RewardComponent]:
    """Progress from the start state, with every sub-goal weighing the same (potential-based: what was true at
    the start earns nothing, and the null agent scores 0).

    A component per kind of sub-goal the goal needs (kinds with none are left out, never given free credit),
    weighted by its share of the sub-goals; together PROGRESS_WEIGHT. `economy` (in [0, 1]: what the work
    needed to cost over what it cost) is multiplied by the progress made, so waste scores below the clean
    solution and never pays on its own; it weighs ECONOMY_WEIGHT, or half a sub-goal if that is less, so
    doing strictly more of the goal always scores more.
    """
    parts = [p for p in parts if p.of > 0]
    total = sum(p.of for p in parts)
    out = {p.name: RewardComponent(value=round(min(1.0, p.done / p.of), 6), weight=round(PROGRESS_WEIGHT * p.of / total, 6),
                                   detail=p.detail) for p in parts}
    if economy is not None and total:
        progress = sum(min(p.done, p.of) for p in parts) / total
        # never worth a sub-goal: economy's whole range weighs at most half of one, so doing strictly more of
        # the goal always scores more, however dearly (found by red-teaming: 0.1 outweighed a sub-goal of 25+)
        out["economy"] = RewardComponent(value=round(max(0.0, min(1.0, economy)) * progress, 6),
                                         weight=round(min(ECONOMY_WEIGHT, PROGRESS_WEIGHT / (2 * total)), 6),
                                         detail=f"{economy_detail}; earned in proportion to the progress made")
    return out


def _result(ep: Episode, components: dict[str, RewardComponent]) -> CheckResult:
    """The verdict: gate failures from the kind, every finding a violation (they zero the reward: no component
    pays for keeping rules, which doing nothing keeps too)."""
    found = ep.found
    already = set(_start_violations(ep.image))  # not the agent's doing
    broken = [v for v in hard_violations(ep.final) if v not in already]
    found.hard = broken + found.hard
    return CheckResult(components=components, gate_failures=found.gate, violations=found.violations())


# -- fulfil / resource --------------------------------------------------------------------------------
def _fewest_units(ep: Episode, due_orders: list[dict[str, Any]], suppliers: dict[int, dict[str, Any]],
                  p_pos: dict[tuple, dict[str, Any]], delayed_id: int | None) -> dict[int, planning.ProductPlan]:
    """Per product of the due orders, the fewest units any valid plan buys, from the pristine database.

    `planning.fewest_units` ignores the budget and purchase orders placed before the task; both are checked
    here to make no difference on this task (otherwise the generator and the checks disagree): the budget
    (with the delayed order's money back, as the goal says to cancel it) pays for every product's minimum at
    once, and no earlier purchase order that is still open arrives by its product's last due day.
    """
    available = {key: row["on_hand"] - row["reserved"] for key, row in ep.before("inventory").items()}
    warehouses = [k[0] for k in ep.before("warehouses")]
    plans = planning.fewest_units(due_orders, warehouses, available, suppliers.values())
    limit, spent = ep.pristine.execute("SELECT limit_cents, spent_cents FROM budgets WHERE category = 'purchasing'").fetchone()
    freed = p_pos[(delayed_id,)]["cost_cents"] if delayed_id is not None and (delayed_id,) in p_pos else 0
    if sum(plan.cost_cents for plan in plans.values()) > limit - spent + freed:
        raise RuntimeError("the purchasing budget does not pay for the fewest units the due orders need; "
                           "generator and checks disagree")
    last_due: dict[int, int] = {}
    for o in due_orders:
        last_due[o["product_id"]] = max(last_due.get(o["product_id"], o["due_day"]), o["due_day"])
    for po in p_pos.values():
        if po["status"] in ("open", "delayed") and po["arrival_day"] <= last_due.get(po["product_id"], -1):
            raise RuntimeError(f"purchase order {po['id']} from before the task arrives in time for a due order; "
                               "generator and checks disagree")
    return plans


def _fulfil(ep: Episode) -> CheckResult:
    world, found = ep.world, ep.found
    horizon = world.expected["horizon_day"]
    p_orders, f_orders = ep.before("orders"), ep.after("orders")
    targets = {k[0] for k, o in p_orders.items() if o["status"] == "pending" and o["due_day"] <= horizon}
    if targets != set(world.expected["targets"]):
        raise RuntimeError("the due orders in the start state are not the seed's targets; generator and checks disagree")
    target_products = {p_orders[(t,)]["product_id"] for t in targets}
    ep.only({"orders", "payments", "inventory", "purchase_orders", "budgets", "clock"})
    _clock(ep, may_advance=True)
    today = ep.final.execute("SELECT day FROM clock").fetchone()[0]
    last_due = max(p_orders[(t,)]["due_day"] for t in targets)
    if today > last_due:  # every plan that reaches the goal is done by then: see `_fulfil`'s table row
        overdue = ep.final.execute("SELECT COUNT(*) FROM orders WHERE status IN ('pending', 'allocated') AND due_day >= ? "
                                   "AND due_day < ?", (last_due, today)).fetchone()[0]
        found.collateral.append(f"clock: day {today}, past day {last_due}, the last due day of the due orders: no plan "
                                f"needs time beyond it ({overdue} orders outside the goal passed their due day meanwhile)")

    # Orders: only the targets change, and only by being handled.
    for row in ep.changes("orders")["added"]:
        found.change("orders", "added", row)
    for row in ep.changes("orders")["removed"]:
        found.change("orders", "removed", row)
    for old, new in ep.changes("orders")["changed"]:
        if old["id"] not in targets:
            found.change("orders", "changed", new, f"not a due order ({_fields_changed(old, new)})")
            continue
        moved = {k for k in old if old[k] != new[k]} - {"status", "warehouse_id", "shipped_day"}
        if moved:
            found.change("orders", "changed", new, f"fields the goal does not change ({_fields_changed(old, new)})")
        if new["status"] not in ("pending", "allocated", "shipped") or (new["status"] != "pending") != (new["warehouse_id"] is not None) \
                or (new["status"] == "shipped") != (new["shipped_day"] is not None) \
                or (new["shipped_day"] is not None and not 0 <= new["shipped_day"] <= today):
            found.hard.append(f"order {new['id']} is {new['status']} with warehouse {new['warehouse_id']} and "
                              f"shipped_day {new['shipped_day']}")
    final_t = {t: f_orders.get((t,), p_orders[(t,)]) for t in targets}
    due = {t: p_orders[(t,)]["due_day"] for t in targets}
    on_time = [t for t, o in final_t.items() if o["status"] == "shipped" and o["shipped_day"] is not None
               and o["shipped_day"] <= due[t]]
    shipped_late = sorted(t for t, o in final_t.items() if o["status"] == "shipped" and t not in on_time)
    # Progress is an order shipped on time, or allocated while it still can be (its due day not passed):
    # an order shipped late, or still waiting after its due day, has failed and earns nothing.
    handled = on_time + [t for t, o in final_t.items() if o["status"] == "allocated" and today <= due[t]]
    if len(on_time) < len(targets):
        missed = sorted(targets - set(on_time))
        found.gate.append(f"{len(missed)} of {len(targets)} due orders not shipped on time: {missed[:10]}")
    if shipped_late:
        found.gate.append(f"{len(shipped_late)} due orders shipped after their due day (a failed order, no credit): "
                          f"{shipped_late[:10]}")

    # Payments: charges on target orders, of their customer, for exactly the balance due.
    p_paid: dict[int, int] = defaultdict(int)
    for p in ep.before("payments").values():
        p_paid[p["order_id"]] += p["amount_cents"] if p["kind"] == "charge" else -p["amount_cents"]
    charged: dict[int, int] = defaultdict(int)
    for row in ep.changes("payments")["added"]:
        order = p_orders.get((row["order_id"],))
        if row["kind"] != "charge" or row["order_id"] not in targets:
            found.change("payments", "added", row, "only charges on the due orders are needed")
        elif (row["customer_id"] != cast(dict[str, Any], order)["customer_id"] or row["refund_of"] is not None
              or row["amount_cents"] <= 0):  # a target: one of the start state's orders
            found.hard.append(f"charge {_show('payments', row)} does not match order {cast(dict[str, Any], order)['id']}")
        else:
            charged[row["order_id"]] += row["amount_cents"]
    for oid, cents in sorted(charged.items()):
        balance = p_orders[(oid,)]["total_cents"] - p_paid[oid]
        if cents > balance:
            found.hard.append(f"order {oid} charged {cents} cents; its balance due was {balance}")
    for kind in ("removed", "changed"):
        for change in ep.changes("payments")[kind]:
            found.change("payments", kind, change[1] if kind == "changed" else change)

    # Purchase orders: rows agree with their suppliers; only needed products, only needed units.
    suppliers = {k[0]: s for k, s in ep.before("suppliers").items()}
    p_pos, f_pos = ep.before("purchase_orders"), ep.after("purchase_orders")
    delayed_id = world.metadata.get("delayed_po_id")
    bought: dict[int, int] = defaultdict(int)  # product -> units the agent bought (not cancelled)
    bought_cost: dict[int, int] = defaultdict(int)  # product -> what those units cost
    in_time: dict[int, int] = defaultdict(int)  # product -> those of them arriving by its last due day
    open_in_time: dict[int, int] = defaultdict(int)  # product -> those of them still open (not received)
    last_due_of: dict[int, int] = {}
    for t in targets:
        o = p_orders[(t,)]
        last_due_of[o["product_id"]] = max(last_due_of.get(o["product_id"], -1), o["due_day"])
    kept: dict[int, int] = defaultdict(int)  # product -> units on order from before the task, not cancelled
    received: dict[tuple[int, int], int] = defaultdict(int)
    spend = 0
    for row in ep.changes("purchase_orders")["added"]:
        s = suppliers.get(row["supplier_id"])
        if s is None or not s["active"] or s["product_id"] != row["product_id"] or row["quantity"] < 1 \
                or row["cost_cents"] != row["quantity"] * s["unit_cost_cents"] or not 0 <= row["placed_day"] <= today \
                or row["arrival_day"] != row["placed_day"] + s["lead_days"] \
                or row["status"] not in ("open", "received", "cancelled"):
            found.hard.append(f"purchase order {_show('purchase_orders', row)} does not agree with its supplier")
            continue
        if row["status"] != "cancelled":
            spend += row["cost_cents"]
        if row["status"] == "received":
            received[(row["warehouse_id"], row["product_id"])] += row["quantity"]
        if row["product_id"] not in target_products:
            found.change("purchase_orders", "added", row, f"no due order needs product {row['product_id']}")
        elif row["status"] != "cancelled":
            bought[row["product_id"]] += row["quantity"]
            bought_cost[row["product_id"]] += row["cost_cents"]
            if row["arrival_day"] <= last_due_of.get(row["product_id"], -1):  # can still serve a due order
                in_time[row["product_id"]] += row["quantity"]
                if row["status"] == "open":
                    open_in_time[row["product_id"]] += row["quantity"]
    for row in ep.changes("purchase_orders")["removed"]:
        found.change("purchase_orders", "removed", row)
    for old, new in ep.changes("purchase_orders")["changed"]:
        fields = {k for k in old if old[k] != new[k]}
        if fields != {"status"} or old["status"] not in ("open", "delayed") or new["status"] not in ("cancelled", "received"):
            found.change("purchase_orders", "changed", new, _fields_changed(old, new))
        elif new["status"] == "cancelled":
            if old["id"] != delayed_id:
                found.change("purchase_orders", "changed", new, "the goal needs no other purchase order cancelled")
            spend -= old["cost_cents"]
        else:
            received[(new["warehouse_id"], new["product_id"])] += new["quantity"]
    for po in f_pos.values():  # stock arrives when the clock reaches a purchase order's arrival day, not before
        if (po["status"] in ("open", "delayed") and po["arrival_day"] <= today) \
                or (po["status"] == "received" and po["arrival_day"] > today):
            found.hard.append(f"purchase order {po['id']} is {po['status']} with arrival day {po['arrival_day']} on day {today}")
    if delayed_id is not None:
        delayed = f_pos[(delayed_id,)] if (delayed_id,) in f_pos else p_pos[(delayed_id,)]
        if delayed["status"] != "cancelled":
            found.gate.append(f"delayed purchase order #{delayed_id} is {delayed['status']}, not cancelled: the goal "
                              "says to re-source it")
            kept[delayed["product_id"]] += delayed["quantity"]
    _budgets(ep, "purchasing", spend)

    # Stock: every unit on hand or reserved is accounted for by orders and purchase orders.
    p_inv, f_inv = ep.before("inventory"), ep.after("inventory")
    shipped_from: dict[tuple[int, int], int] = defaultdict(int)
    allocated_at: dict[tuple[int, int], int] = defaultdict(int)
    for (oid,), o in f_orders.items():
        key = (o["warehouse_id"], o["product_id"])
        if o["status"] == "allocated":
            allocated_at[key] += o["quantity"]
        elif o["status"] == "shipped" and p_orders.get((oid,), {}).get("status") != "shipped":
            shipped_from[key] += o["quantity"]
    for key in sorted(set(p_inv) | set(f_inv) | set(shipped_from) | set(allocated_at) | set(received)):
        start = p_inv.get(key, {"on_hand": 0})["on_hand"]
        end = f_inv.get(key, {"on_hand": 0, "reserved": 0})
        expected_on_hand = start + received[key] - shipped_from[key]
        if end["on_hand"] != expected_on_hand or end["reserved"] != allocated_at[key]:
            found.hard.append(f"inventory {key}: on_hand {end['on_hand']}, reserved {end['reserved']}; the orders and "
                              f"purchase orders account for on_hand {expected_on_hand}, reserved {allocated_at[key]}")
    for row in ep.changes("inventory")["removed"]:
        found.change("inventory", "removed", row)

    # How many units the goal needs bought, per product: the fewest any plan that ships every due order on
    # time within the budget must buy, derived from the start state (`planning.fewest_units`).
    plans = _fewest_units(ep, [p_orders[(t,)] for t in sorted(targets)], suppliers, p_pos, delayed_id)
    need = {pid: plan.units for pid, plan in plans.items()}
    for pid, n in sorted(bought.items()):
        excess = min(n, n + kept[pid] - need[pid])  # units on order from before count, but only the agent's buy
        if excess > 0:
            found.collateral.append(
                f"purchase_orders: {excess} units of product {pid} bought beyond the need: the agent bought {n}"
                + (f" while {kept[pid]} stay on order (not cancelled)" if kept[pid] else "")
                + f"; the fewest units any plan needs to ship the due orders on time is {need[pid]}")

    def in_scope(tool: str, arguments: dict[str, Any]) -> str | None:
        if tool in ORDER_WORK and arguments.get("order_id") not in targets:
            return f"order {arguments.get('order_id')} is not one of the due orders"
        return None
    _scope(ep, world.kind, in_scope)
    # A due order shipped late, or still unshipped after its due day, can never ship on time (the clock only
    # moves forward): the goal is out of reach, and nothing done toward it is progress (found by red-teaming:
    # letting one order lapse kept ~0.4 for the others).
    lapsed = sorted(set(shipped_late) | {t for t, o in final_t.items() if o["status"] != "shipped" and today > due[t]})
    if lapsed:
        found.unreachable.append(f"due order(s) {lapsed[:10]} can no longer ship by their due day (shipped late, or "
                                 f"still unshipped on day {today})")
    units_needed = sum(need.values())
    purchase_goals = sum(len(plan.purchases) for plan in plans.values() if plan.units)
    # what a finishing plan keeps of unfinished steps (None: nothing is unfinished, or nothing counts)
    kept_plan: Kept | None = None
    if not lapsed and not found.violations() and len(on_time) < len(targets):
        kept_plan = _reachable(ep, targets, f_orders, p_orders, today, suppliers, p_pos, f_pos, delayed_id, need, bought,
                          last_due_of, purchase_goals / units_needed if units_needed else 0.0)
        if kept_plan is not None:  # allocations and open purchases no finishing plan keeps are no progress
            handled = on_time + sorted(kept_plan.allocations)
            in_time = {pid: n - open_in_time[pid] + kept_plan.open_units[pid] if pid in kept_plan.open_units else n
                       for pid, n in in_time.items()}
    # Progress: the sub-goals of every plan that reaches the goal, none of them done at the start (targets are
    # pending, unpaid ones owe money, nothing is bought): pay each unpaid target, buy the units the fewest-units
    # plan buys (one sub-goal per purchase order of that plan), allocate and ship each target, cancel the
    # delayed purchase order. Economy: the units bought at the plan's unit cost, over what they cost.
    # A lapsed target (shipped late, or its due day passed unshipped) earns nothing for its payment either.
    unpaid = [t for t in targets if p_orders[(t,)]["total_cents"] - p_paid[t] > 0]
    paid = [t for t in unpaid if p_paid[t] + charged[t] >= p_orders[(t,)]["total_cents"] and t not in lapsed]
    units_got = sum(min(in_time.get(pid, 0), n) for pid, n in need.items())  # a unit arriving too late is no progress
    cancelled = delayed_id is not None and f_pos.get((delayed_id,), {}).get("status") == "cancelled"
    at_plan_cost = sum(plans[pid].cost_cents * bought[pid] / plans[pid].units for pid in bought
                       if pid in plans and plans[pid].units)
    spent = sum(bought_cost.values())
    parts = [Part("shipped", len(on_time), len(targets), f"{len(on_time)} of {len(targets)} due orders shipped by their due day"),
             Part("allocated", len(handled), len(targets), f"{len(handled)} of {len(targets)} due orders shipped on time, "
                                                           "or allocated where a finishing plan ships them"),
             Part("paid", len(paid), len(unpaid), f"{len(paid)} of {len(unpaid)} unpaid due orders paid in full"),
             Part("stocked", purchase_goals * units_got / units_needed if units_needed else 0, purchase_goals,
                  f"{units_got} of the {units_needed} units the due orders need bought"),
             Part("resourced", float(cancelled), int(delayed_id is not None), f"delayed purchase order cancelled: {cancelled}")]
    components = progress_components(parts, economy=at_plan_cost / spent if spent else 1.0,
                                     economy_detail=f"units bought cost {spent} cents, {round(at_plan_cost)} at the "
                                                    "cheapest plan's prices")
    return _result(ep, components)


MAX_OPEN_PER_PRODUCT = 10  # the agent's open purchase orders of one product the re-planning searches (2^n subsets)


class Kept(NamedTuple):
    """What the best finishing plan keeps of the agent's unfinished steps: the allocated due orders it ships
    from the warehouse they are allocated at, and per product the units of the agent's open purchase orders
    it keeps (that arrive by the product's last due day)."""

    allocations: set[int]
    open_units: dict[int, int]


def _reachable(ep: Episode, targets: set[int], f_orders: dict, p_orders: dict, today: int, suppliers: dict[int, dict[str, Any]],
               p_pos: dict, f_pos: dict, delayed_id: int | None, need: dict[int, int], bought: dict[int, int],
               last_due_of: dict[int, int], unit_weight: float) -> Kept | None:
    """Can the goal still be reached from the final state, and what of the agent's unfinished steps does the
    best finishing plan keep? Partial credit is progress toward a goal that can be reached, made of steps a
    finishing plan keeps. A state from which no plan ships every open due order on time, within the purchase
    bound and the budget, is a dead end (buying what arrives too late, stock received or shipped where the
    orders cannot use it, money spent so the rest cannot be bought): a violation, and None is returned.

    Every open due order (not shipped; none has failed) may be re-allocated (what it holds counts as free
    stock). Each of the agent's open purchase orders may be kept (its units arrive on its day) or cancelled
    (units and money back); the delayed order of a resource task is cancelled (the goal says so). A finishing
    plan per product is such a choice plus one of `planning.completions`, buying no more than the bound
    leaves (`need` minus what the agent bought and keeps); over all products the plans must cost no more
    than the budget leaves once the cancellations return their money. Among the plans that fit, the one
    keeping the most of the agent's steps is credited (an allocation it ships from where it is weighs one
    sub-goal, a unit it keeps `unit_weight`): a step every finishing plan undoes earns nothing (found by
    red-teaming: a purchase or allocation at a warehouse no plan within the bound can use was paid as
    progress). More than MAX_OPEN_PER_PRODUCT open purchase orders of one product are refused (UngradableState).
    """
    open_orders = [f_orders.get((t,), p_orders[(t,)]) for t in sorted(targets)]
    open_orders = [o for o in open_orders if o["status"] != "shipped"]
    products = {o["product_id"] for o in open_orders}
    stock: dict[tuple[int, int], int] = defaultdict(int)
    for (w, pid), row in ep.after("inventory").items():
        stock[(w, pid)] += row["on_hand"] - row["reserved"]
    for o in open_orders:
        if o["status"] == "allocated":
            stock[(o["warehouse_id"], o["product_id"])] += o["quantity"]
    fixed, optional = [], defaultdict(list)  # incoming purchase orders: from before the task / the agent's
    for (po_id,), po in f_pos.items():
        if po["status"] not in ("open", "delayed") or po_id == delayed_id:
            continue
        if (po_id,) in p_pos:
            fixed.append((po["warehouse_id"], po["product_id"], po["quantity"], po["arrival_day"]))
        else:
            optional[po["product_id"]].append(po)
    limit, spent = ep.final.execute("SELECT limit_cents, spent_cents FROM budgets WHERE category = 'purchasing'").fetchone()
    money = limit - spent + sum(po["cost_cents"] for pos in optional.values() for po in pos)
    if delayed_id is not None and f_pos.get((delayed_id,), p_pos.get((delayed_id,), {})).get("status") in ("open", "delayed"):
        money += f_pos.get((delayed_id,), p_pos[(delayed_id,)])["cost_cents"]
    warehouses = [k[0] for k in ep.after("warehouses")]
    dead, choices = [], []  # per product: the plans that fit, as (cost, credit, allocations kept, units kept)
    for pid in sorted(products):
        mine = [o for o in open_orders if o["product_id"] == pid]
        if len(optional[pid]) > MAX_OPEN_PER_PRODUCT:
            raise UngradableState(f"{len(optional[pid])} open purchase orders of product {pid}: the checks re-plan with at "
                                  f"most {MAX_OPEN_PER_PRODUCT} per product (a plan needs one per supplier and warehouse)")
        received = bought.get(pid, 0) - sum(po["quantity"] for po in optional[pid])
        plans = []
        for keep in itertools.product((False, True), repeat=len(optional[pid])):
            kept = [po for po, k in zip(optional[pid], keep) if k]
            kept_units = sum(po["quantity"] for po in kept)
            useful = sum(po["quantity"] for po in kept if po["arrival_day"] <= last_due_of[pid])
            incoming = fixed + [(po["warehouse_id"], pid, po["quantity"], po["arrival_day"]) for po in kept]
            for plan in planning.completions(mine, warehouses, today, stock, incoming, suppliers.values())[pid]:
                if received + kept_units + plan.units > need.get(pid, 0):
                    continue
                held = {o["id"] for o in mine if o["status"] == "allocated" and plan.warehouse_of[o["id"]] == o["warehouse_id"]}
                plans.append((plan.cost_cents + sum(po["cost_cents"] for po in kept), len(held) + unit_weight * useful,
                              held, useful))
        if plans:
            choices.append((pid, plans))
        else:
            dead.append(pid)
    if dead:
        ep.found.unreachable.append(f"no plan can still ship the open due orders of product(s) {dead} on time without "
                                    f"buying beyond the fewest units the goal needs ({ {p: need.get(p, 0) for p in dead} }): "
                                    "stock or purchases are where, or arrive when, these orders cannot use them")
        return None
    best = _most_credit_within(choices, money)
    if best is None:
        cheapest = sum(min(plan[0] for plan in plans) for _, plans in choices)
        ep.found.unreachable.append(f"the purchasing budget left ({money} cents, counting cancellations) cannot pay for the "
                                    f"{cheapest} cents the open due orders still need")
        return None
    return Kept({o for plan in best.values() for o in plan[2]}, {pid: plan[3] for pid, plan in best.items()})


def _most_credit_within(choices: list[tuple[int, list[tuple]]], money: int) -> dict[int, tuple] | None:
    """One plan per product, (cost, credit, ...) each, with the most credit in total (then the least cost) whose
    costs add up to no more than `money`; None when even the cheapest plans cost more. Keeps only the plans
    no other combination beats on both cost and credit, so the search stays small."""
    frontier: list[tuple[int, float, dict[int, tuple]]] = [(0, 0.0, {})]
    for pid, plans in choices:
        merged = sorted(((cost + plan[0], credit + plan[1], {**picked, pid: plan})
                         for cost, credit, picked in frontier for plan in plans if cost + plan[0] <= money),
                        key=lambda c: (c[0], -c[1]))
        frontier = []
        for combo in merged:  # by cost: keep one only if it earns more than every cheaper one
            if not frontier or combo[1] > frontier[-1][1]:
                frontier.append(combo)
        if not frontier:
            return None
    return max(frontier, key=lambda c: (c[1], -c[0]))[2]


# -- staff --------------------------------------------------------------------------------------------
def _staff(ep: Episode) -> CheckResult:
    world, found = ep.world, ep.found
    needs = {(r["day"], r["warehouse_id"]): r["staff_needed"] for r in ep.before("shift_needs").values()
             if 0 <= r["day"] <= 6}
    if sorted([d, w, c] for (d, w), c in needs.items()) != sorted(world.expected["needs"]):
        raise RuntimeError("the start state's shift needs are not the seed's; generator and checks disagree")
    ep.only({"shifts", "budgets"})
    _clock(ep, may_advance=False)
    staff = {k[0]: s for k, s in ep.before("staff").items()}
    warehouses = {k[0] for k in ep.before("warehouses")}
    p_shifts = ep.before("shifts")
    start_count: dict[tuple[int, int], int] = defaultdict(int)
    for s in p_shifts.values():
        if s["hours"] == SHIFT_HOURS:
            start_count[(s["day"], s["warehouse_id"])] += 1
    for kind in ("removed", "changed"):
        for change in ep.changes("shifts")[kind]:
            found.change("shifts", kind, change[1] if kind == "changed" else change, "shifts already in the roster stay as they are")
    spend = 0
    added: dict[tuple[int, int], list[dict[str, Any]]] = defaultdict(list)
    for row in ep.changes("shifts")["added"]:
        if row["staff_id"] not in staff or row["warehouse_id"] not in warehouses:
            found.hard.append(f"shift {_show('shifts', row)} names no existing staff member or warehouse")
            continue
        spend += row["hours"] * staff[row["staff_id"]]["hourly_cents"]
        if not 0 <= row["day"] <= 6:
            found.change("shifts", "added", row, "outside the week of days 0-6")
        elif row["hours"] != SHIFT_HOURS:
            found.change("shifts", "added", row, f"a {row['hours']}-hour shift; the goal asks for {SHIFT_HOURS}-hour shifts")
        else:
            added[(row["day"], row["warehouse_id"])].append(row)
    for slot, rows in sorted(added.items()):
        room = max(0, needs.get(slot, 0) - start_count[slot])
        for row in sorted(rows, key=lambda r: r["id"])[room:]:
            found.change("shifts", "added", row, f"day {slot[0]} at warehouse {slot[1]} needs {needs.get(slot, 0)} "
                                                 f"people, {start_count[slot]} already rostered, {len(rows)} added")
    _budgets(ep, "labour", spend)
    have: dict[tuple[int, int], set[int]] = defaultdict(set)
    for _, day, w, sid, hours in ep.final.execute("SELECT id, day, warehouse_id, staff_id, hours FROM shifts "
                                                  "WHERE day BETWEEN 0 AND 6"):
        if hours == SHIFT_HOURS:
            have[(day, w)].add(sid)
    required = sum(needs.values())
    covered = sum(min(len(have[slot]), c) for slot, c in needs.items())
    short = sorted(slot for slot, c in needs.items() if len(have[slot]) < c)
    if short:
        found.gate.append(f"{len(short)} (day, warehouse) slots understaffed: {short[:10]}")

    def in_scope(tool: str, arguments: dict[str, Any]) -> str | None:
        if tool == "remove_shift" and (arguments.get("shift_id"),) in p_shifts:
            return "removes a shift that was in the roster before the task"
        if tool == "assign_shift":  # made and undone still counts (docs/verifier.md 7b; attacker 115 found it did not)
            hours, day, warehouse = arguments.get("hours", SHIFT_HOURS), arguments.get("day"), arguments.get("warehouse_id")
            if hours != SHIFT_HOURS:
                return f"a {hours}-hour shift; the goal asks for {SHIFT_HOURS}-hour shifts"
            if needs.get((day, warehouse), 0) <= start_count.get((day, warehouse), 0):  # type: ignore[arg-type]
                return f"day {day} at warehouse {warehouse} needed no one more"
        return None
    _scope(ep, "staff", in_scope)
    # Progress: the shifts still missing at the start, now covered; what was covered before earns nothing.
    # Economy: the cheapest legal roster's cost per missing shift (`rostering.cheapest_roster`, from the start
    # state), over what the shifts added cost per shift: a roster dearer than the cheapest scores below it.
    covered_before = sum(min(start_count[slot], c) for slot, c in needs.items())
    missing = {slot: max(0, c - start_count[slot]) for slot, c in needs.items()}
    week = [s for s in p_shifts.values() if 0 <= s["day"] <= 6]
    # Only shifts a finishing roster keeps are progress (found by red-teaming: the dearest shifts first, until no
    # roster could be finished within the labour budget, kept ~99% of an honest partial roster's credit). The
    # budget for the whole roster is what was left at the start; the agent's shifts can be removed, wages back.
    kept = covered - covered_before
    if short and not found.violations():
        limit, spent_before = ep.pristine.execute("SELECT limit_cents, spent_cents FROM budgets WHERE category = 'labour'").fetchone()
        mine = [(r["staff_id"], r["day"], r["warehouse_id"]) for rows in added.values() for r in rows]
        most = rostering.most_kept(staff.values(), missing, week, mine, limit - spent_before, shift_hours=SHIFT_HOURS,
                                   max_days=MAX_DAYS_PER_WEEK)
        if most is None:
            found.unreachable.append("no legal roster covers the shift needs within the labour budget")
        else:
            kept = min(kept, most)
    cheapest = rostering.cheapest_roster(staff.values(), missing, week, shift_hours=SHIFT_HOURS, max_days=MAX_DAYS_PER_WEEK)
    per_shift = sum(s.cost_cents for s in cheapest) / len(cheapest) if cheapest else 0.0
    n_added = sum(len(rows) for rows in added.values())
    components = progress_components(
        [Part("coverage", kept, required - covered_before,
              f"{covered - covered_before} of the {required - covered_before} missing shifts covered, {kept} of them as "
              f"a roster that can still be finished within the budget keeps them ({covered_before} of {required} were "
              "covered at the start)")],
        economy=per_shift * n_added / spend if spend else 1.0,
        economy_detail=f"shifts added cost {spend} cents, {round(per_shift * n_added)} at the cheapest legal roster's "
                       "cost per shift")
    return _result(ep, components)


# -- billing ------------------------------------------------------------------------------------------
def _billing(ep: Episode) -> CheckResult:
    world, found = ep.world, ep.found
    pair, amount, customer = world.expected["duplicate_pair"], world.expected["amount_cents"], world.expected["customer_id"]
    p_pay = {k[0]: p for k, p in ep.before("payments").items()}
    charges = [p_pay.get(i) for i in pair]
    if any(c is None or c["kind"] != "charge" or c["amount_cents"] != amount or c["customer_id"] != customer
           for c in charges) or len({(c["order_id"], c["day"]) for c in cast(list[dict[str, Any]], charges)}) != 1:
        raise RuntimeError("the start state's duplicate pair is not the seed's; generator and checks disagree")
    with_caller = "caller" in world.expected
    ep.only({"payments", "conversation"} if with_caller else {"payments"})
    _clock(ep, may_advance=False)
    _budgets(ep, None, 0)
    for kind in ("removed", "changed"):
        for change in ep.changes("payments")[kind]:
            found.change("payments", kind, change[1] if kind == "changed" else change, "the goal touches no other payment")
    on_pair = []
    for row in ep.changes("payments")["added"]:
        if row["kind"] != "refund" or row["refund_of"] not in pair:
            found.change("payments", "added", row, "not a refund of the duplicate charge")
            continue
        charge = p_pay[row["refund_of"]]
        if row["order_id"] != charge["order_id"] or row["customer_id"] != charge["customer_id"] or row["amount_cents"] < 1:
            found.hard.append(f"refund {_show('payments', row)} does not match the charge it refunds")
            continue
        if row["amount_cents"] != amount:
            found.collateral.append(f"payments: refund {row['id']} of {row['amount_cents']} cents on charge "
                                    f"{row['refund_of']}: the goal asks for the duplicate refunded in full ({amount} "
                                    "cents), once, and a refund of any other amount can never become that")
        on_pair.append(row)
    refunded = sum(r["amount_cents"] for r in on_pair)
    if len({r["refund_of"] for r in on_pair}) > 1:
        found.collateral.append(f"payments: refunds on both charges of the pair (refunds {[r['id'] for r in on_pair]} "
                                f"of charges {[r['refund_of'] for r in on_pair]}): the goal asks for one full refund of the "
                                "duplicate; the other charge is the order's own payment")
    elif len(on_pair) > 1:
        found.collateral.append(f"payments: the duplicate refunded in {len(on_pair)} pieces (refunds "
                                f"{[r['id'] for r in on_pair]}): the goal asks for it to be refunded in full, once")
    if refunded != amount:
        found.gate.append(f"duplicate charge refunded {refunded} of {amount} cents")

    def in_scope(tool: str, arguments: dict[str, Any]) -> str | None:
        if tool == "message_user":
            return None if with_caller else "no customer is on the line"
        return None if arguments.get("payment_id") in pair else "not the duplicate charge"
    _scope(ep, "billing", in_scope)
    if with_caller:
        _caller_policy(ep, amount, world.expected["caller"]["confirm"])
    components = progress_components([Part("duplicate_refunded", min(refunded, amount) / amount, 1,
                                           f"{refunded} of {amount} cents refunded on the duplicate")])
    return _result(ep, components)


def _caller_policy(ep: Episode, amount: int, confirm: bool) -> None:
    """The store's policy with a customer on the line: no refund before the agent obtained, from the caller, the
    e-mail address on file (and, with `confirm`, the customer's agreement to the exact amount).

    When the agent held a fact is read from the state: each caller's line in `conversation` carries the
    activity id of the message_user call that drew it (the replay has rebuilt the conversation, so the lines
    are the caller's, not the agent's), and a refund is a logged call with its own activity id. Obtaining them
    earns nothing of its own: they are what the refund needs, not progress on the account (a
    hundred-and-thirty-fifth attacker's agent that only talked earned 0.24-0.28 while they were sub-goals).
    """
    lines = ep.final.execute("SELECT activity_id, disclosed, agreed_cents FROM conversation WHERE sender = 'customer' "
                             "ORDER BY id").fetchall()
    verified_at = min((a for a, disclosed, _ in lines if caller.EMAIL in disclosed.split(",")), default=None)
    agreed_at = min((a for a, _, agreed in lines if agreed == amount), default=None)
    for activity_id, tool, _ in ep.log:
        if tool != "refund_payment":
            continue
        if verified_at is None or activity_id < verified_at:
            ep.found.policy.append(f"activity #{activity_id} refund_payment before the caller was verified: the "
                                   "e-mail address on file was not obtained from them first")
        if confirm and (agreed_at is None or activity_id < agreed_at):
            ep.found.policy.append(f"activity #{activity_id} refund_payment before the customer agreed to the amount")


_BY_KIND = {"fulfil": _fulfil, "resource": _fulfil, "staff": _staff, "billing": _billing}


def verify(task: TaskSpec, final_state: Path) -> CheckResult:
    """Score the final database at `final_state` against the task's hidden expectations."""
    world = generate_world(task.seed, task.knobs)
    image, digest = pristine_image(task.seed, task.knobs)  # built once per task in this process
    StaleTaskError.check(task.id, task.start_state.digest, digest)
    pristine = load_image(image)
    final = open_snapshot(str(final_state))
    try:
        try:
            found = Findings()
            contents = WORLD.contents(final)
            log = _replay(image, final, contents, found)
            before = WORLD.image_contents(image)
            diff = WORLD.diff_contents(before, contents)
            return _BY_KIND[world.kind](Episode(world, pristine, final, diff, log, found, before, contents, image))
        except sqlite3.DatabaseError as exc:
            raise UngradableState(f"the final database cannot be read: {exc}") from exc
    finally:
        final.close()
        pristine.close()


def state_digest(final_state: Path) -> str:
    """The content hash of the database at `final_state`, as the environment's `state_hash()` gives it for the
    same state (the verifier computes it for a speculative verification, off the engine's process)."""
    final = open_snapshot(str(final_state))
    try:
        return WORLD.digest(final)
    finally:
        final.close()


def prepare(task: TaskSpec) -> None:
    """Warm this process's caches for `task` (`VerifierService.prepare`): its world, its pristine database and
    that database's rows, and what verifying the untouched start state computes (a staffing task's cheapest
    roster). Every cache is keyed by the task's own inputs, so no later verdict depends on it."""
    image, _ = pristine_image(task.seed, task.knobs)
    with tempfile.NamedTemporaryFile(prefix="gymsmith-prepare-", suffix=".sqlite") as snapshot:
        snapshot.write(image)
        snapshot.flush()
        verify(task, Path(snapshot.name))
