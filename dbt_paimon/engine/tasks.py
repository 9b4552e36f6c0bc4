"""The functions Spark runs on executors (through mapInArrow). Each is built by a factory that
captures only small picklable things: the table path and schema, a few dicts of metadata.

Rows cross the two shuffles in one layout: the table's columns + BUCKET + SOURCE (+ COUNT after
assignment). Bootstrapped index entries travel in the same columns as batch rows: the key, the
partition fields holding the key's current partition, BUCKET its current bucket and the
sequence_by column its stored value; SOURCE tells them apart. This keeps one shuffle for both.
"""

from __future__ import annotations

import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..assign.global_index_assigner import (BUCKET, HASH, KIND, OLD_BUCKET, OLD_SEQUENCE, AssignCounts,
                                            GlobalIndexAssigner, group_codes, group_runs, old_column)
from ..store import binary_row
from ..store.fileio import FileIO
from ..store.index import HashIndexFile, IndexManifestEntry, read_hash_index
from ..store.key_hash import key_hashes
from ..store.options import BucketMode
from ..store.read import TableRead
from ..store.scan import DataSplit
from ..store.schema import TableSchema
from ..store.table import FileStoreTable
from . import bloom
from .spark_types import for_spark

SOURCE = "__source"  # where a row comes from: FROM_TABLE, FROM_BATCH, FROM_INDEX or FROM_COUNT
COUNT = "__count"    # a bucket's live rows (FROM_COUNT rows); after assignment, summary rows' counts
ROUTE = "__route"    # what the shuffle to the assigners hashes: the key's hash, or a count row's target
FROM_TABLE, FROM_BATCH, FROM_INDEX, FROM_COUNT = 0, 1, 2, 3  # live key; batch row; HASH index entry; bucket count
_COUNT_FIELDS = list(AssignCounts.__dataclass_fields__)


def _task_id() -> tuple[int, int]:
    from pyspark import TaskContext
    ctx = TaskContext.get()
    return ctx.partitionId(), ctx.attemptNumber()


def with_key_hash(table: pa.Table, schema: TableSchema) -> pa.Table:
    """Append Paimon's hash of the trimmed key (what the HASH index stores)."""
    keys = schema.trimmed_primary_keys
    hashes = key_hashes([table.column(k) for k in keys], [schema.field(k).type for k in keys])
    return table.append_column(HASH, pa.array(hashes, pa.int32()))


def hash_task(schema: TableSchema):
    """Batch rows -> the same rows + HASH (HASH_DYNAMIC tables are shuffled by partition and hash)."""
    extra = {HASH: pa.int32(), BUCKET: pa.int32(), SOURCE: pa.int8()}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            t = pa.Table.from_batches([batch])
            if t.num_rows:
                cols = [c for c in t.column_names if c != HASH]
                yield from for_spark(with_key_hash(t.select(cols), schema), schema, extra).to_batches()
    return run


def bucket_state(table: FileStoreTable, plan) -> tuple[list[DataSplit], dict, dict]:
    """What a job needs of the snapshot it bootstraps from: its splits, each bucket's next
    sequence number, and (HASH_DYNAMIC) each bucket's HASH index entry."""
    splits = plan.splits if plan else []
    snapshot = plan.snapshot if plan else None
    next_sequence = {(s.partition, s.bucket): s.max_sequence_number + 1 for s in splits}
    hashed = table.schema.bucket_mode == BucketMode.HASH_DYNAMIC
    index_files = read_hash_index(table.io, table.path, snapshot) if hashed and snapshot else {}
    return splits, next_sequence, index_files


