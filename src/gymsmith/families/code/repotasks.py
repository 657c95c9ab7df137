"""Tasks synthesized from a registered repository (`code` with `source=NAME==VERSION`; see docs/repos.md).

Bugs are injected into the package's own functions: the code family's AST mutations (`mutate.py`) plus
`removed_body` (a function's body, after its docstring, replaced by `raise NotImplementedError`). A mutant is
kept only when at least one of the package's call-check tests (recorded as reliable when the repository was
registered, so each passes on the reference) fails on it and its run finished. FAIL_TO_PASS are the tests it
fails; PASS_TO_PASS the other tests of every call-check file (all of them run at verification, as a whole-suite
pytest run collects them).
Outcomes are cached on disk per repository and runtime, so each mutant is judged once per machine.

The agent's start state: the package's sources (one file per bug mutated) and test files, as one fresh
commit; in each affected test file the failing tests not chosen to be shown are removed (they stay hidden).
The verifier runs the hidden suites as call checks in the repository's own sandbox layer
(`repo_run_hidden`): the same engine, isolation and trusted judging as template tasks.
"""

from __future__ import annotations

import ast
import atexit
import fcntl
import hashlib
import itertools
import json
import os
import random
import threading
from functools import lru_cache
from typing import Any

from gymsmith.core.errors import KnobError, NoTaskForSeed, VerifierError
from gymsmith.families.code import mutate
from gymsmith.families.code.introspection import lookup_hook_modules
from gymsmith.families.code.task import CodeTask, MutationRecord, canary_name, names_used
from gymsmith.families.code.realtests import base_name, method_name
from gymsmith.families.code.repovariants import KEYED_MOVES, PREFIX, SIDE, TRIES_PER_TEST, can_vary, sides, variants
from gymsmith.families.code.repo import is_test_path
from gymsmith.repos.manifest import RepoError, RepoManifest, find_repo
from gymsmith.sandbox.runtime import PythonRuntime, cache_root, layer_runtime
from gymsmith.verifier.calltests import (CallRunner, CompiledSuite, UnsupportedTest, compile_suite, judge_run,
                                         records_by_nodeid)
from gymsmith.verifier.calltests.guessing import Candidates, pinned
from gymsmith.verifier.calltests.wire import TestRecord
from gymsmith.verifier.drawkey import draw_token, keyed_hash
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

REPO_CATALOG_VERSION = 5  # the outcomes' meaning (3: the package in a process of its own; 4: one for all test files, as pytest; 5: undecided comparisons fail); task synthesis may change without it
REFERENCE_KEY = "reference passes"  # the catalog's entry: the tests the reference passes under this call runner
MUTANT_TIMEOUT_S = 5.0
MUTANT_RETRY_S = 60.0  # a mutant still running after this is judged to hang
VERIFY_TIMEOUT_S = 20.0
# the agent's pytest runs the tests as registration judged them: without conftests (a package's conftest may import
# files its sdist does not carry into the task, and pytest would stop before any test)
PYTEST_INI = "[pytest]\npythonpath = .\naddopts = --noconftest\n"
REMOVED_BODY = "removed_body"


