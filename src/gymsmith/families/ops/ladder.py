"""The ops family's reward-ladder agents: the oracle stopped after k of its sub-goals, and a trivial agent.

A *sub-goal* is one effect the goal needs: cancelling the delayed purchase order, capturing one order's
payment, placing one purchase order, allocating one order, shipping one order, assigning one shift,
refunding the duplicate. The witness (the generator's solution) is a list of such calls; advancing the
clock and talking to a customer on the line are not sub-goals (waiting and asking are not progress), so each
belongs to the sub-goal after it. The ladder
audit (`gymsmith.audit.ladder`) runs these agents to check that the reward rises with every sub-goal.
"""

from __future__ import annotations

from gymsmith.agents.ladder import units_done
from gymsmith.core.types import Action, AgentRole, TaskSpec
from gymsmith.families.ops.generator import generate_world
from gymsmith.families.ops.oracle import OpsOracle
from gymsmith.families.ops.scripted import Script, ScriptedAgent

WAITING = frozenset({"advance_clock", "message_user"})  # calls that are no sub-goal of their own


def witness_units(task: TaskSpec) -> list[list[Action]]:
    """The oracle's plan for `task`, cut into sub-goals (each ends with the call that achieves it)."""
    units: list[list[Action]] = []
    pending: list[Action] = []
    for a in generate_world(task.seed, task.knobs).witness:
        pending.append(Action(tool=a["tool"], arguments=dict(a["arguments"])))
        if a["tool"] not in WAITING:
            units.append(pending)
            pending = []
    if pending and units:  # a trailing wait achieves nothing: it joins the last sub-goal
        units[-1].extend(pending)
    return units


def work_units(task: TaskSpec) -> int:
    return len(witness_units(task))


class PartialOpsOracle(OpsOracle):
    """The oracle, stopped after the first `round(fraction * n)` of its n sub-goals (half rounds up)."""

    def __init__(self, fraction: float):
        self.fraction = fraction
        self.name = f"oracle@{round(fraction * 100)}"

    def reset(self, task: TaskSpec, observation, *, seed: int) -> None:
        super().reset(task, observation, seed=seed)
        units = witness_units(task)
        keep = units_done(self.fraction, len(units))
        self.plan = [a for unit in units[:keep] for a in unit]
        self.plan.append(Action(tool="submit", arguments={"note": f"{keep} of {len(units)} sub-goals"}))


class OpsTrivial(ScriptedAgent):
    """Looks busy and changes nothing: reads the records the goal is about and sends calls the rules refuse.

    What it earns is what activity earns without progress; the ladder requires it to be no more than doing
    nothing (the null agent).
    """

    role = AgentRole.BASELINE

    name = "trivial"

    def script(self) -> Script:
        yield from self._call("search_records", entity="orders", filters={}, limit=20, offset=0)
        yield from self._call("ship_order", order_id=10**9)           # no such order: refused
        yield from self._call("refund_payment", payment_id=10**9, amount_cents=1, reason="duplicate charge")
        yield from self._call("advance_clock", days=0)                # no time passes (refused or a no-op)
