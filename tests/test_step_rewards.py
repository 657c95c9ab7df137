"""Per-step rewards (issue 16, item 3): V(s) is the verifier's reward value for a snapshot of the state after each
step; a step's reward is the change in V. Real verifier processes, real stores (SQLite and PostgreSQL), real
sandboxes for `code`. See docs/trainers.md, "Per-step rewards"."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from pathlib import Path

import gymnasium
import pyarrow.parquet as pq
import pytest
from sqlalchemy import create_engine, inspect, text

import gymsmith.gym
from gymsmith.core.types import EndReason, RolloutStatus, Split, TaskSpec
from gymsmith.families.ops.generator import generate_world
from gymsmith.registry import TaskSetSpec, build_taskset, get_family
from gymsmith.runner import RunConfig, run, run_rollout
from gymsmith.store import PARQUET_SCHEMA, TrajectoryStore, export_parquet
from gymsmith.store.schema import SCHEMA_VERSION
from gymsmith.trainers import MultiTurnRollout
from gymsmith.verifier.progress import step_rewards
from gymsmith.verifier.service import VerifierService

from conftest import CountingVerifier

# with no held-out fraction the train split takes seeds in order whatever the tasks' ids (the split is chosen by id,
# which a family version bump changes): these six seeds draw every goal kind (fulfil, billing, resource, billing,
# staff, resource), so several oracle plans are multi-step
OPS_TASKS = TaskSetSpec(family="ops", count=6, base_seed=43, heldout_fraction=0.0,
                        knobs={"difficulty": [0.2, 0.7]})
REPLAYED_STEPS = 12
NEW_STEP_COLUMNS = ("progress", "step_reward", "progress_error")


def rollout(env, agent: str, task: TaskSpec, verifier: VerifierService, *, step_rewards_on: bool, seed: int = 0,
            policy: str = "shaped_gated", max_steps: int = 300):
    family = get_family(task.family)
    return run_rollout(env=env, agent=family.agents()[agent](), task=task, split=Split.TRAIN, seed=seed, run_id="t",
                       verifier=verifier, policy=policy, max_steps=max_steps, time_limit_s=120.0,
                       step_rewards=step_rewards_on)


def assert_telescopes(t) -> None:
    """Every step valued; each step reward is the change in progress; they sum to reward - V(s0); the last
    progress is the reward."""
    assert t.start_progress is not None and t.reward is not None
    assert [s.progress_error for s in t.steps] == [None] * len(t.steps)
    previous = t.start_progress
    for s in t.steps:
        assert s.progress is not None and s.step_reward == pytest.approx(s.progress - previous, abs=1e-12)
        previous = s.progress
    assert t.steps[-1].progress == t.reward.value
    assert sum(s.step_reward for s in t.steps) == pytest.approx(t.reward.value - t.start_progress, abs=1e-6)


# -- ops: oracle and greedy through the runner and the store --------------------------------------------------------
@pytest.fixture(scope="module")
def ops_run(tmp_path_factory):
    store = TrajectoryStore(tmp_path_factory.mktemp("steps") / "s.db")
    trajectories = run(RunConfig(run_id="sr", taskset=OPS_TASKS, agents=["oracle", "greedy", "null"], step_rewards=True,
                                 concurrency=2), store)
    return store, trajectories


def test_ops_oracle_and_greedy_step_rewards_sum_to_the_reward(ops_run):
    _, trajectories = ops_run
    assert len(trajectories) == 3 * OPS_TASKS.count
    for t in trajectories:
        assert t.status is not RolloutStatus.ERROR, t.error
        assert_telescopes(t)
    oracle = [t for t in trajectories if t.agent == "oracle"]
    assert all(t.reward.accepted and t.reward.value == 1.0 for t in oracle)
    # dense: the oracle earns part of its reward before its last step on most multi-step tasks
    early = [t for t in oracle if len(t.steps) > 2 and any(s.step_reward > 0 for s in t.steps[:-1])]
    assert len(early) >= len([t for t in oracle if len(t.steps) > 2]) // 2 > 0
    # doing nothing is worth V(s0): the null agent's reward on the same task is the start state's value
    start = {t.task_id: t.start_progress for t in trajectories if t.agent == "oracle"}
    for t in (t for t in trajectories if t.agent == "null"):
        assert t.reward.value == pytest.approx(start[t.task_id]) and t.start_progress == start[t.task_id]


def test_progress_is_the_verifiers_value_of_each_state_on_replay(ops_run):
    """Replaying the oracle's and the greedy agent's actions in a fresh environment and verifying every
    intermediate snapshot directly gives the stored progress, step by step (so no value is off by a step or
    taken from a stale cache): the first REPLAYED_STEPS steps and the last."""
    store, trajectories = ops_run
    family = get_family("ops")
    chosen = [max((t for t in trajectories if t.agent == agent), key=lambda t: len(t.steps)) for agent in ("oracle", "greedy")]
    env = family.make_env()
    with VerifierService() as verifier:
        for t in chosen:
            task = store.task_of(t.rollout_id)

            def value() -> float:
                with tempfile.TemporaryDirectory() as tmp:
                    return verifier.verify(task, env.final_state(Path(tmp)), policy=t.reward.policy).value

            env.reset(task, seed=t.seed)
            assert value() == t.start_progress
            for s in t.steps:
                env.step(s.action)
                if s.index < REPLAYED_STEPS or s.index == len(t.steps) - 1:
                    assert value() == pytest.approx(s.progress), (t.agent, s.index)
    env.close()


def test_stored_steps_carry_progress_and_step_rewards(ops_run):
    store, trajectories = ops_run
    for t in trajectories:
        assert store.trajectory(t.rollout_id).model_dump() == t.model_dump()
    t = max(trajectories, key=lambda t: len(t.steps))
    with sqlite3.connect(store.engine.url.database) as c:
        rows = c.execute("SELECT idx, progress, step_reward, progress_error FROM steps WHERE rollout_id = ? ORDER BY idx",
                         (t.rollout_id,)).fetchall()
        start = c.execute("SELECT start_progress FROM rollouts WHERE rollout_id = ?", (t.rollout_id,)).fetchone()[0]
    assert rows == [(s.index, s.progress, s.step_reward, None) for s in t.steps] and start == t.start_progress
    assert all(r[1] is not None for r in rows)


def test_export_includes_progress_and_step_rewards(ops_run, tmp_path):
    store, trajectories = ops_run
    out = tmp_path / "x.parquet"
    assert export_parquet(store, out, run_ids=["sr"]) == len(trajectories)
    table = pq.read_table(out)
    assert table.schema.equals(PARQUET_SCHEMA)
    by_id = {t.rollout_id: t for t in trajectories}
    for row in table.to_pylist():
        t = by_id[row["rollout_id"]]
        assert row["start_progress"] == t.start_progress
        assert [(s["progress"], s["step_reward"], s["progress_error"]) for s in row["steps"]] == \
               [(s.progress, s.step_reward, s.progress_error) for s in t.steps]
        assert sum(s["step_reward"] for s in row["steps"]) == pytest.approx(row["reward"] - row["start_progress"], abs=1e-6)


# -- opt-in: the default stores nothing and costs nothing ---------------------------------------------------------
def test_default_off_stores_none_and_verifies_only_the_final_state(ops, tmp_path):
    tasks = [t for t in build_taskset(OPS_TASKS) if len(generate_world(t.seed, t.knobs).witness) > 1]
    env = ops.make_env()
    with CountingVerifier() as verifier:
        for task in tasks:
            before = verifier.calls
            t = rollout(env, "greedy", task, verifier, step_rewards_on=False)
            assert verifier.calls - before == 1 and len(t.steps) > 1
            assert t.start_progress is None
            assert all(s.progress is None and s.step_reward is None and s.progress_error is None for s in t.steps)
            # on: V(s0) plus one verification per state change, never more than one per step
            before = verifier.calls
            on = rollout(env, "greedy", task, verifier, step_rewards_on=True)
            assert 2 <= verifier.calls - before <= len(on.steps) + 1
            assert [s.action for s in on.steps] == [s.action for s in t.steps] and on.reward.value == t.reward.value
    env.close()
    store = TrajectoryStore(tmp_path / "off.db")
    store.create_run("t", purpose="train", config={})
    assert store.add(t, task)
    with sqlite3.connect(tmp_path / "off.db") as c:
        assert c.execute("SELECT count(*), count(progress), count(step_reward), count(progress_error) FROM steps").fetchone()[1:] == (0, 0, 0)
        assert c.execute("SELECT count(start_progress) FROM rollouts").fetchone() == (0,)


# -- failures: a per-step verification that fails, a state that cannot be graded ---------------------------------
def test_a_failed_per_step_verification_is_logged_and_the_rollout_goes_on(ops):
    task = max(build_taskset(OPS_TASKS), key=lambda t: len(generate_world(t.seed, t.knobs).witness))
    env = ops.make_env()
    with CountingVerifier(fail_on=frozenset({3})) as verifier:  # call 1 is V(s0); call 3 a state mid-rollout
        t = rollout(env, "oracle", task, verifier, step_rewards_on=True)
    env.close()
    assert t.status is RolloutStatus.COMPLETED and t.end_reason is EndReason.SUBMITTED and t.reward.value == 1.0
    failed = [s for s in t.steps if s.progress_error is not None]
    assert len(failed) == 1 and "VerifierError: verifier down (injected, call 3)" in failed[0].progress_error
    assert failed[0].progress is None and failed[0].step_reward is None
    after = t.steps[failed[0].index + 1]  # carries the change since the last known value
    known_before = [s.progress for s in t.steps[:failed[0].index] if s.progress is not None] or [t.start_progress]
    assert after.step_reward == pytest.approx(after.progress - known_before[-1])
    known = [s.step_reward for s in t.steps if s.step_reward is not None]
    assert sum(known) == pytest.approx(t.reward.value - t.start_progress, abs=1e-6)


class UngradableAfter:
    """The ops environment, except that after `n` steps its snapshot is ungradable (as `code`'s is for a FIFO)."""

    def __init__(self, env, n: int):
        self.env, self.n, self.steps = env, n, 0

    def __getattr__(self, name):
        return getattr(self.env, name)

    def reset(self, task, *, seed):
        self.steps = 0
        return self.env.reset(task, seed=seed)

    def step(self, action):
        self.steps += 1
        return self.env.step(action)

    def state_hash(self):
        return self.env.state_hash() + (f"-u{self.steps}" if self.steps >= self.n else "")

    def final_state(self, directory):
        final = self.env.final_state(directory)
        return final.model_copy(update={"ungradable": "a FIFO"}) if self.steps >= self.n else final


def test_an_ungradable_state_is_worth_zero_not_an_error(ops):
    task = max(build_taskset(OPS_TASKS), key=lambda t: len(generate_world(t.seed, t.knobs).witness))
    env = UngradableAfter(ops.make_env(), n=3)
    with VerifierService() as verifier:
        t = rollout(env, "oracle", task, verifier, step_rewards_on=True)
    env.close()
    assert t.end_reason is EndReason.UNGRADABLE_STATE and t.reward.value == 0.0
    assert [s.progress_error for s in t.steps] == [None] * len(t.steps)
    assert [s.progress for s in t.steps[2:]] == [0.0] * (len(t.steps) - 2)
    assert_telescopes(t)


def test_step_rewards_of_known_values_telescope_past_gaps():
    assert step_rewards(0.0, [0.25, None, 0.75, 1.0]) == [0.25, None, 0.5, 0.25]
    assert step_rewards(None, [None, 0.5, 0.75]) == [None, None, 0.25]
    assert step_rewards(0.5, []) == []


def test_discounted_step_rewards_take_back_progress_undone_later():
    """A red-team agent on `ops` made progress early, idled 60 steps and undid it at the end (a failed rollout):
    plain differences, discounted by 0.99 as a trainer may, paid it 0.056. Shaped with the trainer's gamma, the
    discounted return is gamma^T V(s_T) - V(s0): nothing for progress undone, its full value for progress kept."""
    undone = [0.0, 0.12] + [0.12] * 60 + [0.0]
    returns = lambda rewards, g: sum(g ** t * r for t, r in enumerate(rewards))  # noqa: E731
    assert returns(step_rewards(0.0, undone), 0.99) > 0.05
    assert returns(step_rewards(0.0, undone, 0.99), 0.99) == pytest.approx(0.0, abs=1e-12)
    kept = undone[:-1] + [1.0]
    assert returns(step_rewards(0.0, kept, 0.99), 0.99) == pytest.approx(0.99 ** len(kept))
    with pytest.raises(ValueError, match="expected a discount"):
        step_rewards(0.0, undone, 1.5)


# -- code: a forged result file earns nothing step by step ---------------------------------------------------------
def test_discounted_step_rewards_telescope_past_values_that_could_not_be_computed():
    """A sixtieth attacker made progress, held it, and undid it while the per-step values failed (injected): with
    failed steps paying nothing, a learner discounting by 0.99 kept about half the credit of what was undone. A
    failed value is now held at the last known one, so the discounted sum is gamma^T V(s_T) - V(s0) whatever failed."""
    def returns(rewards, gamma):
        return sum(gamma ** t * (r or 0.0) for t, r in enumerate(rewards))

    undone_while_failing = [0.5, 1.0] + [1.0] * 30 + [None] * 30 + [0.0]
    for gamma in (0.9, 0.99):
        assert returns(step_rewards(0.0, undone_while_failing, gamma), gamma) == pytest.approx(0.0, abs=1e-12)
        kept = [0.5, None, None, 1.0, None]
        assert returns(step_rewards(0.2, kept, gamma), gamma) == pytest.approx(gamma ** 5 * 1.0 - 0.2, abs=1e-12)
    assert step_rewards(0.0, [0.25, None, 0.75], 1.0) == [0.25, None, 0.5]  # with gamma 1 a held value pays nothing


def test_code_step_rewards_come_from_the_verifier_not_from_a_forged_result_file():
    """conftest_force_pass writes files that make pytest report every test passed. Its steps are worth what
    the verifier's hidden checks give those snapshots (nothing); the oracle's, on the same task, rise to 1."""
    family = get_family("code")
    task = family.generate(3, difficulty=0.3)
    env = family.make_env()
    try:
        with CountingVerifier() as verifier:
            forged = rollout(env, "exploit:conftest_force_pass", task, verifier, step_rewards_on=True)
            forged_calls = verifier.calls
            oracle = rollout(env, "oracle", task, verifier, step_rewards_on=True)
    finally:
        env.close()
    assert "conftest.py" in (forged.final_diff or "") and len(forged.steps) >= 2
    assert not forged.reward.accepted and forged.reward.value == 0.0
    assert forged.start_progress == 0.0 and [s.progress for s in forged.steps] == [0.0] * len(forged.steps)
    assert [s.step_reward for s in forged.steps] == [0.0] * len(forged.steps)
    assert forged_calls >= len(forged.steps)  # each forged state was verified (V(s0), the writes, the final)
    assert oracle.reward.accepted and oracle.start_progress == 0.0
    assert_telescopes(oracle)
    assert sum(s.step_reward for s in oracle.steps) == pytest.approx(1.0)


# -- adapters: Gymnasium and the multi-turn hook --------------------------------------------------------------------
OPS_GYM = gymsmith.gym.env_id("ops", get_family("ops").version)


def _witness_task():
    """A task whose oracle witness takes 5 to 16 steps, without simulated faults (the witness is replayed as is)."""
    task = next(t for t in build_taskset(OPS_TASKS.model_copy(update={"knobs": {**OPS_TASKS.knobs, "fidelity": 0.0}}))
                if 5 <= len(generate_world(t.seed, t.knobs).witness) <= 16)
    return task, generate_world(task.seed, task.knobs).witness + [{"tool": "submit", "arguments": {}}]


@pytest.mark.parametrize("step_rewards_on", [False, True])
def test_gymnasium_step_rewards(step_rewards_on):
    task, actions = _witness_task()
    env = gymnasium.make(OPS_GYM, step_rewards=True, gamma=1.0) if step_rewards_on else gymnasium.make(OPS_GYM)
    _, info = env.reset(seed=0, options={"task": task.model_dump()})
    rewards, infos = [], []
    for a in actions:
        _, reward, terminated, truncated, step_info = env.step(json.dumps(a))
        rewards.append(reward)
        infos.append(step_info)
    env.close()
    assert terminated and step_info["accepted"]
    if not step_rewards_on:  # the default is unchanged: 0 until the end, then the verifier's reward
        assert rewards[:-1] == [0.0] * (len(rewards) - 1) and rewards[-1] == 1.0
        assert "start_progress" not in info and "progress" not in step_info
        return
    assert info["start_progress"] is not None
    assert sum(rewards) == pytest.approx(1.0 - info["start_progress"], abs=1e-6)
    assert any(r > 0 for r in rewards[:-1])  # dense: credit before the end
    assert [i["step_reward"] for i in infos] == pytest.approx(rewards) and infos[-1]["progress"] == 1.0


def test_multi_turn_rollout_step_rewards():
    task, actions = _witness_task()
    r = MultiTurnRollout(task, step_rewards=True, gamma=1.0)
    r.act("\n".join(json.dumps(a) for a in actions[:-1]))  # no submit: reward() scores the state as it is
    verdict = r.reward()
    assert verdict.accepted and len(r.step_rewards) == len(actions) - 1 == len(r.progress)
    assert r.end_reason is EndReason.STEP_LIMIT and r.steps == len(actions) - 1
    assert r.progress[-1] == verdict.value and r.progress_errors == [None] * (len(actions) - 1)
    assert sum(r.step_rewards) == pytest.approx(verdict.value - r.start_progress, abs=1e-6)
    off = MultiTurnRollout(task)
    off.act("\n".join(json.dumps(a) for a in actions))
    assert off.reward().value == verdict.value and off.step_rewards == [] and off.start_progress is None


def test_live_step_rewards_take_back_progress_undone_under_the_learners_own_discount():
    """A fifty-eighth attacker's agent, through Gymnasium with step rewards: staff the week (accepted, V = 1), wait,
    remove every shift it added and submit (reward 0). Shaped for gamma 1, a learner discounting by 0.99 was paid
    about 0.83 for it. Step rewards now take the learner's discount, and must be given it: the discounted return
    of the undone episode is gamma^T 0 - V(s0), never above what doing nothing earns."""
    spec = TaskSetSpec(family="ops", count=8, base_seed=600, knobs={"kind": "staff", "fidelity": 0.0, "difficulty": 0.2})
    task = next(t for t in build_taskset(spec) if generate_world(t.seed, t.knobs).witness)

    def undone(gamma: float) -> tuple[list[float], dict]:
        env = gymnasium.make(OPS_GYM, step_rewards=True, gamma=gamma)
        env.reset(seed=0, options={"task": task.model_dump()})
        rewards, added = [], []

        def act(tool: str, **arguments) -> tuple[str, dict]:
            observation, reward, _, _, info = env.step(json.dumps({"tool": tool, "arguments": arguments}))
            rewards.append(reward)
            return observation, info

        for a in generate_world(task.seed, task.knobs).witness:
            observation, _ = act(a["tool"], **a["arguments"])
            added += [json.loads(observation)["shift_id"]] if a["tool"] == "assign_shift" else []
        assert added and sum(rewards) > 0.5  # the week was staffed: progress paid as it was made
        for _ in range(20):
            act("get_status")
        for shift in added:
            act("remove_shift", shift_id=shift)
        _, info = act("submit")
        env.close()
        return rewards, info

    def discounted(rewards: list[float], gamma: float) -> float:
        return sum(gamma ** t * r for t, r in enumerate(rewards))

    shaped_for_1, info = undone(1.0)
    assert not info["accepted"] and discounted(shaped_for_1, 0.99) > 0.05  # the attack, with the learner's 0.99
    shaped_for_099, info = undone(0.99)
    assert not info["accepted"] and discounted(shaped_for_099, 0.99) <= 1e-9  # -V(s0): nothing for what was undone
    with pytest.raises(ValueError, match="needs gamma"):
        gymnasium.make(OPS_GYM, step_rewards=True)
    with pytest.raises(ValueError, match="needs gamma"):
        MultiTurnRollout(task, step_rewards=True)
    with pytest.raises(ValueError, match="expected a discount"):
        MultiTurnRollout(task, step_rewards=True, gamma=1.5)


# -- the store: schema 7, and stores of schema 6 upgraded in place ------------------------------------------------
def _drop_schema_7(conn) -> None:
    for column in NEW_STEP_COLUMNS:
        conn.execute(text(f"ALTER TABLE steps DROP COLUMN {column}"))
    conn.execute(text("ALTER TABLE rollouts DROP COLUMN start_progress"))
    conn.execute(text("DROP TABLE alembic_version"))  # stores of schema 6 were made before the store used Alembic


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_schema_6_store_is_upgraded_and_keeps_its_data(backend, tmp_path, request, ops_run):
    assert SCHEMA_VERSION >= 7  # this test is about the step from 6 to 7
    if backend == "sqlite":
        location = str(tmp_path / "six.db")
    else:  # a database of its own on the session's server
        server = request.getfixturevalue("postgres_url")
        admin = create_engine(server.replace("postgresql://", "postgresql+psycopg://"), isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text("DROP DATABASE IF EXISTS schema6"))
            c.execute(text("CREATE DATABASE schema6"))
        admin.dispose()
        location = server.rsplit("/", 1)[0] + "/schema6"
    _, trajectories = ops_run
    task_of = {t.id: t for t in build_taskset(OPS_TASKS)}
    old = TrajectoryStore(location)
    off = [t.model_copy(update={"run_id": "six", "start_progress": None,
                                "steps": [s.model_copy(update={"progress": None, "step_reward": None}) for s in t.steps]})
           for t in trajectories[:4]]
    old.create_run("six", purpose="train", config={})
    for t in off:
        assert old.add(t, task_of[t.task_id])
    with old.engine.begin() as c:  # what a store written by gymsmith with schema 6 looks like
        _drop_schema_7(c)
    old.close()

    upgraded = TrajectoryStore(location)
    columns = {c["name"] for c in inspect(upgraded.engine).get_columns("steps")}
    assert set(NEW_STEP_COLUMNS) <= columns
    assert len(upgraded.rollout_rows(["six"])) == 4
    for t in off:
        assert upgraded.trajectory(t.rollout_id).model_dump() == t.model_dump()  # old rows read back, NULLs as None
    on = trajectories[4].model_copy(update={"run_id": "six-on"})
    upgraded.create_run("six-on", purpose="train", config={})
    assert upgraded.add(on, task_of[on.task_id])
    assert upgraded.trajectory(on.rollout_id).model_dump() == on.model_dump()
    assert TrajectoryStore(location).trajectory(on.rollout_id).start_progress == on.start_progress  # reopening is a no-op
    upgraded.close()


def test_valuing_the_agents_states_is_bounded_as_its_time():
    """With step rewards, the time spent valuing states is left out of the time limit, and the async engine's deadline
    counted it: a hundred-and-thirtieth attacker's policy wrote a new module that hangs at every step (about 2 s to
    verify each) and ran past that deadline, an infrastructure error (1 of 2 rollouts). The valuations now have a
    bound of their own (`Episode.valuation_limit_s`): past it the episode ends at its time limit, scored; and the
    engine's default deadline holds that bound and the valuation that passes it."""
    from gymsmith.core.types import Action
    from gymsmith.families.code.env import code_task
    from gymsmith.runner.episode import VALUATION_LIMIT_S, Episode
    from gymsmith.verifier.service import DEFAULT_TIMEOUT_S

    family = get_family("code")
    task = family.generate(5, difficulty=0.0)
    module = code_task(task).buggy_modules[0]
    env = family.make_env()
    try:
        with VerifierService() as verifier:
            episode = Episode(env=env, task=task, verifier=verifier, policy="progress_gated", max_steps=40,
                              time_limit_s=600, step_rewards=True, valuation_limit_s=3.0)
            episode.reset(0)
            episode.value_start()
            outcome = None
            for n in range(40):
                _, outcome = episode.play(Action(tool="write_file", arguments={
                    "path": module, "content": f"# version {n}\nwhile True:\n    pass\n"}))
                if outcome is not None:
                    break
    finally:
        env.close()
    assert outcome is not None and outcome.reason is EndReason.TIME_LIMIT, outcome
    assert outcome.reward.value == 0.0 and len(episode.steps) < 40
    plain = RunConfig(run_id="d", taskset=TaskSetSpec(family="ops", count=1), agents=["oracle"])
    valued = plain.model_copy(update={"step_rewards": True})
    assert valued.rollout_deadline() - plain.rollout_deadline() == VALUATION_LIMIT_S + DEFAULT_TIMEOUT_S
