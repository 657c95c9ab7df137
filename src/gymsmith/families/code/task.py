"""A generated coding task as the trusted side knows it (`CodeTask`: private, the agent sees only its `files`),
and the small helpers both generators (templates: `generator`, registered packages: `repotasks`) build it with.
"""

from __future__ import annotations

import ast
import random

from pydantic import BaseModel, Field

FAMILY_VERSION = "1.8.1"  # the code family's version (CodeFamily.version): part of every task's id


class MutationRecord(BaseModel):
    """One injected bug (private: it is the answer)."""

    module: str
    operator: str
    function: str
    line: int
    description: str
    key: str


class CodeTask(BaseModel):
    """Everything about a generated coding task; only `files` is given to the agent."""

    files: dict[str, str] = Field(description="The agent's start state: buggy modules, visible tests, config, README.")
    modules: list[str] = Field(description="Source files of the repository, e.g. ['lru.py', 'dates.py'].")
    buggy_modules: list[str]
    reference: dict[str, str] = Field(description="Reference source of every module (the fix).")
    hidden_tests: dict[str, str] = Field(description="Full test files, with canaries, that replace tests/ at verification.")
    canaries: list[str] = Field(description="Node ids of hidden tests that must FAIL; passing means the runner was tampered with.")
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    visible_failing: list[str]
    mutations: list[MutationRecord]
    bug_tests: list[list[str]] = Field(default_factory=list, description="Per bug, the FAIL_TO_PASS tests it fails, "
                                       "where bugs share test files (repository tasks); empty: one bug per test file.")
    pinned_tests: list[str] | None = Field(default=None, description="The hidden tests that earn progress: on "
                                           "a registered package, those whose every check needs a value the agent "
                                           "cannot read in its files or beside its code (`calltests.guessing."
                                           "pinned`); on templates, the task's variants, drawn under the verifier's "
                                           "key (`generator.task_variants`). None or empty: none does.")


def names_used(tests_source: str) -> dict[str, set[str]]:
    """Per test function: every name and attribute it mentions (to tell direct tests of a function)."""
    out = {}
    for fn in ast.parse(tests_source).body:
        if isinstance(fn, ast.FunctionDef):
            out[fn.name] = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | \
                           {n.attr for n in ast.walk(fn) if isinstance(n, ast.Attribute)}
    return out


def canary_name(rng: random.Random, taken: set[str]) -> str:
    words = ("regression", "edge", "roundtrip", "boundary", "consistency", "invariant", "sample", "known_value")
    while True:
        name = f"test_{rng.choice(words)}_{rng.getrandbits(24):06x}"
        if name not in taken:
            return name


def checks_digest(task: CodeTask) -> str:
    """The digest of what a task's checks are made of, apart from what the verifier's key draws (`drawkey`): its
    hidden files without their variant tests, and its references. Part of the task's id: the id, and so the task's
    split, is the same under every key (the variants a verifier draws are its own, like its key)."""
    from gymsmith.core.hashing import content_hash
    from gymsmith.families.code.repovariants import PREFIX as variant

    public = {}
    for path, source in task.hidden_tests.items():
        tree = ast.parse(source)
        tree.body = [n for n in tree.body if not (isinstance(n, ast.FunctionDef) and n.name.startswith(variant))]
        public[path] = ast.unparse(tree)
    return content_hash([public, task.reference], length=16)
