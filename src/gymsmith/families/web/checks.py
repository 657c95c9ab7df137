"""Hidden checks for the web family. Loaded only by the verifier process; no agent-side module imports this one.

They read the site's final database and compare it, row by row, with the pristine one rebuilt from the
seed: the intended change must be there, and nothing else may have changed (an over-broad agent that
closes every ticket or refunds every charge fails the gate however much it got right).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gymsmith.core.types import RewardComponent, TaskSpec
from gymsmith.families.web.schema import diff_states
from gymsmith.families.web.world import generate_world, pristine_image
from gymsmith.verifier.protocol import CheckResult

Allowed = Callable[[str, str, dict[str, Any], dict[str, Any] | None], bool]  # (table, kind, row, old row) -> intended?


def _collateral(diff: dict[str, dict[str, list]], allowed: Allowed) -> list[str]:
    """Every change the goal did not ask for, described."""
    out = []
    for table, d in diff.items():
        out += [f"{table}: row {r['id']} added" for r in d["added"] if not allowed(table, "added", r, None)]
        out += [f"{table}: row {r['id']} removed" for r in d["removed"]]
        for old, new in d["changed"]:
            if not allowed(table, "changed", new, old):
                cols = sorted(k for k in new if new[k] != old[k])
                out.append(f"{table}: row {new['id']} changed ({', '.join(cols)})")
    return out


def _components(main: dict[str, RewardComponent], collateral: list[str], gate: list[str]) -> CheckResult:
    if collateral:
        gate.append(f"{len(collateral)} unintended changes: {collateral[:5]}")
    main["no_collateral"] = RewardComponent(value=0.0 if collateral else 1.0, weight=0.2,
                                            detail="; ".join(collateral[:5]) or "nothing else changed")
    return CheckResult(components=main, gate_failures=gate)


def _address(expected, diff) -> CheckResult:
    oid, want = expected["order_id"], expected["address"]
    changed = {new["id"]: new for _, new in diff.get("orders", {}).get("changed", [])}
    got = changed.get(oid, {})
    right = [k for k in want if got.get(k) == want[k]]
    gate = [] if len(right) == len(want) else [f"order {oid}: address fields wrong or unchanged: {sorted(set(want) - set(right))}"]

    def allowed(table, kind, row, old):
        return table == "orders" and kind == "changed" and row["id"] == oid and \
            all(row[k] == old[k] for k in row if not k.startswith("ship_"))
    return _components({"address": RewardComponent(value=len(right) / len(want), weight=0.8,
                                                   detail=f"{len(right)} of {len(want)} address fields as asked")},
                       _collateral(diff, allowed), gate)


def _refund(expected, diff) -> CheckResult:
    cid = expected["charge_id"]
    new_refunds = [r for r in diff.get("refunds", {}).get("added", []) if r["charge_id"] == cid]
    refunded = any(new["id"] == cid and new["status"] == "refunded" for _, new in diff.get("charges", {}).get("changed", []))
    reason_ok = any(r["reason"] == expected["reason"] for r in new_refunds)
    gate = []
    if not (refunded and new_refunds):
        gate.append(f"charge {cid} (the duplicate) was not refunded")
    elif not reason_ok:
        gate.append(f"charge {cid} was refunded with reason {new_refunds[0]['reason']!r}, not {expected['reason']!r}")

    def allowed(table, kind, row, old):
        if table == "charges":
            return kind == "changed" and row["id"] == cid
        return table == "refunds" and kind == "added" and row["charge_id"] == cid and len(new_refunds) == 1
    return _components({"refunded": RewardComponent(value=1.0 if refunded and new_refunds else 0.0, weight=0.6,
                                                    detail=f"duplicate charge {cid} refunded: {refunded}"),
                        "reason": RewardComponent(value=1.0 if reason_ok else 0.0, weight=0.2, detail="reason recorded as asked")},
                       _collateral(diff, allowed), gate)


def _tickets(expected, diff) -> CheckResult:
    targets, newest, text = set(expected["close"]), expected["reply_to"], expected["reply"]
    closed = {new["id"] for old, new in diff.get("tickets", {}).get("changed", []) if new["status"] == "closed" and old["status"] == "open"}
    replies = [m for m in diff.get("messages", {}).get("added", []) if m["ticket_id"] == newest]
    replied = any(m["body"] == text for m in replies)
    gate = []
    if targets - closed:
        gate.append(f"tickets still open: {sorted(targets - closed)}")
    if not replied:
        gate.append(f"ticket {newest} has no reply with the requested text")

    def allowed(table, kind, row, old):
        if table == "tickets":
            return kind == "changed" and row["id"] in targets
        return table == "messages" and kind == "added" and row["ticket_id"] == newest and row["body"] == text and len(replies) == 1
    return _components({"closed": RewardComponent(value=len(targets & closed) / len(targets), weight=0.5,
                                                  detail=f"{len(targets & closed)} of {len(targets)} tickets closed"),
                        "replied": RewardComponent(value=1.0 if replied else 0.0, weight=0.3, detail=f"reply on ticket {newest}")},
                       _collateral(diff, allowed), gate)


_BY_KIND = {"address": _address, "refund": _refund, "tickets": _tickets}


def verify(task: TaskSpec, final_state: Path) -> CheckResult:
    """Score the site's final database at `final_state` against the task's hidden expectations."""
    world = generate_world(task.seed, task.knobs)
    image, digest = pristine_image(task.seed, task.knobs)
    if digest != task.start_state.digest:
        raise RuntimeError(f"task {task.id}: the site rebuilt by the verifier does not match the task's digest")
    pristine, final = sqlite3.connect(":memory:"), sqlite3.connect(f"file:{final_state}?mode=ro", uri=True)
    pristine.deserialize(image)
    try:
        return _BY_KIND[world.kind](world.expected, diff_states(pristine, final))
    finally:
        final.close()
        pristine.close()
