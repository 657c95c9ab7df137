"""The web family's reward-ladder agents: the oracle stopped after k of its sub-goals, and a trivial agent.

Sub-goals, per goal kind (each is what one check of `web.checks` credits):
- address: each address field whose start value differs from the stated one (line 1, line 2, city), and
  the postcode (with the country, when the country changes too: the site checks a postcode against its
  country). A partial agent saves the form once, with its first k sub-goals at the stated values and the
  other fields as they were;
- tickets: the reply, then closing each ticket of the set (the replied one first: a closed ticket takes no
  reply);
- refund: the refund (one irreversible write).
The ladder audit (`gymsmith.audit.ladder`) runs these agents to check that the reward rises with each.
"""

from __future__ import annotations

from typing import Any

from gymsmith.agents.ladder import units_done
from gymsmith.agents.scripted import Script
from gymsmith.core.types import AgentRole, TaskSpec
from gymsmith.families.web.oracle import WebScriptedAgent
from gymsmith.families.web.world import World, generate_world


def _start_address(world: World) -> dict[str, str]:
    """The goal order's shipping address at the start, field by field (the goal's `address` keys)."""
    order = next(r for r in world.rows["orders"] if r["id"] == world.expected["order_id"])
    return {f: order[f] for f in world.expected["address"]}


def _address_units(world: World) -> list[dict[str, str]]:
    start, new = _start_address(world), world.expected["address"]
    units = [{f: new[f]} for f in ("ship_line1", "ship_line2", "ship_city") if start[f] != new[f]]
    if start["ship_country"] != new["ship_country"]:
        units.append({"ship_postcode": new["ship_postcode"], "ship_country": new["ship_country"]})
    elif start["ship_postcode"] != new["ship_postcode"]:
        units.append({"ship_postcode": new["ship_postcode"]})
    return units


def _units(world: World) -> list[Any]:
    x = world.expected
    if x["kind"] == "address":
        return _address_units(world)
    if x["kind"] == "refund":
        return ["refund"]
    return ["reply", x["reply_to"], *[t for t in x["close"] if t != x["reply_to"]]]


def work_units(task: TaskSpec) -> int:
    return len(_units(generate_world(task.seed, task.knobs)))


class PartialWebOracle(WebScriptedAgent):
    """The oracle through the UI, stopped after the first `round(fraction * n)` of its n sub-goals (half up)."""

    role = AgentRole.ORACLE

    submit_note = "did part of the task"

    def __init__(self, fraction: float):
        self.fraction = fraction
        self.name = f"oracle@{round(fraction * 100)}"

    def script(self) -> Script:
        units = _units(self.world)
        keep = units[:units_done(self.fraction, len(units))]
        yield from self.login()
        if not keep:
            return
        x = self.world.expected
        if x["kind"] == "address":
            address = _start_address(self.world)
            for unit in keep:
                address.update(unit)
            yield from self.change_address(x["order_id"], x["customer"], address)
        elif x["kind"] == "refund":
            yield from self.refund(x["order_id"], x["charge_id"])
        else:
            # the reply is typed on the reply target's page; closing it is the next sub-goal
            yield from self.open_ticket(x["reply_to"], x["tag"])
            yield from self.type("body", x["reply"])
            yield from self.click("Send reply", "button")
            for tid in keep[1:]:
                yield from self.open_ticket(tid, x["tag"])
                yield from self.click("Close ticket", "button")
                yield from self.click("Confirm close", "button")


class WebTrivial(WebScriptedAgent):
    """Logs in and opens the record the goal is about; on an address task it saves the form unchanged.

    What it earns is what activity (and a write that changes nothing) earns without progress; the ladder
    requires it to be no more than doing nothing (the null agent).
    """

    role = AgentRole.BASELINE

    name = "trivial"
    submit_note = "looked around"

    def script(self) -> Script:
        yield from self.login()
        x = self.world.expected
        if x["kind"] == "address":
            yield from self.change_address(x["order_id"], x["customer"], _start_address(self.world))
        elif x["kind"] == "refund":
            yield from self.open_order(x["order_id"], str(x["order_id"]))
        else:
            yield from self.open_ticket(x["reply_to"], x["tag"])
