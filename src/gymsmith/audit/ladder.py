"""The reward ladder: does the reward teach? Validate a family's shaped reward against real progress.

On N tasks of a family, the ladder runs the oracle stopped after K% of its sub-goals (`oracle@K`, K in
`LEVELS`; a family says what a sub-goal is with `work_units(task)` and `partial_oracle(fraction)`), next
to the agents that do no real work — `null` (submits at once), `trivial` (activity, and a change that is
no progress) and every red-team agent (`exploit:*`) — and `random`/`greedy` for reference. It reports:

- the mean reward per rung K, and Spearman's rank correlation between the share of sub-goals done and
  the reward, over every ladder rollout;
- the share of tasks on which the reward is *strictly* increasing in the sub-goals done (rungs that do
  the same number of sub-goals on a small task count once);
- every agent doing no real work that scores above the null agent on the same task.

It fails (`LadderReport.failures`) when Spearman < SPEARMAN_MIN, strictly increasing < STRICT_MIN of
tasks, the null agent earns anything on any task, the oracle is not accepted at full reward, or a
trivial or red-team agent scores above null on any task. This validates every shaped reward the way the
reward is meant to be used: partial credit for progress, never for what was already true or for gaming.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any, Protocol, cast

from pydantic import BaseModel

from gymsmith.agents.ladder import LEVELS, units_done
from gymsmith.agents.roles import roles, role_of
from gymsmith.audit.reward import spearman
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import AgentRole, TaskSpec
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner.driver import run
from gymsmith.runner.local import RunConfig
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY

SPEARMAN_MIN = 0.95
STRICT_MIN = 0.90
EPS = 1e-9
NO_WORK = ("null", "trivial")  # agents that do no real work; with every exploit:* agent, never above null


class Rung(BaseModel):
    level: int                 # K, percent of the oracle's sub-goals
    rollouts: int
    done: float                # mean share of sub-goals actually done (K rounded to whole sub-goals)
    mean_reward: float | None
    accepted: int


class AgentLine(BaseModel):
    agent: str
    rollouts: int
    mean_reward: float | None
    max_reward: float | None
    accepted: int
    above_null: int            # tasks on which it scored above the null agent


class LadderReport(BaseModel):
    family: str
    policy: str
    tasks: int
    run_id: str
    rungs: list[Rung]
    spearman: float | None
    strictly_increasing: int   # tasks whose reward strictly rises with the sub-goals done
    null_nonzero: int          # tasks on which the null agent earned anything
    agents: list[AgentLine]
    failures: list[str]
    examples: list[str] = []   # a few tasks that break a rule, for a human to replay

    @property
    def passed(self) -> bool:
        return not self.failures

    @property
    def strict_share(self) -> float:
        return self.strictly_increasing / self.tasks if self.tasks else 0.0


class _Laddered(Protocol):
    """A family with sub-goals (what `ladder_agents` checks it has): how many a task has."""

    def work_units(self, task: TaskSpec) -> int: ...


def ladder_agents(family_name: str) -> list[str]:
    """The agents a ladder runs for the family. Raises ValueError when the family has no partial oracle."""
    family = get_family(family_name)
    if not hasattr(family, "partial_oracle") or not hasattr(family, "work_units"):
        raise ValueError(f"family {family_name!r} defines no sub-goals (work_units and partial_oracle), so it has no "
                         "reward ladder; see docs/reward.md")
    available = family.agents()
    others = [a for a in ("null", "trivial", "random", "greedy") if a in available]
    return [f"oracle@{k}" for k in LEVELS] + others + sorted(a for a, r in roles(available).items() if r is AgentRole.EXPLOIT)


def ladder_taskset(family_name: str, count: int, base_seed: int = 0) -> TaskSetSpec:
    """Tasks of every difficulty, or those the family names with `ladder_knobs` (code: multi-bug tasks)."""
    knobs = getattr(get_family(family_name), "ladder_knobs", None) or {"difficulty": [0.0, 1.0]}
    return TaskSetSpec(family=family_name, count=count, split="all", base_seed=base_seed, knobs=dict(knobs))


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def evaluate(family_name: str, tasks: list[TaskSpec], rows: list[dict[str, Any]], *, policy: str = DEFAULT_POLICY,
             run_id: str = "") -> LadderReport:
    """The ladder's report from stored rollout rows (`TrajectoryStore.rollout_rows`) of `tasks`.

    Error rollouts are left out of the figures and reported as a failure (a ladder that did not run proves
    nothing)."""
    family = get_family(family_name)
    units = {t.id: cast(_Laddered, family).work_units(t) for t in tasks}  # a family with a ladder (ladder_agents)
    by_task: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    errors = 0
    for r in rows:
        if r["task_id"] not in units:
            continue
        if r["reward"] is None:
            errors += 1
            continue
        by_task[r["task_id"]][r["agent"]] = r
    examples: list[str]
    failures, examples = [], []
    rungs, xs, ys = [], [], []
    for k in LEVELS:
        rs = [(tid, got[f"oracle@{k}"]) for tid, got in by_task.items() if f"oracle@{k}" in got]
        done = [units_done(k / 100, units[tid]) / units[tid] for tid, _ in rs]
        xs += done
        ys += [r["reward"] for _, r in rs]
        rungs.append(Rung(level=k, rollouts=len(rs), done=_mean(done) or 0.0, mean_reward=_mean([r["reward"] for _, r in rs]),
                          accepted=sum(bool(r["accepted"]) for _, r in rs)))
    rho = spearman(xs, ys)
    strict = 0
    for tid, got in by_task.items():
        by_units: dict[int, list[float]] = defaultdict(list)
        for k in LEVELS:
            if f"oracle@{k}" in got:
                by_units[units_done(k / 100, units[tid])].append(got[f"oracle@{k}"]["reward"])
        curve = [cast(float, _mean(v)) for _, v in sorted(by_units.items())]  # each list has a reward
        if len(curve) >= 2 and all(b > a + EPS for a, b in zip(curve, curve[1:])):
            strict += 1
        elif len(examples) < 5:
            examples.append(f"{tid}: reward by sub-goals done {dict((u, round(cast(float, _mean(v)), 4)) for u, v in sorted(by_units.items()))}")
    null = {tid: got["null"]["reward"] for tid, got in by_task.items() if "null" in got}
    null_nonzero = sum(v > EPS for v in null.values())
    lines = []
    known = get_family(family_name).agents()
    role = {a: role_of(a, known.get(a)) for got in by_task.values() for a in got}
    names = sorted({a for a, r in role.items() if not a.startswith("oracle@")}, key=lambda a: (role[a] is AgentRole.EXPLOIT, a))
    for name in names:
        rs = [(tid, got[name]) for tid, got in by_task.items() if name in got]
        above = [tid for tid, r in rs if r["reward"] > null.get(tid, 0.0) + EPS]
        lines.append(AgentLine(agent=name, rollouts=len(rs), mean_reward=_mean([r["reward"] for _, r in rs]),
                               max_reward=max((r["reward"] for _, r in rs), default=None),
                               accepted=sum(bool(r["accepted"]) for _, r in rs), above_null=len(above)))
        if (name in NO_WORK or role[name] is AgentRole.EXPLOIT) and above:
            failures.append(f"{name} scores above the null agent on {len(above)} of {len(rs)} tasks (e.g. {above[0]}): "
                            "reward without real work")
    n = len(by_task)
    if errors:
        failures.append(f"{errors} rollouts ended in an infrastructure error")
    if not n:
        failures.append("no ladder rollout was scored")
    if rho is None or rho < SPEARMAN_MIN:
        failures.append(f"Spearman(sub-goals done, reward) {'—' if rho is None else f'{rho:.3f}'} < {SPEARMAN_MIN}")
    if n and strict / n < STRICT_MIN:
        failures.append(f"reward strictly increasing in sub-goals done on {strict}/{n} tasks ({strict / n:.0%}) < {STRICT_MIN:.0%}")
    if null_nonzero:
        failures.append(f"the null agent earns reward on {null_nonzero} of {len(null)} tasks (doing nothing must earn 0)")
    full = [r for got in by_task.values() for k, r in got.items() if k == "oracle@100"]
    not_full = [r["task_id"] for r in full if not r["accepted"] or r["reward"] < 1.0 - 1e-6]
    if not_full:
        failures.append(f"the oracle (oracle@100) is not accepted at full reward on {len(not_full)} tasks, e.g. {not_full[0]}")
    return LadderReport(family=family_name, policy=policy, tasks=n, run_id=run_id, rungs=rungs, spearman=rho,
                        strictly_increasing=strict, null_nonzero=null_nonzero, agents=lines, failures=failures,
                        examples=examples)


def run_ladder(family_name: str, store: TrajectoryStore, *, count: int = 30, base_seed: int = 0, concurrency: int = 2,
               policy: str = DEFAULT_POLICY, agents: list[str] | None = None) -> LadderReport:
    """Run the ladder's agents on `count` tasks of the family into `store` (a run of purpose `audit`) and
    evaluate it. Raises UnknownFamilyError, or ValueError for a family without sub-goals."""
    wanted = agents or ladder_agents(family_name)
    spec = ladder_taskset(family_name, count, base_seed)
    tasks = build_taskset(spec)
    run_id = f"ladder-{family_name}-{time.strftime('%Y%m%d-%H%M%S')}-{content_hash(time.time_ns(), length=6)}"
    run(RunConfig(run_id=run_id, purpose="audit", taskset=spec, agents=wanted, concurrency=concurrency, policy=policy),
        store, tasks=tasks, collect=False)
    return evaluate(family_name, tasks, store.rollout_rows([run_id]), policy=policy, run_id=run_id)


def to_markdown(report: LadderReport) -> str:
    """The ladder as the Markdown tables of docs/reward.md."""
    f = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731
    out = [f"**{report.family}** ({report.tasks} tasks, policy `{report.policy}`): Spearman {f(report.spearman)}, "
           f"strictly increasing on {report.strictly_increasing}/{report.tasks} tasks, null earns reward on "
           f"{report.null_nonzero}; {'PASS' if report.passed else 'FAIL'}", "",
           "| rung | share of sub-goals done | mean reward | accepted |", "|---|---|---|---|"]
    out += [f"| oracle@{r.level} | {r.done:.2f} | {f(r.mean_reward)} | {r.accepted}/{r.rollouts} |" for r in report.rungs]
    out += ["", "| agent | mean reward | max reward | accepted | tasks above null |", "|---|---|---|---|---|"]
    out += [f"| {a.agent} | {f(a.mean_reward)} | {f(a.max_reward)} | {a.accepted}/{a.rollouts} | {a.above_null} |"
            for a in report.agents]
    if report.failures:
        out += ["", *[f"- fails: {x}" for x in report.failures]]
    return "\n".join(out)
