"""Messages between the runner and the verifier process, and what hidden checks return."""

from __future__ import annotations

from pydantic import BaseModel, Field

from gymsmith.core.types import Reward, RewardComponent, TaskSpec


class CheckResult(BaseModel):
    """What a family's hidden checks return: dense components, the gate's failures and violations.

    `gate_failures` say the goal is not (fully) reached: partial credit from the components still counts.
    `violations` say the agent did something forbidden (changed what the goal does not need, broke a rule,
    forged or tampered with results, acted as another account): any one of them rejects the state AND
    zeroes the reward under every policy, so no hack can earn more than doing nothing.
    """

    components: dict[str, RewardComponent]
    gate_failures: list[str] = Field(default_factory=list)
    violations: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return not self.gate_failures and not self.violations


class VerifyRequest(BaseModel):
    request_id: int
    task: TaskSpec
    final_state_kind: str
    final_state_path: str = Field(description="Read-only snapshot written by the environment.")
    policy: str
    prepare: bool = Field(default=False, description="Only warm the worker's caches for `task` (the checks module's "
                          "optional `prepare(task)`): nothing is scored, the final state is not read, and the "
                          "response carries neither reward nor error unless preparing failed.")
    digest: bool = Field(default=False, description="Also return the final state's content hash, as "
                         "`Environment.state_hash()` gives it (the checks module's optional `state_digest(path)`).")


class VerifyResponse(BaseModel):
    request_id: int
    reward: Reward | None = None
    error: str | None = Field(default=None, description="Set when the checks could not produce a verdict.")
    digest: str | None = Field(default=None, description="The final state's content hash, when asked for and the "
                               "family's checks compute it.")
