"""Bring your own repository: a YAML task file turns a commit of a local git repository into a `code` task.

    repository: /path/to/repo          # a local git repository
    commit: 3f2c1e0                    # where the agent starts (a branch, tag or hash)
    test_command: python -m pytest -q  # how the agent runs the tests (must be pytest)
    fail_to_pass: [tests/test_x.py::test_bug]
    pass_to_pass: [tests/test_x.py::test_other]
    goal: Fix the bug ...              # optional
    solution_commit: 9a8b7c6           # optional: a commit with the fix (the oracle replays it)
    test_files: [shapes/fixtures/*]    # optional: more files the tests read (globs), restored like the tests

Unknown keys are refused. Before a task is accepted its tests are run (`check_task_tests`): every
FAIL_TO_PASS test must fail at `commit` and pass on `solution_commit`, every PASS_TO_PASS test pass on
both, and the solution must change the source.

The agent gets the files of `commit` as a fresh repository with one commit (no history: a later fix can
never be read from it). The verifier takes the final non-test files, restores every test-side file of `commit`
(`is_test_or_config`: test files, conftest.py, pytest's configuration files, everything under a directory named
`tests` or `test`, the files the tests' node ids name and the task's `test_files`), and runs FAIL_TO_PASS and PASS_TO_PASS with pytest in its sandbox,
once the final state is one the verifier can run as the workspace would (`workspace_runs_what_is_graded`).
"""

from __future__ import annotations

import fnmatch
import glob
import subprocess
import sys
import tempfile
from pathlib import Path
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails

from gymsmith.core.errors import GymsmithError, UngradableState
from gymsmith.core.types import StartStateRef, TaskSpec
from gymsmith.families.code.grading import EditFacts, grade
from gymsmith.families.code.task import FAMILY_VERSION
from gymsmith.families.code.workspace_rules import (IMPORTABLE, changed_modules_process_reads, library_names,
                                                    module_name, read_as_the_interpreter_reads)
from gymsmith.families.code.repo import MAX_TEXT_BYTES, PYTEST_CONFIGS, Tree, changed_lines, is_test_path, pristine_repo, scan_tree
from gymsmith.families.code.tools import TOOL_SPECS
from gymsmith.verifier.protocol import CheckResult
from gymsmith.verifier.drawkey import graded_hash_seed, keyed_hash
from gymsmith.verifier.pytest_runner import TestOutcome, shared_runner
from gymsmith.verifier.service import DEFAULT_TIMEOUT_S

NODE_ID = r"^[^\s:]+\.py::[\w\[\]\-.:,/ ]+$"
MAX_FILE_BYTES = 1_000_000


class TaskFileError(GymsmithError, ValueError):
    """A task file is unreadable or does not describe a usable task."""


