"""The trajectory store: SQL through SQLAlchemy, Parquet export."""

from gymsmith.store.export import SCHEMA as PARQUET_SCHEMA, export_parquet
from gymsmith.store.sql import DEFAULT_STORE, RunInfo, TrajectoryStore, store_url

__all__ = ["DEFAULT_STORE", "PARQUET_SCHEMA", "RunInfo", "TrajectoryStore", "export_parquet", "store_url"]
