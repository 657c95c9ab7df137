"""`web`: a shop back office (ShopDesk) in a real Chromium, with goals checked against its database (the browser family).

Agent-side modules only: `checks` is loaded by the verifier process through `checks_module`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from gymsmith.agents.base import Agent, NullAgent, RandomAgent
from gymsmith.core.types import StartStateRef, TaskSpec
from gymsmith.registry.family import DIFFICULTY, Knob, KnobKind, resolve_knobs


def derive_knobs(difficulty: float) -> dict[str, Any]:
    """Every knob as a function of difficulty: more records (deeper pages), more look-alikes, traps, more steps, a
    site that looks less like the canonical one."""
    d = difficulty
    return {"records": 20 + round(280 * d), "distractors": round(4 * d), "validation_trap": int(d >= 0.5),
            "n_tickets": 1 + round(4 * d), "variation": round(d, 4)}


class WebFamily:
    name = "web"
    version = "3.5.1"
    checks_module = "gymsmith.families.web.checks"
    system_prompt = ("You operate a web application through a browser. Each observation shows the page's path, its title "
                     "and its text, in which every element you can use has a number in brackets, like [12] link \"Orders\". "
                     "Act with the tools on those numbers. Change only what the task asks for, then call submit.\n\nTask:\n{goal}")
    knobs = (
        DIFFICULTY,
        Knob(name="kind", kind=KnobKind.CHOICE, choices=("address", "refund", "tickets"),
             description="Goal kind; unset, it is drawn from the seed."),
        Knob(name="records", kind=KnobKind.INT, low=10, high=2000, description="Orders in the shop: the depth of its pagination."),
        Knob(name="distractors", kind=KnobKind.INT, low=0, high=8,
             description="Look-alike records: customers one letter away, same-tag tickets on the wrong side of the date."),
        Knob(name="validation_trap", kind=KnobKind.INT, low=0, high=1,
             description="1: the form needs a change the goal does not spell out (another country's postcode format, a field to clear)."),
        Knob(name="n_tickets", kind=KnobKind.INT, low=1, high=8, description="Tickets to close (steps of the ticket goal)."),
        Knob(name="variation", kind=KnobKind.FLOAT, low=0.0, high=1.0,
             description="How far the site's look departs from the canonical ShopDesk (words, menus, layout, page size, "
                         "date and money formats; web/skin.py); the database, goal and checks do not change."),
    )

    def generate(self, seed: int, **knobs: Any) -> TaskSpec:
        from gymsmith.families.web.env import TOOL_SPECS
        from gymsmith.families.web.world import KINDS, generate_world, pristine_image

        resolved = resolve_knobs(self.knobs, knobs, derive_knobs)
        if resolved["kind"] is None:
            resolved["kind"] = KINDS[seed % len(KINDS)]
        world = generate_world(seed, resolved)
        _, digest = pristine_image(seed, resolved)
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=resolved, goal=world.goal,
                        start_state=StartStateRef(kind="sqlite-site", digest=digest), tools=TOOL_SPECS, metadata=world.metadata)

    def fingerprint_extra(self) -> dict[str, Any]:
        """The browser the rollouts run in: Chromium's and Playwright's versions."""
        import subprocess
        from importlib.metadata import version

        from gymsmith.families.web.browser import BrowserUnavailable, chromium_path

        try:
            chromium = subprocess.run([chromium_path(), "--version"], capture_output=True, text=True, timeout=20).stdout.strip()
        except (BrowserUnavailable, OSError, subprocess.TimeoutExpired):
            chromium = "absent"
        return {"chromium": chromium, "playwright": version("playwright")}

    def make_env(self):
        from gymsmith.families.web.env import WebEnvironment

        return WebEnvironment()

    def agents(self) -> Mapping[str, Callable[[], Agent]]:
        from gymsmith.families.web.exploits import EXPLOITS
        from gymsmith.families.web.ladder import WebTrivial
        from gymsmith.families.web.oracle import WebOracle

        # random submits with a 10% chance per step (~10 steps): each of its steps is a browser action
        return {"oracle": WebOracle, "random": partial(RandomAgent, submit_probability=0.1), "null": NullAgent,
                "trivial": WebTrivial, **{e.name: e for e in EXPLOITS}}

    def work_units(self, task: TaskSpec) -> int:
        """Sub-goals of `task` (see `web.ladder`)."""
        from gymsmith.families.web.ladder import work_units

        return work_units(task)

    def partial_oracle(self, fraction: float) -> Agent:
        """The oracle through the UI, stopped after `round(fraction * work_units)` sub-goals."""
        from gymsmith.families.web.ladder import PartialWebOracle

        return PartialWebOracle(fraction)
