"""Running rollouts: one at a time (`run_rollout`) or a whole run (`run`)."""

from gymsmith.runner.local import RunConfig, SummaryRow, check_split_policy, run, summarize
from gymsmith.runner.rollout import rollout_id, run_rollout

__all__ = ["RunConfig", "SummaryRow", "check_split_policy", "rollout_id", "run", "run_rollout", "summarize"]
