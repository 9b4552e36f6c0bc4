"""pyiceberg `Table.upsert` (join on id) into an Iceberg table partitioned by identity(dt), with a
local SQL catalog on SQLite and a local warehouse. Upsert deletes matched rows by key wherever they
are (copy-on-write) and appends the new versions, so keys move partition as in the cross-partition
model. Read-back: pyiceberg's scan."""

from __future__ import annotations

import importlib.metadata
import os

import pyarrow.parquet as pq

from data import SCHEMA
from peers.base import Peer as Base


class Peer(Base):
    label = "pyiceberg upsert"
    note = "pyiceberg Table.upsert(join_cols=[id]), SQLite catalog, identity(dt) partitions"

    def available(self):
        try:
            from pyiceberg.catalog.sql import SqlCatalog  # noqa: F401
            import sqlalchemy  # noqa: F401
        except ImportError as e:
            return f"pyiceberg[sql-sqlite] not installed ({e})"
        return None

    def versions(self):
        return {"pyiceberg": importlib.metadata.version("pyiceberg")}

    def _table(self, work_dir, create=False):
        from pyiceberg.catalog.sql import SqlCatalog
        root = os.path.abspath(work_dir)
        catalog = SqlCatalog("bench", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/iceberg")
        if not create:
            return catalog.load_table("bench.t")
        catalog.create_namespace("bench")
        table = catalog.create_table("bench.t", schema=SCHEMA)
        with table.update_spec() as spec:
            spec.add_identity("dt")
        with table.update_schema() as schema:
            schema.set_identifier_fields("id")
        return table

    def setup(self, work_dir, base_path):
        os.makedirs(work_dir, exist_ok=True)
        self._table(work_dir, create=True).append(pq.read_table(base_path))

    def upsert(self, work_dir, batch):
        r = self._table(work_dir).upsert(batch, join_cols=["id"])
        return {"rows_updated": r.rows_updated, "rows_inserted": r.rows_inserted}

    def read_back(self, work_dir):
        return self._table(work_dir).scan().to_arrow()
