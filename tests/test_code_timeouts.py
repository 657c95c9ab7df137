"""A hidden-test timeout is the agent's only where its code misses thrice the limits that the reference meets, now.

The verifier's limits are wall-clock (`checks.VERIFY_TIMEOUT_S`, each test file's group timeout), so on a loaded
machine an honest fix could miss them and score 0: a fifty-third attacker's control, the reference on a
three-bug task, was rejected with "hidden test run timeout" once at a load average of 8-10 (accepted on 6 of 6
reruns). After a timeout the verifier runs the agent's code again under SLOW_SCALE times the limits; if it times out
again, the reference runs on the same suites under those limits: if it finishes, the timeout stands; if it does not,
the machine is what failed (a VerifierError: an infrastructure error the runners retry, no reward). Real sandboxes
and call runner; the load is modelled by shrinking the limits.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from gymsmith.core.errors import VerifierError
from gymsmith.core.types import Action
from gymsmith.families.code import checks
from gymsmith.families.code.env import code_task
from gymsmith.registry import get_family


def _verify(seed: int, write) -> object:
    family = get_family("code")
    task = family.generate(seed, difficulty=0.0)
    ct = code_task(task)
    env = family.make_env()
    env.reset(task, seed=0)
    try:
        for path in ct.buggy_modules:
            env.step(Action(tool="write_file", arguments={"path": path, "content": write(ct, path)}))
        with tempfile.TemporaryDirectory() as d:
            return checks.verify(task, Path(env.final_state(Path(d)).path))
    finally:
        env.close()


def test_a_timeout_the_reference_cannot_beat_either_is_the_machines_not_the_agents(monkeypatch):
    assert _verify(5, lambda ct, path: ct.reference[path]).accepted  # the honest fix, under the real limits
    monkeypatch.setattr(checks, "VERIFY_TIMEOUT_S", 1e-6)  # a machine so loaded that nothing finishes
    with pytest.raises(VerifierError, match="too loaded to verify"):
        _verify(5, lambda ct, path: ct.reference[path])


def test_a_machine_too_slow_for_the_limits_but_not_for_thrice_them_gives_a_verdict(monkeypatch):
    """The second try runs both under SLOW_SCALE times the limits: an honest fix is judged there, not refused."""
    monkeypatch.setattr(checks, "VERIFY_TIMEOUT_S", 1e-6)
    monkeypatch.setattr(checks, "SLOW_SCALE", 5.0 / 1e-6)  # the second try gets a real 5 s
    assert _verify(5, lambda ct, path: ct.reference[path]).accepted
    assert not _verify(5, lambda ct, path: ct.files[path]).accepted  # the bug: judged, and refused


def test_a_stall_during_the_agents_run_only_does_not_cost_an_honest_fix_its_reward(monkeypatch):
    """In a loaded CI run the oracle's hidden run missed the limits while the reference, run right after, finished:
    the timeout was scored as the agent's and the oracle got 0. The agent's code now runs again under SLOW_SCALE
    times the limits before a timeout is its own. The stall is modelled by limits nothing can meet, for the first
    graded run only."""
    real, graded_runs = checks._hidden_run, []

    def stalled_once(task, ct, sources, scale=1.0, *, graded=False):
        if graded:
            graded_runs.append(scale)
            if len(graded_runs) == 1:
                scale = 1e-9
        return real(task, ct, sources, scale, graded=graded)

    monkeypatch.setattr(checks, "_hidden_run", stalled_once)
    assert _verify(5, lambda ct, path: ct.reference[path]).accepted
    assert graded_runs == [1.0, checks.SLOW_SCALE]
    graded_runs.clear()
    assert not _verify(5, lambda ct, path: ct.files[path]).accepted  # the bug, judged on its second run


def test_code_slower_than_the_reference_still_times_out():
    def hang(ct, path):
        return ct.files[path] + "\n\nwhile True:\n    pass\n"  # never finishes importing

    judged = _verify(5, hang)
    assert not judged.accepted and any("timeout" in g for g in judged.gate_failures), judged.gate_failures


def test_the_variants_reference_records_get_a_second_try_before_the_machine_is_blamed(monkeypatch):
    """The reference's run on a task's drawn variants (`generator._variant_records`) missed its 30 s under load in a
    CI run, and the verification became an infrastructure error; it now runs once more with thrice the time."""
    from gymsmith.families.code import generator

    monkeypatch.setattr(generator, "_VARIANT_REFERENCE", {})  # nothing recorded yet in this process
    monkeypatch.setattr(generator, "VARIANT_RECORD_LIMITS_S", (1e-6, 30.0))  # the first try cannot finish
    assert _verify(5, lambda ct, path: ct.reference[path]).accepted
    assert generator._VARIANT_REFERENCE, "seed 5's task draws no variants: the test proves nothing"
    monkeypatch.setattr(generator, "_VARIANT_REFERENCE", {})
    monkeypatch.setattr(generator, "VARIANT_RECORD_LIMITS_S", (1e-6, 1e-6))  # neither try can finish
    with pytest.raises(VerifierError, match="did not finish the task's variants"):
        _verify(5, lambda ct, path: ct.reference[path])


def test_code_too_costly_to_read_is_the_agents_failure_not_the_verifiers_timeout(monkeypatch):
    """A fifty-seventh attacker kept the bug and added 72 new modules of 199 kB each, one line `x=[a,a,...]` that
    compressed to about 205 bytes (inside the compressed code budget): the static read of each took about a second,
    the verification outlasted the service's 60 s, and the failing score became an infrastructure error (9 of 12
    tries). The uncompressed text is bounded too (`checks.MAX_ADDED_CHARS`), and reading it within READ_BUDGET_S:
    beyond either, the state is ungradable, the agent's failure (reward 0)."""
    from gymsmith.core.errors import UngradableState

    padding = "x=[" + ",".join(["a"] * 99_000) + "]\n"  # 198 kB, a few hundred bytes compressed
    family = get_family("code")
    task = family.generate(5, difficulty=0.0)
    ct = code_task(task)
    env = family.make_env()
    env.reset(task, seed=0)
    try:
        for i in range(3):
            env.step(Action(tool="write_file", arguments={"path": f"pad{i}.py", "content": padding}))
        module = ct.buggy_modules[0]  # graded where the graded code imports them (a module nothing imports is not read)
        env.step(Action(tool="write_file", arguments={"path": module, "content": ct.files[module] + "\nimport pad0, pad1, pad2\n"}))
        with tempfile.TemporaryDirectory() as d, pytest.raises(UngradableState, match="characters"):
            checks.verify(task, Path(env.final_state(Path(d)).path))
        for i in range(3):
            env.step(Action(tool="run_command", arguments={"command": f"rm pad{i}.py"}))
        for path in ct.buggy_modules:  # the honest fix, read on a machine too slow to read it in time
            env.step(Action(tool="write_file", arguments={"path": path, "content": ct.reference[path] + "\n"}))
        from gymsmith.families.code import workspace_rules

        monkeypatch.setattr(workspace_rules, "READ_BUDGET_S", -1.0)
        with tempfile.TemporaryDirectory() as d, pytest.raises(UngradableState, match="to read"):
            checks.verify(task, Path(env.final_state(Path(d)).path))
    finally:
        env.close()
