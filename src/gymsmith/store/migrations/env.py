"""Alembic's environment for the trajectory store: migrations run on the connection `store.migrate` hands over
(`config.attributes["connection"]`), never on a URL of their own, so they share its lock and its transaction."""

from alembic import context

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=None)
with context.begin_transaction():
    context.run_migrations()