class RepositoryTask(BaseModel):
    """A task file, validated: every field is checked against the repository it names."""

    model_config = ConfigDict(extra="forbid")

    repository: Path = Field(description="A local git repository.")
    commit: str = Field(min_length=1, description="The commit the agent starts from.")
    test_command: str = Field(default="python -m pytest -q", description="How the tests run; must be pytest.")
    fail_to_pass: list[str] = Field(min_length=1, description="Tests that fail at `commit` and must pass after the fix.")
    pass_to_pass: list[str] = Field(default_factory=list, description="Tests that pass at `commit` and must keep passing.")
    goal: str | None = Field(default=None, description="The instruction; a default is written from the lists.")
    solution_commit: str | None = Field(default=None, description="A commit with the fix, for the oracle.")
    test_files: list[str] = Field(default_factory=list, description="Globs of more files the tests read (data, "
                                  "helpers), restored from `commit` like the tests.")

    @field_validator("test_command")
    @classmethod
    def _pytest(cls, value: str) -> str:
        if "pytest" not in value.split() and "pytest" not in value:
            raise ValueError(f"test_command must run pytest (the verifier reports per test), got {value!r}")
        return value

    @field_validator("fail_to_pass", "pass_to_pass")
    @classmethod
    def _node_ids(cls, values: list[str]) -> list[str]:
        import re

        bad = [v for v in values if not re.match(NODE_ID, v)]
        if bad:
            raise ValueError(f"expected pytest node ids like 'tests/test_x.py::test_name', got {bad[:3]}")
        return values

    @model_validator(mode="after")
    def _repository(self) -> "RepositoryTask":
        if not self.repository.is_dir():
            raise ValueError(f"repository {str(self.repository)!r} is not a directory")
        if _git(self.repository, "rev-parse", "--git-dir") is None:
            raise ValueError(f"repository {str(self.repository)!r} is not a git repository")
        for name in ("commit", "solution_commit"):
            ref = getattr(self, name)
            if ref is not None:
                full = _git(self.repository, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
                if full is None:
                    raise ValueError(f"{name} {ref!r} is not a commit of {self.repository}")
                setattr(self, name, full.strip())
        if self.solution_commit is not None and _git(self.repository, "diff", "--quiet", self.commit,
                                                     self.solution_commit) is not None:
            raise ValueError(f"solution_commit {self.solution_commit[:12]} has the same files as commit "
                             f"{self.commit[:12]}: a solution must change something")
        overlap = set(self.fail_to_pass) & set(self.pass_to_pass)
        if overlap:
            raise ValueError(f"tests listed in both fail_to_pass and pass_to_pass: {sorted(overlap)[:3]}")
        files = tracked_files(self.repository, self.commit)
        missing = sorted({t.split("::")[0] for t in self.fail_to_pass + self.pass_to_pass} - set(files))
        if missing:
            raise ValueError(f"test files not in commit {self.commit[:12]}: {missing[:5]}")
        return self


def _git(repo: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def tracked_files(repo: Path, commit: str) -> list[str]:
    out = _git(repo, "ls-tree", "-r", "--name-only", commit)
    return out.splitlines() if out else []


def files_at(repo: Path, commit: str) -> dict[str, str]:
    """Text files of `commit` (binary and files over 1 MB are left out: the agent works on text)."""
    out = {}
    for path in tracked_files(repo, commit):
        blob = subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], capture_output=True)
        if blob.returncode == 0 and len(blob.stdout) <= MAX_FILE_BYTES and b"\0" not in blob.stdout:
            try:
                out[path] = blob.stdout.decode()
            except UnicodeDecodeError:
                pass
    return out


def load_task_file(path: str | Path, *, run_tests: bool = True) -> TaskSpec:
    """The TaskSpec of a YAML task file. Raises TaskFileError naming the file and what is wrong.

    With `run_tests` (the default) the task's tests are run first (`check_task_tests`), so a task whose
    FAIL_TO_PASS tests already pass, or whose solution does not make them pass, is refused."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TaskFileError(f"cannot read task file {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise TaskFileError(f"task file {path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise TaskFileError(f"task file {path} must be a mapping with repository, commit, fail_to_pass, ...")
    if isinstance(raw.get("repository"), str) and not Path(raw["repository"]).is_absolute():
        raw["repository"] = str((path.parent / raw["repository"]).resolve())
    try:
        spec = RepositoryTask.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(_problem(e) for e in exc.errors())
        raise TaskFileError(f"task file {path}: {problems}") from None
    if run_tests:
        failures = check_task_tests(spec)
        if failures:
            raise TaskFileError(f"task file {path}: {'; '.join(failures)}")
    files = files_at(spec.repository, spec.commit)
    _, digest = pristine_repo(files)
    goal = spec.goal or (f"The tests {', '.join(spec.fail_to_pass[:5])} fail. Fix the source so that they pass without "
                         f"breaking other tests. Do not edit the tests: the verifier uses its own copy. Run the tests "
                         f"with: {spec.test_command}. Call submit when you are done.")
    meta: dict[str, Any] = {"source": "repository", "repository": str(spec.repository), "commit": spec.commit,
                            "test_command": spec.test_command, "fail_to_pass": spec.fail_to_pass,
                            "pass_to_pass": spec.pass_to_pass, "solution_commit": spec.solution_commit}
    if spec.test_files:  # only when given: the ids of tasks made before the key existed stay as they were
        meta["test_files"] = spec.test_files
    return TaskSpec(family="code", family_version=_family_version(), seed=0, knobs={"difficulty": 0.5}, goal=goal,
                    start_state=StartStateRef(kind="git-repository", digest=digest), tools=TOOL_SPECS, metadata=meta)


def _problem(error: ErrorDetails) -> str:
    where = ".".join(map(str, error["loc"])) or "file"
    if error["type"] == "extra_forbidden":
        return f"unknown key {where!r} (expected some of: {', '.join(RepositoryTask.model_fields)})"
    return f"{where}: {error['msg'].removeprefix('Value error, ')}"


def verifier_view(start: dict[str, str], final: Mapping[str, str | None], test_files: Sequence[str] = ()
                  ) -> dict[str, str]:
    """What the verifier runs: the final non-test files with the start's own test-side files (`is_test_or_config`)."""
    job = {p: t for p, t in final.items() if t is not None and not is_test_or_config(p, test_files)}
    job.update({p: t for p, t in start.items() if is_test_or_config(p, test_files)})
    return job


