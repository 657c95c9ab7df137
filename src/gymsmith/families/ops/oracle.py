"""The ops oracle: replays the generator's solution witness, retrying simulated transient faults.

It is privileged (it rebuilds the witness from the seed, as the verifier does) and exists to prove that
every generated task is solvable; it never runs in training.
"""

from __future__ import annotations

from gymsmith.core.types import Action, ActionErrorKind, AgentRole, Observation, TaskSpec
from gymsmith.families.ops.generator import generate_world

RETRYABLE = (ActionErrorKind.TRANSIENT, ActionErrorKind.RATE_LIMITED)


class OpsOracle:
    role = AgentRole.ORACLE
    name = "oracle"

    def reset(self, task: TaskSpec, observation: Observation, *, seed: int) -> None:
        world = generate_world(task.seed, task.knobs)
        self.plan = [Action(tool=a["tool"], arguments=dict(a["arguments"])) for a in world.witness]
        self.plan.append(Action(tool="submit", arguments={"note": "witness replayed"}))
        self.next = 0

    def act(self, observation: Observation) -> Action:
        if self.next and observation.error is not None and observation.error.kind in RETRYABLE:
            return self.plan[self.next - 1]  # the backend flaked; the same call again
        action = self.plan[min(self.next, len(self.plan) - 1)]
        self.next += 1
        return action
