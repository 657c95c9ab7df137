"""Running rollouts: one at a time (`run_rollout`) or a whole run (`run`)."""

from gymsmith.runner.driver import run
from gymsmith.runner.local import RolloutWorker, RunConfig, SummaryRow, check_split_policy, plan_run, summarize
from gymsmith.runner.rollout import rollout_id, run_rollout

__all__ = ["RolloutWorker", "RunConfig", "plan_run", "SummaryRow", "check_split_policy", "rollout_id", "run", "run_rollout", "summarize"]
