"""The code family: generation, the start state, the tools, and reset exactness (real sandboxes, real git)."""

from __future__ import annotations

import json
import subprocess

import pytest

from gymsmith.core.errors import KnobError
from gymsmith.core.types import Action, ActionErrorKind
from gymsmith.families.code import mutate
from gymsmith.families.code.env import code_task
from gymsmith.families.code.generator import check_reference, hidden_suite, mutant_outcome, usable
from gymsmith.verifier.calltests import compile_suite
from gymsmith.families.code.repo import pristine_repo
from gymsmith.families.code.templates import TEMPLATES, template_source
from gymsmith.registry import get_family

CODE = get_family("code")


def test_at_least_twelve_templates_and_every_reference_passes_its_suite():
    assert len(TEMPLATES) >= 12
    for name in TEMPLATES:
        check_reference(name)  # raises if the reference fails any test in the sandboxed runner


def test_every_operator_yields_a_usable_bug_somewhere():
    found = set()
    for name in TEMPLATES:
        source, _ = template_source(name)
        for m in mutate.candidates(source):
            if m.operator not in found and usable(mutant_outcome(name, m)):
                found.add(m.operator)
    assert found == set(mutate.OPERATORS)


def test_same_seed_same_task_and_different_seed_different_task():
    a, b, c = CODE.generate(7, difficulty=0.6), CODE.generate(7, difficulty=0.6), CODE.generate(8, difficulty=0.6)
    assert a.id == b.id and a.model_dump_json() == b.model_dump_json() and a.id != c.id


def test_knobs_are_validated_with_clear_errors():
    with pytest.raises(KnobError, match="n_bugs"):
        CODE.generate(1, n_bugs=9)
    with pytest.raises(KnobError, match="operator"):
        CODE.generate(1, operator="rename_everything")


@pytest.mark.parametrize("seed", range(6))
def test_a_kept_bug_fails_tests_and_the_lists_partition_the_suite(seed):
    task = CODE.generate(seed, difficulty=seed / 5)
    ct = code_task(task)
    assert len(ct.fail_to_pass) >= 2 * task.knobs["n_bugs"] and set(ct.fail_to_pass).isdisjoint(ct.pass_to_pass)
    every = {f"{path}::{n}" for path, src in ct.hidden_tests.items() for n in _tests(src)}
    assert set(ct.fail_to_pass) | set(ct.pass_to_pass) | set(ct.canaries) == every
    assert set(ct.visible_failing) <= set(ct.fail_to_pass)
    assert set(ct.fail_to_pass) - set(ct.visible_failing)  # some failing tests stay hidden
    for vf in ct.visible_failing:  # the visible failing test is in the agent's test file
        path, name = vf.split("::")
        assert f"def {name}(" in ct.files[path]
    assert len(ct.buggy_modules) == task.knobs["n_bugs"] == len(ct.mutations)
    assert len(ct.modules) == task.knobs["modules"]


def test_every_bug_keeps_a_hidden_test_whose_answer_no_file_holds():
    """The templates' own tests ship with gymsmith: an agent that memorised them and special-cased their calls was
    accepted wherever a bug failed only those. Every bug fails a hidden *private* test (a differential test on a
    call no template test makes, checking more than one bit), and only those earn progress."""
    from gymsmith.families.code.generator import private_tests, public_calls
    from gymsmith.verifier.calltests.compiler import informative

    for seed in range(24):
        ct = code_task(CODE.generate(seed, difficulty=(seed % 8) / 7))
        for module in ct.buggy_modules:
            name = module.removesuffix(".py")
            mine = [n for n in ct.fail_to_pass if n.startswith(f"tests/test_{name}.py::") and n not in ct.visible_failing]
            private = [n for n in mine if n.split("::")[1] in private_tests(name)]
            assert private, (seed, module)
            assert not any(f"def {n.split('::')[1]}(" in ct.files[f"tests/test_{name}.py"] for n in private)
    for name in TEMPLATES:  # private: not the template's own, not a public call, more than one bit
        _, tests = template_source(name)
        suite = {t.name: t for t in compile_suite(hidden_suite(name), f"tests/test_{name}.py").tests}
        assert private_tests(name).isdisjoint(_tests(tests)) and all(informative(suite[n]) for n in private_tests(name))
        assert public_calls("G = [3, 4]\ndef test_x():\n    assert [f(n) for n in G] == [9, 16]\n") == {
            ("f", "(3,)"), ("f", "(4,)")}