def check_task_tests(spec: RepositoryTask, *, timeout: float = 120) -> list[str]:
    """Run the task's tests the way the verifier will; one line per broken promise (empty: the task holds).

    At `commit` every FAIL_TO_PASS test must fail and every PASS_TO_PASS test pass; on `solution_commit` (if
    given, with the commit's tests restored) all of them must pass. Raises VerifierError if the sandboxed
    runner cannot run.
    """
    start = files_at(spec.repository, spec.commit)
    tests = [*spec.fail_to_pass, *spec.pass_to_pass]
    states = [("commit", spec.commit, start, True)]
    if spec.solution_commit:
        solution = verifier_view(start, files_at(spec.repository, spec.solution_commit),
                                 test_side_globs(spec.test_files, tests))
        states.append(("solution_commit", spec.solution_commit, solution, False))
    out = []
    config = pytest_config(start, tests)
    for name, ref, files, f2p_fails in states:
        run = shared_runner().run(files, tests, timeout=timeout, conftest=True, config=config, path_first=True,
                                  collection_order=True)
        passed = lambda t: run.outcome(t) is TestOutcome.PASSED  # noqa: E731
        wrong = [t for t in spec.fail_to_pass if passed(t) == f2p_fails]
        if wrong:
            state = "already pass" if f2p_fails else "do not pass"
            out.append(f"FAIL_TO_PASS tests {state} at {name} {ref[:12]} ({len(wrong)}): {', '.join(wrong[:3])}")
        broken = [t for t in spec.pass_to_pass if not passed(t)]
        if broken:
            out.append(f"PASS_TO_PASS tests do not pass at {name} {ref[:12]} ({len(broken)}): {', '.join(broken[:3])}")
    return out


def pytest_config(start: Mapping[str, str], tests: Sequence[str]) -> str:
    """The file pytest reads its configuration from when the task's tests are run from the repository's root, found
    by pytest's own search (`_pytest.config.findpaths.locate_config`: `pytest.toml`, `.pytest.toml`, `pytest.ini`,
    `.pytest.ini`, a `pyproject.toml`, `tox.ini` or `setup.cfg` with a pytest section, from the tests' directory up);
    "pytest.ini" when there is none (the runner's default, which puts the root on the path). The verifier runs the tests
    with it, so a repository configured in `pyproject.toml` (`filterwarnings = error`, `pythonpath = src`, ...) is
    tested as its own `python -m pytest` tests it (a hundred-and-forty-fifth attacker's fix raised a warning the
    repository's configuration makes an error, and was accepted where pytest failed every test)."""
    from _pytest.config.findpaths import locate_config

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for path, text in start.items():
            if path.rsplit("/", 1)[-1] in PYTEST_CONFIGS:
                (root / path).parent.mkdir(parents=True, exist_ok=True)
                (root / path).write_text(text)
        args = [root / t.split("::", 1)[0] for t in tests]
        for arg in args:
            arg.parent.mkdir(parents=True, exist_ok=True)
            arg.touch()
        _, found, _, _ = locate_config(root, args)
        return found.relative_to(root).as_posix() if found is not None else "pytest.ini"


