"""Append tables: Paimon tables without a primary key, their data files, writer and compaction.

Rules, as Paimon's append table (AppendOnlyFileStore) keeps them:
- A data file holds the table's columns only: no `_KEY_*`, `_SEQUENCE_NUMBER` or `_VALUE_KIND`. Its
  meta has an empty min/max key and empty key stats (DataFileMeta.forAppend), value stats of the
  columns, level 0, and the range of sequence numbers its rows took in their bucket.
- Every row is kept: nothing is merged on read; a split's files are read one after the other.
- `bucket` -1 (the default) is BUCKET_UNAWARE: every file of a partition lives in bucket 0.
  `bucket` N needs `bucket-key`; a row's bucket is the hash of its bucket key, as in a keyed table.
- Compaction only merges small files (below `compaction.file-size`, by default 70% of
  `target-file-size`): in each (partition, bucket), once at least `compaction.min.file-num` (5) of
  them are there, the smallest first are packed into bins of up to twice the target size and each
  bin is rewritten as one file (Paimon's AppendCompactCoordinator / BucketedAppendCompactManager).
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from ..common import binary_row
from .commit import CommitResult, FileStoreCommit
from ..format.datafile import KeyValueFileWriter, conform, creation_time, file_stats_of_rows, int_array
from ..common.errors import SchemaError
from ..common.fileio import FileIO
from ..common.groups import group_codes, group_runs
from ..common.key_hash import java_bucket, key_hashes
from ..common.options import parse_memory, parse_positive
from ..manifest.manifest import ADD, DELETE, FILE_SOURCE_COMPACT, DataFileMeta, ManifestEntry, SimpleStats
from ..common.paths import bucket_dir, partition_path
from ..read.read import TableRead
from ..read.scan import DataSplit
from ..schema.schema import TableSchema
from ..snapshot.snapshot import APPEND

UNAWARE_BUCKET = 0  # where a bucket-unaware table keeps every file of a partition
COMPACTION_FILE_SIZE_SHARE = 0.7  # Paimon's default compaction.file-size: 70% of target-file-size


class AppendFileWriter(KeyValueFileWriter):
    """Writes the data files of one (partition, bucket) of an append table: the table's columns,
    rolled at target-file-size, in the order the rows come."""

    def __post_init__(self):
        super().__post_init__()
        self.dictionary_candidates = [f.name for f in self.schema.fields if not f.type.is_nested]
        self._next_sequence = 0

    def write_rows(self, rows: pa.Table, start_sequence: int) -> list[DataFileMeta]:
        """Write rows (the table's columns, schema order); their sequence numbers are
        start_sequence, start_sequence + 1, ... in order."""
        self._next_sequence = start_sequence
        return self.write_kv(rows)

    def file_meta(self, name: str, size: int, rows: pa.Table, stats) -> DataFileMeta:
        first = self._next_sequence
        self._next_sequence += rows.num_rows
        cols, values = file_stats_of_rows(rows, self._stats)
        return dataclasses.replace(
            _empty_key_meta(), file_name=name, file_size=size, row_count=rows.num_rows, value_stats=values,
            min_sequence_number=first, max_sequence_number=first + rows.num_rows - 1, schema_id=self.schema.id,
            level=self.level, creation_time=creation_time(), file_source=self.file_source, value_stats_cols=cols)


def _empty_key_meta() -> DataFileMeta:
    empty = binary_row.empty_row()
    return DataFileMeta(file_name="", file_size=0, row_count=0, min_key=empty, max_key=empty,
                        key_stats=SimpleStats.empty(), value_stats=SimpleStats.empty(), min_sequence_number=0,
                        max_sequence_number=0, schema_id=0)


def row_buckets(rows: pa.Table, schema: TableSchema) -> np.ndarray:
    """Each row's bucket: 0 in a bucket-unaware table, else the bucket of its bucket key's hash."""
    fixed = schema.core.bucket
    if fixed <= 0:
        return np.full(rows.num_rows, UNAWARE_BUCKET, dtype=np.int32)
    keys = schema.bucket_keys
    hashes = key_hashes([rows.column(k) for k in keys], [schema.field(k).type for k in keys])
    return np.asarray(java_bucket(hashes, fixed), dtype=np.int32)


class AppendWrite:
    """Batch writer of an append table: splits rows by (partition, bucket), keeping their order,
    and writes each group as files; returns the commit's ADD entries.

    Sequence numbers of a bucket continue from the highest of its live files (`next_sequence`:
    (partition bytes, bucket) -> next number, when the caller planned the snapshot already)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema,
                 next_sequence: Mapping[tuple[bytes, int], int] | None = None):
        if not schema.is_append:
            raise SchemaError(f"table {table_path} has a primary key {list(schema.primary_keys)}: it is not an "
                              "append table")
        self.io, self.table_path, self.schema = io, table_path.rstrip("/"), schema
        self.next_sequence: dict[tuple[bytes, int], int] = dict(next_sequence or {})
        self._writers: dict[tuple[bytes, int], AppendFileWriter] = {}
        self.entries: list[ManifestEntry] = []

    @property
    def total_buckets(self) -> int:
        return self.schema.core.bucket if self.schema.core.bucket > 0 else -1

    def write(self, rows: pa.Table, buckets: Sequence[int] | np.ndarray | pa.Array | None = None
              ) -> list[ManifestEntry]:
        rows = conform(rows, self.schema)
        if rows.num_rows == 0:
            return []
        bucket = row_buckets(rows, self.schema) if buckets is None else np.asarray(
            int_array(buckets, pa.int32()).to_numpy(zero_copy_only=False), dtype=np.int32)
        parts = list(self.schema.partition_keys)
        keyed = rows.select(parts).append_column("__bucket", pa.array(bucket)) if parts else pa.table(
            {"__bucket": pa.array(bucket)})
        codes, groups = group_codes(keyed, parts + ["__bucket"])
        order, runs = group_runs(codes)
        ordered = rows.take(pa.array(order)) if len(runs) > 1 else rows
        types = self.schema.partition_types
        written: list[ManifestEntry] = []
        for start, end in runs:  # per group, not per row
            group = groups[int(codes[order[start]])]
            pbytes = binary_row.serialize(list(group[:-1]), types)
            slot = (pbytes, int(group[-1]))
            writer = self._writers.get(slot)
            if writer is None:
                values = binary_row.deserialize(pbytes, types)  # the directory as a scan names it
                pdir = partition_path(values, types, parts, self.schema.core.partition_default_name)
                writer = AppendFileWriter(self.io, self.schema, bucket_dir(self.table_path, pdir, slot[1]))
                self._writers[slot] = writer
            first = self.next_sequence.get(slot, 0)
            self.next_sequence[slot] = first + (end - start)
            metas = writer.write_rows(ordered.slice(start, end - start), first)
            written += [ManifestEntry(ADD, pbytes, slot[1], self.total_buckets, m) for m in metas]
        self.entries += written
        return written

    def prepare_commit(self) -> list[ManifestEntry]:
        entries, self.entries = self.entries, []
        return entries

    def commit(self, kind: str = APPEND, commit_user: str | None = None) -> CommitResult | None:
        return FileStoreCommit(self.io, self.table_path, self.schema, commit_user).commit_or_abort(
            self.prepare_commit(), kind)


