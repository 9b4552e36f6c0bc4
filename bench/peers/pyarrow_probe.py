"""The physical limit: the I/O no upsert can avoid. Reads the base table's keys (id, dt) from a
hive-partitioned Parquet dataset and writes the batch as one zstd Parquet file; no matching, no
merge, no commit. Its check is the written file against the batch, plus the number of keys read."""

from __future__ import annotations

import os

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from peers.base import Peer as Base


class Peer(Base):
    label = "pyarrow probe (limit)"
    model = "batch"
    note = "read base keys (id, dt) + write the batch as Parquet: a floor, not an upsert"

    def setup(self, work_dir, base_path):
        ds.write_dataset(pq.read_table(base_path), os.path.join(work_dir, "base"), format="parquet",
                         partitioning=["dt"], partitioning_flavor="hive")

    def upsert(self, work_dir, batch):
        keys = ds.dataset(os.path.join(work_dir, "base"), format="parquet", partitioning="hive") \
            .to_table(columns=["id", "dt"])
        pq.write_table(batch, os.path.join(work_dir, "batch.parquet"), compression="zstd")
        return {"keys_read": keys.num_rows}

    def read_back(self, work_dir):
        return pq.read_table(os.path.join(work_dir, "batch.parquet"))

    def check(self, info, case):
        if info.get("keys_read") != case["base_rows"]:
            return f"read {info.get('keys_read')} keys, the base has {case['base_rows']}"
        return None
