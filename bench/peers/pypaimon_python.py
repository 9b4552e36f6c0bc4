"""pypaimon 2.1.0, pure Python, on the table a user builds today without cross-partition support:
primary key (id, dt), partitioned by dt, dynamic bucket (bucket -1, HASH_DYNAMIC).

Such a table cannot move a key across partitions: an update whose dt changes becomes a second row
for that id (the old one stays). So it is checked against the `id_dt` model (what that table must
contain), not the cross-partition one; its figure is for a different, weaker result, and labelled so.
pypaimon's native (Rust) paths stay off: write.native.enabled / read.native.enabled default to false.
"""

from __future__ import annotations

import importlib.metadata
import os

import pyarrow.parquet as pq

from data import SCHEMA
from peers.base import Peer as Base

DB, TABLE = "bench", "t"


class Peer(Base):
    label = "pypaimon (id,dt) *"
    model = "id_dt"
    note = "pure Python, PK (id, dt), dynamic bucket: keys do NOT move partition (different result by design)"

    def available(self):
        try:
            import pypaimon  # noqa: F401
        except ImportError as e:
            return f"pypaimon not installed ({e})"
        return None

    def versions(self):
        return {"pypaimon": importlib.metadata.version("pypaimon")}

    def _catalog(self, work_dir):
        from pypaimon import CatalogFactory
        return CatalogFactory.create({"warehouse": os.path.join(work_dir, "warehouse")})

    def setup(self, work_dir, base_path):
        from pypaimon import Schema
        catalog = self._catalog(work_dir)
        catalog.create_database(DB, True)
        catalog.create_table(f"{DB}.{TABLE}", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"], options={"bucket": "-1"}), False)
        self.upsert(work_dir, pq.read_table(base_path))

    def upsert(self, work_dir, batch):
        table = self._catalog(work_dir).get_table(f"{DB}.{TABLE}")
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        return {}

    def read_back(self, work_dir):
        table = self._catalog(work_dir).get_table(f"{DB}.{TABLE}")
        rb = table.new_read_builder()
        return rb.new_read().to_arrow(rb.new_scan().plan().splits())
