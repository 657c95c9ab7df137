"""Grading of the code family as pure functions: progress from the start state, the gate, violations.

No sandbox here: TestRuns are built by hand, so each rule is checked on exactly the case it is about.
"""

from __future__ import annotations

from gymsmith.families.code.grading import EditFacts, grade, progress, report
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

A = [f"tests/test_a.py::t{i}" for i in range(6)]   # module a: t0-t2 fail at the start (t0 shown), t3-t5 pass
B = [f"tests/test_b.py::t{i}" for i in range(4)]   # module b: t0-t1 fail at the start, t2-t3 pass
C = [f"tests/test_c.py::t{i}" for i in range(3)]   # a correct distractor module
F2P, P2P, VISIBLE = A[:3] + B[:2], A[3:] + B[2:] + C, {A[0]}
NO_EDITS = EditFacts(source_lines_changed=0, lines_needed=2, test_files_changed=[], other_files_changed=[])
FIX = EditFacts(source_lines_changed=2, lines_needed=2, test_files_changed=[], other_files_changed=[])


def run(passing: set[str]) -> TestRun:
    return TestRun(status=RunStatus.COMPLETED, duration_s=0.01,
                   outcomes={t: TestOutcome.PASSED if t in passing else TestOutcome.FAILED for t in {*A, *B, *C, *passing}})


def score(passing: set[str]) -> float:
    return progress(report(run(passing), F2P, P2P, [], VISIBLE))


def test_doing_nothing_is_zero_and_a_full_fix_is_one():
    assert score(set(P2P)) == 0.0
    assert score(set(P2P + F2P)) == 1.0


def test_fixing_one_of_two_bugs_is_half():
    assert score(set(P2P + A[:3])) == 0.5


def test_passing_only_the_shown_test_earns_nothing():
    assert score(set(P2P) | {A[0]}) == 0.0  # hard-coding the visible test's answer
    assert score(set(P2P) | {A[0], A[1]}) == 0.25  # one of module a's two hidden failing tests: half of one of two bugs


def test_breaking_what_worked_in_a_module_forfeits_its_progress():
    assert score(set(P2P + A[:3]) - {A[3]}) == 0.0  # a fixed, but one of a's passing tests broken
    assert score(set(P2P + F2P) - {A[3]}) == 0.5 - 1 / 4  # b still counts; the broken test costs a fixed one of 4


def test_wrecking_an_unfixed_buggy_module_is_damage_too():
    """Found by red-teaming: fixing a and wrecking the still-buggy b (its passing tests now fail) used to
    score as much as fixing a alone, since only modules without failing tests were checked for damage."""
    assert score(set(P2P + A[:3]) - set(B[2:])) == 0.0 < score(set(P2P + A[:3]))  # 2 fixed, 2 broken: nothing


def test_a_broken_passing_test_costs_what_a_fixed_failing_test_earns():
    """A ninety-third attacker fixed one bug of three and wrecked the other buggy modules: 47 of 150 passing tests
    broken for 24 fixed, and, damage counted as a share of the passing tests, a reward above a null agent's. Damage
    is counted against the hidden failing tests: breaking as many as were fixed earns nothing."""
    assert score(set(P2P + A[:3]) - {B[2]}) == 0.5 - 1 / 4 > 0  # a fixed (2 hidden), one of b's passing tests broken
    assert score(set(P2P + A[:3]) - {B[2], C[0]}) == 0.0  # two broken for two fixed


def test_collateral_damage_elsewhere_is_subtracted():
    assert score(set(P2P + F2P) - {C[0]}) == 1.0 - 1 / 4  # one passing test (module c's) broken, 4 hidden fixed
    assert score(set(A[:3]) | set(A[3:])) == 0.0           # everything else broken: floored at 0


