"""`code`: a small Python repository with injected bugs, visible failing tests and hidden tests (the coding family).

Agent-side modules only: `checks` is loaded by the verifier process through `checks_module`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gymsmith.agents.base import Agent, NullAgent, RandomAgent
from gymsmith.core.types import StartStateRef, TaskSpec
from gymsmith.families.code.env import CodeEnvironment
from gymsmith.families.code.exploits import EXPLOITS
from gymsmith.families.code.generator import generate_code_task
from gymsmith.families.code.ladder import CodeTrivial, PartialCodeOracle, work_units
from gymsmith.families.code.mutate import OPERATORS
from gymsmith.families.code.oracle import CodeOracle
from gymsmith.families.code.repo import pristine_repo
from gymsmith.families.code.repotasks import REMOVED_BODY
from gymsmith.families.code.task import FAMILY_VERSION, checks_digest
from gymsmith.families.code.templates import TEMPLATES
from gymsmith.families.code.tools import TOOL_SPECS
from gymsmith.registry.family import DIFFICULTY, Knob, KnobKind, resolve_knobs


def derive_knobs(difficulty: float) -> dict[str, Any]:
    """Every knob as a function of difficulty: more bugs and modules, less direct and fewer visible tests."""
    d = difficulty
    return {"n_bugs": 1 + int(d >= 0.5) + int(d >= 0.85), "modules": 1 + round(4 * d),
            "directness": round(1 - d, 4), "visible_tests": max(1, 5 - round(4 * d)), "operator": "any"}


def goal_text(n_bugs: int, visible_failing: list[str], difficulty: float) -> str:
    bugs = "a bug" if n_bugs == 1 else f"{n_bugs} bugs"
    where = (f" These visible tests fail: {', '.join(visible_failing)}." if difficulty < 0.5
             else " Some of its visible tests fail; `run_tests` shows which.")
    return (f"This Python repository has {bugs} in its source code.{where} Fix the source so that the behaviour its "
            "tests and docstrings describe holds. Do not edit the tests: hidden tests check the same behaviour more "
            "thoroughly, and the verifier uses its own copy of every test file. The verifier runs the code in a process "
            "of its own: a fix may not make the source observe the process it runs in (sys, os, frames, the clock, eval, "
            "`is` between computed values, `.format` of a text that is not a literal, imports beyond computation-only "
            "modules such as math, re and collections, and the like, beyond what the module already uses; a file no "
            "graded module imports is not graded). Call submit when you are done.")


TEMPLATES_SOURCE = "templates"


def source_choices() -> tuple[str, ...]:
    """`templates`, then every registered repository as NAME==VERSION (see docs/repos.md)."""
    from gymsmith.repos import list_repos

    return (TEMPLATES_SOURCE, *(m.spec for m in list_repos()))


class CodeFamily:
    name = "code"
    version = FAMILY_VERSION
    checks_module = "gymsmith.families.code.checks"
    ladder_knobs = {"difficulty": [0.5, 1.0]}  # the reward ladder on multi-bug tasks (2-3 bugs): more than one sub-goal
    system_prompt = ("You are a careful software engineer working in a sandboxed repository through tools. Read the "
                     "failing tests and the code, find the root cause, make the smallest change that fixes it, run the "
                     "tests, and call submit.\n\nTask:\n{goal}")
    base_knobs = (
        DIFFICULTY,
        Knob(name="n_bugs", kind=KnobKind.INT, low=1, high=3, description="Bugs injected, each in its own module."),
        Knob(name="modules", kind=KnobKind.INT, low=1, high=len(TEMPLATES),
             description="Modules in the repository (the rest are correct distractors with their own tests)."),
        Knob(name="directness", kind=KnobKind.FLOAT, low=0.0, high=1.0,
             description="Chance that the visible failing test calls the buggy function directly (else through a caller)."),
        Knob(name="visible_tests", kind=KnobKind.INT, low=1, high=12, description="Visible tests per module."),
        Knob(name="operator", kind=KnobKind.CHOICE, choices=("any", *OPERATORS, REMOVED_BODY),
             description=f"Mutation operator to use ({REMOVED_BODY}: registered repositories only)."),
    )

    @property
    def knobs(self) -> tuple[Knob, ...]:
        """The declared knobs; `source`'s choices are the registered repositories of this machine."""
        return (*self.base_knobs, Knob(name="source", kind=KnobKind.CHOICE, choices=source_choices(),
                                       default=TEMPLATES_SOURCE,
                                       description="Where bugs are injected: the embedded templates or a registered "
                                                   "repository (NAME==VERSION; `gymsmith repos add`)."))

    def generate(self, seed: int, **knobs: Any) -> TaskSpec:
        if knobs.get("source") and "==" not in str(knobs["source"]) and knobs["source"] != TEMPLATES_SOURCE:
            from gymsmith.repos import find_repo
            knobs = {**knobs, "source": find_repo(str(knobs["source"]))[1].spec}  # NAME -> its one registered version
        resolved = resolve_knobs(self.knobs, knobs, derive_knobs)
        if resolved["source"] == TEMPLATES_SOURCE:
            del resolved["source"]  # template tasks keep the ids they had before repositories existed
            resolved["modules"] = max(resolved["modules"], resolved["n_bugs"])
        else:
            del resolved["modules"]  # a repository's modules are its own
        ct = generate_code_task(seed, resolved)
        _, digest = pristine_repo(ct.files)
        return TaskSpec(family=self.name, family_version=self.version, seed=seed, knobs=resolved,
                        goal=goal_text(len(ct.buggy_modules), ct.visible_failing, resolved["difficulty"]),
                        start_state=StartStateRef(kind="git-repository", digest=digest), tools=TOOL_SPECS,
                        metadata={"modules": ct.modules, "language": "python",
                                  # any change to the hidden tests or references makes new task ids (but for the
                                  # variants the verifier's key draws: the same task, and split, under every key)
                                  "checks_digest": checks_digest(ct)})

    def fingerprint_extra(self) -> dict[str, Any]:
        """What runs inside the sandboxes: the interpreter, its packages there, bubblewrap, git."""
        import subprocess

        from gymsmith.sandbox.runtime import python_runtime

        rt = python_runtime()

        def version(cmd: list[str]) -> str:
            try:
                return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip() or "absent"
            except OSError:
                return "absent"

        return {"sandbox_python": rt.interpreter, "sandbox_packages": rt.packages,
                "bwrap": version(["bwrap", "--version"]), "git": version(["git", "--version"])}

    def make_env(self) -> CodeEnvironment:
        return CodeEnvironment()

    def agents(self) -> Mapping[str, Callable[[], Agent]]:
        return {"oracle": CodeOracle, "random": RandomAgent, "null": NullAgent, "trivial": CodeTrivial,
                **{e.name: e for e in EXPLOITS}}

    def work_units(self, task: TaskSpec) -> int:
        """Sub-goals of `task`: its bugs (see `code.ladder`)."""
        return work_units(task)

    def partial_oracle(self, fraction: float) -> Agent:
        """The oracle fixing `round(fraction * work_units)` of the bugs."""
        return PartialCodeOracle(fraction)
