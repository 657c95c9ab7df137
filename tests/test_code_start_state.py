"""Doing nothing earns nothing: a FAIL_TO_PASS test the start state itself passes earns no progress.

A fifty-sixth attacker's null submission earned fail_to_pass 0.5 (0.45 of the reward) on a template task: one of its
two pinned variants, kept by the draw on one run of the bug, was passed by the start state at verification. The
verifier now runs the hidden suites on the task's start state itself (once per task and process, under the same key)
and credits no progress for any FAIL_TO_PASS test that passes there; a task where a bug's every FAIL_TO_PASS test
passes there cannot be verified (a VerifierError). The task's tests are forged here by moving a PASS_TO_PASS test
(which the start state passes) into FAIL_TO_PASS: the real sandbox and call runner judge it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gymsmith.core.errors import VerifierError
from gymsmith.families.code import checks
from gymsmith.families.code.env import code_task
from gymsmith.families.code.generator import compiled_suite
from gymsmith.registry import get_family


def _null_verdict(monkeypatch, forge):
    family = get_family("code")
    task = family.generate(5, difficulty=0.0)
    real = code_task(task)
    forged = forge(real)
    monkeypatch.setattr(checks, "code_task", lambda _: forged)
    monkeypatch.setattr(checks, "checks_digest", lambda _: task.metadata["checks_digest"])
    checks._START_PASSES.clear()
    env = family.make_env()
    env.reset(task, seed=0)
    try:
        with tempfile.TemporaryDirectory() as d:
            return checks.verify(task, Path(env.final_state(Path(d)).path))
    finally:
        env.close()
        checks._START_PASSES.clear()


def _with_a_passing_test_to_prove(real, *, alone: bool = False):
    # one the agent could not pass by copying what it was shown (those earn nothing anyway)
    templates = [p.removeprefix("tests/test_").removesuffix(".py") for p in sorted(real.hidden_tests)]
    suites = [compiled_suite(t, real.hidden_tests[f"tests/test_{t}.py"]) for t in templates]
    shown = checks.answered_tests(real.files, suites)
    passing = next(n for n in real.pass_to_pass if n not in shown)
    f2p = [passing] if alone else [*real.fail_to_pass, passing]
    return real.model_copy(update={"fail_to_pass": f2p, "pass_to_pass": [n for n in real.pass_to_pass if n != passing],
                                   "pinned_tests": [*(real.pinned_tests or []), passing],
                                   "bug_tests": [f2p] if alone else [[*b, passing] for b in real.bug_tests]})


def test_a_fail_to_pass_test_the_start_state_passes_earns_the_null_nothing(monkeypatch):
    judged = _null_verdict(monkeypatch, _with_a_passing_test_to_prove)
    assert not judged.accepted and judged.components["fail_to_pass"].value == 0.0, judged.components
    monkeypatch.setattr(checks, "_start_passes", lambda task, ct: frozenset())  # as before: credited
    assert _null_verdict(monkeypatch, _with_a_passing_test_to_prove).components["fail_to_pass"].value > 0


def test_a_bug_whose_every_test_passes_on_the_start_state_cannot_be_verified(monkeypatch):
    with pytest.raises(VerifierError, match="start state passes every FAIL_TO_PASS test"):
        _null_verdict(monkeypatch, lambda real: _with_a_passing_test_to_prove(real, alone=True))
