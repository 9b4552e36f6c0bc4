"""TableWrite: the batch writer of a primary-key table (FileStoreTable.new_write gives it)."""

from __future__ import annotations

from typing import Mapping, Protocol, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common import binary_row, key_order
from ..common import options as opts
from ..common.errors import SchemaError
from ..common.key_hash import java_bucket, key_hashes
from ..format.datafile import (CHANGELOG_FILE_PREFIX, VALUE_KIND, KeyValueFileWriter, check_unique, conform,
                               dictionary_columns, group_file_stats, int_array, kv_table)
from ..format.stats_collector import DataFileStatsCollector
from ..manifest.manifest import ADD, ManifestEntry
from ..common.fileio import FileIO
from ..read.scan import Plan, next_sequences
from ..schema.schema import TableSchema
from ..snapshot.snapshot import APPEND
from .commit import CommitResult, FileStoreCommit
from .postpone import PartitionBuckets



class WrittenTable(Protocol):
    """What the writer needs of its table (store/table.py FileStoreTable, which imports this module)."""
    path: str
    io: FileIO
    schema: TableSchema

    @property
    def total_buckets(self) -> int: ...

    def plan(self) -> Plan: ...

    def partition_bytes(self, values: Sequence) -> bytes: ...

    def bucket_path(self, partition_values: Sequence, bucket: int) -> str: ...

    def new_commit(self, commit_user: str | None = None) -> FileStoreCommit: ...

_BUCKET_COL = "__paimon_bucket"


