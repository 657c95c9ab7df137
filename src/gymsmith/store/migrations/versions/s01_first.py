"""Schema 1: runs, rollouts, steps and reward components (the first release's store)."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import create_table

revision = "s01"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_table("runs",
                 sa.Column("run_id", sa.String(128), primary_key=True),
                 sa.Column("created_at", sa.Float, nullable=False),
                 sa.Column("purpose", sa.String(16), nullable=False),
                 sa.Column("package_version", sa.String(64), nullable=False),
                 sa.Column("config", sa.Text, nullable=False))
    create_table("rollouts",
                 sa.Column("rollout_id", sa.String(64), primary_key=True),
                 sa.Column("run_id", sa.String(128), sa.ForeignKey("runs.run_id"), nullable=False),
                 sa.Column("task_id", sa.String(64), nullable=False),
                 sa.Column("family", sa.String(64), nullable=False),
                 sa.Column("family_version", sa.String(32), nullable=False),
                 sa.Column("split", sa.String(16), nullable=False),
                 sa.Column("difficulty", sa.Float, nullable=False),
                 sa.Column("agent", sa.String(64), nullable=False),
                 sa.Column("seed", sa.Integer, nullable=False),
                 sa.Column("status", sa.String(16), nullable=False),
                 sa.Column("reward", sa.Float),
                 sa.Column("accepted", sa.Boolean),
                 sa.Column("policy", sa.String(32)),
                 sa.Column("n_steps", sa.Integer, nullable=False),
                 sa.Column("invalid_actions", sa.Integer, nullable=False),
                 sa.Column("final_state_hash", sa.String(64)),
                 sa.Column("error", sa.Text),
                 sa.Column("package_version", sa.String(64), nullable=False),
                 sa.Column("started_at", sa.Float, nullable=False),
                 sa.Column("finished_at", sa.Float, nullable=False),
                 sa.Column("task", sa.Text, nullable=False),
                 sa.Column("reset_observation", sa.Text, nullable=False),
                 sa.Column("gate_failures", sa.Text, nullable=False),
                 sa.UniqueConstraint("run_id", "task_id", "agent", "seed", name="one_rollout_per_key"),
                 indexes=(("rollouts_by_run", ["run_id"]), ("rollouts_by_reward", ["reward"])))
    create_table("steps",
                 sa.Column("rollout_id", sa.String(64), sa.ForeignKey("rollouts.rollout_id"), primary_key=True),
                 sa.Column("idx", sa.Integer, primary_key=True),
                 sa.Column("tool", sa.String(64), nullable=False),
                 sa.Column("arguments", sa.Text, nullable=False),
                 sa.Column("observation", sa.Text, nullable=False),
                 sa.Column("error_kind", sa.String(32)),
                 sa.Column("duration_ms", sa.Float, nullable=False))
    create_table("reward_components",
                 sa.Column("rollout_id", sa.String(64), sa.ForeignKey("rollouts.rollout_id"), primary_key=True),
                 sa.Column("name", sa.String(64), primary_key=True),
                 sa.Column("value", sa.Float, nullable=False),
                 sa.Column("weight", sa.Float, nullable=False),
                 sa.Column("detail", sa.Text, nullable=False))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
