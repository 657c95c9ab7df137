"""The code oracle: undoes the injected mutations with one unified diff through the `apply_diff` tool.

It is privileged (it rebuilds the reference from the seed, as the verifier does) and exists to prove that
every generated task is solvable through the agent's own tools; it never runs in training.
"""

from __future__ import annotations

from gymsmith.agents.scripted import Script, ScriptedAgent
from gymsmith.families.code.env import code_task
from gymsmith.families.code.repo import unified_diff


class CodeOracle(ScriptedAgent):
    name = "oracle"
    submit_note = "reverted the injected bugs"

    def script(self) -> Script:
        ct = code_task(self.task)
        diff = unified_diff({m: ct.files[m] for m in ct.buggy_modules}, {m: ct.reference[m] for m in ct.buggy_modules})
        obs = yield from self.call("apply_diff", diff=diff)
        if obs.error is not None:  # the diff tool refused: write the reference files instead
            for m in ct.buggy_modules:
                yield from self.call("write_file", path=m, content=ct.reference[m])