def _family_version() -> str:
    return FAMILY_VERSION


def repository_files(task: TaskSpec) -> dict[str, str]:
    return files_at(Path(task.metadata["repository"]), task.metadata["commit"])


TEST_DIRECTORIES = frozenset({"tests", "test"})
# where pytest's configuration, and so its rootdir and the conftests it loads, come from: its configuration files, and
# without one, the nearest `setup.py` above the tests (a hundred-and-forty-eighth attacker's new `testing/setup.py`
# moved a real pytest run's rootdir past the root conftest, which the verifier still loaded: accepted 0.97-0.98)
ROOTDIR_FILES = PYTEST_CONFIGS | {"setup.py"}


def test_side_globs(test_files: Sequence[str], tests: Sequence[str]) -> tuple[str, ...]:
    """The globs of a task's test-side files beyond the conventional ones: its `test_files`, and each file its tests'
    node ids name (`shapes/tests.py` of `shapes/tests.py::test_x`, under a `python_files` the configuration sets): a
    hundred-and-fifty-eighth attacker changed only the expected value in such a file, the bug kept, and was accepted
    1.0 on 3 of 3 layouts (`shapes/tests.py`, `checks/util_tests.py`, `spec/clamp_spec.py`)."""
    return (*test_files, *sorted({glob.escape(t.split("::", 1)[0]) for t in tests}))


def task_test_globs(metadata: Mapping[str, Any]) -> tuple[str, ...]:
    """`test_side_globs` of a repository task's metadata."""
    return test_side_globs(metadata.get("test_files") or (), [*metadata["fail_to_pass"], *metadata["pass_to_pass"]])


def is_test_or_config(path: str, test_files: Sequence[str] = ()) -> bool:
    """Test-side: a test file; a file pytest reads its configuration from (any of them, anywhere: a
    hundred-and-thirty-seventh attacker's new `.pytest.toml`, which pytest 9 reads first, put a buggy copy on the
    workspace's path while the verifier restored the task's configuration: accepted on 3 of 3 repositories); any file
    under a directory named `tests` or `test`, at any depth (a test's data and helpers: a hundred-and-forty-fifth
    attacker changed only the expected value in `shapes/tests/data/cases.json`, the bug kept, and was accepted 1.0 on
    3 of 3 repositories); and any path matching one of the globs `test_files` (a task's: `test_side_globs`, its own
    and the files its tests' node ids name). The verifier restores these from the commit, and a change to one is
    tampering."""
    parts = path.split("/")
    return (is_test_path(path) or parts[-1] in ROOTDIR_FILES or any(p in TEST_DIRECTORIES for p in parts[:-1])
            or any(fnmatch.fnmatchcase(path, pattern) for pattern in test_files))


# the test job's deadline, with the runner's 15 s grace, stays under the verifier service's: code that hangs fails
# its tests (the agent's failure) instead of timing the verification out (an infrastructure error, no reward; an
# independent attacker's `time.sleep` did that when this was 120 s)
VERIFY_TIMEOUT_S = DEFAULT_TIMEOUT_S - 20


class Prepared(BaseModel):
    """What verifying any final state of a repository task needs, none of it from the state."""

    start: dict[str, str]  # the commit's files
    config: str  # the file pytest reads the tests' configuration from (`pytest_config`)
    needed: int | None  # lines the known fix changes (None: no known fix)
    reference: dict[str, str]  # the source the fix may read the process as: the known fix's files, else the commit's


