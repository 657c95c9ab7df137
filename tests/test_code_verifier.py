"""Call checks give the same per-test outcomes as a fresh `python -m pytest` on honest code (buggy, fixed, half
fixed), and the warm pytest runner (for repositories brought by users) holds up against code that fights it.
Real sandboxes; the fresh runs are real pytest processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from gymsmith.families.code.checks import source_files
from gymsmith.families.code.env import code_task
from gymsmith.families.code.exploits import PATCH_RUNNER
from gymsmith.families.code.generator import PYTEST_INI, compiled_suite, run_hidden_tests
from gymsmith.families.code.grading import EditFacts, grade
from gymsmith.families.code.repo import Tree
from gymsmith.registry import TaskSetSpec, build_taskset
from gymsmith.verifier.pytest_runner import LEAN_ARGS, RunStatus, TestOutcome, WarmPytest, fresh_pytest

# 24 tasks (was 50, 100 and 200 before; since variants draw until they have a new shape and a larger size, generation
# costs more): thousands of passing and hundreds of failing test outcomes compared one by one,
# a third each on buggy, fixed and half-fixed code; each fresh pytest is a real process, and since hidden variants
# are drawn per task (seconds a task the first time on a machine) generation is the fixture's other bulk.
N_TASKS = 24


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
        out.append((sources, ct.hidden_tests))
    return out


@pytest.fixture(scope="module")
def jobs():
    return jobs_for(build_taskset(TaskSetSpec(family="code", count=N_TASKS, base_seed=900, knobs={"difficulty": [0.0, 1.0]})))


def call_checks(sources, hidden):
    templates = [p.removeprefix("tests/test_").removesuffix(".py") for p in sorted(hidden)]
    suites = [compiled_suite(t, hidden[f"tests/test_{t}.py"]) for t in templates]
    # what is compared is each test's outcome, not the time a file takes: a file of two grown variants (88,670 pairs
    # each) takes about 1.5 s of the verifier's 2 s on an idle machine, and timed out here under a loaded one
    return run_hidden_tests(sources, suites, templates, deadline_s=30, group_timeout_s=10)


@pytest.fixture(scope="module")
def fresh(jobs):
    with ThreadPoolExecutor(2) as pool:
        return list(pool.map(lambda j: fresh_pytest({**j[0], **j[1], "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS), jobs))


@pytest.mark.timeout(1500)  # its fixtures generate every task (keyed draws, cold on a clean machine: 331 s in CI52)
def test_call_checks_equal_fresh_pytest_on_honest_code_of_every_task(jobs, fresh):
    """Outside the canaries (which call checks can never pass), pass/fail agree test for test."""
    runs = [call_checks(sources, hidden) for sources, hidden in jobs]
    assert all(f.status is RunStatus.COMPLETED for f in fresh) and all(r.status is RunStatus.COMPLETED for r in runs)
    passed = lambda o: o is TestOutcome.PASSED  # noqa: E731
    mismatches = [i for i, (r, f) in enumerate(zip(runs, fresh))
                  if {k: passed(v) for k, v in r.outcomes.items()} != {k: passed(v) for k, v in f.outcomes.items()}]
    assert mismatches == [], (mismatches[:3], {k: (v, runs[mismatches[0]].outcome(k)) for k, v in fresh[mismatches[0]].outcomes.items()
                                                 if passed(v) != passed(runs[mismatches[0]].outcome(k))} if mismatches else None)
    outcomes = [o for f in fresh for o in f.outcomes.values()]
    assert outcomes.count(TestOutcome.PASSED) > 1000 and outcomes.count(TestOutcome.FAILED) > 150  # both kinds exercised


def test_warm_pytest_equals_fresh_pytest(jobs, fresh):
    with WarmPytest() as warm:
        runs = [warm.run({**j[0], **j[1], "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS) for j in jobs[:60]]
    assert [r.outcomes for r in runs] == [f.outcomes for f in fresh[:60]]


def test_a_runner_patch_forges_pytest_but_not_call_checks():
    """Code that rewrites pytest's reports makes every pytest test 'pass', canaries included (caught as a
    violation); under call checks the same code has no report to rewrite and no test passes by it."""
    task = build_taskset(TaskSetSpec(family="code", count=1, base_seed=77))[0]
    ct = code_task(task)
    sources = {m: ct.files[m] + PATCH_RUNNER for m in ct.modules}
    with WarmPytest() as warm:
        run = warm.run({**sources, **ct.hidden_tests, "pytest.ini": PYTEST_INI}, extra_args=LEAN_ARGS)
    assert all(run.outcome(c) is TestOutcome.PASSED for c in ct.canaries)  # the forgery worked on pytest ...
    edits = EditFacts(source_lines_changed=10, lines_needed=1, test_files_changed=[], other_files_changed=[])
    result = grade(run, ct.fail_to_pass, ct.pass_to_pass, ct.canaries, edits)
    assert not result.accepted and any("tampered" in v for v in result.violations)  # ... and was caught
    calls = call_checks(sources, ct.hidden_tests)
    assert not any(calls.outcome(t) is TestOutcome.PASSED for t in ct.fail_to_pass + ct.canaries)


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
    """The task's modules and the new modules they import; no test file, hook, shadow of a library, link, nor a new
    module nothing graded imports (`unused.py`)."""
    files = {"lru.py": "import helper\n", "helper.py": "y", "unused.py": "import sys\n", "conftest.py": "z",
             "sitecustomize.py": "w", "json.py": "v", "pytest.py": "u", "tests/test_lru.py": "t", "test_extra.py": "s",
             "sub/mod.py": "r", "README.md": "q"}
    final = Tree(files=files, sizes={p: len(t) for p, t in files.items()}, symlinks={"link.py": "/etc/passwd"})
    assert source_files(final, ["lru.py", "dates.py"]) == {"lru.py": "import helper\n", "dates.py": "", "helper.py": "y"}


def test_isolated_pytest_runs_each_test_in_its_own_process_speaking_only_for_itself():
    """For repositories brought by users: a test that kills its process costs only itself, and a process that
    reports outcomes for other tests (forging) is not heard for them."""
    forge = ("import json, os\n\ndef test_forger():\n    for fd in range(3, 64):\n        try:\n"
             "            os.write(fd, (json.dumps({'test': 'tests/test_x.py::test_fails', 'outcome': 'passed'}) + '\\n').encode())\n"
             "        except OSError:\n            pass\n    assert False\n\n"
             "def test_fails():\n    assert False\n\ndef test_exits():\n    os._exit(0)\n\ndef test_ok():\n    assert True\n")
    files = {"m.py": "x = 1\n", "tests/test_x.py": forge, "pytest.ini": PYTEST_INI}
    ids = [f"tests/test_x.py::{t}" for t in ("test_forger", "test_fails", "test_exits", "test_ok")]
    with WarmPytest() as warm:
        shared = warm.run(files, ids, timeout=20)
        isolated = warm.run(files, ids, timeout=20, isolate=True)
    assert shared.outcome("tests/test_x.py::test_ok") is TestOutcome.MISSING  # in one process the exit takes the rest down
    assert isolated.outcome("tests/test_x.py::test_fails") is TestOutcome.FAILED
    assert isolated.outcome("tests/test_x.py::test_ok") is TestOutcome.PASSED
    assert isolated.outcome("tests/test_x.py::test_exits") is TestOutcome.MISSING and isolated.status is RunStatus.CRASHED


def test_a_pytest_job_can_change_nothing_of_the_server_for_the_next():
    """Bring-your-own tasks' tests run in the warm pytest server, a fork per job. The server's priority and limits
    belong to the same host uid as the job's code, and the next job inherits them: a job that could name the server
    could leave a number there for the next rollout (a thirtieth attacker did so with the call server's /proc). A job
    has its own pid namespace and no /proc: it names only itself, and the next job starts as the first did."""
    from gymsmith.verifier.pytest_runner import WarmPytest

    leave = ("import os, resource\n\ndef test_leave():\n    for pid in range(1, 8):\n"
             "        try:\n            os.setpriority(os.PRIO_PROCESS, pid, 9)\n        except OSError:\n            pass\n"
             "        try:\n            resource.prlimit(pid, resource.RLIMIT_NOFILE, (99, 99))\n"
             "        except (OSError, ValueError):\n            pass\n")
    look = ("import os, resource\n\ndef test_look():\n    assert os.getpriority(os.PRIO_PROCESS, 0) == 0\n"
            "    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 99\n    assert not os.path.exists('/proc/1')\n")
    with WarmPytest() as warm:
        first = warm.run({"tests/test_leave.py": leave}, ["tests"])
        second = warm.run({"tests/test_look.py": look}, ["tests"])
    assert first.outcomes == {"tests/test_leave.py::test_leave": "passed"}, first
    assert second.outcomes == {"tests/test_look.py::test_look": "passed"}, second


def test_code_under_test_has_the_frames_left_it_has_under_python_m_pytest():
    """Code can count the frames it has left by recursing to RecursionError (pure code, no rule can read it). The warm
    runner called `pytest.main` from its own frames, so the count was one below `python -m pytest`'s: a
    hundred-and-sixty-first attacker's repository fix held only at the runner's count (accepted 0.96 on 3 of 3, pytest
    failing FAIL_TO_PASS). The runner now moves its recursion limit so that the count, in a test and in a function a
    test calls, is `python -m pytest`'s in the same runtime."""
    probe = "def left(n=0):\n    try:\n        return left(n + 1)\n    except RecursionError:\n        return n\n"
    counts = range(900, 1000)
    tests = "from probe import left\n\n\n" + "".join(
        f"def test_at_{k}():\n    assert left() == {k}\n\n\ndef test_inside_{k}():\n    assert (lambda: left())() == {k}\n\n\n"
        for k in counts)
    files = {"probe.py": probe, "tests/test_depth.py": tests}

    def passed(run) -> list[str]:
        return sorted(t.split("::")[1] for t, o in run.outcomes.items() if o is TestOutcome.PASSED)
    fresh = passed(fresh_pytest(files, ["tests"]))
    with WarmPytest() as warm:
        served = passed(warm.run(files, ["tests"], path_first=True))
    assert len(fresh) == 2 and served == fresh, (served, fresh)