# -- the repository ------------------------------------------------------------------------------------
class Repo:
    """A registered repository loaded for task synthesis and verification (one per spec and process)."""

    def __init__(self, spec: str):
        self.path, self.manifest = find_repo(spec)
        tree = self.path / "tree"
        self.files = {rel: (tree / rel).read_text() for rel in
                      self.manifest.source_files + self.manifest.data_files + self.manifest.test_files if (tree / rel).is_file()}
        self.sources = {p: self.files[p] for p in self.manifest.source_files if p in self.files}
        # package data (a VERSION, word lists): in the start state, and run as registered beside any sources judged
        self.data = {p: self.files[p] for p in self.manifest.data_files if p in self.files}
        self.runtime: PythonRuntime = layer_runtime(self.path / "layer", self.manifest.layer_packages)
        try:
            self.suites = {s.path: compile_suite(s.source, s.path) for s in self.manifest.call_suites}
        except UnsupportedTest as exc:  # reduced by an earlier gymsmith whose call checks this one refuses
            raise RepoError(f"{spec}: registered by an earlier gymsmith; its tests need reducing again ({exc}): "
                            f"gymsmith repos add {self.manifest.spec}") from None
        self.runner = CallRunner(runtime=self.runtime)
        self.lock = threading.RLock()
        self.variable: set[str] | None = None  # `variable_tests`, once computed
        digest = hashlib.sha256(repr((REPO_CATALOG_VERSION, sorted(self.files.items()), self.runtime.digest,
                                      [s.model_dump() for s in self.manifest.call_suites])).encode()).hexdigest()[:16]
        self.catalog_path = cache_root() / "repo-catalog" / f"{self.manifest.name}-{self.manifest.version}-{digest}.json"
        self.catalog: dict[str, Any] = {}
        if self.catalog_path.exists():
            try:
                self.catalog = json.loads(self.catalog_path.read_text())
            except ValueError:
                self.catalog = {}
        self._reference: dict[str, TestRecord] | None = None
        self._variant_reference: dict[str, dict[str, TestRecord]] = {}  # a hidden file's driver -> its variants' records
        # each call suite's source (a task's hidden test file), with only the tests the reference passes here
        self.call_sources = {s.path: s.source for s in self.manifest.call_suites}
        self.suites = self._reference_passes(self.suites)

    def _reference_passes(self, suites: dict[str, CompiledSuite]) -> dict[str, CompiledSuite]:
        """`suites` with only the tests the reference passes under this gymsmith's call runner (cached in the
        catalog). Registration recorded them under the runner of its day; a test that needs the package in the
        driver's own process (it pickles a package object, subclasses a package class) is not used."""
        from gymsmith.families.code.realtests import keep_tests

        with self.lock:
            self._merge_disk()
            passing = self.catalog.get(REFERENCE_KEY)
            if passing is None:
                listed = list(suites.values())
                observed = self._observe(self.sources, listed, deadline_s=300, group_timeout_s=120)
                records = records_by_nodeid(listed, observed)
                run = judge_run(listed, observed, records).run
                if run.status is RunStatus.TIMEOUT:
                    raise VerifierError(f"the reference of {self.spec} did not finish its call checks in time; the "
                                        "verifier's sandbox may be overloaded")
                passing = self._record(REFERENCE_KEY, sorted(n for n, o in run.outcomes.items() if o is TestOutcome.PASSED))
        keep = set(passing)
        out = {}
        for path, suite in suites.items():
            names = {t.name for t in suite.tests if f"{path}::{t.name}" in keep}
            if names == {t.name for t in suite.tests}:
                out[path] = suite
            elif names:
                source = keep_tests(self.call_sources[path], names)
                self.call_sources[path] = source
                out[path] = compile_suite(source, path)
        for path in set(self.call_sources) - set(out):
            del self.call_sources[path]
        return out

    @property
    def spec(self) -> str:
        return self.manifest.spec

    def reference_records(self) -> dict[str, TestRecord]:
        """The reference's observations of every call suite (the exact types runs are judged against)."""
        with self.lock:
            if self._reference is None:
                suites = list(self.suites.values())
                observed = self._observe(self.sources, suites, deadline_s=120, group_timeout_s=60)
                records = records_by_nodeid(suites, observed)
                missing = [n for s in suites for n in s.nodeids() if n not in records]
                if missing:
                    raise VerifierError(f"the reference of {self.spec} did not finish its call checks ({len(missing)} "
                                        f"missing, e.g. {missing[0]}); the verifier's sandbox may be overloaded")
                self._reference = records
            return self._reference

    def run(self, sources: dict[str, str], suites: list[CompiledSuite], deadline_s: float, *,
            graded: bool = False) -> TestRun:
        """Call-check `suites` on `sources`, judged here against the reference (a canary has no reference record,
        so it never passes; a task's variant tests get theirs from the reference's run of their file). `graded`:
        `sources` are an agent's code under verification (`CallRunner.observe`)."""
        reference = {**self.reference_records(), **self._variant_records(suites)}
        with self.lock:
            observed = self._observe(sources, suites, deadline_s=deadline_s, group_timeout_s=deadline_s, graded=graded,
                                     stop_at_failure=reference if graded else None)
        return judge_run(suites, observed, reference, one_session=graded, graded=graded).run

    def _variant_records(self, suites: list[CompiledSuite]) -> dict[str, TestRecord]:
        from gymsmith.families.code.repovariants import PREFIX

        out: dict[str, TestRecord] = {}
        for suite in suites:
            if not any(t.name.startswith(PREFIX) for t in suite.tests):
                continue
            with self.lock:
                if suite.driver not in self._variant_reference:
                    records = records_by_nodeid([suite], self.observe_reference([suite]))
                    if len(self._variant_reference) > 256:
                        self._variant_reference.clear()
                    self._variant_reference[suite.driver] = {n: r for n, r in records.items()
                                                             if n.split("::", 1)[1].startswith(PREFIX)}
                out.update(self._variant_reference[suite.driver])
        return out

    def observe_reference(self, suites: list[CompiledSuite], deadline_s: float | None = None):
        """The reference's observations of `suites`: by default with long limits (this is the verifier's own run),
        else within `deadline_s` (a probe that may be slow: what it did not finish is not observed)."""
        with self.lock:
            return self._observe(self.sources, suites, deadline_s=deadline_s or 120, group_timeout_s=deadline_s or 60)

    def passes(self, sources: dict[str, str], suite: CompiledSuite,
               reference: dict[str, TestRecord] | None = None) -> bool:
        """Whether every test of `suite` passes on `sources`, judged against `reference` (the reference's records
        of `suite`; a fresh run of the reference when None)."""
        if reference is None:
            reference = records_by_nodeid([suite], self.observe_reference([suite]))
        with self.lock:
            observed = self._observe(sources, [suite], deadline_s=MUTANT_RETRY_S, group_timeout_s=MUTANT_RETRY_S)
        run = judge_run([suite], observed, reference).run
        return all(run.outcome(n) is TestOutcome.PASSED for n in suite.nodeids())

    def catalog_entry(self, key: str, compute: Any) -> Any:
        """The catalog's entry `key`, computed (and stored) by `compute()` if no process has stored it yet."""
        with self.lock:
            if key not in self.catalog:
                self._merge_disk()
            if key in self.catalog:
                return self.catalog[key]
        return self._record(key, compute())

    def _observe(self, sources: dict[str, str], suites: list[CompiledSuite], *, deadline_s: float,
                 group_timeout_s: float, graded: bool = False, stop_at_failure: dict[str, TestRecord] | None = None):
        """The call runner's observations of `suites` beside `sources`, with the package's data as registered (graded:
        look-up hooks only in modules whose reference has one; `stop_at_failure`: `CallRunner.observe`'s)."""
        return self.runner.observe({**self.data, **sources}, suites, deadline_s=deadline_s,
                                   group_timeout_s=group_timeout_s, graded=graded,
                                   hook_modules=lookup_hook_modules(self.sources) if graded else (),
                                   stop_at_failure=stop_at_failure)

    def mutant_outcome(self, path: str, m: mutate.Mutation, suites: list[str] | None = None) -> dict[str, Any]:
        """{'status', 'failing': [node ids]} of the single mutant over the call suites `suites` (test file
        paths; all by default), cached on disk.

        Tasks are rebuilt from these outcomes in other processes (the verifier's), so every process must see the
        same ones: the disk catalog is read before judging, the first outcome written wins, and a run that hit
        the deadline is judged again with a long one (a loaded machine must not turn a bug into a 'hang')."""
        return self.bugs_outcome([(path, m)], suites)

    def bugs_outcome(self, bugs: list[tuple[str, mutate.Mutation]], suites: list[str] | None = None) -> dict[str, Any]:
        """`mutant_outcome` of several mutants together, each in its own source file."""
        chosen = sorted(self.suites) if suites is None else sorted(suites)
        key = "+".join(sorted(f"{path}|{m.key}" for path, m in bugs)) + ("" if suites is None else f"|{','.join(chosen)}")
        with self.lock:
            if key not in self.catalog:
                self._merge_disk()
            if key in self.catalog:
                return self.catalog[key]
        sources = {**self.sources, **{path: mutate.apply(self.sources[path], [m]) for path, m in bugs}}
        for deadline in (MUTANT_TIMEOUT_S, MUTANT_RETRY_S):
            run = self.run(sources, [self.suites[p] for p in chosen], deadline)
            if run.status is not RunStatus.TIMEOUT:
                break
        entry = {"status": run.status.value,
                 "failing": sorted(n for p in chosen for n in self.suites[p].nodeids() if run.outcome(n) is not TestOutcome.PASSED)}
        return self._record(key, entry)

    def _record(self, key: str, entry: Any) -> Any:
        """Store `entry` in the disk catalog under `key` unless another process was first (its entry stands and
        is returned)."""
        self.catalog_path.parent.mkdir(parents=True, exist_ok=True)
        with self.lock, open(self.catalog_path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # read, merge and write as one step across processes
            self._merge_disk()
            entry = self.catalog.setdefault(key, entry)
            tmp = self.catalog_path.with_suffix(f".tmp-{os.getpid()}-{threading.get_ident()}")
            tmp.write_text(json.dumps(self.catalog))
            os.replace(tmp, self.catalog_path)
        return entry

    def _merge_disk(self) -> None:
        try:
            self.catalog = {**self.catalog, **json.loads(self.catalog_path.read_text())}
        except (OSError, ValueError):
            pass

    def close(self) -> None:
        self.runner.close()


_repos: dict[str, Repo] = {}
_repos_lock = threading.Lock()


def load_repo(spec: str) -> Repo:
    """The registered repository `spec` (cached per process). Raises RepoError if it is not registered."""
    with _repos_lock:
        if spec not in _repos:
            _repos[spec] = Repo(spec)
            atexit.register(_repos[spec].close)  # its call server and job directory go with this process
        return _repos[spec]


def manifest_of(spec: str) -> RepoManifest:
    return load_repo(spec).manifest


# -- bugs ------------------------------------------------------------------------------------------------
def body_removals(source: str) -> list[mutate.Mutation]:
    """Every function whose body (after its docstring) is replaced by `raise NotImplementedError`."""
    out = []
    for name, fn in mutate._functions(ast.parse(source)):
        body = fn.body[1:] if mutate._docstring(fn) is not None else fn.body
        if not body or (len(body) == 1 and isinstance(body[0], ast.Raise | ast.Pass)):
            continue
        first, last = body[0], body[-1]
        indent = " " * first.col_offset
        out.append(mutate.Mutation(operator=REMOVED_BODY, function=name, line=first.lineno,
                                   description=f"the body of {name} removed", start=(first.lineno, 0),
                                   end=(last.end_lineno + 1, 0), replacement=f"{indent}raise NotImplementedError\n"))
    return out


def candidates(source: str, operator: str = "any") -> list[mutate.Mutation]:
    pool = mutate.candidates(source) + body_removals(source)
    return [m for m in pool if operator in ("any", m.operator)]


def caught_functions(repo: Repo, path: str) -> dict[str, list[str]]:
    """Function of `path` -> the test files that catch its body's removal (functions no test reaches left out).
    Only mutants of these functions are tried, each judged on those files only: the affected test files the
    task's FAIL_TO_PASS and PASS_TO_PASS come from (this saves most mutant runs)."""
    out = {}
    for m in body_removals(repo.sources[path]):
        outcome = repo.mutant_outcome(path, m)
        if outcome["status"] == RunStatus.COMPLETED.value and outcome["failing"]:
            out[m.function] = sorted({n.split("::")[0] for n in outcome["failing"]})
    return out


def test_key(nodeid: str) -> tuple[str, str]:
    """(test file, test function): the cases of one parametrized test are one test to show or hide."""
    path, name = nodeid.split("::", 1)
    return path, base_name(name)


def _function_spans(source: str) -> list[tuple[str, int, int]]:
    """(name, first line index, end line index) of each top-level function and each method of a top-level class
    (named `realtests.method_name`), decorators included."""
    tree = ast.parse(source)
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    nodes = [(fn.name, fn) for fn in tree.body if isinstance(fn, functions)] + \
        [(method_name(c.name, m.name), m) for c in tree.body if isinstance(c, ast.ClassDef) for m in c.body
         if isinstance(m, functions)]
    return [(name, min([fn.lineno, *(d.lineno for d in fn.decorator_list)]) - 1, fn.end_lineno or fn.lineno)
            for name, fn in nodes]


def variable_tests(repo: Repo) -> set[str]:
    """Node ids of the call-check tests `repovariants` can ask on other inputs (`repovariants.can_vary`): the only
    tests a bug can be kept for. A package's own tests are public (a policy may have read the release's whole suite,
    the tests a task hides included), so none of them proves a fix; a variant does: its expected value is the
    reference's answer on inputs of the task's own, which no file holds."""
    if repo.variable is None:
        repo.variable = {n for suite in repo.suites.values() for n, t in zip(suite.nodeids(), suite.tests)
                         if can_vary(t)}
    return repo.variable


def public_candidates(repo: Repo) -> Candidates:
    """What a policy can know of a package's tests whatever a task shows: every test file of the release."""
    return Candidates.merged(*(_candidates_of(repo.files[p]) for p in repo.manifest.test_files if p in repo.files))


@lru_cache(maxsize=8192)
def _candidates_of(text: str) -> Candidates:
    return Candidates.of([text])  # a package's files recur in every task: each is parsed once


def pick_mutation(repo: Repo, path: str, rng: random.Random, operator: str) -> tuple[mutate.Mutation, list[str]] | None:
    """The first mutant of `path` in a seeded order that finishes and fails at least two test functions, one of
    them variable (`variable_tests`): one can be shown and one kept hidden, with variants of the bug's tests
    (`repovariants`) as its proof, so neither passing what was shown, nor reporting values the agent can read
    (inputs, shown expected values, one bit), nor answering the release's own tests from memory passes them."""
    rich = variable_tests(repo)
    try:
        reached = caught_functions(repo, path)
        pool = [m for m in candidates(repo.sources[path], operator) if m.function in reached]
    except SyntaxError:
        return None
    for m in rng.sample(pool, len(pool)):
        outcome = repo.mutant_outcome(path, m, None if m.operator == REMOVED_BODY else reached[m.function])
        if (outcome["status"] == RunStatus.COMPLETED.value and len({test_key(n) for n in outcome["failing"]}) >= 2
                and set(outcome["failing"]) & rich):  # a pinned failing test, to keep hidden
            return m, outcome["failing"]
    return None


def independent(repo: Repo, bugs: list[tuple[str, mutate.Mutation]], files: set[str]) -> list[list[str]] | None:
    """Per bug, the tests of `files` it fails, if every subset of `bugs` fails exactly the union of what each of
    its bugs fails alone there, and no two bugs fail the same test; else None.

    This is what makes a multi-bug task's reward rise with every bug fixed, in any order: bugs that mask or
    compound each other (a real package's functions call each other) would make fixing one pay nothing, or
    leave a PASS_TO_PASS test failing on the start state. Every outcome is cached on disk like a single mutant's."""
    suites = sorted(files)
    alone = []
    for bug in bugs:
        outcome = repo.bugs_outcome([bug], suites)
        if outcome["status"] != RunStatus.COMPLETED.value:
            return None
        alone.append(set(outcome["failing"]))
    if sum(map(len, alone)) != len(set().union(*alone)):
        return None
    for size in range(2, len(bugs) + 1):
        for subset in itertools.combinations(range(len(bugs)), size):
            outcome = repo.bugs_outcome([bugs[i] for i in subset], suites)
            if outcome["status"] != RunStatus.COMPLETED.value or set(outcome["failing"]) != set().union(*(alone[i] for i in subset)):
                return None
    return [sorted(tests) for tests in alone]


# -- tasks -----------------------------------------------------------------------------------------------
def drop_tests(source: str, drop: set[str]) -> str:
    """The test file without the tests in `drop` (top-level functions, or `realtests.method_name` for a method of
    a class), formatting of the rest intact."""
    lines = source.splitlines(keepends=True)
    spans = []
    for name, start, end in _function_spans(source):
        if name in drop:
            while end < len(lines) and not lines[end].strip():
                end += 1
            spans.append((start, end))
    for start, end in sorted(spans, reverse=True):
        del lines[start:end]
    return "".join(lines)


def readme(m: RepoManifest) -> str:
    return (f"# {m.name} {m.version}\n\nThe source of {m.name} {m.version} and its tests. Run the tests with pytest (its pytest.ini\n"
            "leaves conftest.py files out, as the tests were run when the package was registered):\n\n"
            "    python -m pytest -q\n")


MAX_ATTEMPTS = 4  # seeded tries at a task whose every bug keeps a hidden test pinned on its start state


def generate_repo_task(seed: int, knobs: dict[str, Any]) -> CodeTask:
    """The task for `seed` and resolved `knobs` on the repository `knobs['source']`: `n_bugs` bugs, each in its
    own source file, or as many as the package has files with a usable bug (`buggy_modules` says how many).

    Every bug keeps hidden a failing test pinned against the release's test files and the task's start state
    (docs/verifier.md, property 12): a variant on this task's inputs (`repovariants`). A try whose variants leave a
    bug without one is made again with the next seeded choice of bugs, up to MAX_ATTEMPTS tries.

    Raises RuntimeError if no file has a usable bug, NoTaskForSeed if no try kept a pinned hidden test for every
    bug (task sets skip the seed), KnobError if the package has no test a bug could keep hidden."""
    repo = load_repo(knobs["source"])
    if not variable_tests(repo):
        raise KnobError(f"source={repo.spec}: none of its call-check tests gives its calls integers or text a hidden variant "
                        "could move, and its own tests are public (docs/verifier.md, property 12), so no bug of it "
                        "could keep a hidden test that proves a fix; no task can be made")
    for attempt in range(MAX_ATTEMPTS):
        task = _try_task(repo, seed, "" if attempt == 0 else f":{attempt}", knobs)
        if task is not None:
            return task
    raise NoTaskForSeed(f"{repo.spec} seed {seed}: in {MAX_ATTEMPTS} tries, some bug kept no hidden test pinned "
                        "against the start state (its tests' variants gave none); another seed may make a task")


def _try_task(repo: Repo, seed: int, attempt: str, knobs: dict[str, Any]) -> CodeTask | None:
    """One seeded try of `generate_repo_task` (`attempt` "" is the first), or None if a bug keeps no pinned hidden
    test on the start state it makes."""
    rng = random.Random(f"code-repo-task:{repo.spec}:{seed}{attempt}")
    n_bugs = int(knobs["n_bugs"])
    operator = knobs.get("operator") or "any"
    files = dict(repo.files)
    mutations: list[MutationRecord] = []
    buggy: list[str] = []
    bugs: list[tuple[str, mutate.Mutation]] = []
    per_bug: list[list[str]] = []  # the tests each bug fails
    for path in rng.sample(sorted(repo.sources), len(repo.sources)):
        if len(bugs) == n_bugs:
            break
        picked = pick_mutation(repo, path, rng, operator)
        if picked is None:
            continue
        m, fails = picked
        if any(set(fails) & set(tests) for tests in per_bug):
            continue  # two bugs failing the same test could mask each other
        if bugs:
            together = independent(repo, [*bugs, (path, m)], {test_key(n)[0] for n in [*fails, *sum(per_bug, [])]})
            if together is None:
                continue
            per_bug = together[:-1]
            fails = together[-1]
        bugs.append((path, m))
        per_bug.append(sorted(fails))
    if not bugs:
        raise RuntimeError(f"{repo.spec}: no source file has a usable {operator} bug")
    for path, m in bugs:
        files[path] = mutate.apply(repo.sources[path], [m])
        buggy.append(path)
        mutations.append(MutationRecord(module=path, operator=m.operator, function=m.function, line=m.line,
                                        description=m.description, key=m.key))
    failing = sorted(set().union(*per_bug))
    rng = random.Random(f"code-repo-tests:{repo.spec}:{seed}{attempt}")  # what is shown does not depend on the search above
    shown: set[tuple[str, str]] = set()
    used = lru_cache(maxsize=None)(lambda path: names_used(files[path]) if path in files else {})
    variable = variable_tests(repo)
    for (path, m), fails in zip(bugs, per_bug):
        # the shown failing tests of each bug: preferably (directness) ones that name its function; never all of
        # them, and never the variable one kept hidden (see pick_mutation)
        keys = sorted({test_key(n) for n in fails})
        kept = rng.choice(sorted({test_key(n) for n in fails if n in variable}))
        direct = [k for k in keys if k != kept and m.function.split(".")[-1] in used(k[0]).get(k[1], set())]
        indirect = [k for k in keys if k != kept and k not in direct]
        prefer_direct = rng.random() < float(knobs["directness"])
        order = (direct + indirect) if prefer_direct else (indirect + direct)
        shown |= set(order[:max(1, int(knobs["visible_tests"]))])
    visible_failing = [n for n in failing if test_key(n) in shown]
    affected = sorted({test_key(n)[0] for n in failing})
    # every call-check file of the release runs at verification, the affected ones with their hidden tests: with the
    # affected files alone, a whole-suite `python -m pytest` collected other files whose imports the verifier never
    # made (a hundred-and-seventy-ninth attacker's fix ran only until a sibling module was imported: accepted on 6 of 6
    # ledgerkit tasks, the suite failing every FAIL_TO_PASS test), and damage to the rest of the package went unseen
    graded_files = sorted(repo.call_sources)
    p2p: list[str] = []
    for path in graded_files:
        suite = repo.suites[path]
        hide = {test_key(n)[1] for n in failing if test_key(n)[0] == path and test_key(n) not in shown}
        if path in files and hide:
            files[path] = drop_tests(files[path], hide)
        p2p += [n for n in suite.nodeids() if n not in failing]
    files["pytest.ini"] = PYTEST_INI
    files["README.md"] = readme(repo.manifest)
    # each bug's hidden tests on inputs of this task's own (repovariants): a policy cannot learn the answers. A
    # variant must not be readable from the start state nor from any of the package's test files (public: a policy
    # may know them all, hidden ones included). The start state's test files are the release's, cut: what a variant
    # is checked against does not depend on what the task shows, so the catalog keys variants by seed and bugs
    seen = Candidates.merged(public_candidates(repo),
                             *(_candidates_of(text) for path, text in files.items() if is_test_path(path)))
    key = f"{seed}{attempt}|" + "+".join(f"{path}|{m.key}" for path, m in bugs)
    mutant = {p: files[p] for p in repo.sources}
    # every hidden test that proves a fix must also fail each degenerate repair of the bug's function (`standins`)
    stand = [[{**repo.sources, path: mutate.apply(repo.sources[path], [s])} for s in mutate.standins(repo.sources[path], m.function)]
             for path, m in bugs]
    added = variants(repo, f"{seed}{attempt}", bugs, per_bug, mutant, seen, key, standins=stand)
    canary_of = {path: canary_name(rng, set(next(s for s in repo.manifest.call_suites if s.path == path).tests))
                 for path in graded_files}
    canaries = sorted(f"{path}::{canary}" for path, canary in canary_of.items())

    def assemble(drawn: dict[str, list[tuple[int, str]]]) -> tuple[dict[str, str], list[list[str]], list[str]]:
        """The hidden files with the variants `drawn`, each bug's failing tests, and the pinned hidden tests."""
        hidden, tests = {}, [list(fails) for fails in per_bug]
        for path in graded_files:
            mine = drawn.get(path, [])
            for index, source in mine:
                tests[index] = sorted([*tests[index], f"{path}::{source.split('(', 1)[0].removeprefix('def ')}"])
            hidden[path] = (repo.call_sources[path].rstrip() + "".join(f"\n\n\n{source.rstrip()}" for _, source in mine)
                            + f"\n\n\ndef {canary_of[path]}():\n    assert 0\n")
        return hidden, tests, [n for n in hidden_pinned_tests(hidden, seen) if f"::{PREFIX}{SIDE}" not in n]  # a side
        # gates only

    hidden, bug_tests, pinned_here = assemble(added)
    if not all(set(fails) & set(pinned_here) - set(visible_failing) for fails in bug_tests):
        return None  # a bug keeps no hidden test that only a computation passes: its variants gave none here
    # The task is decided by its seed (the start state and the variants above, which anyone can compute). The tests
    # that prove its fix are drawn again under the verifier's key (verifier/drawkey.py), so no one without the key
    # can table their answers; a seed whose keyed draw gives some bug none makes no task (below).
    token = draw_token("repo-variants", repo.spec, f"{seed}{attempt}")
    with keyed_hash():  # answered under the hash seed verification runs graded code with (drawkey.keyed_hash)
        keyed = variants(repo, token, bugs, per_bug, mutant, seen,
                         f"keyed|{token}|{key}|{KEYED_MOVES}|x3|alternate|hash-keyed", moves=KEYED_MOVES,
                         tries=3 * TRIES_PER_TEST, standins=stand)  # wide moves miss more often
    # never the seeded ones instead (anyone can compute them: a table of a template's seeded variant was accepted where
    # the keyed draw came out empty, attacker 39), nor small moves (integers a step from the public ones, words of the
    # test file: a table of them was accepted, attacker 40); such a seed makes no task under this key
    drawn = {path: _numbered(keyed.get(path, [])) for path in affected}
    hidden, bug_tests, pinned_here = assemble(drawn)
    # a variant another one's driver makes readable (its answer is a word swapped into the other's input, say) is no
    # proof: every variant the task keeps must be pinned in the file as assembled
    unpinned = {name for path, entries in drawn.items() for _, source in entries
                if f"{path}::{(name := source.split('(', 1)[0].removeprefix('def '))}" not in pinned_here}
    if unpinned:
        drawn = {path: _numbered([e for e in entries if e[1].split("(", 1)[0].removeprefix("def ") not in unpinned])
                 for path, entries in drawn.items()}
        hidden, bug_tests, pinned_here = assemble(drawn)
    if not all(set(fails) & set(pinned_here) - set(visible_failing) for fails in bug_tests):
        raise NoTaskForSeed(f"{repo.spec} seed {seed}: the verifier's key draws no hidden variant for some bug; the "
                            "next seed is used")
    # ... and the bugs' sides, under the key too: hidden tests where no proving variant goes (wild values, other
    # types, corners, next to the public calls), which gate and earn nothing (repovariants.sides)
    with keyed_hash():
        keyed_sides = sides(repo, token, per_bug, mutant, f"keyed|{token}|{key}|hash-keyed")
    for path, entries in keyed_sides.items():
        if path in drawn:
            drawn[path] = drawn[path] + entries
    hidden, bug_tests, pinned_here = assemble(drawn)
    failing = sorted(set().union(*bug_tests))
    return CodeTask(files=files, modules=sorted(repo.sources), buggy_modules=sorted(buggy), reference=dict(repo.sources),
                    hidden_tests=hidden, canaries=canaries, fail_to_pass=failing, pass_to_pass=sorted(p2p),
                    visible_failing=sorted(visible_failing), mutations=mutations, bug_tests=bug_tests,
                    pinned_tests=pinned_here)


def _numbered(entries: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Variant functions named `PREFIX0`, `PREFIX1`, ... in order (two draws each count from 0)."""
    from gymsmith.families.code.repovariants import PREFIX

    return [(index, f"def {PREFIX}{k}(" + source.split("(", 1)[1]) for k, (index, source) in enumerate(entries)]


def hidden_pinned_tests(hidden: dict[str, str], known: Candidates) -> list[str]:
    """The tests of the task's hidden files pinned against what its agent can know about them: `known` (the
    release's own test files and those of the start state) and the hidden file's own driver (which runs beside its
    code at verification). Only variants can be; only these earn progress, and each bug must keep one hidden."""
    out = []
    for path, source in hidden.items():
        suite = compile_suite(source, path)
        candidates = Candidates.merged(known, _candidates_of(suite.driver))
        out += [n for n, t in zip(suite.nodeids(), suite.tests) if pinned(t, candidates)]
    return sorted(out)


def repo_run_hidden(spec: str, sources: dict[str, str], hidden_tests: dict[str, str], *,
                    graded: bool = False) -> tuple[TestRun, list[CompiledSuite]]:
    """The task's hidden suites run as call checks on `sources` in the repository's sandbox layer (`graded`: an
    agent's code under verification)."""
    repo = load_repo(spec)
    suites = [compile_suite(hidden_tests[p], p) for p in sorted(hidden_tests)]
    return repo.run(sources, suites, VERIFY_TIMEOUT_S, graded=graded), suites


def data_files_of(spec: str) -> dict[str, str]:
    """The registered package's data files (path -> text), which the verifier runs as registered."""
    return dict(load_repo(spec).data)


def runtime_of(spec: str) -> PythonRuntime:
    return load_repo(spec).runtime
