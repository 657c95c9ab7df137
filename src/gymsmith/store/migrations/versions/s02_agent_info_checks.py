"""Schema 2: a model agent's per-step info, and the history of `gymsmith check`."""

import sqlalchemy as sa

from gymsmith.store.migrations.ops import add_columns, create_table

revision = "s02"
down_revision = "s01"
branch_labels = None
depends_on = None


def upgrade() -> None:
    add_columns("steps", sa.Column("agent_info", sa.Text))
    create_table("check_results",
                 sa.Column("check_id", sa.String(64), primary_key=True),
                 sa.Column("name", sa.String(64), primary_key=True),
                 sa.Column("family", sa.String(64), nullable=False),
                 sa.Column("family_version", sa.String(32), nullable=False),
                 sa.Column("created_at", sa.Float, nullable=False),
                 sa.Column("run_id", sa.String(128), nullable=False),
                 sa.Column("passed", sa.Boolean, nullable=False),
                 sa.Column("detail", sa.Text, nullable=False),
                 indexes=(("checks_by_family", ["family", "created_at"]),))


def downgrade() -> None:
    raise NotImplementedError("a store is only ever upgraded")
