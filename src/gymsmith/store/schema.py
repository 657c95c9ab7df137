"""The trajectory store's SQL schema (SQLAlchemy Core): runs, rollouts, steps, reward components."""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

SCHEMA_VERSION = 11  # 11: turns' copied runs; 10: rollouts.error_kind; 9: check_results.status; 7: steps.progress, step_reward, progress_error; rollouts.start_progress; 8: rollouts.group_id, turns
metadata = MetaData()

runs = Table(
    "runs", metadata,
    Column("run_id", String(128), primary_key=True),
    Column("created_at", Float, nullable=False),
    Column("purpose", String(16), nullable=False),  # train | eval
    Column("package_version", String(64), nullable=False),
    Column("config", Text, nullable=False),  # RunConfig as JSON
)

rollouts = Table(
    "rollouts", metadata,
    Column("rollout_id", String(64), primary_key=True),
    Column("run_id", String(128), ForeignKey("runs.run_id"), nullable=False),
    Column("task_id", String(64), nullable=False),
    Column("family", String(64), nullable=False),
    Column("family_version", String(32), nullable=False),
    Column("split", String(16), nullable=False),
    Column("difficulty", Float, nullable=False),
    Column("agent", String(64), nullable=False),
    Column("seed", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("reward", Float),  # NULL exactly when status = 'error'
    Column("accepted", Boolean),
    Column("policy", String(32)),
    Column("n_steps", Integer, nullable=False),
    Column("invalid_actions", Integer, nullable=False),
    Column("final_state_hash", String(64)),
    Column("fingerprint", String(32)),  # digest of fingerprints.body
    Column("error", Text),
    Column("error_kind", String(32)),  # ErrorKind for status 'error' (schema 10; NULL in older rows)
    Column("end_reason", String(32)),  # EndReason: why the rollout ended (schema 6; NULL in older rows)
    Column("end_detail", Text),  # the failure that ended it: the agent's or environment's exception, or why ungradable
    Column("package_version", String(64), nullable=False),
    Column("started_at", Float, nullable=False),
    Column("finished_at", Float, nullable=False),
    Column("task", Text, nullable=False),  # TaskSpec JSON (agent-visible; no witness)
    Column("reset_observation", Text, nullable=False),
    Column("gate_failures", Text, nullable=False),  # JSON list
    Column("violations", Text),  # JSON list: forbidden effects that zeroed the reward (schema 5)
    Column("final_diff", Text),  # unified diff of the final state against the start (file-based families)
    Column("start_progress", Float),  # V(s0) with step rewards (schema 7; NULL without them and in older rows)
    Column("group_id", String(64)),  # schema 8: the sampling group of a run with `group` (NULL without, and in older rows)
    UniqueConstraint("run_id", "task_id", "agent", "seed", name="one_rollout_per_key"),
    Index("rollouts_by_run", "run_id"),
    Index("rollouts_by_reward", "reward"),
)

steps = Table(
    "steps", metadata,
    Column("rollout_id", String(64), ForeignKey("rollouts.rollout_id"), primary_key=True),
    Column("idx", Integer, primary_key=True),
    Column("tool", String(64), nullable=False),
    Column("arguments", Text, nullable=False),  # as sent (a model's raw JSON text is kept verbatim)
    Column("observation", Text, nullable=False),  # Observation JSON
    Column("error_kind", String(32)),
    Column("duration_ms", Float, nullable=False),
    Column("agent_info", Text),  # JSON: a model agent's latency, token usage and retries for this step
    Column("progress", Float),  # schema 7, with step rewards: V(s_t), the verifier's value of the state after it
    Column("step_reward", Float),  # schema 7: progress minus the last known progress before it (or V(s0))
    Column("progress_error", Text),  # schema 7: why progress is NULL although step rewards were on
)

turns = Table(  # schema 8: a model agent's replies, as trainers need them (store/turns.py encodes them)
    "turns", metadata,
    Column("rollout_id", String(64), ForeignKey("rollouts.rollout_id"), primary_key=True),
    Column("step_idx", Integer, primary_key=True),  # the step the reply's first action became
    Column("level", String(16), nullable=False),  # the token fields asked for (agents.tokens.TOKEN_LEVELS)
    Column("finish_reason", String(32)),
    Column("messages_kept", Integer, nullable=False),  # leading request messages equal to the previous turn's + reply
    Column("messages", Text, nullable=False),  # JSON list: the request's other messages
    Column("reply", Text, nullable=False),  # JSON: the assistant message as received
    Column("prompt_kept", Integer),  # leading prompt ids equal to the previous turn's prompt + completion ids
    Column("prompt_ids", Text),  # JSON list: the prompt's other ids (NULL: the server gave none)
    Column("completion_ids", Text),  # JSON list (NULL: the server gave none)
    Column("logprobs", Text),  # JSON list, one per completion token (NULL: the server gave none)
    # schema 11: the run of the previous turn's messages (prompt ids) that a request repeats after its prefix, past the
    # agent's context limit (core.splice; NULL or 0: none)
    Column("messages_copy_from", Integer), Column("messages_copied", Integer), Column("messages_copied_at", Integer),
    Column("prompt_copy_from", Integer), Column("prompt_copied", Integer), Column("prompt_copied_at", Integer),
)

reward_components = Table(
    "reward_components", metadata,
    Column("rollout_id", String(64), ForeignKey("rollouts.rollout_id"), primary_key=True),
    Column("name", String(64), primary_key=True),
    Column("value", Float, nullable=False),
    Column("weight", Float, nullable=False),
    Column("detail", Text, nullable=False),
)

check_results = Table(
    "check_results", metadata,
    Column("check_id", String(64), primary_key=True),  # one `gymsmith check` invocation for one family
    Column("name", String(64), primary_key=True),
    Column("family", String(64), nullable=False),
    Column("family_version", String(32), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("run_id", String(128), nullable=False),  # the audit run whose rollouts the check used
    Column("passed", Boolean, nullable=False),
    Column("detail", Text, nullable=False),
    Column("status", String(8)),  # pass | warn | fail (CheckStatus); NULL in rows from before schema 9
    Index("checks_by_family", "family", "created_at"),
)

fingerprints = Table(
    "fingerprints", metadata,
    Column("digest", String(32), primary_key=True),
    Column("family", String(64), nullable=False),
    Column("first_seen", Float, nullable=False),
    Column("body", Text, nullable=False),  # the fingerprint as JSON
)

check_fingerprints = Table(
    "check_fingerprints", metadata,
    Column("check_id", String(64), primary_key=True),
    Column("family", String(64), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("fingerprint", String(32), nullable=False),
    Index("check_fingerprints_by_family", "family", "created_at"),
)
