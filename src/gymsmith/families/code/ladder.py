"""The code family's reward-ladder agents: the oracle fixing k of the task's bugs, and a trivial edit.

A *sub-goal* is one bug: generated tasks inject each bug in its own module, so fixing one is writing that
module's reference. A bring-your-own task's solution is one sub-goal (its fix is not split). The ladder
audit (`gymsmith.audit.ladder`) runs these agents to check that the reward rises with every bug fixed.
"""

from __future__ import annotations

from gymsmith.core.types import AgentRole, TaskSpec
from gymsmith.families.code.oracle import CodeOracle
from gymsmith.agents.ladder import units_done
from gymsmith.agents.scripted import Script


def work_units(task: TaskSpec) -> int:
    if task.metadata.get("source") == "repository":
        return 1
    if task.knobs.get("source"):  # a registered repository: as many bugs as it had files with one
        from gymsmith.families.code.env import code_task
        return len(code_task(task).buggy_modules)
    return int(task.knobs["n_bugs"])


class PartialCodeOracle(CodeOracle):
    """The oracle, fixing only the first `round(fraction * n)` of the n buggy modules (half rounds up)."""

    def __init__(self, fraction: float):
        self.fraction = fraction
        self.name = f"oracle@{round(fraction * 100)}"
        self.submit_note = "fixed some of the bugs"

    def _fix(self) -> tuple[dict[str, str], dict[str, str]]:
        start, fixed = super()._fix()
        n = units_done(self.fraction, work_units(self.task))
        # generated tasks: one buggy module per bug; a repository's fix is one sub-goal, all of it or none
        keep = sorted(start)[:n] if self.task.metadata.get("source") != "repository" else (sorted(start) if n else [])
        return {p: start[p] for p in keep}, {p: fixed[p] for p in keep}

    def script(self) -> Script:
        start, fixed = self._fix()
        if start:  # nothing to fix at 0%: submit without a call
            yield from super().script()


class CodeTrivial(CodeOracle):
    """Adds one comment line to a buggy module and submits: an edit that fixes nothing.

    What it earns is what an edit earns without progress; the ladder requires it to be no more than doing
    nothing (the null agent).
    """

    role = AgentRole.BASELINE

    name = "trivial"
    submit_note = "added a comment"

    def script(self) -> Script:
        start, _ = self._fix()
        if start:
            path = sorted(start)[0]
            yield from self.call("write_file", path=path, content="# reviewed\n" + start[path])
