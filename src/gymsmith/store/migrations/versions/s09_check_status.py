"""Schema 9: a check's status (pass, warn, fail)."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s09"
down_revision = "s08"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("check_results", sa.Column("status", sa.String(8)))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
