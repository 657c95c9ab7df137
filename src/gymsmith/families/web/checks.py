"""Hidden checks for the web family. Loaded only by the verifier process; no agent-side module imports this one.

The checks rebuild the pristine database from the seed. From it they re-derive every entity the goal
names, then compare the whole final database with it, row by row:
- The goal's change must be there, exactly as stated. What is missing is a gate failure, and partial
  credit stays, measured as progress from the start (below).
- Nothing else may have changed, and every change must have been made by the agent's account. Anything
  else is a violation: one is enough to reject the state and zero the reward, however much of the goal
  was done.
- A write the site cannot undo that leaves the goal unreachable (a refund with another reason than the
  stated one, a reply with another text, the ticket to answer closed before its reply) is a violation too,
  never partial credit: no later action can reach the goal from there.

Partial credit (every component of every kind) is *progress from the start* and *does no harm*:
- it counts only what had to change, i.e. whose pristine value differs from the one the goal states, and
  now equals it, over how much had to change. A field that already held the stated value earns nothing,
  touched or not, so doing nothing, or changing anything else, scores 0;
- a field changed to a value the goal does not state forfeits the component (damage is not progress);
  where the change cannot be undone, it is a violation (above).

Terms used below:
- *pristine* is the start database rebuilt from the seed; *final* is the database the rollout left.
- *audit* is the row the server writes with each change it makes. Its actor is the account of the
  session, never a form field (`site.Site.change`).
- A re-derivation that disagrees with the task's expectations is a generator bug. It raises (an error),
  and is never scored.

| goal kind | what the goal states | the check that re-derives it |
|---|---|---|
| address | the customer's name *X* and the day *D* they placed the order | pristine: the customer named X has exactly one order placed on D, and it is the task's order |
| address | address line 1, postcode, city and country, each a stated string | final: that order's `ship_line1`, `ship_postcode`, `ship_city` and `ship_country` equal them; gate on all |
| address | "no second address line" | final: that order's `ship_line2` is `""` (the fifth field) |
| address | (partial credit) | of the five fields, those whose pristine value differs from the stated one (at least one, else the generator is broken): the share that now equals it; 0 if any of the five ends at a value that is neither its pristine one nor the stated one |
| address | only that order's shipping address changes | final vs pristine: none of the order's other columns changed; no other order, and no row of any other table, changed, was added or was removed (violations) |
| refund | customer *X*, order *#N* | pristine: order N exists and belongs to the customer named X |
| refund | "charged twice", "the later of the two identical charges" | pristine: order N has exactly two captured charges of equal amount; the later one (by date, then id) is the task's charge |
| refund | refund it: the whole charge | final: that charge went from `captured` to `refunded`, and nothing else of it changed; exactly one new `refunds` row names it; its `amount_cents` equals the charge's amount in pristine, and `created_on` is the site's today (otherwise a violation: the site never writes that) |
| refund | reason "Duplicate charge" | final: the refund's `reason` is `duplicate`, the site's value for that label. Another reason is a violation: the charge is refunded and cannot be refunded again, so the goal is out of reach |
| refund | (partial credit) | none: the refund is one irreversible write, right (accepted) or wrong (a violation) |
| refund | "Do not refund anything else" | no other charge changed and no other `refunds` row was added (violations) |
| tickets | tag *T*, status open, "opened before *D*" | pristine: the tickets with tag T, status `open` and `opened_on` < D (strictly) are exactly the task's set |
| tickets | close every one of them | final: each went from `open` to `closed`, and nothing else of it changed; credit for each one closed, gate on all |
| tickets | "the most recently opened of them" | pristine: the set's latest `opened_on` belongs to one ticket only, the task's reply target |
| tickets | reply to it "with exactly this text" | final: exactly one new message on that ticket, with `body` equal to the text and `sent_on` the site's today; gate on it. A reply with other text, a second reply, or a message on any other ticket is a violation |
| tickets | "Before closing [it], reply" | audit: the reply's row comes before the close's row of that ticket. Closed first, or closed with no reply at all, is a violation: a closed ticket takes no reply, so the goal is out of reach |
| tickets | (partial credit) | each ticket of the set (all open in pristine) that is now closed, and the reply (none in pristine); anything else a ticket or message could become is a violation |
| tickets | nothing else | no other ticket changed and no other message was added (violations) |
| every kind | the agent works as `support` (the login the goal gives) | audit: every new row's actor is `support`; a new `refunds.created_by` or `messages.author` is `support`; any other account is a violation |
| every kind | every change is the agent's, through the site | audit: each changed or added business row has a new audit row for its action on it (an unattributed change is a violation). Every new audit row names a row the goal needs (a change undone before submitting is still a change, a violation), at most as often as the goal allows. No audit row is changed or removed |
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gymsmith.core.errors import StaleTaskError
from gymsmith.core.types import RewardComponent, TaskSpec
from gymsmith.envs.sqlite_world import load_image, open_snapshot
from gymsmith.families.web.schema import ACTIONS, WORLD
from gymsmith.families.web.world import AGENT_USER, TODAY, generate_world, pristine_image
from gymsmith.verifier.protocol import CheckResult

DAY = TODAY.isoformat()
MAX_VIOLATIONS = 30  # listed; the rest are counted
Diff = dict[str, dict[str, list]]
Key = tuple[str, int]  # (audit action, target row id)


@dataclass
class Outcome:
    components: dict[str, RewardComponent] = field(default_factory=dict)
    gate: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)


@dataclass
class Needs:
    """What a goal kind needs changed, for the checks shared by every kind."""

    tables: set[str]  # the business tables the kind judged itself, row by row
    audit: dict[Key, int | None]  # audit rows the goal needs: (action, target) -> how many at most (None: any number)
    before: list[tuple[Key, Key]] = field(default_factory=list)  # (a, b): b only after a (b is irreversible and rules a out)


def _derived(pristine: sqlite3.Connection, what: str, sql: str, args: tuple, expected: list[Any]) -> list[tuple]:
    """The rows of `sql` on the pristine site; their first columns must be `expected` (else the generator is broken)."""
    rows = pristine.execute(sql, args).fetchall()
    if [r[0] for r in rows] != expected:
        raise RuntimeError(f"{what} re-derived from the pristine site is {[r[0] for r in rows]}, the task expects {expected}: "
                           "the generator and the checks disagree")
    return rows


def _judge(out: Outcome, diff: Diff, table: str, changes: dict[int, set[str]] | None = None) -> dict[int, dict[str, Any]]:
    """Violations for every change of `table` but those of `changes` (row id -> columns the goal may change), and
    for every row removed. Returns the allowed rows as they ended ({id: new row}); added rows are the caller's."""
    changes = changes or {}
    d = diff.get(table, {"added": [], "removed": [], "changed": []})
    out.violations += [f"{table}: row {r['id']} removed" for r in d["removed"]]
    ok = {}
    for old, new in d["changed"]:
        cols = sorted(k for k in new if new[k] != old[k])
        if new["id"] in changes and set(cols) <= changes[new["id"]]:
            ok[new["id"]] = new
        elif new["id"] in changes:
            out.violations.append(f"{table}: row {new['id']} changed {sorted(set(cols) - changes[new['id']])}, which the goal does not ask for")
        else:
            out.violations.append(f"{table}: row {new['id']} changed ({', '.join(cols)}): the goal does not need it")
    return ok


