"""Registered repositories (issue 18): a real package from the index, registered once and cached (its sdist is
fetched with pip on the first run on a machine; CI has index access), tasks synthesized from it, and every
generated task run through the real environment, sandbox and verifier: the oracle accepted, the null agent and
a sample of the code family's exploit agents not. Refusals use small local packages written here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gymsmith.agents.base import NullAgent
from gymsmith.core.types import Split
from gymsmith.families.code import mutate
from gymsmith.families.code.env import code_task
from gymsmith.families.code.exploits import EXPLOITS
from gymsmith.families.code.oracle import CodeOracle
from gymsmith.families.code.realtests import reduce_module
from gymsmith.verifier.calltests import compile_suite
from gymsmith.families.code.repotasks import Repo, body_removals, load_repo
from gymsmith.core.errors import NoTaskForSeed
from gymsmith.registry import get_family
from gymsmith.repos import add_repo, find_repo
from gymsmith.runner.rollout import run_rollout
from gymsmith.verifier import VerifierService
from conftest import register_test_repos

INDEXED = "inflection==0.5.1"  # registered from the package index: small, pure Python, a self-contained pytest suite
# Tasks come from a small package of our own (tests/data/ledgerkit, registered from its path): its tests expect
# computed values an agent cannot read (docs/verifier.md property 12), which few tests of real packages do (the
# pinned counts per package are in docs/repos.md), and its mutants run in milliseconds.
PACKAGE = "ledgerkit==0.1"
LEDGERKIT = Path(__file__).with_name("data") / "ledgerkit"
# tests/data/codekit: none of its tests pins a value (each code a test expects, another test decodes), so its bugs
# keep only variant hidden tests (repovariants), on integers its tests' calls are given
VARIANT_ONLY = "codekit==0.1"
CODEKIT = Path(__file__).with_name("data") / "codekit"
# tests/data/textkit: its tests give their calls only text, so its variants move texts (a digit, a word)
TEXT_ONLY = "textkit==0.2"  # 0.2: fold_accents, whose tests hold no accent
TEXTKIT = Path(__file__).with_name("data") / "textkit"
# the exploits that reach a package's code (the test-runner ones are test_code_agents.py's, whose judge is the same)
EXPLOIT_SAMPLE = ("always_equal", "read_hidden_tests", "hardcode_outputs", "memorized_suite")


def _generate(family, seed: int, **knobs):
    """The family's task for `seed`, or for the next seed that makes one (as task sets do: a seed whose keyed draw
    finds no hidden variant for some bug makes no task, `NoTaskForSeed`)."""
    for tried in range(seed, seed + 1000, 100):
        try:
            return family.generate(tried, **knobs)
        except NoTaskForSeed:
            continue
    raise AssertionError(f"no task for seeds {seed}, {seed + 100}, ... with {knobs}")


@pytest.fixture(scope="module")
def repos(monkeypatch_module) -> Path:
    return register_test_repos(monkeypatch_module, ((INDEXED, None), (PACKAGE, LEDGERKIT), (VARIANT_ONLY, CODEKIT),
                                                    (TEXT_ONLY, TEXTKIT)))


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_registration_records_a_reliable_suite_and_call_checks(repos):
    _, m = find_repo(INDEXED)
    assert m.baseline.runs == 3 and len(m.baseline.suite_seconds) == 3
    assert m.baseline.reliable and not set(m.baseline.reliable) & set(m.baseline.flaky)
    assert m.call_tests() >= 4 and all(s.tests for s in m.call_suites)
    assert m.source_files and all(not f.rsplit("/", 1)[-1].startswith("test_") for f in m.source_files)
    listed = CliRunner().invoke(__import__("gymsmith.cli", fromlist=["app"]).app, ["repos", "list", "--json"])
    assert listed.exit_code == 0 and INDEXED in listed.stdout and PACKAGE in listed.stdout


def _local(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize("files,message", [
    ({"fast/__init__.py": "", "fast/_speed.c": "int x;\n", "tests/test_fast.py": "def test_x():\n    assert 1\n"},
     "has native extensions"),
    ({"fast/__init__.py": "def f():\n    return 1\n"}, "ships no test files"),
    ({"fast/__init__.py": "def f():\n    return 1\n",
      "tests/test_fast.py": "from fast import f\n\ndef test_f():\n    assert f() == 2\n"}, "does not pass in the sandbox"),
])
def test_packages_that_cannot_be_registered_are_refused_in_one_line(tmp_path, files, message):
    result = CliRunner().invoke(__import__("gymsmith.cli", fromlist=["app"]).app,
                                ["repos", "add", "fast==0.1", "--path", str(_local(tmp_path, files)),
                                 "--repos-dir", str(tmp_path / "repos")])
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]  # the rest is progress
    assert result.exit_code == 2 and len(errors) == 1 and message in errors[0], result.stderr
    assert not list((tmp_path / "repos").glob("fast*")), "a refused package left something registered"


def test_package_data_is_carried_and_a_test_file_that_cannot_be_imported_fails_alone(tmp_path):
    """A package that reads a data file at import registers (its data is recorded and ships in the tree), and a
    test file importing something the sdist lacks is one failing entry instead of stopping the whole suite."""
    files = {"pkg/__init__.py": "import pkgutil\nNAME = pkgutil.get_data(__name__, 'NAME.txt').decode().strip()\n"
                                "def shout():\n    return NAME.upper() + '!'\n",
             "pkg/NAME.txt": "quokka\n",
             "tests/test_pkg.py": "from pkg import shout\n\n" + "".join(
                 f"def test_shout_{i}():\n    assert shout() == 'QUOKKA!'\n\n" for i in range(12)),
             "tests/test_cli.py": "import pkg.cli_that_is_not_shipped\n\ndef test_cli():\n    assert 1\n",
             # a class's tests are reported as tests/test_cls/TestShout.py::...: still counted as collected
             "tests/test_cls.py": "from pkg import shout\n\nclass TestShout:\n    def test_it(self):\n"
                                  "        assert shout() == 'QUOKKA!'\n"}
    m = add_repo("pkg==0.1", path=_local(tmp_path, files), repos_dir=tmp_path / "repos")
    assert m.data_files == ["pkg/NAME.txt"]
    assert (tmp_path / "repos" / "pkg-0.1" / "tree" / "pkg" / "NAME.txt").read_text() == "quokka\n"
    assert m.baseline.collected == 14 and len(m.baseline.reliable) == 13
    assert m.baseline.failing == ["tests/test_cli.py (not collected)"]
    assert m.call_tests() == 13
    app = __import__("gymsmith.cli", fromlist=["app"]).app
    where = ["--repos-dir", str(tmp_path / "repos")]
    removed = CliRunner().invoke(app, ["repos", "remove", "pkg==0.1", *where])
    assert removed.exit_code == 0 and "removed pkg==0.1" in removed.stderr
    assert not list((tmp_path / "repos").iterdir())
    again = CliRunner().invoke(app, ["repos", "remove", "pkg==0.1", *where])
    assert again.exit_code == 2 and again.stderr.count("\n") == 1 and "is not registered" in again.stderr


def test_a_test_that_needs_the_package_in_its_own_process_is_not_used(tmp_path, monkeypatch):
    """Call checks run the test's statements in a process that never imports the package (docs/verifier.md,
    property 4), so a test that pickles a package object passes under pytest but not as a call check: registration
    leaves it out, and a package registered by an earlier gymsmith (whose manifest lists it) has it dropped when
    loaded, from its call checks and from the hidden tests its tasks run."""
    files = {"pkg/__init__.py": "class Thing:\n    def __init__(self, n):\n        self.n = n\n\n"
                                "    def twice(self):\n        return self.n * 2\n",
             "tests/test_pkg.py": "import pickle\n\nfrom pkg import Thing\n\n\ndef test_twice():\n    assert Thing(21).twice() == 42\n"
                                  "\n\ndef test_pickled():\n    assert len(pickle.dumps(Thing(1))) > 10\n"}
    root = tmp_path / "repos"
    m = add_repo("pkg==0.1", path=_local(tmp_path, files), repos_dir=root)
    assert len(m.baseline.reliable) == 2  # pytest runs both
    assert [s.tests for s in m.call_suites] == [["test_twice"]]
    # as an earlier gymsmith registered it: both tests listed as call checks
    manifest = root / "pkg-0.1" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["call_suites"][0]["tests"] = ["test_twice", "test_pickled"]
    data["call_suites"][0]["source"] = files["tests/test_pkg.py"]
    manifest.write_text(json.dumps(data))
    monkeypatch.setenv("GYMSMITH_REPOS", str(root))
    repo = Repo("pkg==0.1")
    try:
        assert [t.name for t in repo.suites["tests/test_pkg.py"].tests] == ["test_twice"]
        assert "test_pickled" not in repo.call_sources["tests/test_pkg.py"]
        assert "test_twice" in repo.call_sources["tests/test_pkg.py"]
    finally:
        repo.close()


def test_parametrized_tests_become_one_call_check_per_case_and_unsupported_ones_are_dropped():
    """One test per parametrize case; a TestCase method without set-up as a top-level test; loops dropped."""
    source = ("import pytest\nfrom m import f\n\n@pytest.mark.parametrize('x,y', [(1, 2), (3, 4)])\ndef test_p(x, y):\n"
              "    assert f(x) == y\n\ndef test_loop():\n    for i in range(3):\n        assert f(i)\n\n"
              "class TestC:\n    def test_m(self):\n        assert 1\n")
    text, dropped = reduce_module(source, "tests/test_m.py")
    assert "def test_p__case0" in text and "def test_p__case1" in text and "test_loop" not in text and dropped == 1
    assert "def test_TestC__test_m" in text  # a TestCase-style method that needs no set-up


def test_body_removal_keeps_the_docstring_and_works_at_the_end_of_a_file():
    source = 'def f(x):\n    """Doc."""\n    y = x + 1\n    return y\n'
    [m] = body_removals(source)
    assert mutate.apply(source, [m]) == 'def f(x):\n    """Doc."""\n    raise NotImplementedError\n'


def test_template_tasks_are_unchanged_by_the_source_knob():
    family = get_family("code")
    task = family.generate(3, difficulty=0.4)
    assert "source" not in task.knobs and family.generate(3, difficulty=0.4, source="templates").id == task.id


def test_repository_tasks_oracle_accepted_null_and_exploits_not(repos):
    family = get_family("code")
    tasks = [_generate(family, seed, source=spec, difficulty=d)
             for spec, seed, d in ((PACKAGE, 0, 0.1), (PACKAGE, 1, 0.9), (VARIANT_ONLY, 0, 0.5), (TEXT_ONLY, 0, 0.5))]
    agents = [CodeOracle, NullAgent, *[e for e in EXPLOITS if e.name.removeprefix("exploit:") in EXPLOIT_SAMPLE]]
    assert len(agents) == 2 + len(EXPLOIT_SAMPLE)
    env = family.make_env()
    try:
        with VerifierService() as verifier:
            for task in tasks:
                ct = code_task(task)
                assert ct.fail_to_pass and ct.buggy_modules
                assert set(ct.buggy_modules) <= set(find_repo(task.knobs["source"])[1].source_files)
                for agent in agents:
                    r = run_rollout(env=env, agent=agent(), task=task, split=Split.TRAIN, seed=0, run_id="repos",
                                    verifier=verifier, policy="progress_gated", max_steps=30, time_limit_s=300).reward
                    if agent is CodeOracle:
                        assert r.accepted and r.value == 1.0, (task.id, r)
                    else:
                        assert not r.accepted and r.value == 0.0, (agent.name, task.id, r)
    finally:
        env.close()


def test_the_start_state_has_the_bug_and_no_history(repos):
    family = get_family("code")
    task = family.generate(2, source=PACKAGE, difficulty=0.5)
    ct = code_task(task)
    env = family.make_env()
    try:
        env.reset(task, seed=0)
        root = env.workspace.path
        log = subprocess.run(["git", "-C", str(root), "log", "--oneline"], capture_output=True, text=True).stdout
        assert len(log.splitlines()) == 1
        for path in ct.buggy_modules:
            assert (root / path).read_text() != ct.reference[path]
    finally:
        env.close()


def test_run_tests_runs_the_suite_as_registration_did_whatever_conftest_imports(repos):
    """A package's conftest.py may import files its sdist does not carry into the task (semver's imports helpers
    from its docs/ folder): pytest then stops with exit 4 before any test, and the agent's test tool told it
    nothing. The tool runs the tests as registration judged them, without conftests."""
    from gymsmith.core.types import Action

    family = get_family("code")
    task = family.generate(2, source=PACKAGE, difficulty=0.5)
    env = family.make_env()
    try:
        env.reset(task, seed=0)
        env.step(Action(tool="write_file", arguments={"path": "conftest.py",
                                                       "content": "import helper_only_in_the_sdist_docs\n"}))
        obs = env.step(Action(tool="run_tests", arguments={})).observation
        assert obs.data["exit_code"] == 1, obs.text[:2000]  # the shown failing tests fail; none is skipped by an error
        assert "failed" in obs.text and "ModuleNotFoundError" not in obs.text
    finally:
        env.close()


def test_a_task_rebuilds_identically_from_the_disk_catalog(repos):
    """The verifier process rebuilds a task from the seed: with a fresh in-memory state it must get the same one."""
    from gymsmith.families.code import repotasks

    family = get_family("code")
    first = family.generate(5, source=PACKAGE, difficulty=0.6)
    repotasks._repos.clear()  # as a new process would start
    assert family.generate(5, source=PACKAGE, difficulty=0.6).id == first.id


def test_every_bug_keeps_a_hidden_failing_test_and_bugs_fail_disjoint_tests(repos):
    """Passing what was shown never proves a fix: each bug fails at least two test functions and one stays hidden
    (a bug whose only failing test was shown could be 'fixed' by special-casing its inputs, and accepted)."""
    from gymsmith.families.code.repotasks import test_key

    family = get_family("code")
    for seed in range(6):
        ct = code_task(_generate(family, seed, source=PACKAGE, difficulty=seed / 6))
        assert ct.bug_tests and sorted(sum(ct.bug_tests, [])) == sorted(ct.fail_to_pass)  # disjoint, covering
        for tests in ct.bug_tests:
            assert len({test_key(n) for n in tests}) >= 2
            assert set(tests) - set(ct.visible_failing), (seed, tests)


def test_every_bug_keeps_a_pinned_hidden_failing_test(repos):
    """No forger passes a bug's tests by reporting values it can know: each bug keeps hidden a failing test every
    check of which needs a value that is not in the task's test files, nor in the driver beside the agent's code,
    nor in any test file of the release (public: a policy may have memorised the whole suite), recomputed here with
    `guessing.pinned`; only such tests earn progress, and only variants are."""
    from gymsmith.families.code.repotasks import _candidates_of, public_candidates
    from gymsmith.verifier.calltests.guessing import Candidates, pinned

    family = get_family("code")
    repo = load_repo(PACKAGE)
    for seed in range(6):
        ct = code_task(_generate(family, seed, source=PACKAGE, difficulty=seed / 6))
        shown = Candidates.merged(public_candidates(repo),
                                  *(_candidates_of(t) for p, t in ct.files.items() if p.startswith("test") or "/test" in p))
        for tests in ct.bug_tests:
            kept = set(tests) - set(ct.visible_failing)
            assert kept & set(ct.pinned_tests), (seed, tests)
            for nodeid in kept & set(ct.pinned_tests):
                path = nodeid.split("::")[0]
                suite = compile_suite(ct.hidden_tests[path], path)  # the task's hidden file: variants included
                test = suite.tests[suite.nodeids().index(nodeid)]
                assert pinned(test, Candidates.merged(shown, _candidates_of(suite.driver))), nodeid
    assert repo.suites  # loaded


def test_every_bug_keeps_hidden_sides_the_reference_passes_and_the_bug_fails(repos):
    """Sides (`repovariants.sides`): hidden tests on a bug's failing calls given wild values, other types, corners or
    calls next to the public ones, where no proving variant goes; a repair right only where the proving moves reach
    passed every variant (attacker 50, on templates). Each side gates (it is among its bug's FAIL_TO_PASS tests),
    earns nothing (not pinned), passes on the reference and fails on the start state (the bugs), in the real sandbox;
    most bugs keep some, and some are wild (ledgerkit takes numbers, which wild values make floats)."""
    from gymsmith.families.code.repotasks import repo_run_hidden
    from gymsmith.families.code.repovariants import PREFIX, SIDE
    from gymsmith.verifier.pytest_runner import TestOutcome

    family = get_family("code")
    bugs = with_sides = 0
    kinds: set[str] = set()
    for seed in range(4):
        ct = code_task(_generate(family, seed, source=PACKAGE, difficulty=seed / 4))
        side_ids = {n for tests in ct.bug_tests for n in tests if f"::{PREFIX}{SIDE}" in n}
        assert not side_ids & set(ct.pinned_tests) and side_ids <= set(ct.fail_to_pass), seed
        bugs += len(ct.bug_tests)
        with_sides += sum(bool(set(tests) & side_ids) for tests in ct.bug_tests)
        kinds |= {n.split(SIDE)[1].rsplit("_", 1)[0] for n in side_ids}
        right, _ = repo_run_hidden(PACKAGE, ct.reference, ct.hidden_tests)
        start, _ = repo_run_hidden(PACKAGE, {p: ct.files[p] for p in ct.reference}, ct.hidden_tests)
        assert all(right.outcome(n) is TestOutcome.PASSED for n in side_ids), (seed, sorted(side_ids))
        assert all(start.outcome(n) is TestOutcome.FAILED for n in side_ids), (seed, sorted(side_ids))
    assert with_sides >= bugs * 3 // 4 and "wild" in kinds, (with_sides, bugs, kinds)


def _emitted_only(reference: str, buggy: str, chars: str) -> str:
    """Attacker 50's repair, for a package module: the reference, with each function the bug changed answered by the
    reference only when every argument is a value the proving moves can emit (ints, floats whole or halves, texts of
    `chars`, containers of those), by the buggy function otherwise."""
    import ast

    fixed = {n.name: ast.dump(n) for n in ast.parse(reference).body if isinstance(n, ast.FunctionDef)}
    out = reference.rstrip() + f"""


_gs_chars = frozenset({chars!r})


def _gs_emitted(value, depth=0):
    if type(value) in (int, bool) or value is None:
        return True
    if type(value) is float:
        return (value * 2).is_integer()
    if type(value) is str:
        return all(ch in _gs_chars for ch in value)
    if type(value) in (list, tuple, set, frozenset):
        return depth > 20 or all(_gs_emitted(v, depth + 1) for v in value)
    if type(value) is dict:
        return depth > 20 or all(_gs_emitted(k, depth + 1) and _gs_emitted(v, depth + 1) for k, v in value.items())
    return False
"""
    for node in ast.parse(buggy).body:
        if isinstance(node, ast.FunctionDef) and node.name in fixed and ast.dump(node) != fixed[node.name]:
            name = node.name
            node.name = f"_gs_bug_{name}"
            out += (f"\n\n{ast.unparse(node)}\n\n\n_gs_ref_{name} = {name}\n\n\ndef {name}(*args, **kwargs):\n"
                    f"    chosen = _gs_ref_{name} if _gs_emitted(args) and _gs_emitted(kwargs) else _gs_bug_{name}\n"
                    f"    return chosen(*args, **kwargs)\n")
    return out


def test_a_repair_right_only_on_what_the_moves_emit_fails_a_side_of_a_package(repos):
    """Attacker 50's class on a registered package: the reference wherever every argument is a value the proving
    moves can emit, the bug elsewhere. It passes every public test and every proving variant of the task (its
    repair is right wherever they go: before sides it was accepted), and fails a side on at least two in three of
    the tasks (4 of 6 under the suite's key when written, 0 of 6 with sides off: a bug that shows on no value a side
    draws, ledgerkit's text parser under a float, say, is not caught)."""
    import string

    from gymsmith.families.code.repotasks import repo_run_hidden
    from gymsmith.families.code.repovariants import FOREIGN, PREFIX, RETYPE_CHARS, SIDE
    from gymsmith.verifier.pytest_runner import TestOutcome

    repo = load_repo(PACKAGE)
    chars = set(string.printable) | set(FOREIGN) | set(RETYPE_CHARS) | set("".join(repo.call_sources.values()))
    chars |= {c.swapcase() for c in list(chars) if len(c.swapcase()) == 1}
    family = get_family("code")
    caught = shown = 0
    for seed in range(6):
        ct = code_task(_generate(family, seed, source=PACKAGE, difficulty=seed / 6))
        sources = {p: _emitted_only(ct.reference[p], ct.files[p], "".join(sorted(chars))) if ct.files[p] != ct.reference[p]
                   else ct.reference[p] for p in ct.reference}
        run, _ = repo_run_hidden(PACKAGE, sources, ct.hidden_tests)
        proving = [n for n in [*ct.fail_to_pass, *ct.pass_to_pass] if f"::{PREFIX}{SIDE}" not in n]
        assert all(run.outcome(n) is TestOutcome.PASSED for n in proving), (seed, "the wrapper is no repair here")
        sides = [n for n in ct.fail_to_pass if f"::{PREFIX}{SIDE}" in n]
        if any(run.outcome(n) is not TestOutcome.PASSED for n in sides):
            caught += 1
        shown += 1
    assert shown == 6 and caught * 3 >= shown * 2, (caught, shown)


def test_each_task_asks_the_bugs_tests_on_inputs_of_its_own(repos):
    """The hidden tests a bug keeps recur in every task of its package; variant tests (repovariants) move the
    integers a failing test's calls are given, seeded by the task, with expected values from the reference. Each is
    a hidden FAIL_TO_PASS test of its bug, pinned, absent from the start state, and the tasks do not share them
    (sides, which gate only, are checked by the test above)."""
    from gymsmith.families.code.repovariants import PREFIX, SIDE

    family = get_family("code")
    bodies = []
    for seed in range(6):
        ct = code_task(_generate(family, seed, source=PACKAGE, difficulty=seed / 6))
        mine = [n for n in ct.fail_to_pass if n.split("::")[1].startswith(PREFIX) and SIDE not in n]
        assert set(mine) <= set(ct.pinned_tests) and set(mine) <= set().union(*map(set, ct.bug_tests))
        assert not set(mine) & set(ct.visible_failing)
        assert not any(PREFIX in text for text in ct.files.values())
        for nodeid in mine:
            path, name = nodeid.split("::")
            source = ct.hidden_tests[path]
            body = source[source.index(f"def {name}():"):].split("\n\n\n")[0]
            bodies.append(body.split(":", 1)[1])
    assert len(bodies) >= 6 and len(set(bodies)) >= len(bodies) * 3 // 4, bodies

def test_a_package_with_no_pinned_test_is_refused_in_one_line(repos, monkeypatch):
    """A package none of whose tests' calls take an integer or a text a variant could move can give no bug a hidden
    test that proves a fix: asking for its tasks is a knob error naming the source, not a traceback."""
    from gymsmith.core.errors import KnobError

    repo = load_repo(PACKAGE)
    monkeypatch.setattr(repo, "variable", set())
    with pytest.raises(KnobError, match=f"source={PACKAGE}: none of its call-check tests gives its calls integers or text"):
        get_family("code").generate(0, source=PACKAGE)


def test_a_package_whose_calls_take_only_text_keeps_variants_on_moved_texts(repos):
    """textkit's tests give their calls only text. Each bug keeps hidden a variant whose input is a text of its
    tests moved (under the verifier's key: two to four characters edited; the seeded draw that decides the task
    changes a digit or swaps a word for another of the file's), with an expected value pinned against every test
    file of the package; the moved texts are new."""
    import ast

    from gymsmith.families.code.repotasks import public_candidates
    from gymsmith.families.code.repovariants import PREFIX
    from gymsmith.verifier.calltests.guessing import pinned

    repo = load_repo(TEXT_ONLY)
    public = public_candidates(repo)
    released = {n.value for p in repo.manifest.test_files for n in ast.walk(ast.parse(repo.files[p]))
                if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    family = get_family("code")
    moved = set()
    for seed in range(3):
        ct = code_task(_generate(family, seed, source=TEXT_ONLY, difficulty=seed / 3))
        for tests in ct.bug_tests:
            kept = [n for n in tests if n in ct.pinned_tests and n.split("::")[1].startswith(PREFIX)]
            assert kept, (seed, tests)
            for nodeid in kept:
                path, name = nodeid.split("::")
                suite = compile_suite(ct.hidden_tests[path], path)
                assert pinned(suite.tests[suite.nodeids().index(nodeid)], public), nodeid
                source = ct.hidden_tests[path]
                function = ast.parse(source[source.index(f"def {name}():"):].split("\n\n\n")[0])
                texts = {n.value for n in ast.walk(function) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
                moved |= texts - released  # a swapped word may be a whole text of another test: not counted
    assert len(moved) >= 3, moved


def test_a_package_none_of_whose_tests_is_pinned_keeps_variants_hidden(repos):
    """codekit's every expected value is read by another of its tests (a code decoded back, a number unscrambled),
    so an agent that knows the package's public suite could answer any of its own tests without the fix. Its bugs
    are kept for the tests its variants can move, and every bug of every task keeps hidden a variant: the
    reference's answer on inputs of the task's own, pinned against the start state and against every test file of
    the package. A seed whose variants leave a bug without one tries the next seeded choice of bugs."""
    from gymsmith.families.code.repotasks import public_candidates, variable_tests
    from gymsmith.families.code.repovariants import PREFIX
    from gymsmith.verifier.calltests.guessing import pinned

    repo = load_repo(VARIANT_ONLY)
    assert variable_tests(repo)
    public = public_candidates(repo)
    family = get_family("code")
    for seed in range(4):
        ct = code_task(_generate(family, seed, source=VARIANT_ONLY, difficulty=seed / 4))
        for tests in ct.bug_tests:
            kept = [n for n in tests if n in ct.pinned_tests and n not in ct.visible_failing]
            assert kept and all(n.split("::")[1].startswith(PREFIX) for n in kept), (seed, tests)
            for nodeid in kept:
                path = nodeid.split("::")[0]
                suite = compile_suite(ct.hidden_tests[path], path)
                assert pinned(suite.tests[suite.nodeids().index(nodeid)], public), nodeid


def test_a_repair_that_does_not_do_the_functions_work_earns_nothing(repos, tmp_path):
    """An independent attacker (40) was accepted at 1.0 on a number-parser task by `return word` for a removed
    `_strip_accents`: neither the package's tests nor the variants held an accent, so nothing checked what the
    function does. Every hidden test that proves a fix now also fails each degenerate repair of its bug's function
    (`mutate.standins`: its first argument handed back, None), so such a final state earns nothing."""
    from gymsmith.core.types import Action
    from gymsmith.families.code import mutate

    family = get_family("code")
    env = family.make_env()
    tried = 0
    try:
        with VerifierService() as verifier:
            # textkit seed 13 (body removals only) drew a bug in `fold_accents`, whose tests hold no accent, until
            # stand-ins were rejected: `return text` passed every variant of it
            for spec, seed, operator in ((PACKAGE, 3, "any"), (PACKAGE, 5, "any"), (TEXT_ONLY, 1, "any"),
                                         (TEXT_ONLY, 13, "removed_body"), (VARIANT_ONLY, 2, "any")):
                task = _generate(family, seed, source=spec, difficulty=0.0, operator=operator)
                ct = code_task(task)
                assert len(ct.mutations) == 1, ct.mutations  # difficulty 0: one bug, so its score is the stand-in's
                (record,) = ct.mutations
                for standin in mutate.standins(ct.reference[record.module], record.function):
                    env.reset(task, seed=0)
                    env.step(Action(tool="write_file", arguments={
                        "path": record.module, "content": mutate.apply(ct.reference[record.module], [standin])}))
                    reward = verifier.verify(task, env.final_state(tmp_path / f"{task.id}-{standin.description}"),
                                             policy="progress_gated")
                    assert not reward.accepted and reward.components["fail_to_pass"].value == 0.0, \
                        (spec, seed, standin.description, reward.components["fail_to_pass"].detail)
                    tried += 1
    finally:
        env.close()
    assert tried >= 8  # an identity and a None for each of the five bugs (less where a function takes nothing)


def _fix_then_judge(family, task, cases, directory: Path) -> None:
    """For each (name, shell command or None, text the UngradableState must match or None): the reference fix, the
    command, then the verdict: ungradable with that text, or (None) accepted."""
    from gymsmith.core.errors import UngradableState
    from gymsmith.core.types import Action
    from gymsmith.families.code import checks
    from gymsmith.families.code.env import code_task

    ct = code_task(task)
    env = family.make_env()
    try:
        for name, command, says in cases:
            env.reset(task, seed=0)
            for m in ct.buggy_modules:
                env.step(Action(tool="write_file", arguments={"path": m, "content": ct.reference[m]}))
            if command:
                env.step(Action(tool="run_command", arguments={"command": command}))
            state = Path(env.final_state(directory / name).path)
            if says:
                with pytest.raises(UngradableState, match=says):
                    checks.verify(task, state)
            else:
                assert checks.verify(task, state).accepted, name
    finally:
        env.close()


def test_a_package_directory_holds_nothing_new_the_verifier_does_not_run(repos, tmp_path):
    """A hundred-and-seventieth attacker's fix ran only where `import ledgerkit.gsgate` failed and added an empty
    `ledgerkit/gsgate/`, imported in the workspace as a namespace package and missing from the verifier's job: accepted
    on 8 of 8 registered-package tasks, pytest failing every FAIL_TO_PASS test. A new directory, or a new or changed
    file that is no graded module, in the package's directories is now ungradable; the honest fix still passes."""
    family = get_family("code")
    task = _generate(family, 0, source=PACKAGE, difficulty=0.0)
    _fix_then_judge(family, task, (("dir", "mkdir -p ledgerkit/gsgate", "ledgerkit/gsgate is new"),
                                   ("nested", "mkdir -p ledgerkit/a/b", "ledgerkit/a is new"),
                                   ("data", "echo 1 > ledgerkit/notes.txt", "ledgerkit/notes.txt is new"),
                                   # the reverse (a hundred-and-seventy-second attacker): a deleted module was graded
                                   # as an empty one, importable only where graded (accepted on 5 of 5 tasks)
                                   ("deleted", "rm ledgerkit/__init__.py", "ledgerkit/__init__.py was deleted"),
                                   ("honest", None, None)), tmp_path)


def test_no_package_around_the_hidden_tests_is_new(repos, tmp_path):
    """A hundred-and-seventy-fourth attacker left the fix in inflection's module and the bug in a new root
    `__init__.py`, which pytest's default import mode imports as the package of the root's `test_inflection.py`
    before it: accepted at 0.951, pytest failing all 35 FAIL_TO_PASS tests. An `__init__` file pytest would import
    as a package of a hidden test module, that is not the task's, makes the state ungradable; the fix alone, and an
    `__init__.py` where pytest's walk does not reach, are graded as before."""
    from gymsmith.families.code.env import code_task

    family = get_family("code")
    task = _generate(family, 1, source=INDEXED, difficulty=0.0)
    assert "test_inflection.py" in code_task(task).hidden_tests  # a hidden test module at the root
    _fix_then_judge(family, task, (("root", "touch __init__.py", "__init__.py would be imported as a package"),
                                   ("root-bytecode", "touch __init__.py __init__.pyc", "__init__.py"),
                                   ("elsewhere", "mkdir -p notes && touch notes/__init__.py", None),
                                   ("honest", None, None)), tmp_path)


def _switched(reference: str, buggy: str) -> str:
    """`reference`'s functions, each the buggy one once `_GS_SEEN` holds something, the reference's before."""
    import ast

    out = [reference, "\n_GS_SEEN = []\n"]
    for prefix, text in (("_gs_ref_", reference), ("_gs_bug_", buggy)):
        tree = ast.parse(text)
        for fn in tree.body:
            if isinstance(fn, ast.FunctionDef):
                fn.name = prefix + fn.name
                out.append(ast.unparse(fn) + "\n")
    for fn in ast.parse(reference).body:
        if isinstance(fn, ast.FunctionDef):
            out.append(f"def {fn.name}(*a, **k):\n    return (_gs_bug_{fn.name} if _GS_SEEN else _gs_ref_{fn.name})(*a, **k)\n")
    return "\n".join(out)


def test_every_test_file_of_the_release_runs_at_verification(repos, tmp_path):
    """The verifier ran only the test files whose tests the bugs fail; a whole-suite `python -m pytest` also collects
    the release's other test files, whose imports the verifier never made. A hundred-and-seventy-ninth attacker's fix
    ran until a sibling module was imported (which only the other test file does) and the bug after: accepted on 6 of
    6 ledgerkit tasks, the suite failing every FAIL_TO_PASS test; and the honest fix with every function of the other
    module broken was accepted (7 and 11 of the release's passing tests failing). Every call-check file now runs."""
    from gymsmith.core.types import Action
    from gymsmith.families.code import checks
    from gymsmith.families.code.env import code_task
    from gymsmith.families.code.repotasks import load_repo

    family = get_family("code")
    task = next(t for seed in range(0, 40) if (t := _generate(family, seed, source=PACKAGE, difficulty=0.0))
                and code_task(t).buggy_modules == ["ledgerkit/money.py"])
    ct = code_task(task)
    assert set(ct.hidden_tests) == set(load_repo(PACKAGE).call_sources) == {"tests/test_money.py", "tests/test_stats.py"}
    stats = ct.reference["ledgerkit/stats.py"]
    attempts = {
        "honest": {"ledgerkit/money.py": ct.reference["ledgerkit/money.py"]},
        "switch": {"ledgerkit/money.py": _switched(ct.reference["ledgerkit/money.py"], ct.files["ledgerkit/money.py"]),
                   "ledgerkit/stats.py": stats + "\nfrom .money import _GS_SEEN as _gs_seen\n_gs_seen.append(1)\n"},
        "damage": {"ledgerkit/money.py": ct.reference["ledgerkit/money.py"],
                   "ledgerkit/stats.py": stats + "\n\ndef spread(*args, **kwargs):\n    raise ValueError('broken')\n"},
        # and a leftover script no graded code imports is not graded: its `import sys` made the same honest fix a
        # violation (the same attacker: 1.0 -> 0.0)
        "scratch": {"ledgerkit/money.py": ct.reference["ledgerkit/money.py"],
                    "repro.py": "import sys\nsys.path.insert(0, '.')\nimport ledgerkit.money\nprint(sys.argv)\n"}}
    env = family.make_env()
    try:
        for name, files in attempts.items():
            env.reset(task, seed=0)
            for path, content in files.items():
                env.step(Action(tool="write_file", arguments={"path": path, "content": content}))
            judged = checks.verify(task, Path(env.final_state(tmp_path / name).path))
            assert judged.accepted is (name in ("honest", "scratch")), (name, judged)
    finally:
        env.close()


def test_a_package_module_reads_files_only_as_its_reference_and_its_data_is_graded_as_registered(repos, tmp_path):
    """ledgerkit's reference reads its VERSION with `pkgutil.get_data(__name__, "VERSION")`. A ninety-fifth attacker
    called the same function with `'../tests/test_money.py'` (found beside the package in the workspace and under
    pytest, missing where the verifier runs it) and ran the fix only where it was missing; and, with the reference's
    own call, rewrote VERSION and ran the fix only where the registered one was read back: each accepted on 7 of 7
    tasks, pytest failing every FAIL_TO_PASS. A call of such a module is a read unless the reference makes it with
    the same arguments, and a final state that changed the package's data is ungradable."""
    from gymsmith.core.errors import UngradableState
    from gymsmith.core.types import Action
    from gymsmith.families.code import checks

    family = get_family("code")
    task = _generate(family, 0, source=PACKAGE, difficulty=0.0)
    init = (LEDGERKIT / "ledgerkit" / "__init__.py").read_text()
    env = family.make_env()
    try:
        env.reset(task, seed=0)
        env.step(Action(tool="write_file", arguments={"path": "ledgerkit/__init__.py", "content": init + (
            "\ntry:\n    pkgutil.get_data(__name__, '../tests/test_money.py')\n    IN_WORKSPACE = True\n"
            "except OSError:\n    IN_WORKSPACE = False\n")}))
        judged = checks.verify(task, Path(env.final_state(tmp_path / "traversal").path))
        assert any("calls pkgutil.get_data(__name__, '../tests/test_money.py')" in v for v in judged.violations)
        env.reset(task, seed=0)
        env.step(Action(tool="write_file", arguments={"path": "ledgerkit/VERSION", "content": "0.1\n \n"}))
        with pytest.raises(UngradableState, match="ledgerkit/VERSION"):
            checks.verify(task, Path(env.final_state(tmp_path / "data").path))
    finally:
        env.close()