_PREPARED: dict[str, Prepared] = {}  # by task id
MAX_PREPARED = 8  # repositories held at once (thousands of files each)


def prepare_repository_task(task: TaskSpec) -> Prepared:
    """What verifying any final state of repository task `task` needs first, none of it from the state: the files of
    its commit (checked against the task's digest), the lines its known fix changes, and the known fix's source (the
    reference of the process-read rule). Kept per process. The verifier service runs it before the state's verification (`checks.prepare`), outside the state's
    limits: a hundred-and-twenty-sixth attacker's hanging code on a task of 3,600 files spent the task's own reads
    (one `git show` per file, twice) and its 40 s test deadline in one 60 s verification, which timed out into an
    infrastructure error (2 of 2; the null agent on the same task scored 0)."""
    if task.id in _PREPARED:
        return _PREPARED[task.id]
    start = repository_files(task)
    _, digest = pristine_repo(start)
    if digest != task.start_state.digest:
        raise RuntimeError(f"repository {task.metadata['repository']} at {task.metadata['commit'][:12]} no longer "
                           f"matches the task (digest {digest}, task {task.start_state.digest})")
    solution = task.metadata.get("solution_commit")
    needed, reference = None, dict(start)
    if solution:  # what the known fix changes is what a fix needs
        after = files_at(Path(task.metadata["repository"]), solution)
        fixed = [p for p in set(start) | set(after)
                 if start.get(p) != after.get(p) and not is_test_or_config(p, task_test_globs(task.metadata))]
        needed = sum(changed_lines(start.get(p) or "", after.get(p) or "") for p in fixed)
        reference.update({p: after.get(p) or "" for p in fixed})
    if len(_PREPARED) >= MAX_PREPARED:
        _PREPARED.pop(next(iter(_PREPARED)))
    tests = [*task.metadata["fail_to_pass"], *task.metadata["pass_to_pass"]]
    _PREPARED[task.id] = prepared = Prepared(start=start, config=pytest_config(start, tests), needed=needed,
                                             reference=reference)
    return prepared


# names the warm runner holds before any job (the standard library's, pytest's and its dependencies'): a pytest run of
# the workspace, root first on the path, imports the workspace's module of such a name where the runner has its own
RUNNER_NAMES = (frozenset(sys.stdlib_module_names) | {"pytest", "_pytest", "pluggy", "iniconfig", "packaging",
                                                       "pygments", "py"}) - {"test"}


def own_modules(start: Mapping[str, str]) -> frozenset[str]:
    """The root modules and regular packages of the commit (`x.py`, `x/__init__.py`): a data directory is none."""
    return frozenset(module_name(p) if "/" not in p else p.split("/", 1)[0] for p in start
                     if p.endswith(IMPORTABLE) and ("/" not in p or (p.count("/") == 1 and
                                                                    module_name(p.split("/")[1]) == "__init__")))


