"""Schema 10: the part that failed, for an error rollout."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s10"
down_revision = "s09"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("error_kind", sa.String(32)))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
