"""`ops`: a simulated back office with constraints and deadlines (the planning family).

Agent-side modules only: `checks` is loaded by the verifier process through `checks_module`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gymsmith.agents.base import Agent, NullAgent, RandomAgent
from gymsmith.core.types import StartStateRef, TaskSpec
from gymsmith.families.ops.env import OpsEnvironment, pristine_image
from gymsmith.families.ops.exploits import EXPLOITS
from gymsmith.families.ops.generator import KINDS, choose_kind, generate_world
from gymsmith.families.ops.greedy import OpsGreedy
from gymsmith.families.ops.ladder import OpsTrivial, PartialOpsOracle, work_units
from gymsmith.families.ops.oracle import OpsOracle
from gymsmith.families.ops.tools import TOOL_SPECS
from gymsmith.registry.family import DIFFICULTY, Knob, KnobKind, resolve_knobs

USERS = ("none", "customer")


def derive_knobs(difficulty: float) -> dict[str, Any]:
    """Defaults of the other knobs as functions of difficulty: every one makes the task harder as it rises."""
    d = difficulty
    return {
        "n_orders": 1 + round(11 * d),
        "budget_slack": round(0.5 * (1 - d) + 0.01, 4),
        "constraints": round(4 * d),
        "distractors": round(10 + 250 * d),
        "horizon": 3 + round(9 * d),
        "fidelity": round(d, 4),
        "user": "none",
    }


class OpsFamily:
    name = "ops"
    version = "3.5.2"
    checks_module = "gymsmith.families.ops.checks"
    system_prompt = (
        "You run the back office of a small distribution business through its tools. Money is in integer "
        "cents and dates are days on a simulated clock (day 0 is today). Look records up before you change "
        "them, respect the business rules the tools enforce, retry calls that fail with a transient error or "
        "a rate limit, read again any answer marked replica_lag (it may predate your latest changes), and never "
        "change records the task does not concern. Advance the clock only when the task "
        "needs time to pass, and no further than it needs; buy no more stock and add no more shifts than it needs. "
        "Call submit when the task is done.\n\n"
        "Task:\n{goal}"
    )
    knobs = (
        DIFFICULTY,
        Knob(name="kind", kind=KnobKind.CHOICE, choices=KINDS,
             description="Goal kind; unset, it is drawn from the seed."),
        Knob(name="n_orders", kind=KnobKind.INT, low=1, high=16,
             description="Size: orders to fulfil (staffing: roster size; billing: the customer's orders)."),
        Knob(name="budget_slack", kind=KnobKind.FLOAT, low=0.0, high=1.0,
             description="Budget beyond what the solution needs, as a fraction of its cost (staffing: spare capacity)."),
        Knob(name="constraints", kind=KnobKind.INT, low=0, high=4,
             description="Number of interacting constraints switched on (unpaid orders, slow cheap suppliers, ...)."),
        Knob(name="distractors", kind=KnobKind.INT, low=0, high=20000,
             description="Records the goal does not concern (other orders, look-alike customers, past shifts)."),
        Knob(name="horizon", kind=KnobKind.INT, low=2, high=14, description="Days until the last due date."),
        Knob(name="fidelity", kind=KnobKind.FLOAT, low=0.0, high=1.0,
             description="How much the tools misbehave like real APIs: transient errors, rate limits, stale reads (marked replica_lag)."),
        Knob(name="user", kind=KnobKind.CHOICE, choices=USERS, only_with=("kind", ("billing",)),
             description="'customer': a billing task's customer is on the line, holding the facts the agent must ask "
                         "for (message_user) under a store policy; 'none' (the default): the goal states the facts."),
    )

    def generate(self, seed: int, **knobs: Any) -> TaskSpec:
        resolved = resolve_knobs(self.knobs, knobs, derive_knobs)
        if resolved["user"] == "customer":  # `only_with`: the kind is billing or unset, and then billing
            resolved["kind"] = "billing"
        if resolved["kind"] is None:
            resolved["kind"] = choose_kind(seed)
        world = generate_world(seed, resolved)
        _, digest = pristine_image(seed, resolved)
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=resolved, goal=world.goal,
                        start_state=StartStateRef(kind="generated", digest=digest), tools=TOOL_SPECS,
                        metadata=world.metadata)

    def make_env(self) -> OpsEnvironment:
        return OpsEnvironment()

    def agents(self) -> Mapping[str, Callable[[], Agent]]:
        return {"oracle": OpsOracle, "greedy": OpsGreedy, "random": RandomAgent, "null": NullAgent,
                "trivial": OpsTrivial, **{e.name: e for e in EXPLOITS}}

    def work_units(self, task: TaskSpec) -> int:
        """Sub-goals of the oracle's plan for `task` (see `ops.ladder`)."""
        return work_units(task)

    def partial_oracle(self, fraction: float) -> Agent:
        """The oracle stopped after `round(fraction * work_units)` sub-goals."""
        return PartialOpsOracle(fraction)