class TableWrite:
    """Batch writer: splits rows by (partition, bucket), writes sorted files, returns commit entries.

    Sequence numbers of a bucket continue from the highest of its live files in the latest
    snapshot, as Paimon's writers restore them. A caller that planned the snapshot already (the
    Spark engine, whose tasks must not each re-read the manifests) passes `next_sequence`:
    (partition bytes, bucket) -> the bucket's next sequence number. On a postpone-bucket table
    (postpone.py) a row's bucket count is its partition's; a caller that planned passes `buckets`.
    """

    def __init__(self, table: WrittenTable, next_sequence: Mapping[tuple[bytes, int], int] | None = None,
                 buckets: PartitionBuckets | None = None):
        self.table = table
        self.schema = table.schema
        self._next_seq: dict[tuple[bytes, int], int] | None = (
            dict(next_sequence) if next_sequence is not None else None)
        self._postpone = self.schema.bucket_mode == opts.BucketMode.POSTPONE_MODE
        if self._postpone and buckets is None:  # one plan gives the counts and the sequence numbers
            plan = table.plan()
            buckets = PartitionBuckets.of_plan(self.schema, plan)
            if self._next_seq is None:
                self._next_seq = next_sequences(plan.splits)
        self._buckets = buckets
        self._writers: dict[tuple[bytes, int], KeyValueFileWriter] = {}
        self._changelog_writers: dict[tuple[bytes, int], KeyValueFileWriter] = {}
        # changelog-producer 'input': every row written is also written to the bucket's changelog
        # files, as written (Paimon's MergeTreeWriter writes its input buffer there, then merges it)
        self._input_changelog = self.schema.core.changelog_producer == "input"
        self.entries: list[ManifestEntry] = []

    def _restore(self) -> dict[tuple[bytes, int], int]:
        if self._next_seq is None:
            plan = self.table.plan()
            self._next_seq = next_sequences(plan.splits)
        return self._next_seq

    def write(self, rows: pa.Table, buckets: int | Sequence[int] | np.ndarray | pa.Array | None = None,
              row_kinds: Sequence[int] | np.ndarray | pa.Array | None = None,
              at: np.ndarray | None = None) -> list[ManifestEntry]:
        """Write rows; keys must be unique per bucket.

        `buckets`: one bucket for all rows or one per row. Left out on a fixed-bucket table, each
        row goes where Paimon puts it (hash of the bucket key); dynamic modes need it given.
        `at`: write only the rows at these positions (buckets and row_kinds are per row of `rows`):
        a writer's share of a batch, taken once, in file order, instead of copied out first.
        """
        rows = conform(rows, self.schema)
        positions = None if at is None else pa.array(at, pa.int64())

        def share(table: pa.Table) -> pa.Table:  # the columns of the rows written
            return table if positions is None else table.take(positions)
        if positions is not None:
            if buckets is not None and not isinstance(buckets, (int, np.integer)):
                buckets = int_array(buckets, pa.int32()).take(positions)
            if row_kinds is not None:
                row_kinds = int_array(row_kinds, pa.int8()).take(positions)
        n = rows.num_rows if at is None else len(at)
        if n == 0:
            return []
        fixed = self.schema.core.bucket
        if self._postpone:  # each row's partition's count
            fixed = self._buckets.of_rows(share(rows.select(list(self.schema.partition_keys))))
        if buckets is None:
            if not self._postpone and fixed <= 0:
                raise SchemaError(f"table {self.table.path} is in {self.schema.bucket_mode} mode: buckets must be "
                                  "assigned by the caller (the upsert engine does)")
            keys = self.schema.bucket_keys
            picked = share(rows.select(keys))
            hashes = key_hashes([picked.column(k) for k in keys], [self.schema.field(k).type for k in keys])
            buckets = java_bucket(hashes, fixed)
        bucket_arr = (pa.array(np.full(n, buckets, dtype=np.int32)) if isinstance(buckets, (int, np.integer))
                      else int_array(buckets, pa.int32()))
        if self._postpone or fixed > 0:
            given = bucket_arr.to_numpy(zero_copy_only=False)
            if (given >= fixed).any() or (given < 0).any():
                raise SchemaError(f"bucket out of range for a table with bucket = {self.schema.core.bucket}"
                                  + (" (its partitions' counts)" if self._postpone else ""))
        kinds = pa.array(np.zeros(n, dtype=np.int8)) if row_kinds is None else int_array(row_kinds, pa.int8())
        keys = self.schema.trimmed_primary_keys
        # the columns that decide the order, of the rows written
        ordering = share(rows.select(list(dict.fromkeys(list(self.schema.partition_keys) + keys))))
        # Group rows by (partition, bucket) through one integer: sorting on it (then the key) is far
        # cheaper than sorting on partition strings, and groups only need to be contiguous.
        group = self._group_ids(ordering, bucket_arr)
        # Within a group, Paimon's key order (FLOAT/DOUBLE keys by Float.compare/Double.compare).
        order = key_order.sort_indices(ordering.append_column("__group", pa.array(group)),
                                       ["__group"] + list(keys)).to_numpy()
        sorted_group = group[order]
        # the rows taken once, in file order
        tagged = rows.take(pa.array(order if at is None else np.asarray(at)[order]))
        tagged = tagged.append_column(_BUCKET_COL, bucket_arr.take(pa.array(order)))
        tagged = tagged.append_column(VALUE_KIND, kinds.take(pa.array(order)))
        tagged = tagged.append_column("__group", pa.array(sorted_group))
        check_unique(tagged, keys, group="__group")
        offsets = np.concatenate([[0], np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1, [n]])
        # Each group's bucket, writer and first sequence number; then every row's KeyValue form
        # at once, and (many groups: an upsert touching many buckets) every file's stats at once.
        next_seq = self._restore()
        slots, writers, first_seq = [], [], np.zeros(len(offsets) - 1, dtype=np.int64)
        partition_cols = [tagged.column(k) for k in self.schema.partition_keys]
        bucket_col = tagged.column(_BUCKET_COL)
        for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):  # per group, not per row
            pbytes = self.table.partition_bytes(binary_row.row_of(partition_cols, int(start)))
            bucket = bucket_col[int(start)].as_py()
            slot = (pbytes, bucket)
            writer = self._writers.get(slot)
            if writer is None:
                # Decode the bytes again so the directory is named exactly as a scan will name it.
                pvals = binary_row.deserialize(pbytes, self.schema.partition_types)
                writer = KeyValueFileWriter(self.table.io, self.schema, self.table.bucket_path(pvals, bucket))
                self._writers[slot] = writer
            first_seq[i] = next_seq.get(slot, 0)
            next_seq[slot] = int(first_seq[i]) + int(end - start)
            slots.append(slot)
            writers.append(writer)
        sizes = np.diff(offsets)
        group_of_row = np.repeat(np.arange(len(sizes)), sizes)
        sequence = first_seq[group_of_row] + (np.arange(n, dtype=np.int64) - offsets[:-1][group_of_row])
        kv = kv_table(self.schema, tagged, sequence)
        stats = (group_file_stats(kv, DataFileStatsCollector(self.schema), offsets) if len(sizes) > 1
                 else [None])
        # which columns a dictionary pays for, judged once over all the groups' rows
        dictionary = dictionary_columns(kv, writers[0].dictionary_candidates) if len(sizes) > 1 else None
        written: list[ManifestEntry] = []
        for (pbytes, bucket), writer, start, size, file_stats in zip(slots, writers, offsets, sizes, stats):
            rows_kv = kv.slice(int(start), int(size))
            metas = writer.write_kv(rows_kv, file_stats, dictionary)
            total = self._buckets.of_partition(pbytes) if self._postpone else self.table.total_buckets
            written += [ManifestEntry(ADD, pbytes, bucket, total, m) for m in metas]
            if self._input_changelog:
                metas = self._changelog_writer((pbytes, bucket), writer).write_kv(rows_kv, file_stats, dictionary)
                written += [ManifestEntry(ADD, pbytes, bucket, total, m, changelog=True) for m in metas]
        self.entries += written
        return written

    def _changelog_writer(self, slot: tuple[bytes, int], data_writer: KeyValueFileWriter) -> KeyValueFileWriter:
        writer = self._changelog_writers.get(slot)
        if writer is None:
            writer = KeyValueFileWriter(self.table.io, self.schema, data_writer.bucket_dir,
                                        prefix=CHANGELOG_FILE_PREFIX)
            self._changelog_writers[slot] = writer
        return writer

    def _group_ids(self, rows: pa.Table, buckets: pa.Array) -> np.ndarray:
        gid = buckets.to_numpy(zero_copy_only=False).astype(np.int64)
        width = int(gid.max()) + 1
        for k in self.schema.partition_keys:
            enc = pc.dictionary_encode(rows.column(k).combine_chunks(), null_encoding="encode")
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            gid = gid + codes * width
            width *= len(enc.dictionary)
        return gid

    def prepare_commit(self) -> list[ManifestEntry]:
        entries, self.entries = self.entries, []
        return entries

    def commit(self, kind: str = APPEND, commit_user: str | None = None) -> CommitResult | None:
        return self.table.new_commit(commit_user).commit_or_abort(self.prepare_commit(), kind)
