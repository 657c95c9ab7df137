"""Bring your own repository: a YAML task file over a real local git repository, validated with clear errors,
run through the real environment, sandbox and verifier."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from gymsmith.agents.base import NullAgent
from gymsmith.core.types import Split
from gymsmith.families.code.byo import TaskFileError, load_task_file
from gymsmith.families.code.oracle import CodeOracle
from gymsmith.registry import get_family
from gymsmith.runner.rollout import run_rollout
from gymsmith.verifier import VerifierService

BUGGY = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi + 1))\n"
FIXED = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
TESTS = ("from shapes.util import clamp\n\n\ndef test_inside():\n    assert clamp(5, 0, 10) == 5\n\n\n"
         "def test_upper_bound():\n    assert clamp(50, 0, 10) == 10\n\n\ndef test_lower_bound():\n    assert clamp(-5, 0, 10) == 0\n")
CONFTEST = "import pytest\n\n\n@pytest.fixture\ndef limit():\n    return 10\n"
FIXTURE_TEST = "from shapes.util import clamp\n\n\ndef test_uses_fixture(limit):\n    assert clamp(99, 0, limit) == limit\n"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}).stdout.strip()


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, str, str]:
    root = tmp_path_factory.mktemp("byo") / "repo"
    (root / "shapes").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "shapes" / "__init__.py").write_text("")
    (root / "shapes" / "util.py").write_text(BUGGY)
    (root / "tests" / "test_util.py").write_text(TESTS)
    (root / "tests" / "test_fixture.py").write_text(FIXTURE_TEST)
    (root / "tests" / "conftest.py").write_text(CONFTEST)
    (root / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (root / "locale" / "fr").mkdir(parents=True)  # data under a library's name (translations)
    (root / "locale" / "fr" / "shapes.po").write_text('msgid "clamp"\nmsgstr "borner"\n')
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    buggy = git(root, "rev-parse", "HEAD")
    (root / "README.md").write_text("shapes\n")  # a commit that changes something, but not the bug
    git(root, "add", "README.md")
    git(root, "commit", "-qm", "readme")
    git(root, "tag", "no-fix")
    (root / "shapes" / "util.py").write_text(FIXED)
    git(root, "commit", "-qam", "fix clamp")
    return root, buggy, git(root, "rev-parse", "HEAD")


def task_file(tmp_path: Path, **fields) -> Path:
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def good(repo, **over):
    root, buggy, fixed = repo
    return {"repository": str(root), "commit": buggy, "solution_commit": fixed, "test_command": "python -m pytest -q",
            "fail_to_pass": ["tests/test_util.py::test_upper_bound", "tests/test_fixture.py::test_uses_fixture"],
            "pass_to_pass": ["tests/test_util.py::test_inside", "tests/test_util.py::test_lower_bound"], **over}


def test_task_file_becomes_a_task_without_history(repo, tmp_path):
    task = load_task_file(task_file(tmp_path, **good(repo)))
    assert task.family == "code" and task.metadata["source"] == "repository"
    env = get_family("code").make_env()
    try:
        env.reset(task, seed=0)
        log = env.step(__import__("gymsmith.core.types", fromlist=["Action"]).Action(
            tool="run_command", arguments={"command": "git log --all --oneline | wc -l; cat shapes/util.py"})).observation.text
        assert log.splitlines()[1] == "1" and "hi + 1" in log  # one commit, the buggy one: the fix is not reachable
    finally:
        env.close()


def test_oracle_accepted_and_null_not_with_the_repositorys_own_conftest(repo, tmp_path):
    task = load_task_file(task_file(tmp_path, **good(repo)))
    env = get_family("code").make_env()
    try:
        with VerifierService() as verifier:
            results = {a.name: run_rollout(env=env, agent=a, task=task, split=Split.TRAIN, seed=0, run_id="byo",
                                           verifier=verifier, policy="shaped_gated", max_steps=20, time_limit_s=120)
                       for a in (CodeOracle(), NullAgent())}
    finally:
        env.close()
    assert results["oracle"].reward.accepted and results["oracle"].reward.value == 1.0, results["oracle"].reward
    null = results["null"].reward
    assert not null.accepted and any("test_upper_bound" in f for f in null.gate_failures)


@pytest.mark.parametrize("change,message", [
    ({"repository": "/nonexistent/repo"}, "is not a directory"),
    ({"repository": tempfile.gettempdir()}, "is not a git repository"),
    ({"commit": "no-such-ref"}, "commit 'no-such-ref' is not a commit"),
    ({"fail_to_pass": []}, "fail_to_pass"),
    ({"fail_to_pass": ["test_upper_bound"]}, "expected pytest node ids"),
    ({"pass_to_pass": ["tests/test_util.py::test_upper_bound"]}, "both fail_to_pass and pass_to_pass"),
    ({"fail_to_pass": ["tests/test_gone.py::test_x"]}, "test files not in commit"),
    ({"test_command": "make check"}, "must run pytest"),
])
def test_bad_task_files_name_the_problem(repo, tmp_path, change, message):
    with pytest.raises(TaskFileError, match=message) as info:
        load_task_file(task_file(tmp_path, **good(repo, **change)))
    assert str(tmp_path / "task.yaml") in str(info.value)


@pytest.mark.parametrize("change,message", [
    ({"fail_to_pass": ["tests/test_util.py::test_upper_bound", "tests/test_util.py::test_inside"],
      "pass_to_pass": ["tests/test_util.py::test_lower_bound"]}, r"FAIL_TO_PASS tests already pass at commit .*test_inside"),
    ({"solution_commit": "no-fix"}, r"FAIL_TO_PASS tests do not pass at solution_commit .*test_upper_bound"),
])
def test_task_files_whose_tests_break_their_promise_are_refused(repo, tmp_path, change, message):
    """The tests really run (in the verifier's sandboxed pytest runner) before a task is accepted."""
    with pytest.raises(TaskFileError, match=message):
        load_task_file(task_file(tmp_path, **good(repo, **change)))


def test_pass_to_pass_must_pass_at_the_start(repo, tmp_path):
    root, buggy, fixed = repo
    fields = good(repo, pass_to_pass=["tests/test_util.py::test_inside"],
                  fail_to_pass=["tests/test_util.py::test_lower_bound", "tests/test_util.py::test_upper_bound"])
    with pytest.raises(TaskFileError, match=r"FAIL_TO_PASS tests already pass at commit .*test_lower_bound"):
        load_task_file(task_file(tmp_path, **fields))
    fields = good(repo, pass_to_pass=["tests/test_util.py::test_upper_bound"], fail_to_pass=["tests/test_fixture.py::test_uses_fixture"])
    with pytest.raises(TaskFileError, match=r"PASS_TO_PASS tests do not pass at commit .*test_upper_bound"):
        load_task_file(task_file(tmp_path, **fields))


def test_unknown_keys_and_a_solution_equal_to_the_start_are_refused_by_the_cli(repo, tmp_path):
    from typer.testing import CliRunner

    from gymsmith.cli import app

    root, buggy, _ = repo
    for change, message in (({"colour": "blue"}, "unknown key 'colour'"),
                            ({"solution_commit": buggy}, "has the same files as commit")):
        result = CliRunner().invoke(app, ["tasks", "from-file", str(task_file(tmp_path, **good(repo, **change)))])
        assert result.exit_code == 2, (result.stdout, result.stderr)
        assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_unreadable_task_files(tmp_path):
    with pytest.raises(TaskFileError, match="cannot read"):
        load_task_file(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("repository: [unclosed\n")
    with pytest.raises(TaskFileError, match="not valid YAML"):
        load_task_file(tmp_path / "bad.yaml")
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(TaskFileError, match="must be a mapping"):
        load_task_file(tmp_path / "list.yaml")


def test_code_that_hangs_fails_its_tests_before_the_verifier_times_out():
    """An independent attacker's `time.sleep` in the code under test held the test job for its 120 s deadline while
    the verifier service gave up at 60 s: the failing rollout became an infrastructure error (no reward). The job's
    deadline, with the runner's grace for a silent server, ends before the service's."""
    from gymsmith.families.code.byo import VERIFY_TIMEOUT_S
    from gymsmith.verifier.pytest_runner import SERVER_GRACE_S
    from gymsmith.verifier.service import DEFAULT_TIMEOUT_S

    assert VERIFY_TIMEOUT_S + SERVER_GRACE_S < DEFAULT_TIMEOUT_S


def test_a_repository_tasks_own_reads_are_its_preparation_not_the_states(repo, tmp_path, monkeypatch):
    """A hundred-and-twenty-sixth attacker's hanging code on a task of 3,600 files: the verification read both
    commits (a `git show` per file, twice) and then gave the state its 40 s test deadline, past the service's 60 s
    (an infrastructure error, no reward; the null agent scored 0). The task's reads are now its preparation, done
    once before any state's verification (`checks.prepare`): verifying a state reads no repository."""
    from gymsmith.families.code import byo, checks

    task = load_task_file(task_file(tmp_path, **good(repo)))
    checks.prepare(task)
    env = get_family("code").make_env()
    try:
        env.reset(task, seed=0)
        final = env.final_state(tmp_path / "final")

        def no_reads(*args, **kwargs):
            raise AssertionError("the state's verification read the repository")

        monkeypatch.setattr(byo, "files_at", no_reads)
        result = checks.verify(task, Path(final.path))
    finally:
        env.close()
    assert not result.accepted and any("test_upper_bound" in f for f in result.gate_failures)


BOGUS_REPORT = ("cat >> shapes/util.py <<'PY'\nimport os as _o, json as _j\nfor _fd in range(3, 40):\n    try:\n"
                "        _o.write(_fd, (_j.dumps({'test': 'tests/test_util.py::test_upper_bound', 'outcome': '%s'}) + '\\n')"
                ".encode())\n    except OSError:\n        pass\nPY")


@pytest.mark.parametrize("command", [
    "rm pytest.ini && mkdir pytest.ini && echo notes > pytest.ini/notes.txt",  # where the restored config goes
    "rm -rf tests && echo x > tests",  # where the restored tests go
    BOGUS_REPORT % "bogus",  # a report line whose outcome is not one
    BOGUS_REPORT % "failed",  # control: the same writes with an outcome word
], ids=["config-as-directory", "tests-as-file", "bogus-outcome", "failed-outcome"])
def test_what_the_state_does_to_the_verifiers_job_is_its_failure(repo, tmp_path, command):
    """A hundred-and-thirty-second attacker kept the bug and made the verification raise, so the rollout became an
    infrastructure error instead of a scored 0: a tree whose paths clash, as file and directory, with the tests and
    configuration the verifier restores (FileExistsError while the job was written), and code that wrote an outcome
    the runner does not know into the report (ValueError on the host). Each is now a scored failure: a tree that
    cannot be laid out is ungradable, and an unknown outcome is a failed test."""
    task = load_task_file(task_file(tmp_path, **good(repo)))
    env = get_family("code").make_env()
    try:
        env.reset(task, seed=0)
        obs = env.step(__import__("gymsmith.core.types", fromlist=["Action"]).Action(
            tool="run_command", arguments={"command": command})).observation
        assert obs.error is None, obs.text
        final = env.final_state(tmp_path / "final")
    finally:
        env.close()
    with VerifierService() as verifier:
        reward = verifier.verify(task, final)
    assert reward.value == 0.0 and not reward.accepted, reward
    if "outcome" not in command:
        assert any("cannot be laid out" in f for f in reward.gate_failures), reward.gate_failures


@pytest.mark.parametrize("name", [".pytest.toml", "pytest.toml", ".pytest.ini"])
def test_every_file_pytest_reads_its_configuration_from_is_the_tasks(repo, tmp_path, name):
    """pytest 9 reads `pytest.toml`, `.pytest.toml` and `.pytest.ini` before the configuration files the task has: a
    hundred-and-thirty-seventh attacker's new `.pytest.toml` put a buggy copy (kept under `.git/`, which the snapshot
    skips) first on the workspace's path while the graded tree held the fix, and the verifier, which restores the
    task's configuration, accepted it (3 of 3 repositories, 0.975). A new configuration file of any of pytest's names
    is now tampering, as a changed one is."""
    task = load_task_file(task_file(tmp_path, **good(repo)))
    env = get_family("code").make_env()
    try:
        env.reset(task, seed=0)
        Action = __import__("gymsmith.core.types", fromlist=["Action"]).Action
        for path, content in (("shapes/util.py", FIXED), (name, "[pytest]\npythonpath = [\".\"]\n")):
            assert env.step(Action(tool="write_file", arguments={"path": path, "content": content})).observation.error is None
        final = env.final_state(tmp_path / "final")
    finally:
        env.close()
    with VerifierService() as verifier:
        reward = verifier.verify(task, final)
    assert reward.value == 0.0 and any(f"test files tampered with: {name}" in v for v in reward.violations), reward


def _final_after(task, commands, directory):
    """The final state after `commands` (shell, in the workspace), each of which must succeed."""
    Action = __import__("gymsmith.core.types", fromlist=["Action"]).Action
    env = get_family("code").make_env()
    try:
        env.reset(task, seed=0)
        for command in commands:
            obs = env.step(Action(tool="run_command", arguments={"command": command})).observation
            assert obs.error is None and obs.data["exit_code"] == 0, obs.text
        return env.final_state(directory)
    finally:
        env.close()


FIX = f"cat > shapes/util.py <<'PY'\n{FIXED}PY"
LATIN = ("mkdir shapes/util && printf '# -*- coding: latin-1 -*-\\n# \\351\\ndef clamp(x, lo, hi):\\n"
         "    return max(lo, min(x, hi + 1))\\n' > shapes/util/__init__.py")
SHIM = ("cat > pprint.py <<'PY'\nimport importlib.util, sys, sysconfig\n_s = importlib.util.spec_from_file_location("
        "'pprint', sysconfig.get_paths()['stdlib'] + '/pprint.py')\n_m = importlib.util.module_from_spec(_s)\n"
        "_s.loader.exec_module(_m)\nsys.modules['pprint'] = _m\nglobals().update(vars(_m))\nPY")


@pytest.mark.parametrize("commands,says", [
    ([FIX, SHIM], "would be imported as part of 'pprint'"),  # a library's name, first on a pytest run's path
    ([FIX, "echo 'def normalize(name):\n    return name' > locale/__init__.py"],
     "would be imported as part of 'locale'"),  # the commit's data directory of a library's name, made a package
    ([FIX, "mkdir -p org/python && echo 'PyStringMap = dict' > org/python/core.py"],
     "would be imported as part of 'org'"),  # Python 3.11's `copy` asks for Jython's `org.python.core`
    ([FIX, LATIN], "is not a regular UTF-8 text file"),
    ([FIX, "printf '\\177ELF\\377' > shapes/fast.abi3.so"], "is not a regular UTF-8 text file"),  # an extension module
    ([FIX, "printf '# coding: utf-7\\nX = 1\\n' > shapes/more.py"], "declares the source encoding"),
    # a data file the job would lack: code that reads its files runs otherwise there (a hundred-and-sixty-fifth attacker)
    ([FIX, "printf '\\211PNG\\377' > shapes/units.bin"], "is not a regular UTF-8 text file"),
], ids=["library-name-at-the-root", "library-named-data-directory", "a-name-the-library-asks-for",
     "latin-1-package-beside-the-module", "extension", "declared-encoding", "binary-data-file"])
def test_code_a_pytest_run_of_the_workspace_would_run_and_the_verifier_could_not_is_ungradable(repo, tmp_path, commands,
                                                                                             says):
    """A hundred-and-forty-fifth attacker kept the fix in the graded `shapes/util.py` and put the bug back where a
    pytest run of the workspace runs it and the verifier's job does not: a root `pprint.py` (pytest imports `pprint`
    with the root first on the path; the verifier's runner imported it before the job), accepted 0.905 on 4 of 4
    repositories; a Latin-1 package `shapes/util/__init__.py` (imported in place of `shapes/util.py`, and left out of
    the job as not text), accepted 1.0 on 4 of 4; pytest failed every FAIL_TO_PASS test on both. Each is now
    ungradable, as is an extension module and a declared encoding (bytecode the final state drops), and a package
    made of the commit's data directory of a library's name (`locale/`, a hundred-and-forty-eighth attacker: 0.957 on
    3 of 3), and a root package of a name a pytest run asks for though nothing installs it (`org`, which Python 3.11's
    `copy` asks for: a hundred-and-fifty-first attacker's, 0.959 on 4 of 4; `workspace_rules.requested_names`); the fix with
    a helper module and a root script of its own is accepted."""
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        reward = verifier.verify(task, _final_after(task, commands, tmp_path / "final"))
        honest = verifier.verify(task, _final_after(task, [FIX, "echo 'X = 1' > shapes/helpers.py",
                                                           "echo 'print(1)' > repro.py"], tmp_path / "honest"))
    assert reward.value == 0.0 and not reward.accepted and any(says in f for f in reward.gate_failures), reward
    assert honest.accepted and honest.value >= 0.95, honest  # a little economy off for the two extra files


CASES_TEST = ("import json\nfrom pathlib import Path\n\nfrom shapes.util import clamp\n\nHERE = Path(__file__).parent\n\n\n"
              "def test_upper_from_tests_data():\n    x, lo, hi, want = json.loads((HERE / 'data' / 'cases.json').read_text())\n"
              "    assert clamp(x, lo, hi) == want\n\n\n"
              "def test_upper_from_fixtures():\n    x, lo, hi, want = json.loads((HERE.parent / 'fixtures' / 'bounds.json')"
              ".read_text())\n    assert clamp(x, lo, hi) == want\n\n\n"
              "def test_inside():\n    assert clamp(5, 0, 10) == 5\n")


@pytest.fixture(scope="module")
def in_package_repo(tmp_path_factory) -> tuple[Path, str, str]:
    """Tests inside the package (psutil's, pandas' layout) reading data beside them and in a fixtures directory."""
    root = tmp_path_factory.mktemp("byo-in-package") / "repo"
    (root / "shapes" / "tests" / "data").mkdir(parents=True)
    (root / "shapes" / "fixtures").mkdir()
    for path, text in (("shapes/__init__.py", ""), ("shapes/util.py", BUGGY), ("shapes/tests/__init__.py", ""),
                       ("shapes/tests/test_cases.py", CASES_TEST), ("shapes/tests/data/cases.json", "[50, 0, 10, 10]\n"),
                       ("shapes/fixtures/bounds.json", "[99, 0, 10, 10]\n"), ("pytest.ini", "[pytest]\npythonpath = .\n")):
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    buggy = git(root, "rev-parse", "HEAD")
    (root / "shapes" / "util.py").write_text(FIXED)
    git(root, "commit", "-qam", "fix clamp")
    return root, buggy, git(root, "rev-parse", "HEAD")


@pytest.mark.parametrize("test,data,extra", [
    ("test_upper_from_tests_data", "shapes/tests/data/cases.json", {}),  # beside the tests: test-side by its directory
    ("test_upper_from_fixtures", "shapes/fixtures/bounds.json", {"test_files": ["shapes/fixtures/*"]}),  # declared
], ids=["under-a-tests-directory", "declared-in-test_files"])
def test_the_data_the_tests_read_is_the_tasks(in_package_repo, tmp_path, test, data, extra):
    """A hundred-and-forty-fifth attacker changed only the expected value in `shapes/tests/data/cases.json`, the bug
    kept, and was accepted 1.0 on 3 of 3 repositories (the verifier restored test files by name only, so a test's
    data was graded as the agent's). Everything under a `tests` or `test` directory, and what the task file's
    `test_files` globs match, is now restored from the commit, and a change to it is tampering; the oracle is
    accepted."""
    root, buggy, fixed = in_package_repo
    spec = {"repository": str(root), "commit": buggy, "solution_commit": fixed, "fail_to_pass": [f"shapes/tests/test_cases.py::{test}"],
            "pass_to_pass": ["shapes/tests/test_cases.py::test_inside"], **extra}
    task = load_task_file(task_file(tmp_path, **spec))
    env = get_family("code").make_env()
    try:
        with VerifierService() as verifier:
            oracle = run_rollout(env=env, agent=CodeOracle(), task=task, split=Split.TRAIN, seed=0, run_id="byo",
                                 verifier=verifier, policy="shaped_gated", max_steps=20, time_limit_s=120)
            reward = verifier.verify(task, _final_after(task, [f"sed -i 's/, 10]/, 11]/' {data}"], tmp_path / "final"))
    finally:
        env.close()
    assert oracle.reward.accepted and oracle.reward.value == 1.0, oracle.reward
    assert reward.value == 0.0 and any(f"test files tampered with: {data}" in v for v in reward.violations), reward


def test_a_defeat_device_in_the_graded_code_is_a_violation(repo, tmp_path):
    """A hundred-and-forty-fifth attacker's device: the fix where `os.getpid() == 1` (the verifier runs each test in
    a fresh sandbox process), the bug everywhere else; accepted 0.94-0.97 on 4 of 4 repositories, pytest failing
    every FAIL_TO_PASS test. A changed module that reads the process it runs in where the known fix does not is now a
    violation, as in every other code task (`introspection`)."""
    device = ("cat > shapes/util.py <<'PY'\nimport os\n\n\ndef clamp(x, lo, hi):\n"
              "    return max(lo, min(x, hi if os.getpid() == 1 else hi + 1))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        reward = verifier.verify(task, _final_after(task, [device], tmp_path / "final"))
    assert reward.value == 0.0 and any("observes the process" in v for v in reward.violations), reward


@pytest.fixture(scope="module")
def src_layout_repo(tmp_path_factory) -> tuple[Path, str, str]:
    """A package under src/, configured in pyproject.toml only: its path and its warnings as errors."""
    root = tmp_path_factory.mktemp("byo-src") / "repo"
    (root / "src" / "shapes").mkdir(parents=True)
    (root / "tests").mkdir()
    for path, text in (("src/shapes/__init__.py", ""), ("src/shapes/util.py", BUGGY), ("tests/test_util.py", TESTS),
                       ("pyproject.toml", "[project]\nname = 'shapes'\n\n[tool.pytest.ini_options]\n"
                                          "pythonpath = ['src']\nfilterwarnings = ['error']\n")):
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    buggy = git(root, "rev-parse", "HEAD")
    (root / "src" / "shapes" / "util.py").write_text(FIXED)
    git(root, "commit", "-qam", "fix clamp")
    return root, buggy, git(root, "rev-parse", "HEAD")


def test_the_tests_run_with_the_repositorys_own_pytest_configuration(src_layout_repo, tmp_path):
    """The verifier ran every repository's tests with a `pytest.ini` of its own when the repository had none, so a
    configuration in `pyproject.toml` was ignored: a src/ layout could not be a task at all, and a hundred-and-
    forty-fifth attacker's fix that raised a warning the repository makes an error was accepted (0.933 on 3 of 3)
    where the repository's own `python -m pytest` failed every test. The tests now run with the file pytest's own
    search finds: the src/ package imports, the oracle is accepted, and the warning fails the tests."""
    root, buggy, fixed = src_layout_repo
    task = load_task_file(task_file(tmp_path, repository=str(root), commit=buggy, solution_commit=fixed,
                                    fail_to_pass=["tests/test_util.py::test_upper_bound"],
                                    pass_to_pass=["tests/test_util.py::test_inside"]))
    warns = ("cat > src/shapes/util.py <<'PY'\nimport warnings\n\n\ndef clamp(x, lo, hi):\n"
             "    warnings.warn('clamp is deprecated', DeprecationWarning)\n    return max(lo, min(x, hi))\nPY")
    env = get_family("code").make_env()
    try:
        with VerifierService() as verifier:
            oracle = run_rollout(env=env, agent=CodeOracle(), task=task, split=Split.TRAIN, seed=0, run_id="byo",
                                 verifier=verifier, policy="shaped_gated", max_steps=20, time_limit_s=120)
            reward = verifier.verify(task, _final_after(task, [warns], tmp_path / "final"))
    finally:
        env.close()
    assert oracle.reward.accepted and oracle.reward.value == 1.0, oracle.reward
    assert not reward.accepted and any("test_upper_bound" in f for f in reward.gate_failures), reward


def test_the_listed_tests_run_in_one_session_and_pytests_rootdir_is_the_tasks(repo, tmp_path):
    """A hundred-and-forty-eighth attacker: a fix right only on its process's first call was accepted 0.967 on 4 of
    4 repositories while each listed test ran in a process of its own (one pytest session fails every FAIL_TO_PASS
    test after the first); and a new `setup.py` beside the tests moved a real pytest run's rootdir past the root
    conftest the verifier still loaded (accepted 0.97-0.98). The tests now run in one session, as
    `python -m pytest <ids>` runs them, and a `setup.py` is test-side: changing one is tampering."""
    first_call = ("cat > shapes/util.py <<'PY'\n_calls = [0]\n\n\ndef clamp(x, lo, hi):\n    _calls[0] += 1\n"
                  "    return max(lo, min(x, hi if _calls[0] <= 1 else hi + 1))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        counting = verifier.verify(task, _final_after(task, [first_call], tmp_path / "counting"))
        rootdir = verifier.verify(task, _final_after(task, [FIX, "echo '# setup' > shapes/setup.py"], tmp_path / "setup"))
    assert not counting.accepted and any("FAIL_TO_PASS failing" in f for f in counting.gate_failures), counting
    assert rootdir.value == 0.0 and any("tampered with: shapes/setup.py" in v for v in rootdir.violations), rootdir


def test_the_listed_tests_run_in_the_order_python_m_pytest_runs_them(repo, tmp_path):
    """A hundred-and-sixty-seventh attacker: the verifier ran the listed tests FAIL_TO_PASS first, so a fix right only
    for as many calls as those tests make was accepted 0.967 on 2 of 2 repositories while the task's own `python -m
    pytest -q` failed a FAIL_TO_PASS test. The listed tests now run in the order pytest collects them (here
    `tests/test_fixture.py` first, then `test_util.py`'s tests as defined), so the same fix fails there as it does
    under the task's command."""
    from gymsmith.verifier.pytest_runner import walk_order

    assert walk_order(["tests/test_util.py::a", "tests/b/test_x.py::c", "tests/test_util.py::d", "tests/a_test.py::e"]
                      ) == ["tests/a_test.py", "tests/b/test_x.py", "tests/test_util.py"]
    first_two = ("cat > shapes/util.py <<'PY'\n_calls = [0]\n\n\ndef clamp(x, lo, hi):\n    _calls[0] += 1\n"
                 "    return max(lo, min(x, hi if _calls[0] <= 2 else hi + 1))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        counting = verifier.verify(task, _final_after(task, [first_two], tmp_path / "counting"))
        honest = verifier.verify(task, _final_after(task, [FIX], tmp_path / "honest"))
    assert honest.accepted, honest
    assert not counting.accepted and any("test_upper_bound" in f for f in counting.gate_failures), counting


def test_a_directory_the_workspace_imports_is_in_the_verifiers_job(repo, tmp_path):
    """An empty directory is a namespace package to the interpreter: a hundred-and-fifty-first attacker's fix took the
    bug wherever `import shapes._m` succeeded and added an empty `shapes/_m/`, which the verifier's job (files only)
    lacked: accepted 0.961 on 5 of 5 repositories, pytest failing every FAIL_TO_PASS test. The job now has every
    directory of the state, so the verifier runs the bug where pytest does."""
    device = ("cat > shapes/util.py <<'PY'\ntry:\n    import shapes._m\n    _D = 1\nexcept ImportError:\n    _D = 0\n\n\n"
              "def clamp(x, lo, hi):\n    return max(lo, min(x, hi + _D))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        alone = verifier.verify(task, _final_after(task, [device], tmp_path / "alone"))
        with_directory = verifier.verify(task, _final_after(task, [device, "mkdir shapes/_m"], tmp_path / "directory"))
    assert alone.accepted  # without the directory the import fails and the fix runs, in pytest too
    assert not with_directory.accepted and any("test_upper_bound" in f for f in with_directory.gate_failures)


def test_importing_a_cache_directory_is_a_read_and_the_read_of_imports_is_linear(repo, tmp_path, monkeypatch):
    """A hundred-and-fifty-third attacker: `import shapes.__pycache__` succeeds where the interpreter writes bytecode (a
    user's pytest run) and fails in the verifier's processes, which write none; its fix took the bug where it imported
    (accepted on 8 of 9 package and repository tasks). It is now a process read. And its 2,000 circular `from`
    imports made the rule walk the other module again at each (19.5 s, quadratic: after a 40 s test run, a verifier
    timeout, an infrastructure error); each module's imports are now walked once."""
    from gymsmith.families.code import introspection

    device = ("cat > shapes/util.py <<'PY'\ntry:\n    import shapes.__pycache__\n    _D = 1\nexcept ImportError:\n"
              "    _D = 0\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi + _D))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        reward = verifier.verify(task, _final_after(task, [device], tmp_path / "final"))
    assert not reward.accepted and any("uses __pycache__" in v for v in reward.violations), reward
    n = 2_000
    sources = {"shapes/__init__.py": "", "shapes/gsa.py": "".join(f"from shapes.gsb import f{i}\n" for i in range(n)),
               "shapes/gsb.py": "".join(f"from shapes.gsa import g{i}\n" for i in range(n))}
    walks = []
    original = introspection._imported_own
    monkeypatch.setattr(introspection, "_imported_own", lambda *a: walks.append(1) or original(*a))
    reads = introspection.process_reads(sources["shapes/gsa.py"], "", frozenset({"shapes"}), path="shapes/gsa.py",
                                        sources=sources, references={})
    assert any("circularly" in r for r in reads) and len(walks) < 10 * n  # quadratic: millions


def test_the_tests_run_under_the_keys_hash_seed_not_the_sandboxes(repo, tmp_path):
    """Every sandbox runs Python with PYTHONHASHSEED=0, and the warm pytest runner did too: a hundred-and-fifty-eighth
    attacker's fix held only where `hash(text)` had its value under seed 0 (read in its own sandbox), accepted 0.97 on 3
    of 3 layouts, pytest under a random seed failing FAIL_TO_PASS. A repository task's tests now run under the seed
    drawn from the verifier's key, as generated tasks' graded code does; the same device keyed to that seed passes
    (the seed is the only difference), and the honest fix still does."""
    from gymsmith.verifier.drawkey import graded_hash_seed, keyed_hash

    def seeded_hash(seed: int) -> int:
        out = subprocess.run([sys.executable, "-c", "print(hash('gymsmith-158'))"], capture_output=True, text=True,
                             env={"PYTHONHASHSEED": str(seed), "PATH": "/usr/bin:/bin"}, check=True)
        return int(out.stdout)

    def device(value: int) -> str:
        return (f"cat > shapes/util.py <<'PY'\n_D = 0 if hash('gymsmith-158') == {value} else 1\n\n\n"
                "def clamp(x, lo, hi):\n    return max(lo, min(x, hi + _D))\nPY")
    with keyed_hash():
        keyed = graded_hash_seed()
    assert keyed != 0
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        sandboxes = verifier.verify(task, _final_after(task, [device(seeded_hash(0))], tmp_path / "zero"))
        control = verifier.verify(task, _final_after(task, [device(seeded_hash(keyed))], tmp_path / "keyed"))
        honest = verifier.verify(task, _final_after(task, [FIX], tmp_path / "fix"))
    assert sandboxes.value == 0.0 and any("test_upper_bound" in f for f in sandboxes.gate_failures), sandboxes
    assert control.accepted and honest.accepted and honest.value == 1.0, (control, honest)


ODD_TEST = "from shapes.util import clamp\n\n\ndef test_upper_bound():\n    assert clamp(50, 0, 10) == 10\n\n\n" \
           "def test_inside():\n    assert clamp(5, 0, 10) == 5\n"


@pytest.mark.parametrize("test_path,config", [
    ("shapes/tests.py", "[pytest]\npythonpath = .\npython_files = tests.py\n"),
    ("checks/util_tests.py", "[pytest]\npythonpath = .\npython_files = *_tests.py\n"),
], ids=["django-tests-py", "suffix-tests"])
def test_the_files_the_tests_node_ids_name_are_the_tasks(tmp_path, test_path, config):
    """Test files pytest collects under a `python_files` of the repository's, outside the conventional names and
    directories: a hundred-and-fifty-eighth attacker changed only the expected value in one, the bug kept, and was
    accepted 1.0 on 3 of 3 layouts. The files the task's node ids name are test-side now: restored from the commit,
    and a change to one is tampering; the oracle is accepted."""
    root = tmp_path / "repo"
    (root / "shapes").mkdir(parents=True)
    (root / test_path).parent.mkdir(parents=True, exist_ok=True)
    for path, text in (("shapes/__init__.py", ""), ("shapes/util.py", BUGGY), (test_path, ODD_TEST),
                       ("pytest.ini", config)):
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    buggy = git(root, "rev-parse", "HEAD")
    (root / "shapes" / "util.py").write_text(FIXED)
    git(root, "commit", "-qam", "fix")
    task = load_task_file(task_file(tmp_path, repository=str(root), commit=buggy,
                                    solution_commit=git(root, "rev-parse", "HEAD"),
                                    fail_to_pass=[f"{test_path}::test_upper_bound"],
                                    pass_to_pass=[f"{test_path}::test_inside"]))
    forged = f"sed -i 's/== 10$/== 11/' {test_path}"
    with VerifierService() as verifier:
        reward = verifier.verify(task, _final_after(task, [forged], tmp_path / "forged"))
        honest = verifier.verify(task, _final_after(task, [FIX], tmp_path / "fix"))
    assert reward.value == 0.0 and any(f"test files tampered with: {test_path}" in v for v in reward.violations), reward
    assert honest.accepted and honest.value == 1.0, honest


def test_a_star_import_is_read_as_the_names_it_binds(repo, tmp_path):
    """A hundred-and-fifty-eighth attacker: `from shapes.gsaux import *` with `__all__ = ["__py" + "cache__"]` imported the
    cache directory where bytecode was written (a user's pytest run) and failed in the verifier's processes, and
    `from ledgerkit import *` bound the package's `pkgutil`, then `pkgutil.resolve_name(...)` read the pid: accepted on
    12 of 12 and 3 of 3 registered-package tasks, 2 of 2 repositories. A star import of an own module is now read as
    the names it binds (its literal `__all__`, or its public names), and one whose names are computed is a read."""
    from gymsmith.families.code.introspection import process_reads

    device = ("mkdir -p shapes/gsaux && echo '__all__ = [\"__py\" + \"cache__\"]' > shapes/gsaux/__init__.py && "
              "cat > shapes/util.py <<'PY'\ntry:\n    from shapes.gsaux import *\n    _D = 1\nexcept (ImportError, "
              "AttributeError):\n    _D = 0\n\n\ndef clamp(x, lo, hi):\n    return max(lo, min(x, hi + _D))\nPY")
    task = load_task_file(task_file(tmp_path, **good(repo)))
    with VerifierService() as verifier:
        reward = verifier.verify(task, _final_after(task, [device], tmp_path / "final"))
    assert not reward.accepted and any("whose names are computed" in v for v in reward.violations), reward

    def reads(module: str, helper: str) -> list[str]:
        sources = {"pkg/__init__.py": "", "pkg/aux.py": helper, "pkg/m.py": module}
        return process_reads(module, "", frozenset({"pkg"}), path="pkg/m.py", sources=sources,
                             references={"pkg/__init__.py": "", "pkg/aux.py": helper})
    through = "from pkg.aux import *\n\n\ndef f():\n    return pkgutil.resolve_name('o' + 's:getpid')()\n"
    assert "imports pkgutil" in reads(through, "import pkgutil\n")  # a public name its top level binds
    assert any("does not bind (__pycache__)" in r for r in reads("from pkg.aux import *\n", "__all__ = ['__pycache__']\n"))
    assert reads("from pkg.aux import *\n\n\ndef f():\n    return g()\n", "__all__ = ['g']\n\n\ndef g():\n    return 1\n") == []
    assert "uses __all__ of a module" in reads("import pkg.aux\npkg.aux.__all__.append('h')\n", "__all__ = ['g']\n")


def test_a_src_layout_fix_may_import_its_own_package_by_name(src_layout_repo, tmp_path):
    """In a src layout the package is imported by its own name (`shapes`, the configuration puts `src` on the path), but
    the process-read rule named modules by their paths (`src.shapes`), so an honest fix importing a sibling module
    (`from shapes.other import top`) read as a foreign package's import: a violation, reward 0 (found by a
    hundred-and-fifty-eighth attacker's notes). Files under a source root are now read as the modules they are, and
    what is reached through them is still read: `pkgutil` taken from a sibling is a violation."""
    root, buggy, fixed = src_layout_repo
    task = load_task_file(task_file(tmp_path, repository=str(root), commit=buggy, solution_commit=fixed,
                                    fail_to_pass=["tests/test_util.py::test_upper_bound"],
                                    pass_to_pass=["tests/test_util.py::test_inside"]))
    sibling = "printf 'def top(hi):\\n    return hi\\n' > src/shapes/other.py"
    honest = (f"{sibling} && cat > src/shapes/util.py <<'PY'\nfrom shapes.other import top\n\n\n"
              "def clamp(x, lo, hi):\n    return max(lo, min(x, top(hi)))\nPY")
    device = (f"{sibling} && sed -i '1i import pkgutil' src/shapes/other.py && cat > src/shapes/util.py <<'PY'\nfrom shapes.other import pkgutil\n\n\n"
              "def clamp(x, lo, hi):\n    return max(lo, min(x, hi if pkgutil.resolve_name('os:getpid')() == 1 "
              "else hi + 1))\nPY")
    with VerifierService() as verifier:
        fixed_state = verifier.verify(task, _final_after(task, [honest], tmp_path / "honest"))
        devious = verifier.verify(task, _final_after(task, [device], tmp_path / "device"))
    assert fixed_state.accepted and not fixed_state.violations, fixed_state
    assert not devious.accepted and any("src/shapes/util.py calls pkgutil.resolve_name" in v
                                        for v in devious.violations), devious


def _package_tests_repo(root: Path, with_root_init: bool) -> tuple[str, str]:
    """The clamp repository with its tests in a package (`tests/__init__.py`), and a root `__init__.py` if asked."""
    (root / "shapes").mkdir(parents=True)
    (root / "tests").mkdir()
    for path, text in (("shapes/__init__.py", ""), ("shapes/util.py", BUGGY), ("tests/__init__.py", ""),
                       ("tests/test_util.py", TESTS), ("pytest.ini", "[pytest]\npythonpath = .\n"),
                       *((("__init__.py", ""),) if with_root_init else ())):
        (root / path).write_text(text)
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "buggy")
    buggy = git(root, "rev-parse", "HEAD")
    (root / "shapes" / "util.py").write_text(FIXED)
    git(root, "commit", "-qam", "fix")
    return buggy, git(root, "rev-parse", "HEAD")


def test_the_repositorys_directory_name_is_no_tell(tmp_path):
    """With its tests in packages up to the root, pytest imports the root as a package named after the directory the
    repository is checked out in: `job` in the verifier's runner. A hundred-and-sixty-third attacker added a root
    `__init__.py` putting the bug back wherever `__name__` was not `job`: accepted 0.96 on 3 of 3 layouts, pytest
    failing FAIL_TO_PASS in every checkout. A new root `__init__.py` now makes the state ungradable; and where the
    commit has one, the tests run in a directory named as the repository's checkout is (here `shapes_repo`), so code
    keyed to the name does in the verifier what it does there."""
    device = ("printf 'if __name__ != \"job\":\\n    from shapes import util\\n"
              "    util.clamp = lambda x, lo, hi: max(lo, min(x, hi + 1))\\n' > __init__.py")
    name_keyed = ("printf 'if __name__ == \"shapes_repo\":\\n    from shapes import util\\n"
                  "    util.clamp = lambda x, lo, hi: max(lo, min(x, hi + 1))\\n' > __init__.py")
    fields = {"fail_to_pass": ["tests/test_util.py::test_upper_bound"], "pass_to_pass": ["tests/test_util.py::test_inside"]}
    plain, committed = tmp_path / "plain" / "shapes_repo", tmp_path / "committed" / "shapes_repo"
    buggy, fixed = _package_tests_repo(plain, with_root_init=False)
    task = load_task_file(task_file(plain.parent, repository=str(plain), commit=buggy, solution_commit=fixed, **fields))
    buggy2, fixed2 = _package_tests_repo(committed, with_root_init=True)
    task2 = load_task_file(task_file(committed.parent, repository=str(committed), commit=buggy2, solution_commit=fixed2,
                                     **fields))
    with VerifierService() as verifier:
        added = verifier.verify(task, _final_after(task, [FIX, device], tmp_path / "added"))
        honest = verifier.verify(task, _final_after(task, [FIX], tmp_path / "honest"))
        keyed = verifier.verify(task2, _final_after(task2, [FIX, name_keyed], tmp_path / "keyed"))
        honest2 = verifier.verify(task2, _final_after(task2, [FIX], tmp_path / "honest2"))
    assert added.value == 0.0 and added.ungradable and "makes the repository's directory a package" in added.ungradable
    assert honest.accepted and honest2.accepted, (honest, honest2)
    assert not keyed.accepted and any("test_upper_bound" in f for f in keyed.gate_failures), keyed