def index_entry_rows(files: HashIndexFile, schema: TableSchema, entry: IndexManifestEntry) -> pa.Table:
    """One bucket's HASH index as (partition, hash, bucket) rows (FROM_INDEX), one per indexed hash,
    in the Arrow types Spark hands to the assigners."""
    hashes = files.read(entry)
    n = len(hashes)
    values = binary_row.deserialize(entry.partition, schema.partition_types)
    arrays = [pa.array([v], schema.field(p).type.to_arrow()).take(np.zeros(n, np.int64))
              for p, v in zip(schema.partition_keys, values)]
    arrays += [pa.array(hashes, pa.int32()), pa.array(np.full(n, entry.bucket, np.int32)),
               pa.array(np.full(n, FROM_INDEX, np.int8))]
    rows = pa.Table.from_arrays(arrays, names=list(schema.partition_keys) + [HASH, BUCKET, SOURCE])
    return for_spark(rows, schema, {HASH: pa.int32(), BUCKET: pa.int32(), SOURCE: pa.int8()})


def index_bootstrap_task(path: str, schema: TableSchema, io: FileIO):
    """Rows of pickled HASH index entries -> (partition, hash, bucket) rows, one per indexed hash."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = HashIndexFile(io, path)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                for entry in pickle.loads(blob):
                    t = index_entry_rows(files, schema, entry)
                    if t.num_rows:
                        yield from t.to_batches()
    return run


def bootstrap_task(path: str, schema: TableSchema, io: FileIO, sequence_by: str | None, with_hash: bool = False,
                   bloom_bits: np.ndarray | None = None, routes: dict[int, int] | None = None):
    """Rows of pickled split lists -> (key, current partition, bucket[, sequence_by][, hash]) of
    live keys.

    With routes (assigner id -> a ROUTE value the shuffle sends to it), one FROM_COUNT row per
    bucket (its live rows) goes to the assigner that owns the bucket, which must know how full
    every bucket it owns is whichever assigners its keys hash to; with a Bloom filter of the
    batch's keys too, only keys the batch may touch are shipped."""
    keys = list(schema.primary_keys)
    columns = keys + [p for p in schema.partition_keys if p not in keys]
    if sequence_by and sequence_by not in columns:
        columns.append(sequence_by)
    projection = [c for c in columns if c not in schema.partition_keys or c in keys]
    extra = {BUCKET: pa.int32(), SOURCE: pa.int8(), HASH: pa.int32(), COUNT: pa.int64(), ROUTE: pa.int32()}

    def read_split(reader: TableRead, split: DataSplit) -> pa.Table:
        live = reader.read_split(split)
        n = live.num_rows
        arrays, names = [], []
        for c in columns:
            if c in projection:
                arrays.append(live.column(c))
            else:  # a partition field outside the key: constant per split
                value = split.partition_values[schema.partition_keys.index(c)]
                arrays.append(pa.array([value] * 1, schema.field(c).type.to_arrow()).take(np.zeros(n, np.int64)))
            names.append(c)
        arrays += [pa.array(np.full(n, split.bucket, np.int32)), pa.array(np.full(n, FROM_TABLE, np.int8))]
        out = pa.Table.from_arrays(arrays, names=names + [BUCKET, SOURCE])
        if routes is None:
            return with_key_hash(out, schema) if with_hash else out
        if bloom_bits is not None:
            out = out.filter(pa.array(bloom.might_contain(bloom_bits, out, keys, schema)))
        out = out.append_column(COUNT, pa.nulls(out.num_rows, pa.int64()))
        out = out.append_column(ROUTE, pa.nulls(out.num_rows, pa.int32()))
        counted = [pa.nulls(1, schema.field(c).type.to_arrow()) if c not in schema.partition_keys else
                   pa.array([split.partition_values[schema.partition_keys.index(c)]], schema.field(c).type.to_arrow())
                   for c in columns]
        counted += [pa.array([split.bucket], pa.int32()), pa.array([FROM_COUNT], pa.int8()),
                    pa.array([n], pa.int64()), pa.array([routes[split.bucket % len(routes)]], pa.int32())]
        return pa.concat_tables([out, pa.Table.from_arrays(counted, names=out.column_names)])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = TableRead(io, path, schema, projection)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                splits: list[DataSplit] = pickle.loads(blob)
                with ThreadPoolExecutor(max_workers=4) as pool:
                    for t in pool.map(lambda s: read_split(reader, s), splits):
                        if t.num_rows:
                            yield from for_spark(t, schema, extra).to_batches()
    return run


