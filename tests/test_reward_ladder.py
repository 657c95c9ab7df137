"""Dense rewards that teach: zero for doing nothing, strictly increasing in real progress, below any solve
when not accepted, and strictly below the clean solution when wasteful or collateral. Everything runs
through the real environments and the real verifier process; ops on 40 tasks, code on a few multi-bug
tasks (each rollout is a bubblewrap sandbox), web on one task of each goal kind (each rollout is a
Chromium session). `gymsmith audit reward --ladder` and `gymsmith check` run the full sizes."""

from __future__ import annotations

import pytest

from gymsmith.agents.ladder import LEVELS, units_done
from gymsmith.agents.scripted import Script, ScriptedAgent
from gymsmith.audit.ladder import evaluate, ladder_taskset, run_ladder
from gymsmith.core.types import Action, Split
from gymsmith.families.ops.scripted import ScriptedAgent as OpsScriptedAgent
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner.rollout import run_rollout
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY, get_policy
from gymsmith.verifier.service import VerifierService


# -- the policy --------------------------------------------------------------------------------------
def test_default_policy_is_strictly_increasing_uncapped_and_keeps_partial_below_any_solve():
    fn = get_policy(DEFAULT_POLICY)
    grid = [i / 100 for i in range(101)]
    rejected = [fn(s, False) for s in grid]
    accepted = [fn(s, True) for s in grid]
    assert rejected[0] == 0.0
    assert all(b > a for a, b in zip(rejected, rejected[1:])), "partial credit must rise with every bit of progress"
    assert all(b > a for a, b in zip(accepted, accepted[1:])), "a cleaner solve must score more"
    assert max(rejected) < min(accepted), "partial credit must stay below any accepted solve"
    assert accepted[-1] == 1.0


def test_the_old_cap_flattens_what_the_new_policy_separates():
    old, new = get_policy("shaped_gated"), get_policy(DEFAULT_POLICY)
    assert old(0.6, False) == old(0.9, False)  # past half way every state paid the same
    assert new(0.6, False) < new(0.9, False)


# -- the ladder's arithmetic (no environment: rows made by hand) ----------------------------------------
def _rows(task_ids, rewards_by_agent):
    return [{"task_id": t, "agent": a, "reward": r[i], "accepted": a == "oracle@100"}
            for a, r in rewards_by_agent.items() for i, t in enumerate(task_ids)]


def _honest(task, k):
    """A reward that rises with the sub-goals done: 0.45 * share below the goal, 1 at it."""
    n = get_family("ops").work_units(task)
    j = units_done(k / 100, n)
    return 1.0 if j == n else 0.45 * j / n


def test_ladder_evaluation_flags_flat_rungs_paid_null_and_paid_exploits():
    tasks = build_taskset(TaskSetSpec(family="ops", count=6, split="all"))
    ids = [t.id for t in tasks]
    good = {f"oracle@{k}": [_honest(t, k) for t in tasks] for k in LEVELS}
    good |= {"null": [0.0] * 6, "trivial": [0.0] * 6, "exploit:x": [0.0] * 6}
    report = evaluate("ops", tasks, _rows(ids, good))
    assert report.passed, report.failures
    flat = dict(good) | {"oracle@75": good["oracle@50"], "null": [0.3] * 6, "exploit:x": [0.0] * 5 + [0.2]}
    report = evaluate("ops", tasks, _rows(ids, flat))
    text = " ".join(report.failures)
    assert "null agent earns reward on 6" in text
    assert "exploit:x scores above the null agent" not in text  # 0.2 is below this null's 0.3 ...
    assert report.null_nonzero == 6
    worse = dict(good) | {"exploit:x": [0.0] * 5 + [0.2], "trivial": [0.01] + [0.0] * 5}
    text = " ".join(evaluate("ops", tasks, _rows(ids, worse)).failures)
    assert "exploit:x scores above the null agent on 1 of 6" in text and "trivial scores above" in text


