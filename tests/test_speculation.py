"""Speculative verification (issue 17): the async engine verifies a rollout's state while its agent waits on the
model and keeps that verdict only when the episode ends in the same state, byte for byte.

The property (docs/verifier.md, "Verdicts kept for an unchanged state"): a rollout's reward is the verifier's
verdict on the state it ended in. A verdict found for any other state (an earlier one, another episode's, a solved
one handed over) is never used; a speculation that failed or never ran costs nothing but the verification the
final state then gets. Real verifier processes and real ops environments throughout; the engine runs against the
fake OpenAI-compatible endpoint (`agents.fake_endpoint`, its own process over real HTTP: no model runs here).
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from gymsmith.agents.fake_endpoint import FakeEndpoint
from gymsmith.agents.model import ModelAgentConfig
from gymsmith.core.errors import VerifierError
from gymsmith.core.types import Action, TaskSpec
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner import RunConfig
from gymsmith.runner.async_engine import AsyncEngine
from gymsmith.runner.episode import Episode
from gymsmith.runner.local import RunTally, plan_run
from gymsmith.store import TrajectoryStore
from gymsmith.verifier.service import VerifierService


def _solvable_task() -> TaskSpec:
    """An ops task whose witness takes more than one action (so a state part way is not the solved one), with no
    simulated faults (`_play` replays the witness without retrying one)."""
    return next(t for t in build_taskset(TaskSetSpec(family="ops", count=40, base_seed=5, knobs={"fidelity": 0.0}))
                if len(generate_world(t.seed, t.knobs).witness) >= 2)


def _episode(task: TaskSpec, verifier: VerifierService) -> Episode:
    episode = Episode(env=get_family("ops").make_env(), task=task, verifier=verifier, policy="progress_gated",
                      max_steps=100)
    episode.reset(0)
    return episode


def _play(episode: Episode, actions: list[dict]) -> None:
    for a in actions:
        episode.step(Action(tool=a["tool"], arguments=a.get("arguments", {})))


def _speculated(episode: Episode, verifier: VerifierService, image: bytes | None = None) -> Future:
    """Speculate on `image` (default: the episode's own state now) and wait for the verdict."""
    image = image if image is not None else episode.speculation_image()
    assert image is not None
    with ThreadPoolExecutor(1) as pool:
        verdict = pool.submit(episode.verdict_of, image, verifier)
        episode.speculate(image, verdict)
        verdict.result()
    return verdict


def _submit(episode: Episode):
    episode.step(Action(tool="submit", arguments={}))
    return episode.finish()


def test_a_verdict_is_kept_only_for_the_same_state_and_equals_a_fresh_verification():
    task = _solvable_task()
    witness = generate_world(task.seed, task.knobs).witness
    with VerifierService() as verifier, VerifierService() as fresh:
        # solved, speculated, then submitted without a change: the kept verdict, no second verification
        kept = _episode(task, verifier)
        _play(kept, witness)
        _speculated(kept, verifier)
        before = verifier.verifications
        outcome = _submit(kept)
        assert verifier.verifications == before  # the final state was not verified again
        # the same actions verified afresh, in another verifier process: the same reward, digest and diff
        plain = _episode(task, fresh)
        _play(plain, witness)
        reference = _submit(plain)
        assert outcome.reward == reference.reward and outcome.reward.accepted
        assert outcome.final_hash == reference.final_hash == kept.env.state_hash()
        assert (outcome.status, outcome.reason, outcome.final_diff) == (reference.status, reference.reason,
                                                                        reference.final_diff)


def test_a_verdict_found_before_the_last_change_is_not_used():
    """Speculated part way (not solved), then the last action solves it: the final state is verified, and the
    reward is the solved state's, not the speculation's."""
    task = _solvable_task()
    witness = generate_world(task.seed, task.knobs).witness
    with VerifierService() as verifier:
        episode = _episode(task, verifier)
        _play(episode, witness[:-1])
        early = _speculated(episode, verifier).result()
        _play(episode, witness[-1:])
        before = verifier.verifications
        outcome = _submit(episode)
        assert verifier.verifications == before + 1  # verified again: the state changed
        assert outcome.reward.accepted and not early.reward.accepted


def test_a_solved_states_verdict_handed_to_an_episode_that_did_nothing_earns_it_nothing():
    """The attacker's wish: a verdict for a state the episode did not end in. Another episode's solved image is
    speculated on in an episode that never acted; its own final state (the start state) is what is scored."""
    task = _solvable_task()
    witness = generate_world(task.seed, task.knobs).witness
    with VerifierService() as verifier:
        solver = _episode(task, verifier)
        _play(solver, witness)
        solved_image = solver.speculation_image()
        idle = _episode(task, verifier)
        verdict = _speculated(idle, verifier, image=solved_image)
        assert verdict.result().reward.accepted  # what was handed over is a solved state's verdict
        outcome = _submit(idle)
        assert not outcome.reward.accepted and outcome.reward.value == 0.0
        assert outcome.final_hash == task.start_state.digest


def test_a_speculation_that_failed_or_never_started_costs_only_the_final_verification():
    task = _solvable_task()
    witness = generate_world(task.seed, task.knobs).witness
    with VerifierService() as verifier:
        closed = VerifierService()
        closed.close()  # its verifications raise VerifierError
        failed = _episode(task, verifier)
        _play(failed, witness)
        with pytest.raises(VerifierError):
            _speculated(failed, closed).result()
        assert _submit(failed).reward.accepted

        never = _episode(task, verifier)
        _play(never, witness)
        image = never.speculation_image()
        assert image is not None
        queued: Future = Future()  # a speculation still waiting for its thread when the episode ends
        never.speculate(image, queued)
        before = verifier.verifications
        assert _submit(never).reward.accepted
        assert queued.cancelled() and verifier.verifications == before + 1


def test_nothing_to_speculate_on_an_unchanged_image_or_after_the_end():
    task = _solvable_task()
    with VerifierService() as verifier:
        episode = _episode(task, verifier)
        _speculated(episode, verifier)
        assert episode.speculation_image() is None  # this very state is verified already
        _play(episode, [{"tool": "get_status"}])  # a read changes nothing
        assert episode.speculation_image() is None
        _submit(episode)
        assert episode.speculation_image() is None  # over
        valued = Episode(env=get_family("ops").make_env(), task=task, verifier=verifier, policy="progress_gated",
                         max_steps=10, step_rewards=True)
        valued.reset(0)
        assert valued.speculation_image() is None  # step rewards value every state already


def _engine_run(endpoint: FakeEndpoint, spec: TaskSetSpec, store: TrajectoryStore, run_id: str,
                speculate: bool) -> tuple[dict, int]:
    model = ModelAgentConfig(base_url=endpoint.base_url, model="fake", api_key_env=None)
    config = RunConfig(run_id=run_id, taskset=spec, agents=["model"], seeds=2, model=model, max_in_flight=64)
    plan = plan_run(config, store)
    with AsyncEngine(config, speculate=speculate) as engine:
        tally = RunTally(plan.finished, plan.total, None, collect=True)
        engine.run(plan.work, store, tally)
        verified = engine.verifier.verifications
    out = {(t.task_id, t.seed): (t.status, t.end_reason, t.reward.value if t.reward else None,
                                 t.reward.accepted if t.reward else None, t.final_state_hash) for t in tally.results}
    return out, verified


def test_the_engine_gives_the_same_rewards_with_and_without_speculation(tmp_path):
    """Each rollout plays its task's witness (up to 6 actions: many stop part way, some solve), so the states an
    episode is speculated in change under it; speculation on and off must store the same outcomes, and with it
    on some final verifications are kept instead of made."""
    spec = TaskSetSpec(family="ops", count=12, base_seed=31)
    plans = {t.goal: generate_world(t.seed, t.knobs).witness for t in build_taskset(spec)}
    store = TrajectoryStore(tmp_path / "s.db")
    with FakeEndpoint(latency_s=0.3, calls=6, plans=plans) as endpoint:
        without, verified_without = _engine_run(endpoint, spec, store, "plain", speculate=False)
        with_, verified_with = _engine_run(endpoint, spec, store, "speculative", speculate=True)
    assert len(without) == 24 and with_ == without
    assert {v[3] for v in without.values()} == {True, False}  # solved and unsolved rollouts alike
    assert verified_without == 24
    assert verified_with < 24  # some verdicts were kept
