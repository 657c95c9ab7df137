"""A greedy ops agent: sensible first-come heuristics that earn partial credit and fail on hard tasks.

It reads only what any agent sees (goal metadata, observations). Its blind spots are deliberate and
realistic: orders in id order instead of by due date, the cheapest supplier whatever its lead time,
whole-quantity purchase orders, the first matching customer, the first order with two charges.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gymsmith.core.types import Action, AgentRole, Observation
from gymsmith.families.ops.scripted import Script, ScriptedAgent


class OpsGreedy(ScriptedAgent):

    role = AgentRole.BASELINE
    name = "greedy"

    def script(self) -> Script:
        kind = self.task.metadata["kind"]
        return {"fulfil": self._fulfil, "resource": self._fulfil, "staff": self._staff, "billing": self._billing}[kind]()

    # -- fulfil / resource ----------------------------------------------------------------------
    def _fulfil(self) -> Script:
        horizon = self.task.metadata["horizon_day"]
        targets = yield from self._all("orders", {"status": "pending", "due_day__lte": horizon})
        waiting = []
        for order in targets:
            record = yield from self._call("get_record", entity="orders", id=order["id"])
            if record.error is None and record.data["balance_due_cents"] > 0:
                yield from self._call("capture_payment", order_id=order["id"])
            if (yield from self._allocate_and_ship(order)):
                continue
            suppliers = yield from self._all("suppliers", {"product_id": order["product_id"], "active": 1})
            if suppliers:
                cheapest = min(suppliers, key=lambda s: s["unit_cost_cents"])
                inv = yield from self._call("check_inventory", product_id=order["product_id"])
                warehouse = inv.data["stock"][0]["warehouse_id"] if inv.error is None and inv.data["stock"] else 1
                yield from self._call("place_purchase_order", supplier_id=cheapest["id"], warehouse_id=warehouse,
                                      quantity=order["quantity"])
            waiting.append(order)
        last_due = max((o["due_day"] for o in targets), default=0)
        for _ in range(last_due):  # no due order can ship on time after the last due day: stop waiting there
            if not waiting:
                break
            yield from self._call("advance_clock", days=1)
            still = []
            for order in waiting:
                if not (yield from self._allocate_and_ship(order)):
                    still.append(order)
            waiting = still

    def _allocate_and_ship(self, order: dict[str, Any]) -> Generator[Action, Observation, bool]:
        inv = yield from self._call("check_inventory", product_id=order["product_id"])
        if inv.error is not None:
            return False
        for stock in inv.data["stock"]:
            if stock["available"] >= order["quantity"]:
                alloc = yield from self._call("allocate_stock", order_id=order["id"], warehouse_id=stock["warehouse_id"])
                if alloc.error is None:
                    shipped = yield from self._call("ship_order", order_id=order["id"])
                    return shipped.error is None
        return False

    # -- staff ----------------------------------------------------------------------------------
    def _staff(self) -> Script:
        needs = yield from self._all("shift_needs")
        staff = yield from self._all("staff")
        days: dict[int, set[int]] = {s["id"]: set() for s in staff}
        for need in needs:
            for _ in range(need["staff_needed"]):
                for person in staff:
                    sid, worked = person["id"], days[person["id"]]
                    off = {int(d) for d in person["unavailable_days"].split(",") if d}
                    if need["day"] in worked or need["day"] in off or len(worked) >= 5 \
                            or 8 * (len(worked) + 1) > person["max_hours_week"]:
                        continue
                    obs = yield from self._call("assign_shift", staff_id=sid, day=need["day"],
                                                warehouse_id=need["warehouse_id"], hours=8)
                    if obs.error is None:
                        worked.add(need["day"])
                        break

    # -- billing --------------------------------------------------------------------------------
    def _billing(self) -> Script:
        meta = self.task.metadata
        if meta.get("user") == "customer":  # asks the caller who they are; overlooks any policy beyond that
            meta = yield from self._ask_caller_email()
        if "order_id" in meta:
            record = yield from self._call("get_record", entity="orders", id=meta["order_id"])
            customer_id = record.data["customer_id"] if record.error is None else None
        elif "customer_name" in meta or "customer_email" in meta:
            filters = {"name__contains": meta["customer_name"]} if "customer_name" in meta else {"email": meta["customer_email"]}
            found = yield from self._all("customers", filters)
            customer_id = found[0]["id"] if found else None
        else:
            customer_id = None
        if customer_id is None:
            return
        charges = yield from self._all("payments", {"customer_id": customer_id, "kind": "charge"})
        by_order: dict[int, list[dict]] = {}
        for charge in charges:
            by_order.setdefault(charge["order_id"], []).append(charge)
        for order_id in sorted(by_order):
            if len(by_order[order_id]) >= 2:
                last = by_order[order_id][-1]
                yield from self._call("refund_payment", payment_id=last["id"], amount_cents=last["amount_cents"],
                                      reason="duplicate charge")
                return
