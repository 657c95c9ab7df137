"""The trajectory store's schema history as Alembic revisions (`versions/sNN_*.py`, revision "sNN" is schema NN).

`gymsmith.store.migrate` applies them; a revision is written by hand for each schema change, and
`tests/test_store_migrations.py` upgrades a store of every earlier schema version, on SQLite and PostgreSQL."""
