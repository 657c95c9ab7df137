"""The verifier service: hidden checks in a separate process, and reward policies."""

from gymsmith.verifier.policies import DEFAULT_POLICY, apply_policy, get_policy, policy_names, reward_policy
from gymsmith.verifier.protocol import CheckResult, VerifyRequest, VerifyResponse
from gymsmith.verifier.service import VerifierService

__all__ = ["DEFAULT_POLICY", "CheckResult", "VerifierService", "VerifyRequest", "VerifyResponse", "apply_policy",
           "get_policy", "policy_names", "reward_policy"]