def _row(conn: sqlite3.Connection, table: str, rid: int) -> dict[str, Any]:
    cur = conn.execute(f"SELECT * FROM {table} WHERE id = ?", (rid,))
    return dict(zip([c[0] for c in cur.description], cur.fetchone()))


def _progress(done: int, needed: int, damaged: list[str]) -> float:
    """Partial credit: the share of what had to change (start value differs from the goal's) that now matches; 0 once
    anything was changed to a value the goal does not state (do no harm: damage is not progress)."""
    return 0.0 if damaged else done / needed


def _address(x: dict[str, Any], pristine: sqlite3.Connection, diff: Diff, out: Outcome) -> Needs:
    oid, want = x["order_id"], x["address"]
    _derived(pristine, f"the order {x['customer']} placed on {x['placed_on']}",
             "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = ? AND o.placed_on = ? ORDER BY o.id",
             (x["customer"], x["placed_on"]), [oid])
    if want["ship_line2"] != "" or len(want) != 5:
        raise RuntimeError(f"the goal says 'no second address line' and five fields; the task expects {want}")
    start = _row(pristine, "orders", oid)
    needed = [k for k in want if start[k] != want[k]]  # progress is measured on these only
    if not needed:
        raise RuntimeError(f"order {oid} already has the address the goal asks for: the generator made a goal with nothing to do")
    end = _judge(out, diff, "orders", {oid: set(want)}).get(oid) or start
    out.violations += [f"orders: row {r['id']} added" for r in diff.get("orders", {}).get("added", [])]
    wrong = sorted(k for k in want if end[k] != want[k])
    damaged = sorted(k for k in wrong if end[k] != start[k])  # changed, but not to what the goal states
    done = [k for k in needed if end[k] == want[k]]
    if wrong:
        out.gate.append(f"order {oid}: address fields not as asked: {wrong}"
                        + (f" (changed to values the goal does not state: {damaged})" if damaged else ""))
    progress = _progress(len(done), len(needed), damaged)
    out.components["address"] = RewardComponent(
        value=progress, weight=0.8, detail=f"{len(done)} of the {len(needed)} address fields of order {oid} that had to change now as asked"
        + (f"; no credit: {damaged} changed to values the goal does not state" if damaged else ""))
    return Needs(tables={"orders"}, audit={("order.address", oid): None})  # each save that changed it is a row


