"""The code oracle: undoes the injected mutations with one unified diff through the `apply_diff` tool.

It is privileged (it rebuilds the reference from the seed, as the verifier does) and exists to prove that
every generated task is solvable through the agent's own tools; it never runs in training.
"""

from __future__ import annotations

from pathlib import Path

from gymsmith.agents.scripted import Script, ScriptedAgent
from gymsmith.core.types import AgentRole
from gymsmith.families.code.env import code_task
from gymsmith.families.code.repo import unified_diff


class CodeOracle(ScriptedAgent):
    role = AgentRole.ORACLE
    name = "oracle"
    submit_note = "reverted the injected bugs"

    def script(self) -> Script:
        start, fixed = self._fix()
        obs = yield from self.call("apply_diff", diff=unified_diff(start, fixed))
        if obs.error is not None:  # the diff tool refused: write the fixed files instead
            for path, text in fixed.items():
                yield from self.call("write_file", path=path, content=text)

    def _fix(self) -> tuple[dict[str, str], dict[str, str]]:
        """(the changed files at the start, the same files fixed)."""
        if self.task.metadata.get("source") == "repository":
            from gymsmith.families.code.byo import files_at, is_test_or_config, repository_files, task_test_globs

            solution = self.task.metadata.get("solution_commit")
            if not solution:
                raise ValueError("this task file has no solution_commit, so there is no oracle for it")
            start = repository_files(self.task)
            after = files_at(Path(self.task.metadata["repository"]), solution)
            tests = task_test_globs(self.task.metadata)
            changed = [p for p in set(start) | set(after) if start.get(p) != after.get(p) and not is_test_or_config(p, tests)]
            return {p: start.get(p, "") for p in changed}, {p: after.get(p, "") for p in changed}
        ct = code_task(self.task)
        return {m: ct.files[m] for m in ct.buggy_modules}, {m: ct.reference[m] for m in ct.buggy_modules}