def workspace_runs_what_is_graded(tree: Tree, start: Mapping[str, str], test_files: Sequence[str] = ()) -> None:
    """Raise UngradableState where a pytest run of the workspace would run other code than the verifier's job holds.

    The job holds the final state's non-test files that read as UTF-8 text and the commit's test-side files, and its
    runner imported pytest (and with it much of the standard library) before the job existed. So, for each importable
    file (`.py`, `.pyw`, `.pyc`, an extension) or link the commit lacks or that changed:
    - it must be a regular UTF-8 file the snapshot reads whole, read by the interpreter as that text (a
      hundred-and-forty-fifth attacker's Latin-1 `shapes/util/__init__.py`, imported in place of the fixed
      `shapes/util.py`, was left out of the job: accepted 1.0 on 4 of 4 repositories);
    - it must not be under a root name the runner holds before the job (`RUNNER_NAMES`), whatever the commit has there
      (the same attacker's root `pprint.py`, which pytest imports from the root first, put the bug back: 0.905 on 4 of
      4; a hundred-and-forty-eighth added `locale/__init__.py` beside the commit's `locale/` translations: 0.957 on
      3 of 3), nor under another library's name or one a pytest run asks for (`workspace_rules.library_names`) that is not a root module or
      regular package of the commit's own (`own_modules`).
    Test-side files are restored from the commit, and a change to one is tampering, so they are not looked at here."""
    # a new `__init__.py` at the root makes the checkout's directory a package, named wherever it is checked out, which
    # graded code reads as its `__name__` (a hundred-and-sixty-third attacker's root `__init__.py` put the bug back
    # where the name was not the verifier's `job`: accepted 0.96 on 3 of 3 layouts, pytest failing FAIL_TO_PASS)
    for path in sorted({*tree.files, *tree.symlinks, *tree.special}):
        if "/" not in path and module_name(path) == "__init__" and path.endswith(IMPORTABLE) and path not in start:
            raise UngradableState(f"{path} makes the repository's directory a package, whose name is wherever it is "
                                  "checked out: the verifier cannot run it as every checkout would")
    shadowed = RUNNER_NAMES | (library_names() - own_modules(start))
    for path in sorted({*tree.files, *tree.symlinks, *tree.special}):
        if is_test_or_config(path, test_files) or (path in start and tree.kind(path) == "file"
                                                   and tree.files.get(path) == start[path]):
            continue
        importable = path.endswith(IMPORTABLE)
        top = path.split("/", 1)[0]
        if module_name(top) in shadowed and (importable or tree.kind(path) == "symlink"):
            raise UngradableState(f"{path} would be imported as part of {module_name(top)!r} by a pytest run of the "
                                  "tests, in place of the library module the verifier runs")
        text = tree.files.get(path) if tree.kind(path) == "file" and path not in tree.digests else None
        if text is None:  # the job holds text files: any other would be missing there, or be a placeholder text
            # (a hundred-and-sixty-fifth attacker's binary `units.bin`, beside code that reads its data files, put the
            # bug back where it opened: accepted 0.967 on 3 of 3 layouts, pytest failing FAIL_TO_PASS)
            raise UngradableState(f"{path} {'can be imported, and ' if importable else ''}is not a regular UTF-8 text "
                                  f"file of at most {MAX_TEXT_BYTES:,} bytes: the verifier cannot run the tests with "
                                  "it as the workspace would")
        if not importable:
            continue
        if path.endswith((".py", ".pyw")):
            read_as_the_interpreter_reads(path, text)


def source_roots(start: Mapping[str, str]) -> tuple[str, ...]:
    """Top-level directories that are no package but hold one (`src/shapes/__init__.py`): a src layout, whose packages
    the repository's configuration puts on the path and its code imports by their own names."""
    tops = {p.split("/", 1)[0] for p in start if "/" in p}
    return tuple(sorted(d for d in tops if f"{d}/__init__.py" not in start and d not in TEST_DIRECTORIES
                        and any(p.startswith(f"{d}/") and p.count("/") == 2 and p.endswith("/__init__.py")
                                for p in start)))


def _process_reads_as_imported(sources: dict[str, str], start: Mapping[str, str],
                               reference: Mapping[str, str]) -> list[str]:
    """`changed_modules_process_reads` with each file named as its module is imported: under a source root
    (`source_roots`) without the root, so `from shapes.other import top` in `src/shapes/util.py` is the own import it is
    (read through as one), not a foreign module's (an honest src-layout fix importing a sibling was a violation). The
    phrases name the files' own paths. Unchanged when two files would be one module."""
    roots = source_roots(start)

    def imported_as(path: str) -> str:
        root = next((r for r in roots if path.startswith(f"{r}/")), None)
        return path[len(root) + 1:] if root is not None else path
    paths = set(sources) | set(start) | set(reference)
    if len({imported_as(p) for p in paths}) < len(paths):
        roots = ()
    back = {imported_as(p): p for p in paths}
    graded, before, known = ({imported_as(p): t for p, t in files.items()} for files in (sources, start, reference))
    own = frozenset(module_name(p.split("/", 1)[0]) for p in before)
    reads = changed_modules_process_reads(graded, dict[str, str | None](before), known, own)
    return [f"{back.get(path, path)} {phrase}" for path, _, phrase in (r.partition(" ") for r in reads)]


