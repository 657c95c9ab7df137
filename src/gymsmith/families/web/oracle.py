"""The web oracle: solves every task through the browser's UI only - clicks, typing and choosing options.

It is privileged in what it knows (it rebuilds the goal's answer from the seed, as the verifier does),
never in how it acts: it finds each element by its visible label in the observation, pages through
lists, and passes every validation and confirmation page the way a person would. It proves each generated
task solvable through the UI; it never runs in training.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from gymsmith.agents.scripted import Script, ScriptedAgent
from gymsmith.core.types import Action, AgentRole, Observation
from gymsmith.families.web.skin import skin_of
from gymsmith.families.web.world import AGENT_PASSWORD, AGENT_USER, generate_world

Steps = Generator[Action, Observation, Any]


class UIError(RuntimeError):
    """The page does not show what the script expected; the script stops and submits."""


class WebScriptedAgent(ScriptedAgent):
    """Scripted agents that read the observation's elements: `el(role, label)` finds one, `click`/`type` act on it."""

    def reset(self, task, observation, *, seed):
        super().reset(task, observation, seed=seed)
        self.obs = observation
        self.world = generate_world(task.seed, task.knobs)
        self.skin = skin_of(task.seed, task.knobs.get("variation", 0.0))  # the site's words, rebuilt as the site does

    def act(self, observation: Observation) -> Action:
        if self.started:
            self.obs = observation
        try:
            return super().act(observation)
        except UIError as exc:
            return Action(tool="submit", arguments={"note": f"gave up: {exc}"})

    def do(self, tool: str, **arguments: Any) -> Steps:
        self.obs = yield Action(tool=tool, arguments=arguments)
        return self.obs

    def el(self, role: str, label: str | None = None, *, name: str | None = None) -> int | None:
        """The first element of `role` whose label is what the site shows for canonical `label` (and named `name`)."""
        label = self.skin.shown(label) if label is not None else None
        for e in self.obs.data.get("elements", []) if self.obs.data else []:
            if e["role"] == role and (label is None or e["label"] == label) and (name is None or e["name"] == name):
                return e["id"]
        return None

    def need(self, role: str, label: str | None = None, *, name: str | None = None) -> int:
        found = self.el(role, label, name=name)
        if found is None:
            raise UIError(f"no {role} {label or name!r} on {self.obs.data.get('url') if self.obs.data else '?'}")
        return found

    def click(self, label: str, role: str = "link") -> Steps:
        return (yield from self.do("click", element=self.need(role, label)))

    def type(self, name: str, text: str) -> Steps:
        return (yield from self.do("type", element=self.need("textbox", name=name), text=text))

    def choose(self, name: str, option: str) -> Steps:
        return (yield from self.do("select", element=self.need("select", name=name), option=option))

    def login(self, username: str = AGENT_USER, password: str = AGENT_PASSWORD) -> Steps:
        field: dict[str, Any] = next((e for e in self.obs.data.get("elements", []) if e["name"] == "username"), {}) if self.obs.data else {}
        if field.get("value") != username:  # a refused login shows the page again with the name filled in
            yield from self.type("username", username)
        yield from self.type("password", password)
        yield from self.click("Log in", "button")
        return not self.obs.data.get("url", "").startswith("/login")  # logged in: the site moved on

    def solve(self) -> Steps:
        """The goal's changes through the UI, once logged in (the oracle's plan; exploits reuse it)."""
        x = self.world.expected
        if x["kind"] == "address":
            name = self.world.goal.split("the order that ", 1)[1].split(" placed on ", 1)[0]
            yield from self.change_address(x["order_id"], name, x["address"])
        elif x["kind"] == "refund":
            yield from self.refund(x["order_id"], x["charge_id"])
        else:
            yield from self.close_ticket(x["reply_to"], x["tag"], reply=x["reply"])  # reply first: closed tickets take none
            for tid in x["close"]:
                if tid != x["reply_to"]:
                    yield from self.close_ticket(tid, x["tag"])

    def open_in_list(self, link: str) -> Steps:
        """Click link `link` in a paginated list, following Next until it shows up."""
        for _ in range(500):
            if self.el("link", link) is not None:
                return (yield from self.click(link))
            yield from self.click("Next")
        raise UIError(f"{link} not found in the list")

    def open_order(self, order_id: int, search: str) -> Steps:
        yield from self.click("Orders")
        yield from self.type("q", search)
        yield from self.click("Search", "button")
        yield from self.open_in_list(f"#{order_id}")

    def open_ticket(self, ticket_id: int, tag: str) -> Steps:
        yield from self.click("Tickets")
        yield from self.choose("tag", tag)
        yield from self.choose("status", "open")
        yield from self.click("Filter", "button")
        yield from self.open_in_list(f"#{ticket_id}")

    def change_address(self, order_id: int, search: str, address: dict[str, str]) -> Steps:
        yield from self.open_order(order_id, search)
        yield from self.edit_address(address)

    def edit_address(self, address: dict[str, str]) -> Steps:
        """From an order's page: its address form, filled with `address` and saved."""
        yield from self.click("Edit shipping address")
        yield from self.type("line1", address["ship_line1"])
        yield from self.type("line2", address["ship_line2"])
        yield from self.type("city", address["ship_city"])
        yield from self.type("postcode", address["ship_postcode"])
        yield from self.choose("country", address["ship_country"])
        yield from self.click("Save address", "button")
        if self.skin.t("Shipping address updated.") not in self.obs.text:
            raise UIError(f"the address form did not save: {self.obs.text[-300:]}")

    def refund(self, order_id: int, charge_id: int, reason: str = "Duplicate charge") -> Steps:
        yield from self.open_order(order_id, str(order_id))
        yield from self.click(f"Refund charge #{charge_id}")
        yield from self.choose("reason", reason)
        yield from self.click("Continue", "button")
        yield from self.click("Confirm refund", "button")

    def close_ticket(self, ticket_id: int, tag: str, reply: str | None = None) -> Steps:
        yield from self.open_ticket(ticket_id, tag)
        if reply is not None:
            yield from self.type("body", reply)
            yield from self.click("Send reply", "button")
        yield from self.click("Close ticket", "button")
        yield from self.click("Confirm close", "button")


class WebOracle(WebScriptedAgent):
    role = AgentRole.ORACLE
    name = "oracle"
    submit_note = "done through the UI"

    def script(self) -> Script:
        yield from self.login()
        yield from self.solve()
