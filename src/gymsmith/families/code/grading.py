"""Grading as a chain of small pure functions: test outcomes -> report -> gate, violations and components.

Truth table of the gate (every row must hold for `accepted`):

| condition                                   | if it fails                                  | kind       |
|---------------------------------------------|----------------------------------------------|------------|
| the hidden test run completed               | "hidden test run timeout" / "crashed"        | gate       |
| every FAIL_TO_PASS test passes              | "FAIL_TO_PASS failing: ..."                  | gate       |
| every PASS_TO_PASS test passes              | "PASS_TO_PASS failing: ..."                  | gate       |
| every canary test fails                     | "test runner tampered with: ..."             | violation  |
| no existing test file or conftest changed   | "test files tampered with: ..."              | violation  |
| no graded module observes its process       | "graded code observes the process ..."       | violation  |

A canary is a hidden check that no run can pass (its expected value is impossible); if one passes, the
verdict itself was forged and the run proves nothing. A violation zeroes the reward (see
`verifier.protocol.CheckResult`). New test files the agent adds are ignored: the verifier runs its own.

Components measure progress from the start state, so doing nothing earns 0 (potential-based: at the
start every FAIL_TO_PASS test fails by construction):
- `fail_to_pass` (0.9): `progress`, per bug the share of its *hidden* FAIL_TO_PASS tests that now
  pass — the agent saw the visible ones' inputs and expected values, so passing those (or hidden tests on
  the same inputs) proves nothing on its own; the caller says which tests were shown (`visible`) — counted
  only while none of the PASS_TO_PASS tests of its test files fails; averaged over the bugs, minus the
  PASS_TO_PASS tests broken (any module) counted against the hidden FAIL_TO_PASS tests (a broken passing test
  costs what a fixed failing one earns), floored at 0. What worked is worth nothing by itself, and breaking
  it forfeits the progress it was traded for.
- `edit_economy` (0.1, or half the smallest step of progress if less, so more of the fix always scores
  more): lines the reference fix needs / source lines changed (halved for changes outside the source),
  times the progress: economy earns only alongside progress.
"""

from __future__ import annotations

from pydantic import BaseModel

from gymsmith.core.types import RewardComponent
from gymsmith.verifier.protocol import CheckResult
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

WEIGHTS = {"fail_to_pass": 0.9, "edit_economy": 0.1}


class GradeReport(BaseModel):
    run_status: RunStatus
    f2p_passed: list[str]
    f2p_failed: list[str]
    hidden_f2p_passed: list[str]
    hidden_f2p_failed: list[str]
    p2p_passed: list[str]
    p2p_failed: list[str]
    canaries_passed: list[str]


class EditFacts(BaseModel):
    """What the agent changed, from the start state to the final one."""

    source_lines_changed: int
    lines_needed: int                  # lines the reference fix changes
    test_files_changed: list[str]      # existing test files edited or deleted; conftest files added or changed
    other_files_changed: list[str]     # anything outside source and test files (config, data, new scripts)
    test_files_added: list[str] = []   # new test files: ignored by the verifier, not a violation
    process_reads: list[str] = []      # what graded modules use to observe their process (`introspection`): a violation


def report(run: TestRun, f2p: list[str], p2p: list[str], canaries: list[str], visible: set[str] | frozenset[str] = frozenset()) -> GradeReport:
    passed = lambda t: run.outcome(t) is TestOutcome.PASSED  # noqa: E731
    hidden = [t for t in f2p if t not in visible]
    return GradeReport(run_status=run.status, f2p_passed=[t for t in f2p if passed(t)], f2p_failed=[t for t in f2p if not passed(t)],
                       hidden_f2p_passed=[t for t in hidden if passed(t)], hidden_f2p_failed=[t for t in hidden if not passed(t)],
                       p2p_passed=[t for t in p2p if passed(t)], p2p_failed=[t for t in p2p if not passed(t)],
                       canaries_passed=[t for t in canaries if passed(t)])


def _listed(tests: list[str]) -> str:
    return ", ".join(tests[:5]) + (" ..." if len(tests) > 5 else "")


def gate_failures(r: GradeReport) -> list[str]:
    out = []
    if r.run_status is not RunStatus.COMPLETED:
        out.append(f"hidden test run {r.run_status.value}")
    if r.f2p_failed:
        out.append(f"FAIL_TO_PASS failing: {_listed(r.f2p_failed)}")
    if r.p2p_failed:
        out.append(f"PASS_TO_PASS failing: {_listed(r.p2p_failed)}")
    return out


def violations(r: GradeReport, edits: EditFacts) -> list[str]:
    out = []
    if r.canaries_passed:
        out.append(f"test runner tampered with: canary tests passed ({len(r.canaries_passed)})")
    if edits.test_files_changed:
        out.append(f"test files tampered with: {_listed(edits.test_files_changed)} (the task says not to edit the tests)")
    if edits.process_reads:
        out.append(f"graded code observes the process it runs in: {_listed(edits.process_reads)} (the task says a fix "
                   "may not; code that can tell the verifier's process from others can pass there and fail elsewhere)")
    return out


