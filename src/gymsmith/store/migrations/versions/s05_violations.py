"""Schema 5: the violations that zeroed a reward."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s05"
down_revision = "s04"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("violations", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
