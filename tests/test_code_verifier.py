"""The warm verifier path gives the same per-test outcomes as a fresh `python -m pytest`, and holds up against
code that fights it. Real sandboxes; the fresh runs are real pytest processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from gymsmith.families.code.checks import source_files
from gymsmith.families.code.env import code_task
from gymsmith.families.code.exploits import PATCH_RUNNER
from gymsmith.families.code.generator import PYTEST_INI
from gymsmith.families.code.grading import EditFacts, grade
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.verifier.pytest_runner import (
    LEAN_ARGS,
    RunStatus,
    TestOutcome,
    WarmPytest,
    choose_engine,
    fresh_pytest,
    is_plain_test_module,
)

N_TASKS = 200


def jobs_for(tasks):
    """One verification job per task: the buggy start, the reference fix, or only the first bug fixed."""
    out = []
    for i, task in enumerate(tasks):
        ct = code_task(task)
        sources = {m: ct.files[m] for m in ct.modules}
        if i % 3 == 1:
            sources.update({m: ct.reference[m] for m in ct.buggy_modules})
        elif i % 3 == 2:
            sources[ct.buggy_modules[0]] = ct.reference[ct.buggy_modules[0]]
        out.append({**sources, **ct.hidden_tests, "pytest.ini": PYTEST_INI})
    return out


@pytest.fixture(scope="module")
def jobs():
    return jobs_for(build_taskset(TaskSetSpec(family="code", count=N_TASKS, base_seed=900, knobs={"difficulty": [0.0, 1.0]})))


@pytest.fixture(scope="module")
def fresh(jobs):
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda j: fresh_pytest(j, extra_args=LEAN_ARGS), jobs))


def test_warm_outcomes_equal_fresh_pytest_on_every_task(jobs, fresh):
    with WarmPytest() as warm:
        runs = [warm.run(j, extra_args=LEAN_ARGS) for j in jobs]
    assert all(choose_engine(j, ["tests"], "auto")[0] == "plain" for j in jobs)
    assert all(f.status is RunStatus.COMPLETED for f in fresh)
    mismatches = [i for i, (w, f) in enumerate(zip(runs, fresh)) if w.outcomes != f.outcomes]
    assert mismatches == [], (mismatches[:3], runs[mismatches[0]].outcomes if mismatches else None)
    outcomes = [o for f in fresh for o in f.outcomes.values()]
    assert outcomes.count(TestOutcome.PASSED) > 1000 and outcomes.count(TestOutcome.FAILED) > 300  # both kinds exercised


def test_warm_pytest_engine_equals_fresh_pytest_too(jobs, fresh):
    with WarmPytest() as warm:
        runs = [warm.run(j, extra_args=LEAN_ARGS, engine="pytest") for j in jobs[:60]]
    assert [r.outcomes for r in runs] == [f.outcomes for f in fresh[:60]]


def test_plain_engine_refuses_what_it_cannot_reproduce():
    assert is_plain_test_module("import x\nA = 1\n\ndef helper(a):\n    return a\n\ndef test_a():\n    assert helper(1)\n")
    for source in ("import pytest\n@pytest.mark.parametrize('a', [1])\ndef test_a(a):\n    pass\n",
                   "def test_a(tmp_path):\n    pass\n", "class TestX:\n    def test_a(self):\n        pass\n",
                   "def setup_module():\n    pass\n", "pytestmark = []\n"):
        assert not is_plain_test_module(source)
    with pytest.raises(ValueError, match="plain engine"):
        choose_engine({"tests/test_a.py": "def test_a(x):\n    pass\n"}, ["tests"], "plain")


def test_a_forged_pass_is_caught_by_the_canaries_under_pytest():
    """Code that rewrites pytest's reports makes every test 'pass', including the canaries that must fail."""
    task = build_taskset(TaskSetSpec(family="code", count=1, base_seed=77))[0]
    ct = code_task(task)
    sources = {m: ct.files[m] + PATCH_RUNNER for m in ct.modules}
    with WarmPytest() as warm:
        run = warm.run({**sources, **ct.hidden_tests, "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS, engine="pytest")
    assert all(run.outcome(c) is TestOutcome.PASSED for c in ct.canaries)  # the forgery worked on pytest ...
    result = grade(run, ct.fail_to_pass, ct.pass_to_pass, ct.canaries,
                   EditFacts(source_lines_changed=10, lines_needed=1, test_files_changed=[], other_files_changed=[]))
    assert not result.accepted and any("tampered" in f for f in result.gate_failures)  # ... and was caught
    assert result.components["fail_to_pass"].value == 0.0  # no partial credit for forged passes


def test_runner_survives_code_that_kills_hangs_or_exits():
    base = {"m.py": "def f():\n    return 1\n", "pytest.ini": PYTEST_INI}
    with WarmPytest() as warm:
        killer = warm.run({**base, "tests/test_k.py": "import os\n\ndef test_a():\n    assert True\n\ndef test_kill():\n"
                                                      "    os.kill(-1, 9)\n"}, timeout=10)
        hang = warm.run({**base, "tests/test_h.py": "import time\n\ndef test_a():\n    assert True\n\ndef test_hang():\n"
                                                    "    time.sleep(60)\n"}, timeout=1)
        exits = warm.run({**base, "tests/test_e.py": "import os\nos._exit(0)\n"}, timeout=10)
        after = warm.run({**base, "tests/test_ok.py": "from m import f\n\ndef test_f():\n    assert f() == 1\n"})
    assert killer.outcome("tests/test_k.py::test_a") is TestOutcome.PASSED
    assert hang.status is RunStatus.TIMEOUT and hang.outcome("tests/test_h.py::test_a") is TestOutcome.PASSED
    assert hang.outcome("tests/test_h.py::test_hang") is TestOutcome.MISSING
    assert exits.status is RunStatus.CRASHED and exits.outcomes == {}
    assert after.status is RunStatus.COMPLETED and after.outcomes == {"tests/test_ok.py::test_f": TestOutcome.PASSED}


def test_only_harmless_source_files_reach_the_verifier():
    final = {"lru.py": "x", "helper.py": "y", "conftest.py": "z", "sitecustomize.py": "w", "json.py": "v",
             "pytest.py": "u", "tests/test_lru.py": "t", "test_extra.py": "s", "sub/mod.py": "r", "README.md": "q"}
    assert source_files(final, ["lru.py", "dates.py"]) == {"lru.py": "x", "dates.py": "", "helper.py": "y"}
