"""PartitionIndex: where a dynamic-bucket table whose key holds the partition (HASH_DYNAMIC) puts
a new key, as Paimon's PartitionIndex does.

Per partition the HASH index records which bucket each key hash went to. A new key whose hash
the index knows goes to that bucket; an unknown hash is placed like BucketAssigner places a new
key, one slot per distinct hash (rows sharing a hash share a bucket). Bucket fullness comes from
the index, not the data: every index entry of a bucket counts one (Paimon's loadIndex with its
bucket filter), so an assigner is sent the entries of every bucket it owns.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.schema.schema import TableSchema
from .bucket_assigner import BucketAssigner
from ..store.common.groups import group_codes, group_runs
from .rows import HASH, OLD_BUCKET, old_column

_ROW = "__row"


class PartitionIndex:
    def __init__(self, schema: TableSchema, assigner: BucketAssigner, index: pa.Table | None):
        """index: old_column(p) per partition field + HASH + OLD_BUCKET, one row per indexed hash."""
        self.partition_keys = list(schema.partition_keys)
        self.assigner = assigner
        olds = [old_column(p) for p in self.partition_keys]
        if index is None:
            index = pa.schema([pa.field(old_column(p), schema.field(p).type.to_arrow()) for p in self.partition_keys]
                              + [pa.field(HASH, pa.int32()), pa.field(OLD_BUCKET, pa.int32())]).empty_table()
        self.index = index
        assigner.bootstrap_table(index, olds, OLD_BUCKET)

    def assign(self, rows: pa.Table, new: np.ndarray, buckets: np.ndarray) -> np.ndarray:
        """buckets with the `new` rows (partition fields + HASH) placed."""
        if not new.any():
            return buckets
        idx = np.flatnonzero(new)
        cols = self.partition_keys + [HASH]
        fresh = rows.take(pa.array(idx)).select(cols).append_column(_ROW, pa.array(np.arange(len(idx))))
        if self.index.num_rows:
            known = self.index.rename_columns(cols + [OLD_BUCKET])
            fresh = fresh.join(known, cols, join_type="left outer", use_threads=False)
            fresh = fresh.take(pc.sort_indices(fresh, sort_keys=[(_ROW, "ascending")]))
            found = fresh.column(OLD_BUCKET).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        else:
            found = np.full(len(idx), -1, dtype=np.int32)
        hit = found >= 0
        buckets[idx[hit]] = found[hit]
        if hit.all():
            return buckets
        unknown = fresh.filter(pa.array(~hit)).select(cols)
        distinct = unknown.group_by(cols, use_threads=False).aggregate([])
        distinct = distinct.take(pc.sort_indices(distinct, sort_keys=[(c, "ascending") for c in cols]))
        codes, parts = group_codes(distinct, self.partition_keys)
        order, runs = group_runs(codes)
        chosen = np.empty(distinct.num_rows, dtype=np.int32)
        for start, end in runs:  # one iteration per partition
            chosen[order[start:end]] = self.assigner.assign(parts[codes[order[start]]], end - start)
        distinct = distinct.append_column(OLD_BUCKET, pa.array(chosen))
        unknown = unknown.append_column(_ROW, pa.array(np.flatnonzero(~hit)))
        placed = unknown.join(distinct, cols, join_type="inner", use_threads=False)
        rows_at = placed.column(_ROW).to_numpy(zero_copy_only=False)
        buckets[idx[rows_at]] = placed.column(OLD_BUCKET).to_numpy(zero_copy_only=False)
        return buckets