def _refund(x: dict[str, Any], pristine: sqlite3.Connection, diff: Diff, out: Outcome) -> Needs:
    oid, cid = x["order_id"], x["charge_id"]
    _derived(pristine, f"order #{oid} of {x['customer']}",
             "SELECT o.id FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.id = ? AND c.name = ?", (oid, x["customer"]), [oid])
    charges = pristine.execute("SELECT id, amount_cents FROM charges WHERE order_id = ? AND status = 'captured' ORDER BY charged_on, id",
                               (oid,)).fetchall()
    if len(charges) != 2 or charges[0][1] != charges[1][1] or charges[1][0] != cid:
        raise RuntimeError(f"order #{oid} should have two identical captured charges, the later #{cid}; it has {charges}")
    amount = charges[1][1]
    new = _judge(out, diff, "charges", {cid: {"status"}}).get(cid)
    status_done = new is not None and new["status"] == "refunded"
    if new is not None and not status_done:
        out.violations.append(f"charges: row {cid} set to status {new['status']!r}")
    _judge(out, diff, "refunds")
    added = diff.get("refunds", {}).get("added", [])
    out.violations += [f"refunds: row {r['id']} added for charge {r['charge_id']}: the goal refunds charge {cid} only"
                       for r in added if r["charge_id"] != cid]
    mine = [r for r in added if r["charge_id"] == cid]
    if len(mine) > 1:
        out.violations.append(f"refunds: {len(mine)} refunds of charge {cid}; it can be refunded once")
    refund = mine[0] if len(mine) == 1 else None
    if refund is not None:
        if refund["amount_cents"] != amount:
            out.violations.append(f"refund {refund['id']} is of {refund['amount_cents']} cents; charge {cid} was {amount}")
        if refund["created_on"] != DAY:
            out.violations.append(f"refund {refund['id']} dated {refund['created_on']}, not the site's today {DAY}")
        if refund["created_by"] != AGENT_USER:
            out.violations.append(f"refund {refund['id']} made by account {refund['created_by']!r}, not the agent's {AGENT_USER!r}")
    if status_done != (refund is not None):
        out.violations.append(f"charge {cid}: status {'refunded' if status_done else 'captured'} but "
                              f"{'no' if refund is None else 'a'} refund row: not a change the site makes")
    done = status_done and refund is not None
    reason_ok = refund is not None and done and refund["reason"] == x["reason"]
    if refund is None or not done:
        out.gate.append(f"charge {cid} (the later of the two identical charges of order #{oid}) was not refunded")
    elif not reason_ok:  # a refund is written once: the goal can no longer be reached, so it is not partial progress
        out.violations.append(f"charge {cid} was refunded with reason {refund['reason']!r}; the goal states {x['reason']!r}, "
                              "and a refund cannot be redone")
    out.components["refunded"] = RewardComponent(value=1.0 if done else 0.0, weight=0.6, detail=f"duplicate charge {cid} refunded: {done}")
    out.components["reason"] = RewardComponent(value=1.0 if reason_ok else 0.0, weight=0.2, detail="reason recorded as asked")
    return Needs(tables={"charges", "refunds"}, audit={("charge.refund", cid): 1})