def verify_repository_task(task: TaskSpec, final_state_path: Path) -> CheckResult:
    """Final non-test files + the commit's own test-side files, run with pytest on FAIL_TO_PASS and PASS_TO_PASS.
    Raises UngradableState when the verifier cannot run the final state as the workspace would
    (`workspace_runs_what_is_graded`)."""
    prepared = prepare_repository_task(task)
    start, needed = prepared.start, prepared.needed
    test_files = task_test_globs(task.metadata)
    tree = scan_tree(Path(final_state_path))
    workspace_runs_what_is_graded(tree, start, test_files)
    final = tree.as_text()
    job = verifier_view(start, final, test_files)
    f2p, p2p = task.metadata["fail_to_pass"], task.metadata["pass_to_pass"]
    # a changed or new module that reads the process it runs in (its pid, frames, environment...) where the known fix
    # does not is a defeat device (`introspection`): a hundred-and-forty-fifth attacker's `os.getpid() == 1` (the
    # verifier's per-test process) took the fix there only, accepted 0.94-0.97 on 4 of 4 repositories. Read before the
    # tests run, so its bounded time (READ_BUDGET_S) and the tests' deadline stay inside the service's wall-clock limit
    sources = {p: t for p, t in job.items() if p.endswith(".py") and not is_test_or_config(p, test_files)}
    reads = _process_reads_as_imported(sources, start, prepared.reference)
    # one pytest session, as `python -m pytest <ids>` runs them: what the code keeps between calls carries from test
    # to test there too (in a process per test, a hundred-and-forty-eighth attacker's fix right only on a process's
    # first call was accepted 0.967 on 4 of 4 repositories, pytest failing every FAIL_TO_PASS test but the first)
    # under the key's hash seed, as generated tasks' graded code runs (`drawkey.keyed_hash`): every sandbox's is 0, which
    # the agent reads in its own (`hash('x') == <its value there>`: a hundred-and-fifty-eighth attacker took the fix
    # only there, accepted 0.97 on 3 of 3 layouts, pytest under a random seed failing FAIL_TO_PASS)
    with keyed_hash():
        seed = graded_hash_seed()
    # in a directory named as the repository's checkout is: a root `__init__.py` makes it a package of that name
    # in the order `python -m pytest` runs them, not FAIL_TO_PASS first: a fix right only for the calls the listed
    # FAIL_TO_PASS tests make first was accepted 0.967 on 2 of 2 repositories (a hundred-and-sixty-seventh attacker),
    # the task's own test command failing a FAIL_TO_PASS test
    run = shared_runner().run(job, [*f2p, *p2p], timeout=VERIFY_TIMEOUT_S, conftest=True, config=prepared.config,
                              path_first=True, directories=tree.directories, hash_seed=seed,
                              job_name=Path(task.metadata["repository"]).name, collection_order=True)
    changed = sorted(p for p in set(start) | set(final) if start.get(p) != final.get(p))
    tests = [p for p in changed if is_test_or_config(p, test_files)]
    source_changed = sum(changed_lines(start.get(p) or "", final.get(p) or "") for p in changed if p not in tests)
    edits = EditFacts(source_lines_changed=source_changed,
                      lines_needed=needed if needed is not None else source_changed,  # no known fix: no basis for a penalty
                      test_files_changed=tests, other_files_changed=[])
    edits.process_reads = reads
    return grade(run, f2p, p2p, [], edits)