def assign_task(schema: TableSchema, num_assigners: int, sequence_by: str | None, counted: bool = False):
    """One assigner per Spark partition of the shuffle by key: its id is the partition id.
    counted: the bootstrap was filtered by the batch's keys and sends bucket counts (FROM_COUNT)."""
    hashed = schema.bucket_mode == BucketMode.HASH_DYNAMIC
    names = schema.field_names + ([HASH] if hashed else [])
    extra = {BUCKET: pa.int32(), KIND: pa.int8(), COUNT: pa.int64(), HASH: pa.int32()}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        assign_id, _ = _task_id()
        batches = list(batches)
        if not batches:
            return
        table = pa.Table.from_batches(batches)
        if table.num_rows == 0:
            return
        source = table.column(SOURCE)
        result = assign(schema, num_assigners, assign_id, sequence_by,
                        rows=table.filter(pc.equal(source, FROM_BATCH)).select(names),
                        stored=table.filter(pc.equal(source, FROM_TABLE)),
                        count_rows=table.filter(pc.equal(source, FROM_COUNT)) if counted else None,
                        indexed=table.filter(pc.equal(source, FROM_INDEX)) if hashed else None)
        out = result.rows.append_column(COUNT, pa.nulls(result.rows.num_rows, pa.int64()))
        yield from for_spark(out, schema, extra).to_batches(max_chunksize=1 << 17)
        yield from for_spark(_summary(result.counts, schema, hashed), schema, extra).to_batches()
    return run


def assign(schema: TableSchema, num_assigners: int, assign_id: int, sequence_by: str | None, rows: pa.Table,
           stored: pa.Table | None, count_rows: pa.Table | None = None, indexed: pa.Table | None = None):
    """One assigner's work on its share: rows (the table's columns [+ HASH]) against the stored keys
    the bootstrap sent it (FROM_TABLE layout), per-bucket counts (FROM_COUNT rows, when the bootstrap
    was filtered) and HASH index entries (FROM_INDEX rows, HASH_DYNAMIC)."""
    existing = _as_existing(stored, schema, sequence_by) if stored is not None else None
    bucket_counts = None
    if count_rows is not None:
        bucket_counts = pa.Table.from_arrays(
            [count_rows.column(p) for p in schema.partition_keys]
            + [count_rows.column(BUCKET), count_rows.column(COUNT)],
            names=[old_column(p) for p in schema.partition_keys] + [OLD_BUCKET, "count"])
    index = None
    if indexed is not None:
        index = pa.Table.from_arrays(
            [indexed.column(p) for p in schema.partition_keys] + [indexed.column(HASH), indexed.column(BUCKET)],
            names=[old_column(p) for p in schema.partition_keys] + [HASH, OLD_BUCKET])
    assigner = GlobalIndexAssigner(schema, num_assigners, assign_id, sequence_by)
    return assigner.process(rows, existing, index, bucket_counts)


def _as_existing(stored: pa.Table, schema: TableSchema, sequence_by: str | None) -> pa.Table:
    arrays = [stored.column(k) for k in schema.primary_keys]
    names = list(schema.primary_keys)
    for p in schema.partition_keys:
        arrays.append(stored.column(p))
        names.append(old_column(p))
    arrays.append(stored.column(BUCKET))
    names.append(OLD_BUCKET)
    if sequence_by:
        arrays.append(stored.column(sequence_by))
        names.append(OLD_SEQUENCE)
    return pa.Table.from_arrays(arrays, names=names)


def _summary(counts: AssignCounts, schema: TableSchema, hashed: bool) -> pa.Table:
    """One row per count, BUCKET = -1, KIND = the count's index; the writer side adds them up."""
    n = len(_COUNT_FIELDS)
    arrays = [pa.nulls(n, f.type.to_arrow()) for f in schema.fields] + ([pa.nulls(n, pa.int32())] if hashed else [])
    arrays += [pa.array(np.full(n, -1, np.int32)), pa.array(np.arange(n, dtype=np.int8)),
               pa.array([getattr(counts, f) for f in _COUNT_FIELDS], pa.int64())]
    names = schema.field_names + ([HASH] if hashed else [])
    return pa.Table.from_arrays(arrays, names=names + [BUCKET, KIND, COUNT])