def _share(good: list[str], bad: list[str]) -> float:
    return len(good) / (len(good) + len(bad)) if good or bad else 0.0


def _file(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def _units(r: GradeReport, bugs: list[list[str]] | None) -> list[set[str]]:
    """The FAIL_TO_PASS tests of each sub-goal: `bugs` when the task says which tests each bug fails (a real
    package's bugs share test files), else one per test file with failing tests (templates: a bug per file)."""
    if bugs:
        return [set(tests) for tests in bugs]
    tests = r.f2p_passed + r.f2p_failed
    return [{t for t in tests if _file(t) == f} for f in sorted({_file(t) for t in tests})]


def progress(r: GradeReport, bugs: list[list[str]] | None = None) -> float:
    """Progress in [0, 1] from the start state, where every FAIL_TO_PASS test failed.

    Per bug (`_units`): the share of its unanswered hidden FAIL_TO_PASS tests that pass — counted only while
    every PASS_TO_PASS test of the test files it fails in still passes (do no harm: otherwise wrecking a module,
    every function raising say, would buy the tests that expect an exception). The bugs' mean, minus the
    PASS_TO_PASS tests broken (collateral damage, in any file: an unfixed buggy module wrecked is damage too) as a
    share of the hidden FAIL_TO_PASS tests, floored at 0: a broken passing test costs what a fixed failing test
    earns. (As a share of the passing tests, damage was cheap where they are many: a ninety-third attacker fixed
    one bug of three and wrecked the other buggy modules, 47 of 150 passing tests broken for 24 fixed, and scored
    above a null agent.)
    """
    units = _units(r, bugs)
    if not units:
        return 0.0
    per_unit = []
    for unit in units:
        mine = lambda tests: [t for t in tests if t in unit]  # noqa: E731
        hidden_passed, hidden_failed = mine(r.hidden_f2p_passed), mine(r.hidden_f2p_failed)
        # with no unanswered hidden test (rare: see checks.answered_tests), a bug's progress is all or nothing
        fixed = _share(hidden_passed, hidden_failed) if hidden_passed or hidden_failed else float(not mine(r.f2p_failed))
        files = {_file(t) for t in unit}
        per_unit.append(0.0 if any(_file(t) in files for t in r.p2p_failed) else fixed)
    # damage anywhere costs: a broken test of an unfixed buggy module too (else wrecking it was free)
    hidden = len(r.hidden_f2p_passed) + len(r.hidden_f2p_failed)
    return max(0.0, sum(per_unit) / len(per_unit) - len(r.p2p_failed) / max(1, hidden))


def economy_weight(r: GradeReport, bugs: list[list[str]] | None = None) -> float:
    """WEIGHTS['edit_economy'], or half the smallest step of progress if that is less (one more hidden test
    passing in the bug with the most), so that doing strictly more of the fix always scores more."""
    units = _units(r, bugs)
    hidden = [sum(t in unit for t in r.hidden_f2p_passed + r.hidden_f2p_failed) for unit in units]
    step = WEIGHTS["fail_to_pass"] / (len(units) * max([1, *hidden])) if units else WEIGHTS["fail_to_pass"]
    return round(min(WEIGHTS["edit_economy"], step / 2), 6)


def components(r: GradeReport, edits: EditFacts, bugs: list[list[str]] | None = None) -> dict[str, RewardComponent]:
    done = progress(r, bugs)
    changed = edits.source_lines_changed
    economy = 0.0 if changed == 0 else min(1.0, edits.lines_needed / changed)
    if edits.other_files_changed:
        economy *= 0.5
    return {
        "fail_to_pass": RewardComponent(
            value=round(done, 6), weight=WEIGHTS["fail_to_pass"],
            detail=f"{len(r.hidden_f2p_passed)}/{len(r.hidden_f2p_passed) + len(r.hidden_f2p_failed)} hidden failing tests now "
                   f"pass; {len(r.p2p_passed)}/{len(r.p2p_passed) + len(r.p2p_failed)} passing tests still pass"),
        "edit_economy": RewardComponent(
            value=round(economy * done, 6), weight=economy_weight(r, bugs),
            detail=f"{changed} source lines changed, the fix needs {edits.lines_needed}"
                   + (f"; files outside the source changed: {edits.other_files_changed[:5]}" if edits.other_files_changed else "")),
    }


def grade(run: TestRun, f2p: list[str], p2p: list[str], canaries: list[str], edits: EditFacts,
          visible: set[str] | frozenset[str] = frozenset(), bugs: list[list[str]] | None = None) -> CheckResult:
    """`visible`: node ids of the tests the agent was shown (they earn no progress on their own); `bugs`: the
    FAIL_TO_PASS tests of each bug, when bugs share test files (else a bug per test file)."""
    r = report(run, f2p, p2p, canaries, visible)
    return CheckResult(components=components(r, edits, bugs), gate_failures=gate_failures(r), violations=violations(r, edits))