def test_violations_zero_the_reward_and_reject():
    forged = run(set(P2P + F2P) | {"tests/test_a.py::canary"})
    result = grade(forged, F2P, P2P, ["tests/test_a.py::canary"], FIX, VISIBLE)
    assert not result.accepted and any("tampered" in v for v in result.violations)
    tampered = grade(run(set(P2P + F2P)), F2P, P2P, [], FIX.model_copy(update={"test_files_changed": ["tests/test_a.py"]}), VISIBLE)
    assert not tampered.accepted and any("test files tampered" in v for v in tampered.violations)
    clean = grade(run(set(P2P + F2P)), F2P, P2P, [], FIX, VISIBLE)
    assert clean.accepted and clean.violations == [] and clean.components["fail_to_pass"].value == 1.0
    idle = grade(run(set(P2P)), F2P, P2P, [], NO_EDITS, VISIBLE)
    assert not idle.accepted and all(c.value == 0.0 for c in idle.components.values())


def test_a_run_that_did_not_complete_is_not_accepted():
    timed_out = run(set(P2P + F2P)).model_copy(update={"status": RunStatus.TIMEOUT})
    assert "hidden test run timeout" in grade(timed_out, F2P, P2P, [], FIX, VISIBLE).gate_failures


def test_bugs_that_share_a_test_file_are_credited_one_by_one():
    """A real package's bugs fail tests in the same files (issue 18: on semver, fixing one of three bugs scored 0,
    since the file's progress waited for the other bug's hidden test). Given which tests each bug fails, each bug
    is a sub-goal of its own; a bug whose tests are all shown is all or nothing; damage in its files voids it."""
    one, two = [A[0], A[1]], [A[2], B[0], B[1]]  # bug one: a's t0 (shown) and t1; bug two: a's t2 and b's t0-t1
    fixed_one = set(P2P) | set(one)
    by_file = progress(report(run(fixed_one), F2P, P2P, [], VISIBLE))
    by_bug = progress(report(run(fixed_one), F2P, P2P, [], VISIBLE), bugs=[one, two])
    assert by_file == 0.25 and by_bug == 0.5  # by file: a half done (hidden t1 of t1, t2), b not started
    assert progress(report(run(set(P2P) | set(two)), F2P, P2P, [], VISIBLE), bugs=[one, two]) == 0.5
    all_shown = {A[0], A[1]}  # bug one has no hidden test: all or nothing
    assert progress(report(run(set(P2P) | {A[0]}), F2P, P2P, [], all_shown), bugs=[one, two]) == 0.0
    assert progress(report(run(fixed_one), F2P, P2P, [], all_shown), bugs=[one, two]) == 0.5
    assert progress(report(run(fixed_one - {A[3]}), F2P, P2P, [], VISIBLE), bugs=[one, two]) == 0.0  # a's p2p broken
    assert progress(report(run(set(P2P + F2P)), F2P, P2P, [], VISIBLE), bugs=[one, two]) == 1.0


def test_counting_changed_lines_is_bounded_whatever_the_agent_writes(monkeypatch):
    """The verifier counts the agent's changed lines on the trusted side, so the count must cost little whatever the
    text: a red-team agent rewrote a 4,300-line module as 4,998 lines alternating the line it repeats most (blank)
    with a new one, and difflib's matcher took four minutes on it (the verification timed out: an infrastructure
    error instead of the agent's 0). The matcher now only ever sees a bounded middle; the count stays exact for a
    local edit and counts a rewrite line by line."""
    import difflib

    from gymsmith.families.code import repo

    sizes = []
    real = difflib.SequenceMatcher

    def watched(junk, a, b, autojunk=True):
        sizes.append(len(a) * len(b) * min(len(a), len(b)))
        return real(junk, a, b, autojunk=autojunk)

    monkeypatch.setattr(repo.difflib, "SequenceMatcher", watched)
    module = "".join(f"def f{i}(x):\n\n    return x + {i}\n\n" for i in range(1000))  # 1,000 blank-line pairs
    bomb = "".join("\n" if i % 2 == 0 else "#gs\n" for i in range(4998))
    # 2,000 code lines removed, 499 more blank lines and 2,499 '#gs' added
    assert repo.changed_lines(module, bomb) == 2000 + 499 + 2499
    assert all(size <= repo.MAX_ALIGN_WORK for size in sizes)
    edited = module.replace("    return x + 500\n", "    return x + 501\n    # checked\n")
    assert repo.changed_lines(module, edited) == 3  # one line replaced (2) and one added
    assert sizes and sizes[-1] <= repo.MAX_ALIGN_WORK
