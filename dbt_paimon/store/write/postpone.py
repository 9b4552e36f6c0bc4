"""Postpone bucket mode (`bucket` = -2): how a batch writer puts rows into real buckets.

A postpone-bucket table has no table-wide bucket count. Paimon's streaming writers park rows in
bucket -2 (`bucket-postpone/` files no batch reader reads) until its postpone compaction moves them
into real buckets; its batch writers (Spark and Flink batch since 1.4, pypaimon's Ray sink, with
`postpone.batch-write-fixed-bucket` = true, the default) write straight into real buckets, as a
fixed-bucket table does, with a bucket count per partition. dbt-paimon is a batch writer and does
the same:

- a partition that has real-bucket files keeps its count: the `_TOTAL_BUCKETS` of its manifest
  entries (Paimon keeps it nowhere else; PostponeUtils.getKnownNumBuckets);
- a new partition gets `postpone.default-bucket-num` (1 by default, the option's default in Paimon
  1.4 and 2.0, where its batch writers choose otherwise: 1.4's Spark writer its input's partition
  count, 2.0's one bucket per 1 GB of the batch; a fixed choice keeps runs reproducible);
- a row's bucket is Paimon's fixed-bucket hash of its bucket key modulo its partition's count, so
  Paimon's readers, which prune buckets of a key filter by that hash and the entry's count, find it;
- a commit whose new files disagree with the partition's live count fails as a conflict (Paimon's
  checkBucketKeepSame): another writer gave the partition its count first, and the job runs again.

The files are left at level 0 (Paimon's batch write is write-only there: no compaction). Rows in
bucket -2 stay where they are until a compaction moves them (postpone_compact.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np
import pyarrow as pa

from ..common import binary_row
from ..common.errors import CommitConflictError, PaimonError
from ..common.groups import group_codes
from ..manifest.manifest import ADD, ManifestEntry
from ..common.options import BucketMode
from ..schema.schema import TableSchema
from ..common.types import DataType

DEFAULT_BUCKET_NUM = "postpone.default-bucket-num"


@dataclass(frozen=True)
class PartitionBuckets:
    """The bucket count of each partition of a postpone-bucket table, as of one plan: picklable, so
    Spark tasks take it with the stage's other state."""

    partition_keys: tuple[str, ...]
    partition_types: tuple[DataType, ...]
    default: int
    known: Mapping[bytes, int] = field(default_factory=dict)

    @classmethod
    def of_plan(cls, schema: TableSchema, plan) -> "PartitionBuckets | None":
        """The counts a write on `plan` (a Plan of every file, or None: a new table) uses; None
        when the table is not in postpone bucket mode."""
        if schema.bucket_mode != BucketMode.POSTPONE_MODE:
            return None
        known: dict[bytes, int] = {}
        for split in plan.splits if plan is not None else ():
            if split.total_buckets <= 0:
                continue
            seen = known.setdefault(split.partition, split.total_buckets)
            if seen != split.total_buckets:
                raise PaimonError(f"partition {_describe(schema, split.partition)} of a postpone-bucket table has "
                                  f"files written for {seen} and for {split.total_buckets} buckets; Paimon's "
                                  "rescale procedure gives it one count")
        return cls(tuple(schema.partition_keys), tuple(schema.partition_types),
                   int(schema.core.get(DEFAULT_BUCKET_NUM)), known)

    def of_partition(self, partition: bytes) -> int:
        return self.known.get(partition, self.default)

    def of_rows(self, rows: pa.Table) -> np.ndarray:
        """Each row's partition's bucket count (int32), looked up once per partition."""
        n = rows.num_rows
        if not self.partition_keys:
            return np.full(n, self.of_partition(binary_row.serialize([], ())), dtype=np.int32)
        if not self.known or n == 0:
            return np.full(n, self.default, dtype=np.int32)
        codes, _ = group_codes(rows, self.partition_keys)
        _, first = np.unique(codes, return_index=True)  # a row of each partition
        columns = [rows.column(k).combine_chunks() for k in self.partition_keys]
        counts = np.array([self.of_partition(binary_row.serialize(binary_row.row_of(columns, int(i)),
                                                                  self.partition_types)) for i in first],
                          dtype=np.int32)
        return counts[codes]


def check_counts_kept(schema: TableSchema, added: Iterable[ManifestEntry],
                      live: Iterable[ManifestEntry]) -> None:
    """Paimon's checkBucketKeepSame for an APPEND commit on a postpone-bucket table: the real-bucket
    files it adds to a partition are written for the count that partition's live files have (and
    for one count among themselves). CommitConflictError otherwise: another writer committed the
    partition with another count since the job planned it, and the job must run again."""
    ours: dict[bytes, set[int]] = {}
    for e in added:
        if e.kind == ADD and not e.changelog and e.bucket >= 0:
            ours.setdefault(e.partition, set()).add(e.total_buckets)
    if not ours:
        return
    theirs: dict[bytes, int] = {}
    for e in live:
        if e.bucket >= 0 and e.total_buckets > 0 and e.partition in ours:
            theirs.setdefault(e.partition, e.total_buckets)
    for partition, counts in ours.items():
        expected = theirs.get(partition)
        if len(counts) > 1 or (expected is not None and counts != {expected}):
            raise CommitConflictError(f"Total buckets of partition {_describe(schema, partition)} changed from "
                                      f"{expected} to {sorted(counts)} (another writer committed it meanwhile)")


def _describe(schema: TableSchema, partition: bytes) -> str:
    values = binary_row.deserialize(partition, schema.partition_types)
    return "{" + ", ".join(f"{k}={v}" for k, v in zip(schema.partition_keys, values)) + "}"
