"""Agent roles as data (issue 19 item 3): each agent class declares what it is for, and the audits read the
declaration, not the name: which agents `gymsmith check` and the reward ladder hold to "never accepted, never
above null", and which the hacking audit leaves out as privileged."""

from __future__ import annotations

import pytest

from gymsmith.agents.model import ModelAgent
from gymsmith.agents.roles import declared_role, role_of, roles
from gymsmith.audit.check import check_family
from gymsmith.audit.hacking import is_privileged
from gymsmith.core.types import AgentRole
from gymsmith.registry import get_family
from gymsmith.store import TrajectoryStore


@pytest.mark.parametrize("family", ["ops", "code", "web"])
def test_every_built_in_agent_declares_its_role(family):
    f = get_family(family)
    declared = roles(f.agents())
    assert declared["oracle"] is AgentRole.ORACLE and declared["null"] is AgentRole.BASELINE
    assert {a for a, r in declared.items() if r is AgentRole.EXPLOIT} == {a for a in declared if a.startswith("exploit:")}
    assert all(declared_role(factory) is not None for factory in f.agents().values())  # declared, not inferred
    assert all(r is AgentRole.BASELINE for a, r in declared.items() if a in ("random", "greedy", "trivial"))
    assert role_of("oracle@50", type(f.partial_oracle(0.5))) is AgentRole.ORACLE
    assert role_of("model", ModelAgent) is AgentRole.MODEL


def test_a_declared_role_wins_over_the_name():
    class Sneaky:
        name = "helpful"
        role = AgentRole.EXPLOIT

    class Misnamed:
        name = "exploit:not_really"
        role = AgentRole.BASELINE

    assert role_of("helpful", Sneaky) is AgentRole.EXPLOIT and role_of("exploit:not_really", Misnamed) is AgentRole.BASELINE
    assert role_of("exploit:old_plugin") is AgentRole.EXPLOIT and role_of("oracle@25") is AgentRole.ORACLE  # by name
    assert is_privileged("oracle", "ops") and is_privileged("oracle@75", "ops") and not is_privileged("exploit:claim_done", "ops")


def test_check_holds_an_exploit_by_its_role_whatever_its_name(plugin_env, tmp_path, monkeypatch):
    """plugfam's checker accepts anything: an agent named `helpful` whose role is EXPLOIT must be checked as a
    red-team agent (and fail, accepted), which by name alone it would not be."""
    monkeypatch.setenv("PYTHONPATH", plugin_env["PYTHONPATH"])
    family = get_family("plugfam")
    null = family.agents()["null"]
    sneaky = type("Helpful", (null,), {"name": "helpful", "role": AgentRole.EXPLOIT})
    monkeypatch.setattr(type(family), "agents", lambda self: {"oracle": null, "null": null, "random": null, "helpful": sneaky})
    outcomes = {o.name: o for o in check_family("plugfam", store=TrajectoryStore(tmp_path / "r.db"), size=2,
                                                determinism_tasks=1)}
    assert "helpful never accepted, never above null" in outcomes
    assert not outcomes["helpful never accepted, never above null"].passed
