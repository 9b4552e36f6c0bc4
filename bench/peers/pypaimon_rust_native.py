"""pypaimon-rust: the Rust core of Apache Paimon's Python client (PyPI `pypaimon-rust`, module
`pypaimon_rust`, what `pypaimon` 2.1.0 loads for write.native.enabled). Its batch writer handles
Paimon's CROSS_PARTITION bucket mode natively (a CrossPartitionAssigner bootstraps the global
key index from the table each job, then writes -D to the old partition and +I to the new one).

It is driven directly (pypaimon_rust.datafusion.PaimonCatalog → Table → batch write builder) so
that nothing can fall back to the Python writer. Same table as dbt-paimon's: PK (id), dt partition,
bucket -1. Created with pypaimon's catalog (plain filesystem catalog, no data written by it).
Read-back uses pypaimon-rust's own reader.
"""

from __future__ import annotations

import importlib.metadata
import os

import pyarrow as pa
import pyarrow.parquet as pq

from data import SCHEMA
from peers.base import Peer as Base

DB, TABLE = "bench", "t"


class Peer(Base):
    label = "pypaimon-rust native"
    note = "pypaimon_rust 0.4 batch writer, CROSS_PARTITION mode (bucket -1, PK id)"
    second_reader = "dbt-paimon store reader"
    primary_keys = ["id"]
    options = {"bucket": "-1"}
    # Its own W3-100M setup, one write job of 100M rows, is OOM-killed on a 24 GB machine. The two
    # tables are defined alike (PK id, dt partition, bucket -1), so its upsert runs on a copy of
    # dbt-paimon's: the Rust writer bootstraps from, and commits onto, a table dbt-paimon wrote.
    borrows_setup = {"W3-100M": "dbt-paimon"}

    def available(self):
        try:
            from pypaimon_rust.datafusion import PaimonCatalog  # noqa: F401
        except ImportError as e:
            return f"pypaimon-rust not installed ({e})"
        return None

    def start(self, work_dir):
        from pypaimon_rust.datafusion import PaimonCatalog  # noqa: F401 - imported before the clock, as every peer's library

    def versions(self):
        return {"pypaimon-rust": importlib.metadata.version("pypaimon-rust")}

    def _warehouse(self, work_dir):
        return os.path.abspath(os.path.join(work_dir, "warehouse"))   # the Rust catalog wants absolute paths

    def _table(self, work_dir):
        from pypaimon_rust.datafusion import PaimonCatalog
        return PaimonCatalog({"warehouse": self._warehouse(work_dir)}).get_table((DB, TABLE))

    def setup(self, work_dir, base_path):
        from pypaimon import CatalogFactory, Schema
        catalog = CatalogFactory.create({"warehouse": self._warehouse(work_dir)})
        catalog.create_database(DB, True)
        catalog.create_table(f"{DB}.{TABLE}", Schema.from_pyarrow_schema(
            SCHEMA, partition_keys=["dt"], primary_keys=self.primary_keys, options=dict(self.options)), False)
        self.upsert(work_dir, pq.ParquetFile(base_path).iter_batches(1 << 20))   # in parts: W3-100M

    def upsert(self, work_dir, batch):
        table = self._table(work_dir)
        builder = table.new_batch_write_builder()
        write = builder.new_write()
        for rb in batch.to_batches() if isinstance(batch, pa.Table) else batch:
            write.write_arrow(rb)
        messages = write.prepare_commit()
        write.close()
        commit = builder.new_commit()
        commit.commit(messages)
        commit.close()
        snap = self._table(work_dir).latest_snapshot()
        return {"snapshot_id": snap.id(), "delta_record_count": snap.delta_record_count()}

    def read_back(self, work_dir):
        """The table split by split (a 100M-row table does not fit in memory at once)."""
        rb = self._table(work_dir).new_read_builder()
        read = rb.new_read()
        for split in rb.new_scan().plan().splits():
            batches = read.read([split])
            if batches:
                yield pa.Table.from_batches(batches)

    def second_opinion(self, work_dir):
        """dbt-paimon's store reader on the Rust writer's table (interoperability, not validity)."""
        from peers.store_reader import read_parts
        return read_parts(os.path.join(self._warehouse(work_dir), f"{DB}.db", TABLE))
