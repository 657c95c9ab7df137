"""Schema 3: environment fingerprints."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns, create_table

revision = "s03"
down_revision = "s02"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("rollouts", sa.Column("fingerprint", sa.String(32)))
    create_table("fingerprints",
                 sa.Column("digest", sa.String(32), primary_key=True),
                 sa.Column("family", sa.String(64), nullable=False),
                 sa.Column("first_seen", sa.Float, nullable=False),
                 sa.Column("body", sa.Text, nullable=False))
    create_table("check_fingerprints",
                 sa.Column("check_id", sa.String(64), primary_key=True),
                 sa.Column("family", sa.String(64), nullable=False),
                 sa.Column("created_at", sa.Float, nullable=False),
                 sa.Column("fingerprint", sa.String(32), nullable=False),
                 indexes=(("check_fingerprints_by_family", ["family", "created_at"]),))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