def _tests(source: str) -> list[str]:
    import ast
    return [n.name for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")]


def test_difficulty_moves_every_knob():
    easy, hard = CODE.generate(3, difficulty=0.0).knobs, CODE.generate(3, difficulty=1.0).knobs
    assert easy["n_bugs"] < hard["n_bugs"] and easy["modules"] < hard["modules"]
    assert easy["directness"] > hard["directness"] and easy["visible_tests"] > hard["visible_tests"]


def test_start_state_is_a_fresh_single_commit_repository_that_leaks_nothing():
    task = CODE.generate(11, difficulty=0.9)
    ct = code_task(task)
    repo, digest = pristine_repo(ct.files)
    assert digest == task.start_state.digest
    git = lambda *a: subprocess.run(["git", *a], cwd=repo, capture_output=True, text=True).stdout  # noqa: E731
    assert git("rev-list", "--all").split() and len(git("rev-list", "--all").split()) == 1
    assert git("reflog").count("\n") <= 1 and git("stash", "list") == ""
    blobs = git("rev-list", "--objects", "--all")
    everything = "".join(p.read_text() for p in repo.rglob("*") if p.is_file() and ".git" not in p.parts)
    for module in ct.buggy_modules:
        assert ct.reference[module] != ct.files[module]
        assert ct.reference[module] not in everything
    for canary in ct.canaries:
        assert canary.split("::")[1] not in everything and canary.split("::")[1] not in blobs
    assert "mutation" not in everything.lower() and len(blobs.split("\n")) < 40


@pytest.fixture(scope="module")
def env():
    e = CODE.make_env()
    yield e
    e.close()


def step(env, tool, **arguments):
    return env.step(Action(tool=tool, arguments=arguments)).observation


def test_tools_read_write_replace_and_list(env):
    task = CODE.generate(5, difficulty=0.2)
    obs = env.reset(task, seed=0)
    module = code_task(task).modules[0]
    assert module in obs.text and "Repository files" in obs.text
    assert "1  " in step(env, "read_file", path=module, start_line=1, end_line=3).text
    assert step(env, "write_file", path="notes.txt", content="a\nb\n").error is None
    assert step(env, "replace_text", path="notes.txt", old="b", new="c").error is None
    assert step(env, "read_file", path="notes.txt").text.endswith("c")
    assert "notes.txt" in step(env, "list_files").text


@pytest.mark.parametrize("tool,args,kind", [
    ("read_file", {"path": "missing.py"}, ActionErrorKind.NOT_FOUND),
    ("read_file", {"path": "../../etc/passwd"}, ActionErrorKind.RULE_VIOLATION),
    ("write_file", {"path": "/etc/x", "content": ""}, ActionErrorKind.RULE_VIOLATION),
    ("replace_text", {"path": "README.md", "old": "no such text", "new": ""}, ActionErrorKind.NOT_FOUND),
    ("replace_text", {"path": "README.md", "old": "e", "new": "E"}, ActionErrorKind.RULE_VIOLATION),
    ("apply_diff", {"diff": "this is not a diff"}, ActionErrorKind.RULE_VIOLATION),
    ("run_tests", {"tests": ["--co"]}, ActionErrorKind.INVALID_ARGUMENTS),
    ("read_file", {"path": "tests"}, ActionErrorKind.INVALID_ARGUMENTS),
    ("run_command", {"command": "true", "timeout_s": 999}, ActionErrorKind.INVALID_ARGUMENTS),
])
def test_bad_tool_calls_are_error_observations_and_the_rollout_continues(env, tool, args, kind):
    env.reset(CODE.generate(5, difficulty=0.2), seed=0)
    obs = step(env, tool, **args)
    assert obs.error is not None and obs.error.kind is kind, obs.text
    assert step(env, "list_files").error is None


def test_planted_symlink_cannot_be_read_through_the_tools(env):
    env.reset(CODE.generate(5, difficulty=0.2), seed=0)
    step(env, "run_command", command="ln -s /etc/passwd leak.txt")
    obs = step(env, "read_file", path="leak.txt")
    assert obs.error is not None and obs.error.kind is ActionErrorKind.RULE_VIOLATION and "root:" not in obs.text


def test_run_tests_reports_the_visible_failure_without_timings(env):
    task = CODE.generate(5, difficulty=0.2)
    env.reset(task, seed=0)
    obs = step(env, "run_tests")
    assert obs.data["exit_code"] == 1 and code_task(task).visible_failing[0].split("::")[1] in obs.text
    assert " in 0." not in obs.text


def test_reset_is_exact_after_arbitrary_changes(env):
    task = CODE.generate(9, difficulty=0.5)
    env.reset(task, seed=0)
    assert env.state_hash() == task.start_state.digest
    step(env, "run_command", command="rm -rf tests && echo x > new.py && git commit -qam wip && git checkout -qb other")
    assert env.state_hash() != task.start_state.digest
    env.reset(task, seed=0)
    assert env.state_hash() == task.start_state.digest
    assert step(env, "run_command", command="git log --oneline | wc -l").text.splitlines()[1] == "1"


def test_final_state_carries_the_diff_against_the_start(env, tmp_path):
    task = CODE.generate(9, difficulty=0.5)
    env.reset(task, seed=0)
    module = code_task(task).modules[0]
    step(env, "run_command", command=f"echo '# touched' >> {module}")
    final = env.final_state(tmp_path)
    assert f"+++ b/{module}" in final.diff and "+# touched" in final.diff and final.digest == env.state_hash()
    assert json.loads(json.dumps(final.model_dump()))["kind"] == "repo"


def test_run_tests_output_drops_addresses_in_either_case_and_run_time():
    """What run_tests reports must repeat exactly for the same state (the determinism check): object addresses
    change from run to run, in lower case (CPython's reprs) or upper case (sqlparse's), and so does pytest's time."""
    from gymsmith.families.code.env import _ADDRESS, _TIMING

    text = "cls = <Statement ' ...' at 0x7FC3848F1C50> f = <function f at 0x7f6ae78a1c50>\n3 failed in 1.25s"
    assert _ADDRESS.sub("0x…", _TIMING.sub("", text)) == "cls = <Statement ' ...' at 0x…> f = <function f at 0x…>\n3 failed"


def test_commands_repeat_exactly_under_the_same_seed_and_differ_under_another():
    """The determinism check's premise for packages whose tests draw random values (shortuuid's UUIDs, a mock's
    id): a command's randomness and addresses come from the task and the episode seed (sandbox/seeded_site.py)."""
    family = CODE
    task = family.generate(3)
    probe = ("python3 -c \"import uuid, random, secrets; from unittest.mock import MagicMock; "
             "print(uuid.uuid4(), random.random(), secrets.token_hex(4), id(MagicMock()))\"")
    seen = []
    for seed in (7, 7, 8):
        env = family.make_env()
        try:
            env.reset(task, seed=seed)
            seen.append([step(env, "run_command", command=probe).text for _ in range(2)])
        finally:
            env.close()
    assert seen[0] == seen[1], seen
    assert seen[0][0] != seen[0][1]  # two commands of a rollout draw different values
    assert seen[2] != seen[0]
