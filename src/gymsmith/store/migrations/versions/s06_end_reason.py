"""Schema 6: why a rollout ended."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s06"
down_revision = "s05"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("end_reason", sa.String(32)), sa.Column("end_detail", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
