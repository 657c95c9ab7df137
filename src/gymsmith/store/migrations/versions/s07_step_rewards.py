"""Schema 7: per-step rewards."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s07"
down_revision = "s06"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("steps", sa.Column("progress", sa.Float), sa.Column("step_reward", sa.Float),
                sa.Column("progress_error", sa.Text))
    add_columns("rollouts", sa.Column("start_progress", sa.Float))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
