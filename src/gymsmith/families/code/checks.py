"""Hidden checks for `code`. Loaded only by the verifier process; no agent-side module imports this one.

From the final repository, only the source files are taken: the task's modules (a deleted one counts as
empty) and new top-level modules whose names shadow nothing (not the standard library, pytest, conftest
or site hooks). The visible tests are replaced by the full hidden suite, with canaries, and the whole job
runs in the warm sandboxed runner. Nothing the agent wrote besides source code is ever executed here.
"""

from __future__ import annotations

import sys
from pathlib import Path

from gymsmith.core.hashing import content_hash
from gymsmith.core.types import TaskSpec
from gymsmith.families.code.env import code_task, start_files
from gymsmith.families.code.generator import PYTEST_INI
from gymsmith.families.code.grading import EditFacts, grade
from gymsmith.families.code.repo import changed_lines, pristine_repo, read_tree
from gymsmith.verifier.protocol import CheckResult
from gymsmith.verifier.pytest_runner import LEAN_ARGS, shared_runner

VERIFY_TIMEOUT_S = 5.0  # a generated suite runs in ~50 ms; hanging code is a failure, not an error
MAX_SOURCE_BYTES = 200_000
SHADOWED = set(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py",
                                           "conftest", "sitecustomize", "usercustomize", "setup", "__main__"}


def is_test_path(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return path.startswith("tests/") or name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


def source_files(final: dict[str, str | None], modules: list[str]) -> dict[str, str]:
    """The code the verifier will run: the task's modules and harmless new top-level modules."""
    out = {m: final.get(m) or "" for m in modules}
    for path, text in final.items():
        if (path not in out and "/" not in path and path.endswith(".py") and not is_test_path(path)
                and path[:-3] not in SHADOWED and text is not None and len(text) <= MAX_SOURCE_BYTES):
            out[path] = text
    return out


def edit_facts(start: dict[str, str | None], final: dict[str, str | None], sources: set[str],
               reference: dict[str, str], buggy: list[str]) -> EditFacts:
    """What changed from `start` to `final`; `sources` are the paths the verifier treats as source code."""
    changed = sorted(p for p in set(start) | set(final) if start.get(p) != final.get(p))
    return EditFacts(
        source_lines_changed=sum(changed_lines(start.get(p) or "", final.get(p) or "") for p in changed if p in sources),
        lines_needed=sum(changed_lines(start[m] or "", reference[m]) for m in buggy),
        test_files_changed=[p for p in changed if is_test_path(p)],
        other_files_changed=[p for p in changed if p not in sources and not is_test_path(p)])


def verify(task: TaskSpec, final_state_path: Path) -> CheckResult:
    if task.metadata.get("source") == "repository":
        from gymsmith.families.code.byo import verify_repository_task
        return verify_repository_task(task, Path(final_state_path))
    ct = code_task(task)
    _, digest = pristine_repo(ct.files)
    if digest != task.start_state.digest:
        raise RuntimeError(f"task {task.id}: rebuilt start state has digest {digest}, the task says {task.start_state.digest}")
    if content_hash([ct.hidden_tests, ct.reference], length=16) != task.metadata.get("checks_digest"):
        raise RuntimeError(f"task {task.id} was made with other hidden tests than this verifier has; regenerate it")
    final = read_tree(Path(final_state_path))
    start: dict[str, str | None] = dict(start_files(task))
    sources = source_files(final, ct.modules)
    job = {**sources, **ct.hidden_tests, "pytest.ini": PYTEST_INI}
    run = shared_runner().run(job, ["tests"], timeout=VERIFY_TIMEOUT_S, extra_args=LEAN_ARGS)
    edits = edit_facts(start, final, set(sources), ct.reference, ct.buggy_modules)
    return grade(run, ct.fail_to_pass, ct.pass_to_pass, ct.canaries, edits)
