"""Schema 11: the run of the previous turn's messages and prompt ids a turn repeats after its prefix (core.splice)."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns

revision = "s11"
down_revision = "s10"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("turns", *(sa.Column(f"{what}_{field}", sa.Integer) for what in ("messages", "prompt")
                           for field in ("copy_from", "copied", "copied_at")))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
