"""Schema 8: GRPO groups and a model agent's turns."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns, create_table

revision = "s08"
down_revision = "s07"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("group_id", sa.String(64)))
    create_table("turns",
                 sa.Column("rollout_id", sa.String(64), sa.ForeignKey("rollouts.rollout_id"), primary_key=True),
                 sa.Column("step_idx", sa.Integer, primary_key=True),
                 sa.Column("level", sa.String(16), nullable=False),
                 sa.Column("finish_reason", sa.String(32)),
                 sa.Column("messages_kept", sa.Integer, nullable=False),
                 sa.Column("messages", sa.Text, nullable=False),
                 sa.Column("reply", sa.Text, nullable=False),
                 sa.Column("prompt_kept", sa.Integer),
                 sa.Column("prompt_ids", sa.Text),
                 sa.Column("completion_ids", sa.Text),
                 sa.Column("logprobs", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
