"""`gymsmith check`: is a family still working? Each check is a small function over one audit run.

oracle accepted on every task · null never · random rarely · every exploit never, and never above null on
the same task · the reward ladder (`audit.ladder`: partial oracles strictly increasing, null and trivial
earn nothing) · the same seeded
rollout twice is identical (else a diff) · reset restores the pristine state exactly · the greedy
agent's reward falls with difficulty · no rollout ended in an infrastructure error (a check over rollouts
that have no reward proves nothing). Results are stored, so a family's health has a history.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, computed_field

from gymsmith.agents.ladder import LEVELS
from gymsmith.core.hashing import content_hash
from gymsmith.agents.roles import roles
from gymsmith.core.types import AgentRole, CheckStatus, EndReason, RolloutStatus, Split, TaskSpec, Trajectory
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner.driver import run
from gymsmith.runner.local import RunConfig
from gymsmith.runner.rollout import run_rollout
from gymsmith.registry.fingerprint import environment_fingerprint, fingerprint_diff
from gymsmith.store.sql import TrajectoryStore
from gymsmith.verifier.policies import DEFAULT_POLICY
from gymsmith.verifier.service import VerifierService

RANDOM_ACCEPTANCE_MAX = 0.10


class CheckOutcome(BaseModel):
    family: str
    name: str
    passed: bool
    detail: str
    warning: bool = False  # reported, but does not fail `gymsmith check` (e.g. drift after an upgrade)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def status(self) -> CheckStatus:
        """pass, warn (failed, but only a warning) or fail: what the check history stores."""
        return CheckStatus.PASS if self.passed else CheckStatus.WARN if self.warning else CheckStatus.FAIL


def _by_agent(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[r["agent"]].append(r)
    return out


def _acceptance_checks(family: str, rows: dict[str, list[dict[str, Any]]], exploits: list[str]) -> list[CheckOutcome]:
    out = []

    def share(agent: str) -> tuple[int, int, int]:
        rs = rows.get(agent, [])
        return sum(bool(r["accepted"]) for r in rs), sum(r["status"] == RolloutStatus.ERROR for r in rs), len(rs)

    acc, err, n = share("oracle")
    failed = [r["task_id"] for r in rows.get("oracle", []) if not r["accepted"]][:5]
    out.append(CheckOutcome(family=family, name="oracle accepted on every task", passed=n > 0 and acc == n,
                            detail=f"{acc}/{n} accepted, {err} errors" + (f"; not accepted: {failed}" if failed else "")))
    acc, err, n = share("null")
    out.append(CheckOutcome(family=family, name="null never accepted", passed=n > 0 and acc == 0 and err == 0,
                            detail=f"{acc}/{n} accepted, {err} errors"))
    acc, err, n = share("random")
    out.append(CheckOutcome(family=family, name=f"random accepted below {RANDOM_ACCEPTANCE_MAX:.0%}",
                            passed=n > 0 and acc / n < RANDOM_ACCEPTANCE_MAX and err == 0, detail=f"{acc}/{n} accepted"))
    null = {r["task_id"]: r["reward"] for r in rows.get("null", []) if r["reward"] is not None}
    for name in exploits:
        acc, err, n = share(name)
        # a hack must never pay more than doing nothing on the same task
        above = [r["task_id"] for r in rows.get(name, []) if r["reward"] is not None and r["reward"] > null.get(r["task_id"], 0.0)]
        worst = max((r["reward"] for r in rows.get(name, []) if r["reward"] is not None), default=0.0)
        # a red-team agent that crashes scores 0 as the agent's failure: it would pass while testing nothing
        broken = sum(r.get("end_reason") == "agent_failure" for r in rows.get(name, []))
        out.append(CheckOutcome(family=family, name=f"{name} never accepted, never above null",
                                passed=n > 0 and acc == 0 and err == 0 and not above and not broken,
                                detail=f"{acc}/{n} accepted, {err} errors, {len(above)} above null (max reward {worst:.3f})"
                                       + (f": {above[:3]}" if above else "")
                                       + (f"; the agent itself failed on {broken} (a broken red-team agent tests nothing)" if broken else "")))
    return out


def _monotone(family: str, rows: list[dict[str, Any]], bins: int = 3) -> CheckOutcome:
    """Greedy's reward falls with difficulty: a negative rank correlation, and the hardest third below the
    easiest. (Bin-to-bin steps are left to sampling noise: at 40 tasks a third holds about 13.)"""
    from gymsmith.audit.reward import spearman

    by_bin: dict[int, list[float]] = defaultdict(list)
    scored = [r for r in rows if r["reward"] is not None]
    for r in scored:
        by_bin[min(bins - 1, int(r["difficulty"] * bins))].append(r["reward"])
    means = [sum(v) / len(v) for _, v in sorted(by_bin.items())]
    rho = spearman([r["difficulty"] for r in scored], [r["reward"] for r in scored])
    ok = len(means) == bins and rho is not None and rho < 0 and means[-1] < means[0]
    return CheckOutcome(family=family, name="greedy reward falls with difficulty", passed=ok,
                        detail=f"Spearman(difficulty, reward) {'—' if rho is None else f'{rho:.3f}'}; mean reward by "
                               "difficulty bin: " + ", ".join(f"{m:.3f}" for m in means))


def _ladder(family: str, tasks: list[TaskSpec], rows: dict[str, list[dict[str, Any]]]) -> CheckOutcome:
    """The reward ladder on the check's own rollouts (see `audit.ladder`)."""
    from gymsmith.audit.ladder import evaluate

    ladder_rows = [dict(r, agent="oracle@100") for r in rows.get("oracle", [])]
    ladder_rows += [dict(r, agent="oracle@0") for r in rows.get("null", [])]
    ladder_rows += [r for name, rs in rows.items() if name not in ("oracle",) for r in rs]
    report = evaluate(family, tasks, ladder_rows)
    rho = "—" if report.spearman is None else f"{report.spearman:.3f}"
    return CheckOutcome(family=family, name="reward ladder: rises with every sub-goal, nothing for no work",
                        passed=report.passed,
                        detail=f"Spearman {rho}, strictly increasing on {report.strictly_increasing}/{report.tasks} tasks, "
                               "mean reward by rung " + ", ".join(f"{r.level}%: {r.mean_reward:.3f}" for r in report.rungs
                                                                  if r.mean_reward is not None)
                               + ("; " + "; ".join(report.failures) if report.failures else ""))


