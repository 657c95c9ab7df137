"""Schema 4: the final state's diff."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s04"
down_revision = "s03"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("final_diff", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