def test_units_done_rounds_half_up_and_stays_in_range():
    assert [units_done(k / 100, 2) for k in LEVELS] == [0, 1, 1, 2, 2]
    assert [units_done(k / 100, 1) for k in LEVELS] == [0, 0, 1, 1, 1]
    assert [units_done(k / 100, 4) for k in LEVELS] == [0, 1, 2, 3, 4]


# -- the ladder on real rollouts ------------------------------------------------------------------------
def test_ops_ladder_passes_every_threshold(tmp_path):
    report = run_ladder("ops", TrajectoryStore(tmp_path / "s.db"), count=40)
    assert report.passed, report.failures
    assert report.null_nonzero == 0 and report.spearman >= 0.95 and report.strict_share >= 0.9
    means = [r.mean_reward for r in report.rungs]
    assert all(b > a for a, b in zip(means, means[1:])), means


def test_code_ladder_on_multi_bug_tasks(tmp_path):
    """Fix 1 of 2 bugs pays more than a comment; the comment pays nothing (4 multi-bug tasks)."""
    agents = [f"oracle@{k}" for k in LEVELS] + ["null", "trivial"]
    report = run_ladder("code", TrajectoryStore(tmp_path / "s.db"), count=4, agents=agents)
    assert report.passed, report.failures
    assert all(get_family("code").work_units(t) >= 2 for t in build_taskset(ladder_taskset("code", 4)))
    trivial = next(a for a in report.agents if a.agent == "trivial")
    assert trivial.max_reward == 0.0
    assert report.rungs[2].mean_reward > trivial.max_reward  # oracle@50: one bug of two (or two of three) fixed


def test_web_ladder_on_each_goal_kind(tmp_path):
    """One task of each kind (address, refund, tickets); each rollout is a Chromium session."""
    fam = get_family("web")
    tasks = [fam.generate(7, kind=k, difficulty=0.6) for k in ("address", "refund", "tickets")]
    agents = [f"oracle@{k}" for k in LEVELS] + ["null", "trivial"]
    store = TrajectoryStore(tmp_path / "s.db")
    from gymsmith.runner import RunConfig, run

    spec = TaskSetSpec(family="web", count=3, split="all")
    run(RunConfig(run_id="web-ladder", purpose="audit", taskset=spec, agents=agents, concurrency=2), store,
        tasks=tasks, collect=False)
    report = evaluate("web", tasks, store.rollout_rows(["web-ladder"]))
    assert report.passed, report.failures + report.examples
    assert report.strictly_increasing == 3


# -- waste and collateral score strictly below the clean solution ------------------------------------
class _OpsVariant(OpsScriptedAgent):
    """The ops oracle's witness, changed by `plan()`: a wasteful or collateral variant of the clean solution.
    Retries simulated transient faults (`_call`), as the oracle does."""

    def script(self) -> Script:
        from gymsmith.families.ops.generator import generate_world

        self.world = generate_world(self.task.seed, self.task.knobs)
        for a in self.plan():
            yield from self._call(a["tool"], **a["arguments"])

    def plan(self):
        return self.world.witness


class _OpsExpensive(_OpsVariant):
    """Buys each purchase from the dearest active supplier that is as quick as the witness's one."""

    def plan(self):
        suppliers = {s["id"]: s for s in self.world.rows["suppliers"]}
        out = []
        for a in self.world.witness:
            if a["tool"] == "place_purchase_order":
                mine = suppliers[a["arguments"]["supplier_id"]]
                dearer = max((s for s in suppliers.values() if s["product_id"] == mine["product_id"] and s["active"]
                              and s["lead_days"] <= mine["lead_days"]), key=lambda s: s["unit_cost_cents"])
                a = {"tool": a["tool"], "arguments": dict(a["arguments"], supplier_id=dearer["id"])}
            out.append(a)
        return out


class _OpsCollateral(_OpsVariant):
    """The witness, then a month of waiting the goal does not need (orders outside the goal fall due)."""

    def plan(self):
        return [*self.world.witness, *[{"tool": "advance_clock", "arguments": {"days": 7}}] * 4]