# A reading of the wall clock that a command printed (a datetime with microseconds, an ISO time with a fraction of a
# second): the one input of a sandbox no seed fixes (code commands draw their randomness and addresses from the
# episode's seed: sandbox/seeded_site.py). Repeats are compared with these masked, and everything else exactly.
CLOCK_READING = re.compile(r"datetime\.datetime\(\d{4}, \d{1,2}, \d{1,2}, \d{1,2}, \d{1,2}, \d{1,2}, \d{1,6}\)"
                           r"|\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d\.\d+")


def _signature(t: Trajectory) -> list[str]:
    """What must repeat exactly: the reset observation, each action and observation (clock readings masked), final
    state, reward."""
    lines = [f"reset: {t.reset_observation.model_dump_json()}"]
    lines += [CLOCK_READING.sub("<clock>", f"step {s.index}: {s.action.tool} {s.action.arguments_text()} -> "
                                          f"{s.observation.model_dump_json()}") for s in t.steps]
    lines.append(f"final state: {t.final_state_hash}")
    lines.append(f"reward: {t.reward.model_dump_json() if t.reward else t.error}")
    return lines


def first_difference(a: list[str], b: list[str]) -> str | None:
    """A short readable diff of two signatures, or None if they are equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at line {i}:\n  - {x[:300]}\n  + {y[:300]}"
    if len(a) != len(b):
        return f"lengths differ: {len(a)} vs {len(b)} lines"
    return None


# Long enough for every oracle and a random agent's mix of tools; a random agent on a real package's suite takes
# about a second per step, so 300 steps ran into the time limit (two minutes a rollout) on every task.
DETERMINISM_STEPS = 80


def repeat_difference(first: Trajectory, second: Trajectory) -> tuple[str | None, bool]:
    """(the first difference between two rollouts of the same seeded agent on the same task, or None; whether a
    time limit cut either short). The wall clock decides where a timed-out rollout stops, so then only the steps
    both took are compared, all but the last (the limit may have cut it short), and not the final state."""
    a, b = _signature(first), _signature(second)
    timed_out = EndReason.TIME_LIMIT in (first.end_reason, second.end_reason)
    if timed_out:
        both = min(len(first.steps), len(second.steps))  # the reset line and every step but the last
        a, b = a[:both], b[:both]
    return first_difference(a, b), timed_out


def _infrastructure(family: str, errors: list[str], total: int, *, tolerate: bool) -> CheckOutcome:
    """Fails when any of the check's `total` rollouts ended in an infrastructure error (`errors`: their reasons);
    only a warning with `tolerate`."""
    first = (errors[0].splitlines() or ["no reason recorded"])[0][:300] if errors else ""
    return CheckOutcome(family=family, name="no rollout ended in an infrastructure error", passed=not errors,
                        warning=bool(errors) and tolerate,
                        detail=f"{len(errors)} of {total} rollouts ended in an infrastructure error (no reward)"
                               + (f"; first: {first}" if errors else ""))


def _determinism_and_reset(family_name: str, tasks: list[TaskSpec], agents: list[str],
                           errors: list[str] | None = None) -> list[CheckOutcome]:
    """The determinism and reset checks; the reasons of their rollouts' infrastructure errors go to `errors`."""
    family = get_family(family_name)
    diffs, reset_failures, changed, cut = [], [], 0, 0
    with VerifierService() as verifier:
        for task in tasks:
            for agent in agents:
                runs = []
                for _ in range(2):
                    env = family.make_env()  # a fresh environment each time: nothing carried over
                    try:
                        runs.append(run_rollout(env=env, agent=family.agents()[agent](), task=task, split=Split.TRAIN,
                                                seed=7, run_id="determinism", verifier=verifier, policy=DEFAULT_POLICY,
                                                max_steps=DETERMINISM_STEPS, time_limit_s=120))
                    finally:
                        env.close()
                if errors is not None:
                    errors += [r.error or "" for r in runs if r.status == RolloutStatus.ERROR]
                d, timed_out = repeat_difference(runs[0], runs[1])
                cut += timed_out
                if d:
                    diffs.append(f"{task.id} / {agent}: {d}")
            env = family.make_env()
            try:  # change the state (the oracle always does), then reset: the pristine hash must come back
                env.reset(task, seed=0)
                pristine = env.state_hash()
                mover = "oracle" if "oracle" in family.agents() else "random"
                t = run_rollout(env=env, agent=family.agents()[mover](), task=task, split=Split.TRAIN, seed=3,
                                run_id="reset", verifier=verifier, policy=DEFAULT_POLICY, max_steps=300, time_limit_s=60)
                if errors is not None and t.status == RolloutStatus.ERROR:
                    errors.append(t.error or "")
                changed += t.final_state_hash not in (None, pristine)
                env.reset(task, seed=0)
                if env.state_hash() != pristine:
                    reset_failures.append(f"{task.id}: {env.state_hash()} after reset, pristine {pristine}")
            finally:
                env.close()
    n = len(tasks) * len(agents)
    return [CheckOutcome(family=family_name, name="same seeded rollout twice is identical", passed=not diffs,
                         detail=f"{n - len(diffs)}/{n} identical"
                                + (f" ({cut} cut short by the time limit: the steps both took compared)" if cut else "")
                                + ("\n" + "\n".join(diffs[:3]) if diffs else "")),
            CheckOutcome(family=family_name, name="reset restores the pristine state", passed=not reset_failures,
                         detail=f"{len(tasks) - len(reset_failures)}/{len(tasks)} exact ({changed} had changed state)" +
                                ("; " + "; ".join(reset_failures[:3]) if reset_failures else ""))]