def _tickets(x: dict[str, Any], pristine: sqlite3.Connection, diff: Diff, out: Outcome) -> Needs:
    targets, newest, text = sorted(x["close"]), x["reply_to"], x["reply"]
    _derived(pristine, f"the open tickets tagged {x['tag']!r} opened before {x['cutoff']}",
             "SELECT id FROM tickets WHERE tag = ? AND status = 'open' AND opened_on < ? ORDER BY id", (x["tag"], x["cutoff"]), targets)
    latest = pristine.execute(f"SELECT id, opened_on FROM tickets WHERE id IN ({', '.join('?' * len(targets))}) "
                              "ORDER BY opened_on DESC, id DESC", targets).fetchall()
    if latest[0][0] != newest or (len(latest) > 1 and latest[1][1] == latest[0][1]):
        raise RuntimeError(f"the most recently opened of {targets} should be ticket {newest} alone; by date they are {latest}")
    ended = _judge(out, diff, "tickets", {t: {"status"} for t in targets})
    out.violations += [f"tickets: row {r['id']} added" for r in diff.get("tickets", {}).get("added", [])]
    out.violations += [f"tickets: row {t} set to status {r['status']!r}" for t, r in ended.items() if r["status"] != "closed"]
    closed = {t for t, r in ended.items() if r["status"] == "closed"}
    _judge(out, diff, "messages")
    added = diff.get("messages", {}).get("added", [])
    out.violations += [f"messages: row {m['id']} added on ticket {m['ticket_id']}: the goal asks for one reply, on ticket {newest}"
                       for m in added if m["ticket_id"] != newest]
    replies = [m for m in added if m["ticket_id"] == newest]
    if len(replies) > 1:
        out.violations.append(f"messages: {len(replies)} replies on ticket {newest}; the goal asks for one")
    for m in replies:
        if m["body"] != text:
            out.violations.append(f"messages: reply {m['id']} on ticket {newest} is not the requested text: {m['body'][:80]!r}")
        if m["author"] != AGENT_USER:
            out.violations.append(f"messages: reply {m['id']} written by account {m['author']!r}, not the agent's {AGENT_USER!r}")
        if m["sent_on"] != DAY:
            out.violations.append(f"messages: reply {m['id']} dated {m['sent_on']}, not the site's today {DAY}")
    replied = len(replies) == 1 and replies[0]["body"] == text
    if set(targets) - closed:
        out.gate.append(f"tickets still open: {sorted(set(targets) - closed)}")
    if not replied:
        out.gate.append(f"ticket {newest} has no reply with the requested text")
    # every sub-goal weighs the same: each close and the reply (found by red-teaming: the reply weighed 0.375 of
    # the task whatever the number of tickets, so replying alone outscored closing two of four)
    out.components["closed"] = RewardComponent(value=len(closed) / len(targets), weight=float(len(targets)),
                                               detail=f"{len(closed)} of {len(targets)} tickets closed")
    out.components["replied"] = RewardComponent(value=1.0 if replied else 0.0, weight=1.0, detail=f"reply on ticket {newest}")
    return Needs(tables={"tickets", "messages"}, audit={**{("ticket.close", t): 1 for t in targets}, ("ticket.reply", newest): 1},
                 before=[(("ticket.reply", newest), ("ticket.close", newest))])