def _reward(family, task, agent, verifier):
    env = family.make_env()
    try:
        t = run_rollout(env=env, agent=agent, task=task, split=Split.TRAIN, seed=0, run_id="t", verifier=verifier,
                        policy=DEFAULT_POLICY, max_steps=300, time_limit_s=120)
    finally:
        env.close()
    assert t.reward is not None, t.error
    return t.reward


def test_ops_waste_and_collateral_score_strictly_below_the_clean_solution():
    fam = get_family("ops")
    tasks = build_taskset(TaskSetSpec(family="ops", count=60, split="all", knobs={"kind": "fulfil", "difficulty": [0.0, 0.6]}))
    dearer_exists = []
    for t in tasks:
        from gymsmith.families.ops.generator import generate_world

        w = generate_world(t.seed, t.knobs)
        sup = {s["id"]: s for s in w.rows["suppliers"]}
        for a in w.witness:
            if a["tool"] == "place_purchase_order":
                mine = sup[a["arguments"]["supplier_id"]]
                if any(s["product_id"] == mine["product_id"] and s["active"] and s["lead_days"] <= mine["lead_days"]
                       and s["unit_cost_cents"] > mine["unit_cost_cents"] for s in sup.values()):
                    dearer_exists.append(t)
                    break
    assert len(dearer_exists) >= 3, "the generator should offer dearer suppliers that are as quick"
    with VerifierService() as v:
        for t in dearer_exists[:4]:
            clean = _reward(fam, t, fam.agents()["oracle"](), v)
            wasteful = _reward(fam, t, _OpsExpensive(), v)
            collateral = _reward(fam, t, _OpsCollateral(), v)
            assert clean.accepted and clean.value == 1.0
            if wasteful.accepted:  # the dearer plan may also break the budget: then it is a violation (0)
                assert 0.5 <= wasteful.value < clean.value, wasteful
            else:
                assert wasteful.value < clean.value
            assert collateral.value == 0.0 and collateral.violations


class _CodeVariant(ScriptedAgent):
    def __init__(self, extra: str):
        self.extra = extra

    def script(self) -> Script:
        from gymsmith.families.code.env import code_task

        ct = code_task(self.task)
        for m in ct.buggy_modules:
            yield Action(tool="write_file", arguments={"path": m, "content": ct.reference[m]})
        if self.extra == "waste":  # the fix, and thirty lines the fix does not need
            m = ct.buggy_modules[0]
            yield Action(tool="write_file", arguments={"path": m, "content": ct.reference[m] + "".join(
                f"\n_unused_{i} = {i}" for i in range(30)) + "\n"})
        else:  # the fix, and a correct module broken (a change the goal does not need)
            m = next(x for x in ct.modules if x not in ct.buggy_modules)
            yield Action(tool="write_file", arguments={"path": m, "content": "raise RuntimeError('gone')\n"})


def test_code_waste_and_collateral_score_strictly_below_the_clean_solution():
    fam = get_family("code")
    tasks = [t for t in build_taskset(TaskSetSpec(family="code", count=6, split="all", knobs={"difficulty": [0.3, 0.7]}))
             if len(t.metadata["modules"]) > fam.work_units(t)][:2]
    assert tasks
    with VerifierService() as v:
        for t in tasks:
            clean = _reward(fam, t, fam.agents()["oracle"](), v)
            waste = _reward(fam, t, _CodeVariant("waste"), v)
            collateral = _reward(fam, t, _CodeVariant("collateral"), v)
            assert clean.accepted
            assert waste.accepted and waste.value < clean.value
            assert not collateral.accepted and collateral.value < clean.value


@pytest.mark.parametrize("family", ["ops", "code"])
def test_null_earns_exactly_zero(family):
    fam = get_family(family)
    tasks = build_taskset(TaskSetSpec(family=family, count=30 if family == "ops" else 3, split="all"))
    with VerifierService() as v:
        for t in tasks:
            r = _reward(fam, t, fam.agents()["null"](), v)
            assert r.value == 0.0 and r.shaped == 0.0, (t.id, r.components)
