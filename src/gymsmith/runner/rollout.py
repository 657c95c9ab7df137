"""One rollout: reset, the agent-environment loop under step and time limits, verification."""

from __future__ import annotations

import tempfile
import time
import traceback
from pathlib import Path

import gymsmith
from gymsmith.agents.base import Agent
from gymsmith.core.errors import VerifierError
from gymsmith.core.hashing import content_hash
from gymsmith.core.types import Observation, RolloutStatus, Split, Step, TaskSpec, Trajectory
from gymsmith.envs.base import Environment
from gymsmith.verifier.service import VerifierService


def rollout_id(run_id: str, task_id: str, agent: str, seed: int) -> str:
    """Deterministic, so a resumed run recognises a rollout it has already stored."""
    return content_hash([run_id, task_id, agent, seed], length=24)


def run_rollout(*, env: Environment, agent: Agent, task: TaskSpec, split: Split, seed: int, run_id: str,
                verifier: VerifierService, policy: str, max_steps: int, time_limit_s: float) -> Trajectory:
    """Run `agent` on `task` and return the trajectory; infrastructure failures become status ERROR.

    Never raises for agent behaviour. The reward is None exactly when the status is ERROR.
    """
    started = time.time()
    base = dict(rollout_id=rollout_id(run_id, task.id, agent.name, seed), run_id=run_id, task_id=task.id,
                family=task.family, family_version=task.family_version, split=split, difficulty=task.difficulty,
                seed=seed, agent=agent.name, package_version=gymsmith.__version__)
    steps: list[Step] = []
    first = Observation(text="")
    try:
        first = env.reset(task, seed=seed)
        agent.reset(task, first, seed=seed)
        observation, done = first, False
        while not done and len(steps) < max_steps and time.time() - started < time_limit_s:
            action = agent.act(observation)
            t0 = time.perf_counter()
            result = env.step(action)
            steps.append(Step(index=len(steps), action=action, observation=result.observation,
                              duration_ms=round((time.perf_counter() - t0) * 1000, 3),
                              agent_info=getattr(agent, "step_info", None)))
            observation, done = result.observation, result.done
        status = RolloutStatus.COMPLETED if done else RolloutStatus.TRUNCATED
        with tempfile.TemporaryDirectory(prefix="gymsmith-final-") as tmp:
            final = env.final_state(Path(tmp))
            reward = verifier.verify(task, final, policy=policy)
        return Trajectory(**base, reset_observation=first, steps=steps, reward=reward, status=status,
                          invalid_actions=getattr(env, "invalid_actions", 0), final_state_hash=final.digest,
                          final_diff=final.diff,
                          started_at=started, finished_at=time.time())
    except VerifierError as exc:
        error = f"verifier error: {exc}"
    except Exception as exc:  # an environment or agent bug is an infrastructure error, not a low reward
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
    return Trajectory(**base, reset_observation=first, steps=steps, reward=None, status=RolloutStatus.ERROR,
                      error=error, invalid_actions=getattr(env, "invalid_actions", 0), started_at=started,
                      finished_at=time.time())
