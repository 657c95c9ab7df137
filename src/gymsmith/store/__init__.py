"""The trajectory store: SQL through SQLAlchemy, Parquet export (pyarrow is imported on first use of the export)."""

from gymsmith.store.sql import DEFAULT_STORE, RunInfo, TrajectoryStore, store_url

__all__ = ["DEFAULT_STORE", "PARQUET_SCHEMA", "RunInfo", "TrajectoryStore", "export_parquet", "store_url"]


def __getattr__(name: str):
    # every worker process imports the store; only an export needs pyarrow (about 0.1 s to import)
    if name in ("PARQUET_SCHEMA", "export_parquet"):
        from gymsmith.store import export

        return export.SCHEMA if name == "PARQUET_SCHEMA" else export.export_parquet
    raise AttributeError(f"module 'gymsmith.store' has no attribute {name!r}")
