"""Hidden checks for ops. Loaded only by the verifier process; no agent-side module imports this one.

The checks read the final database directly and compare it with the pristine start state rebuilt from
the seed. They do not trust the tools: every hard constraint is re-derived from the data.
"""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from pathlib import Path
from typing import Any

from gymsmith.core.types import RewardComponent, TaskSpec
from gymsmith.families.ops.generator import MAX_DAYS_PER_WEEK, generate_world
from gymsmith.families.ops.env import pristine_image
from gymsmith.families.ops.schema import TABLES, open_snapshot, primary_key
from gymsmith.verifier.protocol import CheckResult

IGNORED_TABLES = {"activity"}  # the log of calls, not business state


def _rows(conn: sqlite3.Connection, table: str) -> dict[tuple, dict[str, Any]]:
    cur = conn.execute(f"SELECT * FROM {table}")
    names = [c[0] for c in cur.description]
    pk = primary_key(table)
    return {tuple(r[names.index(k)] for k in pk): dict(zip(names, r)) for r in cur.fetchall()}


def diff_states(before: sqlite3.Connection, after: sqlite3.Connection) -> dict[str, dict[str, list]]:
    """Per table: rows added, removed and changed ((old, new) pairs), keyed by primary key."""
    out: dict[str, dict[str, list]] = {}
    for table in TABLES:
        if table in IGNORED_TABLES:
            continue
        old, new = _rows(before, table), _rows(after, table)
        added = [new[k] for k in new.keys() - old.keys()]
        removed = [old[k] for k in old.keys() - new.keys()]
        changed = [(old[k], new[k]) for k in old.keys() & new.keys() if old[k] != new[k]]
        if added or removed or changed:
            out[table] = {"added": added, "removed": removed, "changed": changed}
    return out


def hard_violations(conn: sqlite3.Connection) -> list[str]:
    """Business rules re-derived from the data: budgets, stock, paid shipments, refunds, labour rules."""
    v: list[str] = []
    for cat, limit, spent in conn.execute("SELECT category, limit_cents, spent_cents FROM budgets"):
        if spent > limit:
            v.append(f"{cat} budget overspent: {spent} > {limit}")
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
    for sid, shifts in week.items():
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


def _collateral(diff: dict[str, dict[str, list]], allowed: dict[str, Any]) -> list[str]:
    """Changes outside what the goal concerns. `allowed[table]` is True (anything) or a predicate per change."""
    found: list[str] = []
    for table, d in diff.items():
        rule = allowed.get(table)
        if rule is True:
            continue
        for kind in ("added", "removed", "changed"):
            for change in d[kind]:
                if rule is None or not rule(kind, change):
                    row = change[1] if kind == "changed" else change
                    found.append(f"{table}: {kind} {dict((k, row[k]) for k in primary_key(table))}")
    return found


def _budget_component(conn: sqlite3.Connection, category: str) -> RewardComponent:
    limit, spent = conn.execute("SELECT limit_cents, spent_cents FROM budgets WHERE category = ?", (category,)).fetchone()
    over = max(0, spent - limit)
    value = 1.0 if not over else max(0.0, 1.0 - over / max(1, limit))
    return RewardComponent(value=value, weight=0.1, detail=f"spent {spent} of {limit} cents")


def _discipline(final: sqlite3.Connection, diff: dict, allowed: dict, category: str,
                gate: list[str]) -> dict[str, RewardComponent]:
    violations = hard_violations(final)
    collateral = _collateral(diff, allowed)
    budget = _budget_component(final, category)
    gate += [f"hard constraint: {v}" for v in violations[:5]]
    gate += [f"collateral change: {c}" for c in collateral[:5]]
    if budget.value < 1.0:
        gate.append(f"{category} budget exceeded ({budget.detail})")
    return {
        "budget": budget,
        "rules": RewardComponent(value=max(0.0, 1.0 - len(violations) / 3), weight=0.1,
                                 detail="; ".join(violations[:3]) or "all hard constraints hold"),
        "no_collateral": RewardComponent(value=max(0.0, 1.0 - len(collateral) / 5), weight=0.1,
                                         detail="; ".join(collateral[:3]) or "nothing outside the goal changed"),
    }