def write_task(path: str, schema: TableSchema, io: FileIO, next_sequence: dict, index_files: dict | None = None,
               update_index: bool = True):
    """Writes the buckets of one Spark partition of the shuffle by (partition, bucket); returns one
    row: the pickled manifest entries, counts and (HASH_DYNAMIC) rewritten index files.

    index_files: (partition bytes, bucket) -> the bucket's HASH index entry in the bootstrap snapshot."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        counts = AssignCounts()
        entries = []
        new_index: dict = {}
        table = pa.Table.from_batches(batches) if batches else None
        if table is not None and table.num_rows:
            is_summary = pc.equal(table.column(BUCKET), -1)
            summary = table.filter(is_summary)
            for kind, total in zip(summary.column(KIND).to_pylist(), summary.column(COUNT).to_pylist()):
                field = _COUNT_FIELDS[kind]
                setattr(counts, field, getattr(counts, field) + total)
            data = table.filter(pc.invert(is_summary))
            entries, new_index = write_rows(path, schema, io, next_sequence, index_files, data, update_index)
        payload = pickle.dumps((entries, counts.as_dict(), new_index))
        yield pa.RecordBatch.from_arrays([pa.array([payload], pa.binary())], names=["payload"])
    return run


def write_rows(path: str, schema: TableSchema, io: FileIO, next_sequence: dict, index_files: dict | None,
               data: pa.Table, update_index: bool = True) -> tuple[list, dict]:
    """Write assigned rows (the table's columns + BUCKET + KIND [+ HASH]) into their buckets' files:
    (manifest entries, rewritten HASH index files)."""
    if not data.num_rows:
        return [], {}
    writer = FileStoreTable(path, schema, io).new_write(next_sequence)
    entries = writer.write(data.select(schema.field_names), data.column(BUCKET), data.column(KIND))
    # deletes keep their hashes, as in Paimon
    hashed = schema.bucket_mode == BucketMode.HASH_DYNAMIC and update_index
    return entries, _update_hash_index(path, schema, io, data, index_files or {}) if hashed else {}


def _update_hash_index(path: str, schema: TableSchema, io: FileIO, data: pa.Table, index_files: dict) -> dict:
    """Rewrite the HASH index file of every bucket that gained a hash (the full set, as Paimon does)."""
    files = HashIndexFile(io, path)
    cols = list(schema.partition_keys) + [BUCKET]
    codes, groups = group_codes(data, cols)
    hashes = data.column(HASH).to_numpy(zero_copy_only=False)
    order, runs = group_runs(codes)
    changed = {}
    for start, end in runs:  # one iteration per bucket
        *values, bucket = groups[codes[order[start]]]
        pbytes = binary_row.serialize(list(values), schema.partition_types)
        incoming = np.unique(hashes[order[start:end]])
        old = index_files.get((pbytes, bucket))
        known = files.read(old) if old is not None else np.empty(0, np.int32)
        if not np.isin(incoming, known).all():
            changed[(pbytes, bucket)] = files.write(np.union1d(known, incoming))
    return changed


def chunk_splits(splits: Sequence[DataSplit], chunks: int) -> list[bytes]:
    """Pickled lists of splits, balanced by row count, one per bootstrap task."""
    chunks = max(1, min(chunks, len(splits)))
    loads = np.zeros(chunks, dtype=np.int64)
    groups: list[list[DataSplit]] = [[] for _ in range(chunks)]
    for s in sorted(splits, key=lambda s: -s.row_count):  # per split (metadata), not per row
        i = int(np.argmin(loads))
        groups[i].append(s)
        loads[i] += s.row_count
    return [pickle.dumps(g) for g in groups if g]