def _changes_to_attribute(diff: Diff) -> list[tuple[Key, str]]:
    """(the audit row each business change needs, the change) for every change the site records in the audit."""
    d = {t: diff.get(t, {"added": [], "changed": []}) for t in ("orders", "charges", "refunds", "tickets", "messages")}
    return ([(("order.address", new["id"]), f"orders: row {new['id']} changed") for _, new in d["orders"]["changed"]]
            + [(("charge.refund", new["id"]), f"charges: row {new['id']} changed") for _, new in d["charges"]["changed"]]
            + [(("charge.refund", r["charge_id"]), f"refunds: row {r['id']} added") for r in d["refunds"]["added"]]
            + [(("ticket.close", new["id"]), f"tickets: row {new['id']} changed") for _, new in d["tickets"]["changed"]]
            + [(("ticket.reply", m["ticket_id"]), f"messages: row {m['id']} added") for m in d["messages"]["added"]])


def _who_and_order(out: Outcome, diff: Diff, needs: Needs) -> None:
    """Every new audit row by the agent, today, on a row the goal needs; every change attributed; the goal's order kept."""
    d = diff.get("audit", {"added": [], "removed": [], "changed": []})
    out.violations += [f"audit: row {r['id']} removed" for r in d["removed"]]
    out.violations += [f"audit: row {new['id']} rewritten" for _, new in d["changed"]]
    counts: Counter[Key] = Counter()
    first: dict[Key, int] = {}
    for r in sorted(d["added"], key=lambda r: r["id"]):
        key = (r["action"], r["target_id"])
        what = f"audit {r['id']}: {r['action']} on {ACTIONS.get(r['action'], '?')} row {r['target_id']}"
        if r["actor"] != AGENT_USER:
            out.violations.append(f"{what} made by account {r['actor']!r}, not the agent's {AGENT_USER!r}")
        if r["on_day"] != DAY:
            out.violations.append(f"{what} dated {r['on_day']}, not the site's today {DAY}")
        if key not in needs.audit:
            out.violations.append(f"{what}: a change the goal does not need (undone or not)")
        counts[key] += 1
        first.setdefault(key, r["id"])
    out.violations += [f"audit: {counts[k]} rows of {k[0]} on row {k[1]}; the goal allows {n}"
                       for k, n in needs.audit.items() if n is not None and counts[k] > n]
    out.violations += [f"{change} with no audit row: a change the site did not make for any account"
                       for key, change in _changes_to_attribute(diff) if not counts[key]]
    # b cannot be undone and a is not possible after it (a closed ticket takes no reply): b without a before it
    # leaves the goal unreachable, a violation rather than partial progress
    out.violations += [f"{b[0]} on row {b[1]} came before {a[0]} on it; the goal asks for {a[0]} first" if a in first else
                       f"{b[0]} on row {b[1]} with no {a[0]} before it; the goal asks for {a[0]} first, and it is no longer possible"
                       for a, b in needs.before if b in first and (a not in first or first[b] < first[a])]


_BY_KIND = {"address": _address, "refund": _refund, "tickets": _tickets}


def verify(task: TaskSpec, final_state: Path) -> CheckResult:
    """Score the site's final database at `final_state` against the task's hidden expectations."""
    world = generate_world(task.seed, task.knobs)
    image, digest = pristine_image(task.seed, task.knobs)
    StaleTaskError.check(task.id, task.start_state.digest, digest, "site")
    pristine, final = load_image(image), open_snapshot(str(final_state))
    try:
        diff = WORLD.diff(pristine, final)
        out = Outcome()
        needs = _BY_KIND[world.kind](world.expected, pristine, diff, out)
        for table in sorted(diff.keys() - needs.tables - {"audit"}):  # tables the goal does not touch at all
            _judge(out, diff, table)
            out.violations += [f"{table}: row {r['id']} added" for r in diff[table]["added"]]
        _who_and_order(out, diff, needs)
    finally:
        final.close()
        pristine.close()
    violations = out.violations[:MAX_VIOLATIONS] + ([f"and {len(out.violations) - MAX_VIOLATIONS} more"]
                                                    if len(out.violations) > MAX_VIOLATIONS else [])
    return CheckResult(components=out.components, gate_failures=out.gate, violations=violations)