def _fulfil(world, pristine, final, diff) -> CheckResult:
    targets = set(world.expected["targets"])
    orders = {r["id"]: r for r in _rows(final, "orders").values() if r["id"] in targets}
    on_time = [o for o in orders.values() if o["status"] == "shipped" and o["shipped_day"] <= o["due_day"]]
    handled = [o for o in orders.values() if o["status"] in ("allocated", "shipped")]
    gate: list[str] = []
    if len(on_time) < len(targets):
        late = sorted(targets - {o["id"] for o in on_time})
        gate.append(f"{len(late)} of {len(targets)} due orders not shipped on time: {late[:10]}")
    allowed = {
        "orders": lambda kind, ch: kind == "changed" and ch[0]["id"] in targets,
        "payments": lambda kind, row: kind == "added" and row["kind"] == "charge" and row["order_id"] in targets,
        "inventory": True, "purchase_orders": True, "budgets": True, "clock": True,
    }
    components = {
        "on_time": RewardComponent(value=len(on_time) / len(targets), weight=0.5,
                                   detail=f"{len(on_time)} of {len(targets)} due orders shipped by their due day"),
        "handled": RewardComponent(value=len(handled) / len(targets), weight=0.2,
                                   detail=f"{len(handled)} of {len(targets)} due orders allocated or shipped"),
        **_discipline(final, diff, allowed, "purchasing", gate),
    }
    return CheckResult(components=components, gate_failures=gate)


def _staff(world, pristine, final, diff) -> CheckResult:
    have: dict[tuple[int, int], int] = defaultdict(int)
    for _, day, w in final.execute("SELECT staff_id, day, warehouse_id FROM shifts WHERE day BETWEEN 0 AND 6"):
        have[(day, w)] += 1
    needs = world.expected["needs"]
    required = sum(c for _, _, c in needs)
    covered = sum(min(have[(d, w)], c) for d, w, c in needs)
    gate: list[str] = []
    short = [(d, w) for d, w, c in needs if have[(d, w)] < c]
    if short:
        gate.append(f"{len(short)} (day, warehouse) slots understaffed: {short[:10]}")
    allowed = {
        "shifts": lambda kind, row: kind == "added" and 0 <= row["day"] <= 6,
        "budgets": True, "clock": True,
    }
    components = {
        "coverage": RewardComponent(value=covered / required, weight=0.7,
                                    detail=f"{covered} of {required} required shifts covered"),
        **_discipline(final, diff, allowed, "labour", gate),
    }
    return CheckResult(components=components, gate_failures=gate)


def _billing(world, pristine, final, diff) -> CheckResult:
    pair, amount = world.expected["duplicate_pair"], world.expected["amount_cents"]
    new_refunds = [r for r in diff.get("payments", {}).get("added", []) if r["kind"] == "refund"]
    on_pair = sum(r["amount_cents"] for r in new_refunds if r["refund_of"] in pair)
    gate: list[str] = []
    if on_pair != amount:
        gate.append(f"duplicate charge refunded {on_pair} of {amount} cents")
    allowed = {
        "payments": lambda kind, row: kind == "added" and row["kind"] == "refund" and row["refund_of"] in pair,
        "budgets": True, "clock": True,
    }
    components = {
        "duplicate_refunded": RewardComponent(value=min(on_pair, amount) / amount, weight=0.7,
                                              detail=f"{on_pair} of {amount} cents refunded on the duplicate"),
        **_discipline(final, diff, allowed, "purchasing", gate),
    }
    return CheckResult(components=components, gate_failures=gate)


_BY_KIND = {"fulfil": _fulfil, "resource": _fulfil, "staff": _staff, "billing": _billing}


def verify(task: TaskSpec, final_state: Path) -> CheckResult:
    """Score the final database at `final_state` against the task's hidden expectations."""
    world = generate_world(task.seed, task.knobs)
    image, digest = pristine_image(task.seed, task.knobs)  # built once per task in this process
    if digest != task.start_state.digest:
        raise RuntimeError(f"task {task.id}: the start state rebuilt by the verifier does not match the task's digest")
    pristine = sqlite3.connect(":memory:")
    pristine.deserialize(image)
    final = open_snapshot(str(final_state))
    try:
        return _BY_KIND[world.kind](world, pristine, final, diff_states(pristine, final))
    finally:
        final.close()
        pristine.close()
