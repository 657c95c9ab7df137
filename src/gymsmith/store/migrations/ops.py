"""What the revisions do, idempotently: a store made before Alembic was created by `metadata.create_all` and
upgraded column by column, so a table or column a revision adds may already be there (a store of schema 2 opened
by a later release got the later tables, and a process may race another upgrading the same store)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def has_table(name: str) -> bool:
    return sa.inspect(op.get_bind()).has_table(name)


def has_column(table: str, column: str) -> bool:
    return column in {c["name"] for c in sa.inspect(op.get_bind()).get_columns(table)}


def add_columns(table: str, *columns: sa.Column) -> None:
    """Add each column unless the table has it (nullable columns only: old rows hold NULL)."""
    for column in columns:
        if not has_column(table, column.name):
            op.add_column(table, column)


def create_table(name: str, *parts: sa.schema.SchemaItem, indexes: tuple[tuple[str, list[str]], ...] = ()) -> None:
    """Create the table and its indexes unless it exists."""
    if has_table(name):
        return
    op.create_table(name, *parts)
    for index, columns in indexes:
        op.create_index(index, name, columns)
