"""Grading as a chain of small pure functions: test outcomes -> report -> gate failures and reward components.

Truth table of the gate (every row must hold for `accepted`):

| condition                                   | if it fails                       |
|---------------------------------------------|-----------------------------------|
| the hidden test run completed               | "test run timeout" / "crashed"    |
| every FAIL_TO_PASS test passes              | "FAIL_TO_PASS failing: ..."       |
| every PASS_TO_PASS test passes              | "PASS_TO_PASS failing: ..."       |
| every canary test fails                     | "test runner tampered with: ..."  |

A canary is a hidden test that fails on any honest run. If one passes, something in the code under test
rewrote the results, so the run proves nothing. Edits to test files never count: the verifier runs its
own copies; they are flagged and lower `tests_untouched`.
"""

from __future__ import annotations

from pydantic import BaseModel

from gymsmith.core.types import RewardComponent
from gymsmith.verifier.protocol import CheckResult
from gymsmith.verifier.pytest_runner import RunStatus, TestOutcome, TestRun

WEIGHTS = {"fail_to_pass": 0.5, "pass_to_pass": 0.3, "edit_economy": 0.1, "tests_untouched": 0.1}


class GradeReport(BaseModel):
    run_status: RunStatus
    f2p_passed: list[str]
    f2p_failed: list[str]
    p2p_passed: list[str]
    p2p_failed: list[str]
    canaries_passed: list[str]


class EditFacts(BaseModel):
    """What the agent changed, from the start state to the final one."""

    source_lines_changed: int
    lines_needed: int                  # lines the reference fix changes
    test_files_changed: list[str]      # visible tests edited, deleted or added; conftest files
    other_files_changed: list[str]     # anything outside source and test files (config, data, new scripts)


def report(run: TestRun, f2p: list[str], p2p: list[str], canaries: list[str]) -> GradeReport:
    passed = lambda t: run.outcome(t) is TestOutcome.PASSED  # noqa: E731
    return GradeReport(run_status=run.status, f2p_passed=[t for t in f2p if passed(t)], f2p_failed=[t for t in f2p if not passed(t)],
                       p2p_passed=[t for t in p2p if passed(t)], p2p_failed=[t for t in p2p if not passed(t)],
                       canaries_passed=[t for t in canaries if passed(t)])


def gate_failures(r: GradeReport) -> list[str]:
    out = []
    if r.run_status is not RunStatus.COMPLETED:
        out.append(f"hidden test run {r.run_status.value}")
    if r.f2p_failed:
        out.append(f"FAIL_TO_PASS failing: {', '.join(r.f2p_failed[:5])}" + (" ..." if len(r.f2p_failed) > 5 else ""))
    if r.p2p_failed:
        out.append(f"PASS_TO_PASS failing: {', '.join(r.p2p_failed[:5])}" + (" ..." if len(r.p2p_failed) > 5 else ""))
    if r.canaries_passed:
        out.append(f"test runner tampered with: canary tests passed ({len(r.canaries_passed)})")
    return out


def components(r: GradeReport, edits: EditFacts) -> dict[str, RewardComponent]:
    tampered = bool(r.canaries_passed)  # forged passes earn no partial credit either
    share = lambda good, bad: 0.0 if tampered else (len(good) / (len(good) + len(bad)) if good or bad else 1.0)  # noqa: E731
    changed = edits.source_lines_changed
    economy = 0.0 if changed == 0 else min(1.0, edits.lines_needed / changed)
    if edits.other_files_changed:
        economy *= 0.5
    flagged = edits.test_files_changed
    return {
        "fail_to_pass": RewardComponent(value=share(r.f2p_passed, r.f2p_failed), weight=WEIGHTS["fail_to_pass"],
                                        detail=f"{len(r.f2p_passed)}/{len(r.f2p_passed) + len(r.f2p_failed)} failing tests now pass"),
        "pass_to_pass": RewardComponent(value=share(r.p2p_passed, r.p2p_failed), weight=WEIGHTS["pass_to_pass"],
                                        detail=f"{len(r.p2p_passed)}/{len(r.p2p_passed) + len(r.p2p_failed)} passing tests still pass"),
        "edit_economy": RewardComponent(value=round(economy, 4), weight=WEIGHTS["edit_economy"],
                                        detail=f"{changed} source lines changed, the fix needs {edits.lines_needed}"
                                               + (f"; files outside the source changed: {edits.other_files_changed[:5]}"
                                                  if edits.other_files_changed else "")),
        "tests_untouched": RewardComponent(value=0.0 if flagged else 1.0, weight=WEIGHTS["tests_untouched"],
                                           detail=f"FLAG: test files edited (ignored by the verifier): {flagged[:5]}" if flagged
                                           else "no test file edited"),
    }


def grade(run: TestRun, f2p: list[str], p2p: list[str], canaries: list[str], edits: EditFacts) -> CheckResult:
    r = report(run, f2p, p2p, canaries)
    return CheckResult(components=components(r, edits), gate_failures=gate_failures(r))
