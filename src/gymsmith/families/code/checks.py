"""Hidden checks for `code`. Loaded only by the verifier process; no agent-side module imports this one.

From the final repository, only the source files are taken: the task's modules (a deleted one makes the state
ungradable) and new top-level modules whose names shadow nothing (not the standard library, pytest, conftest
or site hooks). The hidden suite, with canaries, runs as call checks (`verifier/calltests`): only its
drivers (the calls, with their inputs) go into the sandbox beside the agent's code; the expected values
and every comparison stay in this process, which never imports the agent's code. Nothing the agent wrote
besides source code is ever executed. A final state the checks cannot grade (a module too large, a
symlink or special file in its place) is the agent's failure (`UngradableState`), never a crash.
See docs/verifier.md for the threat model.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.machinery
import importlib.metadata
import re
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gymsmith.core.errors import UngradableState, VerifierError
from gymsmith.core.types import TaskSpec
from gymsmith.families.code.env import code_task, start_files
from gymsmith.families.code.generator import compiled_suite, run_hidden_tests
from gymsmith.families.code.grading import EditFacts, grade
from gymsmith.families.code.introspection import imported_modules
from gymsmith.families.code.repo import PYTEST_CONFIGS, changed_lines, is_test_path, pristine_repo, scan_tree, Tree
from gymsmith.families.code.task import CodeTask, checks_digest
from gymsmith.families.code.workspace_rules import (changed_modules_process_reads,
                                                    library_names, library_shadow, module_name,
                                                    read_as_the_interpreter_reads)
from gymsmith.verifier.calltests import CompiledSuite
from gymsmith.verifier.drawkey import keyed_hash
from gymsmith.verifier.protocol import CheckResult
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

VERIFY_TIMEOUT_S = 5.0  # a generated suite runs in ~50 ms; hanging code is a failure, not an error
GROUP_TIMEOUT_S = 2.0  # each test file's
SLOW_SCALE = 3.0  # the limits of the second try after a timeout: 5 + 15 + 15 s at worst (code that hangs, then a
# reference that misses them too), well inside the verifier service's 60 s per verification
MAX_SOURCE_BYTES = 200_000
SHADOWED = set(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "pygments", "py",
                                           "conftest", "sitecustomize", "usercustomize", "setup", "__main__"}


def source_files(final: Tree, modules: list[str], imported: frozenset[str] = frozenset(),
                 start: Mapping[str, str | None] | None = None) -> dict[str, str]:
    """The code the verifier will run: the task's modules and the new files they import (regular files only): none
    named like a module of the standard library or the test runner (SHADOWED), nor like one the task's code
    imports (`imported`: an optional dependency the sandbox lacks, which the package would import in its place; a
    fifty-fourth attacker's `idna.py` patched rfc3986 from there, where no rule read it).

    Raises UngradableState when a task module is deleted, a link, a special file, binary or larger than MAX_SOURCE_BYTES:
    the agent left something in place of the code that cannot be graded, which is its failure.
    """
    out = {}
    for m in modules:
        kind = final.kind(m)
        if kind is None and (start or {}).get(m) is not None:
            # graded as an empty file, it was importable where graded and not in the workspace: a hundred-and-
            # seventy-second attacker deleted `ledgerkit/__init__.py` and took the fix only where `import
            # ledgerkit.__init__` succeeded (accepted on 5 of 5 tasks, pytest failing every FAIL_TO_PASS test)
            raise UngradableState(f"{m} was deleted: the workspace has no such module where the verifier would run one")
        if kind not in (None, "file"):
            raise UngradableState(f"{m} is a {kind}; a module must be a regular file")
        if kind == "file" and final.sizes[m] > MAX_SOURCE_BYTES:
            raise UngradableState(f"{m} has {final.sizes[m]} bytes; at most {MAX_SOURCE_BYTES} are graded")
        if kind == "file" and final.files[m] is None:
            raise UngradableState(f"{m} is not UTF-8 text")
        out[m] = final.files.get(m) or ""  # one the start state lacks too counts as empty
    # a new module is graded where the graded code imports it (`_imported_files`), and only there: every new root
    # module was, so a leftover debugging script no code imports was read as graded code, and its `import sys` made
    # an honest fix a violation (a hundred-and-seventy-ninth attacker: 1.0 -> 0.0 on a template and two packages)
    _imported_files(final, out, imported, start or {})
    for path, text in out.items():
        read_as_the_interpreter_reads(path, text)
        _not_shadowed(final, path)
    return out


def _not_shadowed(final: Tree, path: str) -> None:
    """Raise UngradableState when the workspace holds what the interpreter imports in place of the module at `path`
    (its finder takes, in one directory, a package `X/__init__.*` before an extension `X.*.so` before `X.py`): the
    verifier would grade a file the workspace never runs. A hundred-and-fourteenth attacker left the fix in each
    buggy `M.py` and the bug in a new `M/__init__.py`, which pytest imported (accepted on 10 of 10 tasks, pytest
    failing every FAIL_TO_PASS test). An honest fix adds neither beside a module."""
    stem = path[:-3]
    candidates = [stem + suffix for suffix in importlib.machinery.EXTENSION_SUFFIXES]
    if not path.endswith("__init__.py"):
        candidates += [f"{stem}/__init__{suffix}" for suffix in (*importlib.machinery.EXTENSION_SUFFIXES, ".py", ".pyc")]
        candidates.append(stem)  # a link named like the package (never followed here; the interpreter follows it)
    for candidate in candidates:
        if final.kind(candidate) not in (None, "file") or (candidate != stem and final.kind(candidate) is not None):
            raise UngradableState(f"{candidate} would be imported in place of {path}, which is what the verifier grades")


def _pytest_imports_what_is_graded(final: Tree, start: Mapping[str, str | None], names: frozenset[str],
                                   at_root: frozenset[str] = frozenset()) -> None:
    """Raise UngradableState where a pytest run of the hidden tests on this workspace would import other code, under
    the names `names` (the graded top-level modules, what they import, the standard library's and pytest's), than
    the verifier grades: a module or package of such a name under `tests/` that the start state lacks (pytest's
    default import mode puts each test file's directory ahead of the root on `sys.path`), or a pytest configuration
    file anywhere that is not the start state's (its `pythonpath`, `addopts`, `--import-mode`, `rootdir`). A
    hundred-and-twenty-seventh attacker left the fix in each graded `M.py` and the bug in a new `tests/M.py`, or in
    `lib/M.py` with `pythonpath = lib .` in the task's `pytest.ini`: accepted on 13 of 13 and 3 of 3 tasks, pytest
    failing every FAIL_TO_PASS test. An honest fix does neither. At the root (first on a pytest run's `sys.path`,
    by the task's `pythonpath = .`), a new module or package named like one of `at_root` (LIBRARY_NAMES, and what the
    code imports from elsewhere): the workspace would run it where the verifier runs the library's (a hundred-and-
    twenty-eighth attacker's `pdb.py`, which pytest's debugging plugin imports once the root is on the path: 15 of
    15 tasks accepted, pytest failing every FAIL_TO_PASS test). And a new `__init__` under `tests/`: pytest imports
    it as the package of the hidden test modules (the same attacker's device in it: 15 of 15)."""
    texts = final.as_text()
    for path in sorted({*final.files, *final.symlinks, *final.special, *start}):
        name = path.rsplit("/", 1)[-1]
        if name in PYTEST_CONFIGS and texts.get(path) != start.get(path):
            raise UngradableState(f"{path} configures pytest, and is not the task's; the test configuration is the task's")
        if path in start and final.kind(path) == "file" and final.files.get(path) == start[path]:
            continue  # the start state's own files are the task's
        if not path.startswith("tests/"):
            library_shadow(final, path, at_root)
            continue
        parts = path.split("/")[1:]
        if parts[-1].split(".", 1)[0] == "__init__":
            raise UngradableState(f"{path} would be imported as the package of the hidden tests, which are the task's")
        for i, part in enumerate(parts):  # a package (its directory, at any depth of tests/) or a module file
            stem = part if i < len(parts) - 1 else module_name(part)
            if stem in names and (i < len(parts) - 1 or stem != part or final.kind(path) == "symlink"):
                found = "/".join(["tests", *parts[:i + 1]])
                raise UngradableState(f"{found} would be imported as {stem!r} by a pytest run of the tests, in place of "
                                      "what the verifier grades")


def _test_packages_are_the_tasks(final: Tree, start: Mapping[str, str | None], hidden_tests: Iterable[str],
                                 modules: Iterable[str]) -> None:
    """Raise UngradableState where pytest would import, as a package of a hidden test module, an `__init__` file that
    is neither the start state's nor a module of the task. pytest's default import mode walks up from a test file's
    directory while it holds an `__init__.py` and imports each such directory as a package of the test module (the
    root too); the verifier imports none of them. A hundred-and-seventy-fourth attacker left the fix in inflection's
    module and the bug in a new root `__init__.py`, which a pytest run of the root's `test_inflection.py` imports
    first: accepted at 0.951, pytest failing all 35 FAIL_TO_PASS tests (the rule for a new `tests/__init__.py` did not
    reach the root). An honest fix adds no package around the tests."""
    own = set(modules)
    for test in sorted(hidden_tests):
        parts = test.split("/")[:-1]
        for depth in range(len(parts), -1, -1):
            directory = "/".join(parts[:depth])
            prefix = f"{directory}/" if directory else ""
            if final.kind(f"{prefix}__init__.py") is None:
                break  # the walk ends at the first directory without one
            for path in sorted({*final.files, *final.symlinks, *final.special}):
                if path.startswith(prefix) and "/" not in path[len(prefix):] and path[len(prefix):].split(".", 1)[0] == "__init__" \
                        and path not in own and not (path in start and final.kind(path) == "file" and final.files.get(path) == start[path]):
                    raise UngradableState(f"{path} would be imported as a package of the hidden test {test}, and is "
                                          "not the task's")


def _imported_files(final: Tree, out: dict[str, str], imported: frozenset[str],
                    start: Mapping[str, str | None]) -> None:
    """Add to `out` every file of `final` that the code in it imports by name, and what those import: the verifier
    must import what the workspace imports. A new `sqids/gsmark.py` that only the workspace had made `try: from .
    import gsmark` fail in the verifier alone, a tell (a fifty-ninth attacker: accepted on 6 of 6 package tasks).

    Raises UngradableState when such a file is named like a module the verifier keeps from the code (SHADOWED, or
    one the task's code imports from elsewhere: `imported`): the workspace would import the agent's file where the
    verifier imports the real one, or none."""
    layout = _Layout.of(final, start)
    queue = list(out)
    while queue:
        path = queue.pop()
        for target in _import_targets(path, out[path]):
            _importable_as_the_verifier_runs(final, path, target, layout)
            for candidate in (f"{target}.py", f"{target}/__init__.py"):
                if candidate in out or candidate not in final.files or \
                        (candidate in start and final.files[candidate] == start[candidate]):
                    continue  # the start state's own files are the verifier's too
                top = candidate.split("/", 1)[0].removesuffix(".py")
                text = final.files[candidate]
                if top in SHADOWED | imported or text is None or final.sizes[candidate] > MAX_SOURCE_BYTES:
                    raise UngradableState(f"{path} imports {candidate}, which the verifier cannot run as the workspace "
                                          "does (named like a library module, binary, or too large)")
                out[candidate] = text
                queue.append(candidate)


@dataclass(frozen=True)
class _Layout:
    """What `_importable_as_the_verifier_runs` asks of a final state for every import, computed once per state."""

    unchanged: frozenset[str]  # files the start state has, byte for byte
    directories: frozenset[str]  # every directory holding something now ("a" and "a/b" for "a/b/c.py")
    start_directories: frozenset[str]  # the same in the start state

    @classmethod
    def of(cls, final: Tree, start: Mapping[str, str | None]) -> "_Layout":
        return cls(frozenset(c for c in final.files if c in start and final.files[c] == start[c]),
                   _directories((*final.files, *final.symlinks, *final.special)), _directories(start))


def _directories(paths: Iterable[str]) -> frozenset[str]:
    out: set[str] = set()
    for path in paths:
        parts = path.split("/")[:-1]
        out.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return frozenset(out)


def _importable_as_the_verifier_runs(final: Tree, path: str, target: str, layout: _Layout) -> None:
    """Raise UngradableState when what the module at `path` imports as `target` is, in the workspace, something the
    verifier does not carry: a test file (a hundred-and-seventeenth attacker's `from .test_gsmark import GS` failed
    in the verifier alone, which carries no test file: accepted on 24 of 24 registered-package tasks), bytecode or an
    extension without its source, or a directory (a namespace package). The import must succeed or fail alike in
    both; an honest fix imports none of these."""
    if target.split("/", 1)[0] in sys.stdlib_module_names and "/" not in target:
        return  # the standard library's own (a same-named file is refused elsewhere: SHADOWED)
    sources = [c for c in (f"{target}.py", f"{target}/__init__.py") if final.kind(c) is not None]
    if sources and not any(is_test_path(c) and c not in layout.unchanged for c in sources):
        return  # source the verifier carries (`_imported_files`), or refuses there
    others = [f"{target}{s}" for s in (*importlib.machinery.EXTENSION_SUFFIXES, ".pyc")] + \
        [f"{target}/__init__{s}" for s in (*importlib.machinery.EXTENSION_SUFFIXES, ".pyc")]
    found = next((c for c in (*sources, *others) if final.kind(c) is not None and c not in layout.unchanged), None)
    if found is None and target in layout.directories and target not in layout.start_directories:
        found = f"{target}/"  # a directory the start state lacks
    if found is not None:
        raise UngradableState(f"{path} imports {found}, which the verifier does not run as the workspace does (a test "
                              "file, bytecode or an extension without source, or a directory)")


def _import_targets(path: str, text: str) -> set[str]:
    """The module paths (without .py: `a/b` for `a/b.py` or `a/b/__init__.py`) that the imports of the module at
    `path` name, their packages included; a module that does not parse names none (its tests fail).

    Raises UngradableState for a dotted name of MAX_IMPORT_PARTS names or more: Python's parser builds an import's
    name a part at a time, in the square of its length (`import a.a.a...` of 60,000 parts: 10 s; 100,000: 45 s), and
    every graded file is parsed here first, on the verifier's side (a ninetieth attacker's 200 kB of them kept the
    verifier past its 60 s, so a failing rollout timed out into an infrastructure error: 3 of 3)."""
    if _longest_dotted(text) >= MAX_IMPORT_PARTS - 1:
        raise UngradableState(f"{path} holds a dotted name of {MAX_IMPORT_PARTS} parts or more")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return set()
    package = path.rsplit("/", 1)[0].split("/") if "/" in path else []
    dotted: list[list[str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            dotted += [a.name.split(".") for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 > len(package):
                    continue
                base = package[:len(package) - (node.level - 1)]
            else:
                base = []
            module = base + (node.module.split(".") if node.module else [])
            dotted += [module] + [module + [a.name] for a in node.names if a.name != "*"]
    return {"/".join(parts[:i]) for parts in dotted for i in range(1, len(parts) + 1) if parts}


MAX_IMPORT_PARTS = 64  # no honest module names a dotted path this long (nor can a workspace hold one so deep)
# a name, a gap inside a dotted name (spaces, tabs, a line continuation), or any other character: one token per match,
# so each character is read once (the regex this replaced matched the whole dotted name and backtracked through
# every word from every position inside it: 27 s for one 40,000-letter comment, a hundred-and-twenty-third
# attacker's, which timed the verifier out into an infrastructure error on 13 of 13 tasks)
_TOKENS = re.compile(r"([^\W\d]\w*)|([ \t]+|\\\r?\n)|(.)", re.S)


def _longest_dotted(text: str) -> int:
    """The most `name .` pairs in a row in `text` (however spaced or continued over lines), in one pass: a dotted
    name of n parts has n - 1."""
    best = run = 0
    after_name = False
    for name, gap, other in _TOKENS.findall(text):
        if gap:
            continue
        if name:
            run = run if not after_name else 0  # two names without a dot between them: a new name begins
            after_name = True
        elif other == "." and after_name:
            run += 1
            best = max(best, run)
            after_name = False
        else:
            run, after_name = 0, False
    return best


MAX_ADDED_BYTES = 16_000  # compressed bytes a final state's code may hold beyond the reference's
MAX_ADDED_CHARS = 250_000  # and characters, uncompressed (what reading it statically costs); a fix needs far less


def packed_bytes(sources: dict[str, str]) -> int:
    """The size of `sources` (every byte: code, comments, docstrings, data a module reads back at run time) once
    compressed, so that writing the same thing more loosely or more tightly changes little."""
    return len(zlib.compress("\0".join(f"{path}\0{text}" for path, text in sorted(sources.items())).encode(), 9))


@lru_cache(maxsize=256)
def _imported(reference: tuple[tuple[str, str], ...]) -> frozenset[str]:  # a task's reference, once per process
    return imported_modules(dict(reference))


@lru_cache(maxsize=256)
def _reference_bytes(sources: tuple[tuple[str, str], ...]) -> int:  # a task's reference, once per process
    return packed_bytes(dict(sources))


def check_code_budget(sources: dict[str, str], reference: dict[str, str]) -> None:
    """Raise UngradableState when the code to grade, compressed, exceeds the reference's by more than
    MAX_ADDED_BYTES (about 60 kB of ordinary code), or, uncompressed, by more than MAX_ADDED_CHARS.

    A fix needs little code; a table of answers needs a lot. Hidden tests drawn from a wide space (variants under the
    verifier's key) are passed by a table only if it covers much of that space: a thirty-seventh attacker's tables
    of every input near the public ones took 8-80 kB per function, and a thirty-eighth kept lzma-compressed tables in
    docstrings of new modules (which a count of code alone left out) and read them back through `__doc__`. Every
    byte of every graded file counts, compressed."""
    budget = _reference_bytes(tuple(sorted(reference.items()))) + MAX_ADDED_BYTES
    used = packed_bytes(sources)
    if used > budget:
        raise UngradableState(f"the code to grade is {used:,} bytes compressed, more than the reference's "
                              f"{budget - MAX_ADDED_BYTES:,} plus {MAX_ADDED_BYTES:,}")
    # what the verifier reads statically (`introspection`, the edit facts) costs time by the uncompressed text: 72
    # new modules of 199 kB that compressed to 205 bytes each made the verification outlast the service's limit, an
    # infrastructure error instead of the agent's failure (a fifty-seventh attacker); the text is bounded too
    raw_budget = sum(map(len, reference.values())) + MAX_ADDED_CHARS
    raw = sum(map(len, sources.values()))
    if raw > raw_budget:
        raise UngradableState(f"the code to grade is {raw:,} characters, more than the reference's "
                              f"{raw_budget - MAX_ADDED_CHARS:,} plus {MAX_ADDED_CHARS:,}")


def answered_tests(start: dict[str, str], suites: list[CompiledSuite]) -> set[str]:
    """Node ids of the hidden tests an agent could pass by copying what it was shown: the visible tests, and
    hidden tests that ask nothing a visible test does not (every statement of theirs is in a visible test) or
    only on inputs a visible test uses (special-casing those inputs passes them). Passing them proves nothing
    on its own, so they earn no progress; they still gate acceptance."""
    from gymsmith.families.code.realtests import base_name, visible_tests

    visible = {(path, name) for path, text in start.items() if is_test_path(path) and path.endswith(".py")
               for name in visible_tests(text)}
    # a repository's parametrized test is split into name__case0, ...: shown when its function is
    shown = {nodeid for suite in suites for nodeid in suite.nodeids()
             if (suite.path, base_name(nodeid.split("::", 1)[1])) in visible}
    tests = [(nodeid, test) for suite in suites for nodeid, test in zip(suite.nodeids(), suite.tests)]
    asked = {stmt for nodeid, test in tests if nodeid in shown for stmt in test.statements}
    inputs = {x for nodeid, test in tests if nodeid in shown for x in test.inputs}
    return shown | {nodeid for nodeid, test in tests
                    if (test.statements and set(test.statements) <= asked) or (test.inputs and test.inputs <= inputs)}


def edit_facts(start: dict[str, str | None], final: dict[str, str | None], sources: set[str],
               reference: dict[str, str], buggy: list[str]) -> EditFacts:
    """What changed from `start` to `final`; `sources` are the paths the verifier treats as source code."""
    changed = sorted(p for p in set(start) | set(final) if start.get(p) != final.get(p))
    tests = [p for p in changed if is_test_path(p)]
    return EditFacts(
        source_lines_changed=sum(changed_lines(start.get(p) or "", final.get(p) or "") for p in changed if p in sources),
        lines_needed=sum(changed_lines(start[m] or "", reference[m]) for m in buggy),
        # an existing test edited or deleted, or any conftest: tampering; a new test file is the agent's own
        test_files_changed=[p for p in tests if p in start or p.rsplit("/", 1)[-1] == "conftest.py"],
        test_files_added=[p for p in tests if p not in start and p.rsplit("/", 1)[-1] != "conftest.py"],
        other_files_changed=[p for p in changed if p not in sources and not is_test_path(p)])


def verify(task: TaskSpec, final_state_path: Path) -> CheckResult:
    """The verdict on a code task's final state. Graded code runs under the key's hash seed (`drawkey.keyed_hash`:
    under the sandboxes' fixed seed, `hash()` or a set's order told the verifier's process from any other)."""
    with keyed_hash():
        return _verify(task, final_state_path)


def prepare(task: TaskSpec) -> None:
    """What verifying any final state of `task` computes first, none of it from the state: its hidden tests and which
    of them its start state passes (kept per process). The verifier service runs it before a task's first
    verification in each worker, outside the CPU budget a state's own verification gets (`VerifierService`)."""
    if task.metadata.get("source") == "repository":
        from gymsmith.families.code.byo import prepare_repository_task
        prepare_repository_task(task)
        return
    with keyed_hash():
        ct = code_task(task)
        checks_digest(ct)
        _start_passes(task, ct)


_START_PASSES: dict[str, frozenset[str]] = {}  # by task and hidden tests: the FAIL_TO_PASS tests its start state passes


def _start_passes(task: TaskSpec, ct: CodeTask) -> frozenset[str]:
    """The task's FAIL_TO_PASS tests that its start state itself passes, run here under the same key (once per
    task and process). They earn no progress: doing nothing must earn nothing, and a variant the draw kept on one
    run of the bug that a later run passes (a fifty-sixth attacker's null earned 0.45 from one) proves nothing.
    Raises VerifierError when every FAIL_TO_PASS test of some bug passes there: the task cannot tell that bug's fix
    from the start state, so no verdict on it means anything."""
    key = task.id + hashlib.sha256("\0".join(f"{p}\0{t}" for p, t in sorted(ct.hidden_tests.items())).encode()
                                    ).hexdigest()  # the variants are the key's: another key, another entry
    if key not in _START_PASSES:
        run, _ = _hidden_run(task, ct, {m: ct.files.get(m, "") for m in ct.modules})
        passing = frozenset(n for n in ct.fail_to_pass if run.outcome(n) is TestOutcome.PASSED)
        for tests in ct.bug_tests or [ct.fail_to_pass]:
            if tests and set(tests) <= passing:
                raise VerifierError(f"task {task.id}: its start state passes every FAIL_TO_PASS test of a bug "
                                    f"({', '.join(sorted(tests)[:3])}); regenerate the task")
        if len(_START_PASSES) > 1024:
            _START_PASSES.clear()
        _START_PASSES[key] = passing
    return _START_PASSES[key]


def _check_data_files(task: TaskSpec, tree: Tree) -> None:
    """Raises UngradableState when the final state changed a registered package's data file: the verifier runs the
    package's data as registered, so code reading a changed copy would run one way in the workspace and another where
    it is graded (a ninety-fifth attacker rewrote `ledgerkit/VERSION` and keyed the fix on reading it back with the
    reference's own `pkgutil.get_data` call: accepted on 7 of 7 tasks, pytest failing every FAIL_TO_PASS)."""
    if not task.knobs.get("source"):
        return
    from gymsmith.families.code.repotasks import data_files_of

    changed = sorted(p for p, text in data_files_of(task.knobs["source"]).items() if tree.files.get(p) != text)
    if changed:
        raise UngradableState(f"the package's data files are graded as registered, and the final state changed "
                              f"{', '.join(changed[:5])}")


def _package_holds_only_what_is_graded(tree: Tree, start: Mapping[str, str | None], sources: Mapping[str, str],
                                       modules: Sequence[str]) -> None:
    """Raise UngradableState where a package directory of the task's holds a new or changed entry the verifier does not
    carry: a file that is no graded source, or a directory the start state lacks. The verifier's job holds the graded
    sources (over the package as registered), so such an entry is found in the workspace alone: a
    hundred-and-seventieth attacker's empty `ledgerkit/gsgate/`, imported there as a namespace package and missing
    where graded, ran the fix only in the verifier (accepted on 8 of 8 registered-package tasks, pytest failing every
    FAIL_TO_PASS test); a new data file read with the package's own `pkgutil.get_data` would do the same. An honest fix
    changes the package's modules and nothing else in it."""
    packages = {m.split("/", 1)[0] for m in modules if "/" in m}
    if not packages:
        return
    had = _directories(start)
    for path in sorted({*tree.files, *tree.symlinks, *tree.special, *tree.directories}):
        if "/" not in path or path.split("/", 1)[0] not in packages or path in sources:
            continue
        if path in tree.directories:
            if path in had:
                continue
        elif tree.kind(path) == "file" and path in start and tree.files.get(path) == start[path]:
            continue
        raise UngradableState(f"{path} is new or changed in the package but is no module the verifier runs: the "
                              "workspace would find it and the verifier not")


def _hidden_run(task: TaskSpec, ct: CodeTask, sources: dict[str, str], scale: float = 1.0, *,
                graded: bool = False) -> tuple[TestRun, list[CompiledSuite]]:
    """The task's hidden suites run as call checks on `sources` (a registered repository's in its sandbox layer),
    a template task's limits times `scale`; `graded`: the agent's code (served at pytest's stack depth, `calltests.depths`)."""
    if task.knobs.get("source"):
        from gymsmith.families.code.repotasks import repo_run_hidden
        return repo_run_hidden(task.knobs["source"], sources, ct.hidden_tests, graded=graded)
    templates = [path.removeprefix("tests/test_").removesuffix(".py") for path in sorted(ct.hidden_tests)]
    suites = [compiled_suite(t, ct.hidden_tests[f"tests/test_{t}.py"]) for t in templates]
    return run_hidden_tests(sources, suites, templates, deadline_s=VERIFY_TIMEOUT_S * scale,
                            group_timeout_s=GROUP_TIMEOUT_S * scale, graded=graded), suites


def _verify(task: TaskSpec, final_state_path: Path) -> CheckResult:
    if task.metadata.get("source") == "repository":
        from gymsmith.families.code.byo import verify_repository_task
        return verify_repository_task(task, Path(final_state_path))
    ct = code_task(task)
    _, digest = pristine_repo(ct.files)
    if digest != task.start_state.digest:
        raise RuntimeError(f"task {task.id}: rebuilt start state has digest {digest}, the task says {task.start_state.digest}")
    if checks_digest(ct) != task.metadata.get("checks_digest"):
        raise RuntimeError(f"task {task.id} was made with other hidden tests than this verifier has; regenerate it")
    tree = scan_tree(Path(final_state_path))
    start: dict[str, str | None] = dict(start_files(task))
    own = frozenset(m.split("/", 1)[0].removesuffix(".py") for m in ct.modules)
    imported = _imported(tuple(sorted(ct.reference.items()))) - own
    sources = source_files(tree, ct.modules, imported, start)
    graded = frozenset(p.split("/", 1)[0].removesuffix(".py") for p in sources)
    # a conftest.py is pytest's own hook file: a changed test file (a violation), not a shadow
    _pytest_imports_what_is_graded(tree, start, (graded | own | imported | SHADOWED) - {"conftest"},
                                   at_root=(library_names() | imported) - graded)
    check_code_budget(sources, ct.reference)
    _check_data_files(task, tree)
    _package_holds_only_what_is_graded(tree, start, sources, ct.modules)
    _test_packages_are_the_tasks(tree, start, ct.hidden_tests, ct.modules)
    run, suites = _hidden_run(task, ct, sources, graded=True)
    # the limits are wall-clock: on a loaded machine an honest fix can miss them, all the more in a stall that lasts
    # just its run (the reference, run right after, finished: the oracle was scored 0 that way in a loaded CI run). A
    # timeout is the agent's only where its code, run again under SLOW_SCALE times the limits (templates; a registered
    # package's are already wide: the same limits), misses those too while the reference, run now under them,
    # finishes (nothing of the agent's files is in that run, and nothing its runs started outlives them). Where the
    # reference misses them too, the machine is too loaded to tell (a VerifierError, retried by the runners).
    if run.status is RunStatus.TIMEOUT:
        scale = 1.0 if task.knobs.get("source") else SLOW_SCALE
        if scale > 1.0:
            run, suites = _hidden_run(task, ct, sources, scale, graded=True)
        if run.status is RunStatus.TIMEOUT:
            reference, _ = _hidden_run(task, ct, dict(ct.reference), scale)
            if reference.status is not RunStatus.COMPLETED:
                raise VerifierError(f"task {task.id}: the machine is too loaded to verify: the reference itself did "
                                    f"not finish the hidden tests within {scale:g} times the verifier's limits "
                                    f"({reference.status.value}); retry the verification")
    edits = edit_facts(start, tree.as_text(), set(sources), ct.reference, ct.buggy_modules)
    # a module that can tell the verifier's process from others can be the fix only there (`introspection`); a new
    # module runs in the same process, so it is read as one whose reference is empty
    edits.process_reads = changed_modules_process_reads(sources, start, ct.reference, own)
    no_progress = answered_tests(ct.files, suites) | _start_passes(task, ct)
    # only the hidden tests on inputs of this task's own earn progress (`CodeTask.pinned_tests`): every other test
    # of a template or a release is public (gymsmith and the package ship them) or passed by readable values
    pinned = set(ct.pinned_tests or ())
    no_progress |= {n for suite in suites for n in suite.nodeids() if n not in pinned}
    return grade(run, ct.fail_to_pass, ct.pass_to_pass, ct.canaries, edits, visible=no_progress, bugs=ct.bug_tests or None)