# ---- compaction -------------------------------------------------------------------------------------

def compaction_file_size(schema: TableSchema) -> int:
    """The size below which a file is small (Paimon's compaction.file-size)."""
    given = schema.options.get("compaction.file-size")
    if given is not None:
        return parse_memory("compaction.file-size", given)
    return int(schema.core.target_file_size * COMPACTION_FILE_SIZE_SHARE)


def pick_bins(schema: TableSchema, files: Sequence[DataFileMeta], full: bool = False) -> list[list[DataFileMeta]]:
    """The groups of one (partition, bucket)'s files a compaction rewrites, each into one file
    (rolled at target-file-size): small files, smallest first, packed into bins that close at
    twice target-file-size or at compaction.min.file-num files; the files of a bin that did not
    close wait for more. `full` (the compact operation): every file under target-file-size, in bins
    that close at twice the target size, the last one too; files of the target size stay."""
    target = schema.core.target_file_size
    min_files = parse_positive("compaction.min.file-num", schema.options.get("compaction.min.file-num", "5"))
    limit = target if full else compaction_file_size(schema)
    small = sorted((f for f in files if f.file_size < limit), key=lambda f: (f.file_size, f.min_sequence_number))
    bins, current, size = [], [], 0
    for f in small:  # per file, not per row
        current.append(f)
        size += f.file_size
        if size >= 2 * target or (not full and len(current) >= min_files):
            bins.append(current)
            current, size = [], 0
    if full and current:
        bins.append(current)
    return [b for b in bins if len(b) > 1]


def compact_split(io: FileIO, table_path: str, schema: TableSchema, split: DataSplit, full: bool = False
                  ) -> list[ManifestEntry]:
    """DELETE + ADD entries that merge the small files of one split (pick_bins; `full`: all its
    files), to commit as a COMPACT snapshot. A bin's rows keep their order (by sequence number)
    and the sequence numbers from its first file on, as Paimon's rewriter numbers them."""
    entries: list[ManifestEntry] = []
    writer = AppendFileWriter(io, schema, split.bucket_path, file_source=FILE_SOURCE_COMPACT)
    reader = TableRead(io, table_path, schema)
    try:
        for group in pick_bins(schema, split.files, full):
            group.sort(key=lambda f: f.min_sequence_number)
            rows = reader.read_files(split, group)
            metas = writer.write_rows(rows, group[0].min_sequence_number)
            entries += [ManifestEntry(DELETE, split.partition, split.bucket, split.total_buckets, f) for f in group]
            entries += [ManifestEntry(ADD, split.partition, split.bucket, split.total_buckets, m) for m in metas]
    except BaseException:
        for e in entries:
            if e.kind == ADD:
                io.delete(f"{split.bucket_path}/{e.file.file_name}")
        raise
    return entries


