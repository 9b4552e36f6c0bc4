"""Paimon's cross-partition BucketAssigner (crosspartition.BucketAssigner), vectorised per batch.

Per partition it keeps the live-row count of every bucket it has seen (bootstrapped from the table).
An assigner owns bucket b when b % num_assigners == assign_id. A new key goes to the lowest owned
bucket with fewer than target-row-num rows, else to a new bucket: the smallest owned id not yet
known in that partition. Assigning n keys at once is the same as n single assignments in a row:
fill the owned non-full buckets in ascending order, then open new buckets one after another.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Hashable, Sequence

import numpy as np
import pyarrow as pa


class BucketAssigner:
    def __init__(self, target_row_num: int, num_assigners: int = 1, assign_id: int = 0):
        if target_row_num <= 0:
            raise ValueError("dynamic-bucket.target-row-num must be positive")
        if not 0 <= assign_id < num_assigners:
            raise ValueError(f"assign_id {assign_id} is not in [0, {num_assigners})")
        self.target = target_row_num
        self.num_assigners = num_assigners
        self.assign_id = assign_id
        self.counts: dict[Hashable, dict[int, int]] = defaultdict(dict)

    def owns(self, bucket: int) -> bool:
        return bucket % self.num_assigners == self.assign_id

    def bootstrap(self, partition: Hashable, bucket: int, rows: int = 1) -> None:
        """Count rows already live in (partition, bucket); any bucket, owned or not, becomes known."""
        counts = self.counts[partition]
        counts[bucket] = counts.get(bucket, 0) + rows

    def bootstrap_table(self, rows: pa.Table, partition_columns: Sequence[str], bucket_column: str,
                        count_column: str | None = None) -> None:
        """bootstrap() for every (partition, bucket) of rows: each row counts one, or count_column."""
        if rows.num_rows == 0:
            return
        cols = list(partition_columns) + [bucket_column]
        agg = [(count_column, "sum")] if count_column else [([], "count_all")]
        total = f"{count_column}_sum" if count_column else "count_all"
        for r in rows.group_by(cols, use_threads=False).aggregate(agg).to_pylist():  # per bucket, not per row
            self.bootstrap(tuple(r[c] for c in partition_columns), r[bucket_column], r[total])

    def decrement(self, partition: Hashable, bucket: int, rows: int = 1) -> None:
        """A key left (partition, bucket): its slot can be reused."""
        counts = self.counts[partition]
        counts[bucket] = max(counts.get(bucket, 0) - rows, 0)

    def assign(self, partition: Hashable, n: int) -> np.ndarray:
        """Buckets for n new keys of one partition, in order."""
        out = np.empty(n, dtype=np.int32)
        if n == 0:
            return out
        counts = self.counts[partition]
        pos = 0
        for bucket in sorted(b for b in counts if self.owns(b)):
            room = self.target - counts[bucket]
            if room <= 0:
                continue
            take = min(room, n - pos)
            out[pos:pos + take] = bucket
            counts[bucket] += take
            pos += take
            if pos == n:
                return out
        candidate = self.assign_id
        while pos < n:
            while candidate in counts:
                candidate += self.num_assigners
            take = min(self.target, n - pos)
            out[pos:pos + take] = candidate
            counts[candidate] = take
            pos += take
        return out