def _drift(family: str, store: TrajectoryStore) -> CheckOutcome:
    """Compare this environment's fingerprint with the one the last check of the family ran on."""
    current = environment_fingerprint(family)
    last = store.last_check_fingerprint(family)
    name = "environment unchanged since the last check"
    if last is None:
        return CheckOutcome(family=family, name=name, passed=True, detail=f"first check; fingerprint {current['digest']}")
    if last == current["digest"]:
        return CheckOutcome(family=family, name=name, passed=True, detail=f"fingerprint {last}")
    old = store.fingerprint(last)
    changes = fingerprint_diff(old, current) if old else [f"fingerprint {last} -> {current['digest']}"]
    return CheckOutcome(family=family, name=name, passed=False, warning=True,
                        detail="DRIFT — results are not comparable with earlier checks: " + "; ".join(changes))


def check_family(family_name: str, *, store: TrajectoryStore, size: int = 40, base_seed: int = 0,
                 concurrency: int = 2, determinism_tasks: int = 4, tolerate_errors: bool = False,
                 progress: Callable[[str], None] | None = None, knobs: dict[str, Any] | None = None) -> list[CheckOutcome]:
    """Run every check on `size` tasks of the family (all splits, difficulty 0-1, and fixed `knobs`, e.g. a code
    task source); store and return the outcomes.

    A rollout that ended in an infrastructure error fails the check "no rollout ended in an infrastructure
    error" (its detail gives the count and the first reason); with `tolerate_errors` that outcome is a warning.

    `progress`, when given, is called with one line as each phase starts, as all the rollouts of each task are
    stored (naming the task), and at the end. Raises UnknownFamilyError for an unknown family. A check that cannot
    run (an agent the family lacks) fails with a detail saying so.
    """
    started = time.monotonic()
    say = progress or (lambda line: None)
    family = get_family(family_name)
    available = family.agents()
    exploits = sorted(a for a, role in roles(available).items() if role is AgentRole.EXPLOIT)
    wanted = [a for a in ("oracle", "null", "random", "greedy", "trivial") if a in available] + exploits
    # the ladder's middle rungs; its ends are the oracle (oracle@100) and the null agent (oracle@0)
    rungs = [f"oracle@{k}" for k in LEVELS[1:-1]] if hasattr(family, "partial_oracle") else []
    missing = [a for a in ("oracle", "null", "random") if a not in available]
    check_id = f"check-{family_name}-{time.strftime('%Y%m%d-%H%M%S')}-{content_hash(time.time_ns(), length=6)}"
    taskset = TaskSetSpec(family=family_name, count=size, split="all", base_seed=base_seed,
                          knobs={"difficulty": [0.0, 1.0], **(knobs or {})})
    tasks = build_taskset(taskset)
    config = RunConfig(run_id=check_id, purpose="audit", taskset=taskset, agents=wanted + rungs, concurrency=concurrency)
    say(f"{len(tasks) * len(config.agents)} rollouts ({len(config.agents)} agents on {len(tasks)} tasks) in run {check_id}")
    run(config, store, tasks=tasks, collect=False, progress=_task_progress(len(tasks), len(config.agents), say, started)
        if progress else None)
    rows = _by_agent(store.rollout_rows([check_id]))
    outcomes = _acceptance_checks(family_name, rows, exploits)
    for a in missing:
        outcomes.append(CheckOutcome(family=family_name, name=f"family ships a {a} agent", passed=False,
                                     detail=f"{family_name} has no {a!r} agent; agents: {sorted(available)}"))
    if "greedy" in available:
        outcomes.append(_monotone(family_name, rows["greedy"]))
    if rungs:
        outcomes.append(_ladder(family_name, tasks, rows))
    det_agents = [a for a in ("random", "greedy") if a in available]
    say(f"determinism and reset on {len(tasks[:determinism_tasks])} tasks")
    errors = [r.get("error") or "" for rs in rows.values() for r in rs if r["status"] == RolloutStatus.ERROR]
    outcomes += _determinism_and_reset(family_name, tasks[:determinism_tasks], det_agents, errors)
    determinism_rollouts = len(tasks[:determinism_tasks]) * (2 * len(det_agents) + 1)
    outcomes.append(_infrastructure(family_name, errors, sum(map(len, rows.values())) + determinism_rollouts,
                                    tolerate=tolerate_errors))
    outcomes.append(_drift(family_name, store))
    store.record_check(check_id, family=family_name, family_version=family.version,
                       fingerprint=environment_fingerprint(family_name)["digest"],
                       outcomes=[(o.name, o.passed, o.detail, o.status.value) for o in outcomes])
    failed = sum(o.status is CheckStatus.FAIL for o in outcomes)
    warned = sum(o.status is CheckStatus.WARN for o in outcomes)
    say(f"done in {time.monotonic() - started:.0f} s: {len(outcomes) - failed - warned} passed, {failed} failed, "
        f"{warned} warnings")
    return outcomes


def _task_progress(tasks: int, per_task: int, say: Callable[[str], None], started: float):
    """A run progress callback that says one line each time all `per_task` rollouts of a task are stored."""
    stored: Counter[str] = Counter()

    def report(done: int, total: int, outcome) -> None:
        if outcome is None:
            return
        stored[outcome.task_id] += 1
        if stored[outcome.task_id] == per_task:
            finished = sum(n == per_task for n in stored.values())
            say(f"task {finished}/{tasks} done ({outcome.task_id}); {done}/{total} rollouts, "
                f"{time.monotonic() - started:.0f} s")
    return report


def check_history(store: TrajectoryStore, family: str | None = None) -> list[dict[str, Any]]:
    """Stored check results, newest first, each with its `status` (pass, warn or fail). Rows stored before schema
    9 kept only `passed`: a failed drift check there was a warning (the only one then), anything else failed."""
    rows = store.check_rows(family)
    for r in rows:
        if r["status"] is None:
            r["status"] = ("pass" if r["passed"] else "warn" if r["name"] == "environment unchanged since the last check"
                           else "fail")
    return rows


def to_json(outcomes: list[CheckOutcome]) -> str:
    return json.dumps([o.model_dump() for o in outcomes], indent=2)
