"""The upsert's stages as functions over Arrow tables, and the Spark tasks that run them.

Each stage is a plain function that both executors call: the driver-local executor (local.py)
directly, in threads; the Spark job (distributed.py) through a `*_task` wrapper, a mapInArrow
function built by a factory that captures only small picklable things (the table path and schema,
a few dicts of metadata). The rows between stages are declared in assign/rows.py.

    live_keys      one split of the table -> its live keys (Bloom-filtered), + the bucket's count
    index_entries  one bucket's HASH index file -> its (partition, hash, bucket) entries
    assign         one assigner's share -> assigned rows + counts (assign/global_index_assigner.py)
    write_rows     assigned rows of whole buckets -> new data files (+ HASH index files)
"""

from __future__ import annotations

import pickle
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...assign.global_index_assigner import COUNT_KINDS, AssignCounts, AssignResult, GlobalIndexAssigner
from ...store.common.groups import group_codes, group_runs
from ...assign.rows import (BUCKET, COUNT, DIGEST, HASH, KIND, OLD_BUCKET, OLD_SEQUENCE, PACKED, PAYLOAD, RECORD, ROUTE,
                            SOURCE, SUMMARY_BUCKET, Source, StageRows, conform, of_source, old_column)
from ...store.common import binary_row
from ...store.common.errors import PaimonError
from ...store.common.fileio import FileIO
from ...store.index.index import HashIndexFile, IndexManifestEntry, read_hash_index
from ...store.common.key_hash import key_hashes
from ...store.common.options import BucketMode
from ...store.write.postpone import PartitionBuckets
from ...store.read.read import TableRead
from ...store.read.scan import DataSplit, next_sequences
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from . import bloom

SPLIT_READ_THREADS = 4  # a bootstrap task reads its splits' files concurrently (I/O, decompression)


def _task_id() -> tuple[int, int]:
    from pyspark import TaskContext  # only inside a Spark task: the driver-local executor never needs it
    ctx = TaskContext.get()
    return ctx.partitionId(), ctx.attemptNumber()


def blobs(batches: Iterator[pa.RecordBatch]) -> Iterator:
    """The unpickled task descriptors of a descriptor DataFrame's rows (jobs.descriptors)."""
    for batch in batches:
        for blob in batch.column(0).to_pylist():
            yield pickle.loads(blob)


def payload(result) -> pa.RecordBatch:
    """A task's small result (metadata, never table rows) as its one PAYLOAD row (jobs.collect_payloads)."""
    return pa.RecordBatch.from_arrays([pa.array([pickle.dumps(result)], pa.binary())], schema=PAYLOAD)


# ---- what a job needs of its snapshot ---------------------------------------------------------------

def bucket_state(table: FileStoreTable, plan) -> tuple[list[DataSplit], dict, dict]:
    """What a job needs of the snapshot it bootstraps from: its splits, each bucket's next
    sequence number, and (HASH_DYNAMIC) each bucket's HASH index entry."""
    splits = plan.splits if plan else []
    snapshot = plan.snapshot if plan else None
    next_sequence = next_sequences(splits)
    hashed = table.schema.bucket_mode == BucketMode.HASH_DYNAMIC
    index_files = read_hash_index(table.io, table.path, snapshot) if hashed and snapshot else {}
    return splits, next_sequence, index_files


def chunk_splits(splits: Sequence[DataSplit], chunks: int) -> list[list[DataSplit]]:
    """The splits in at most `chunks` groups balanced by row count, one per bootstrap task."""
    chunks = max(1, min(chunks, len(splits)))
    loads = np.zeros(chunks, dtype=np.int64)
    groups: list[list[DataSplit]] = [[] for _ in range(chunks)]
    for s in sorted(splits, key=lambda s: -s.row_count):  # per split (metadata), not per row
        i = int(np.argmin(loads))
        groups[i].append(s)
        loads[i] += s.row_count
    return [g for g in groups if g]


# ---- what the bootstrap needs to know of the batch ------------------------------------------------

def partition_pruning(schema: TableSchema) -> bool:
    """Whether the bootstrap may skip the partitions the batch has no row in: when the primary key
    holds every partition field, a key can only be found in its own partition."""
    return bool(schema.partition_keys) and not schema.cross_partition_update


def batch_partitions(batch: pa.Table, schema: TableSchema) -> set[tuple]:
    """The batch's distinct partitions, in the form split_partition() gives a split's: values
    read back from the binary row, so both sides compare alike whoever wrote the table."""
    keys, types = list(schema.partition_keys), schema.partition_types
    distinct = batch.select(keys).group_by(keys, use_threads=False).aggregate([])
    columns = [distinct.column(k) for k in keys]
    return {binary_row.deserialize(binary_row.serialize(binary_row.row_of(columns, i), types), types)
            for i in range(distinct.num_rows)}  # per partition, not per row


def split_partition(partition: bytes, schema: TableSchema) -> tuple:
    return binary_row.deserialize(partition, schema.partition_types)


def prune(splits: Sequence[DataSplit], index_files: dict, partitions: set[tuple] | None, schema: TableSchema):
    """The splits and HASH index entries of the batch's partitions (all when partitions is None)."""
    if partitions is None:
        return list(splits), index_files
    return ([s for s in splits if split_partition(s.partition, schema) in partitions],
            {k: e for k, e in index_files.items() if split_partition(k[0], schema) in partitions})


def digest_task(schema: TableSchema, bits: int | None, with_partitions: bool):
    """Batch rows -> one row (DIGEST) for this task: its partial Bloom filter of the keys (bits
    null when none is wanted) and its pickled set of partitions (null when not wanted)."""
    keys = list(schema.primary_keys)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        bitset = np.zeros(bits // 8, dtype=np.uint8) if bits else None
        partitions: set = set()
        for batch in batches:
            t = pa.Table.from_batches([batch])
            if t.num_rows and bitset is not None:
                bloom.add(bitset, t, keys, schema)
            if t.num_rows and with_partitions:
                partitions |= batch_partitions(t, schema)
        yield pa.RecordBatch.from_arrays(
            [pa.array([bitset.tobytes() if bitset is not None else None], pa.binary()),
             pa.array([pickle.dumps(partitions) if with_partitions else None], pa.binary())], schema=DIGEST)
    return run


# ---- stage: bootstrap --------------------------------------------------------------------------------

def with_key_hash(table: pa.Table, schema: TableSchema) -> pa.Table:
    """Append Paimon's hash of the trimmed key (what the HASH index stores)."""
    keys = schema.trimmed_primary_keys
    hashes = key_hashes([table.column(k) for k in keys], [schema.field(k).type for k in keys])
    return table.append_column(HASH, pa.array(hashes, pa.int32()))


def live_keys(reader: TableRead, split: DataSplit, stage: StageRows, bloom_bits: np.ndarray | None = None,
              routes: Sequence[int] | None = None) -> pa.Table:
    """One split's live keys in the stage.live_key layout: (key, the partition it lives in, bucket
    [, stored sequence_by][, HASH]).

    With routes (per assigner id, a ROUTE value the shuffle sends to it), a bucket-count row (the
    split's live rows) goes to the assigner that owns the bucket, which must know how full every
    bucket it owns is whichever assigners its keys hash to; with bloom_bits (the batch's keys) only
    the keys the batch may touch are kept."""
    schema = stage.schema
    live = reader.read_split(split)
    n = live.num_rows
    columns = {}
    for c in stage.live_key_columns:
        if c in live.column_names:
            columns[c] = live.column(c)
        else:  # a partition field outside the key: constant per split
            value = split.partition_values[schema.partition_keys.index(c)]
            columns[c] = pa.array([value], schema.field(c).type.to_arrow()).take(np.zeros(n, np.int64))
    columns[BUCKET] = pa.array(np.full(n, split.bucket, np.int32))
    columns[SOURCE] = pa.array(np.full(n, Source.TABLE, np.int8))
    out = pa.table(columns)
    if stage.hashed:
        out = with_key_hash(out, schema)
    counted = routes is not None
    if bloom_bits is not None:
        out = out.filter(pa.array(bloom.might_contain(bloom_bits, out, list(schema.primary_keys), schema)))
    layout = stage.live_key(counted)
    out = conform(out, layout)
    if not counted:
        return out
    count = {p: pa.array([v], schema.field(p).type.to_arrow())
             for p, v in zip(schema.partition_keys, split.partition_values)}
    count.update({BUCKET: pa.array([split.bucket], pa.int32()), SOURCE: pa.array([Source.COUNT], pa.int8()),
                  COUNT: pa.array([n], pa.int64()), ROUTE: pa.array([routes[split.bucket % len(routes)]], pa.int32())})
    return pa.concat_tables([out, conform(pa.table(count), layout)])


def live_key_projection(stage: StageRows) -> list[str]:
    """The columns a bootstrap reads from the data files (partition fields outside the key are
    constant per split and come from its metadata)."""
    keys = stage.schema.primary_keys
    return [c for c in stage.live_key_columns if c not in stage.schema.partition_keys or c in keys]


def live_keys_task(path: str, io: FileIO, stage: StageRows, bloom_bits: np.ndarray | None = None,
                   routes: Sequence[int] | None = None):
    """Rows of pickled split lists -> their live keys (live_keys)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = TableRead(io, path, stage.schema, live_key_projection(stage))
        for splits in blobs(batches):
            with ThreadPoolExecutor(max_workers=SPLIT_READ_THREADS) as pool:
                for t in pool.map(lambda s: live_keys(reader, s, stage, bloom_bits, routes), splits):
                    if t.num_rows:
                        yield from t.to_batches()
    return run


def index_entries(files: HashIndexFile, stage: StageRows, entry: IndexManifestEntry) -> pa.Table:
    """One bucket's HASH index in the stage.index_entry layout, one row per indexed hash."""
    schema = stage.schema
    hashes = files.read(entry)
    n = len(hashes)
    values = binary_row.deserialize(entry.partition, schema.partition_types)
    columns = {p: pa.array([v], schema.field(p).type.to_arrow()).take(np.zeros(n, np.int64))
               for p, v in zip(schema.partition_keys, values)}
    columns.update({HASH: pa.array(hashes, pa.int32()), BUCKET: pa.array(np.full(n, entry.bucket, np.int32)),
                    SOURCE: pa.array(np.full(n, Source.INDEX, np.int8))})
    return conform(pa.table(columns), stage.index_entry())


def index_entries_task(path: str, io: FileIO, stage: StageRows):
    """Rows of pickled HASH index entry lists -> their (partition, hash, bucket) rows."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        files = HashIndexFile(io, path)
        for entries in blobs(batches):
            for entry in entries:
                t = index_entries(files, stage, entry)
                if t.num_rows:
                    yield from t.to_batches()
    return run


def hash_task(stage: StageRows):
    """Batch rows -> the same rows + HASH (HASH_DYNAMIC tables are routed by partition and hash)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                yield from conform(with_key_hash(pa.Table.from_batches([batch]), stage.schema),
                                   stage.batch()).to_batches()
    return run


# ---- stage: assign -----------------------------------------------------------------------------------

def assign(stage: StageRows, num_assigners: int, assign_id: int, batch: pa.Table, live: pa.Table | None,
           counts: pa.Table | None = None, index: pa.Table | None = None) -> AssignResult:
    """One assigner's share: batch rows (stage.batch) against the live keys the bootstrap sent it,
    per-bucket counts (when the bootstrap was filtered by the batch's keys) and HASH index entries
    (HASH_DYNAMIC), each in the layout it travelled in."""
    schema = stage.schema
    olds = [old_column(p) for p in schema.partition_keys]
    existing = None
    if live is not None:
        names = list(schema.primary_keys) + olds + [OLD_BUCKET] + ([OLD_SEQUENCE] if stage.sequence_by else [])
        existing = pa.Table.from_arrays(
            [live.column(c) for c in list(schema.primary_keys) + list(schema.partition_keys) + [BUCKET]]
            + ([live.column(stage.sequence_by)] if stage.sequence_by else []), names=names)
    bucket_counts = None
    if counts is not None:
        bucket_counts = pa.Table.from_arrays(
            [counts.column(p) for p in schema.partition_keys] + [counts.column(BUCKET), counts.column(COUNT)],
            names=olds + [OLD_BUCKET, "count"])
    indexed = None
    if index is not None:
        indexed = pa.Table.from_arrays(
            [index.column(p) for p in schema.partition_keys] + [index.column(HASH), index.column(BUCKET)],
            names=olds + [HASH, OLD_BUCKET])
    assigner = GlobalIndexAssigner(schema, num_assigners, assign_id, stage.sequence_by, stage.not_null,
                                   stage.buckets)
    return assigner.process(batch, existing, indexed, bucket_counts)


PACKED_ROWS = 1 << 17  # rows per packed value (~13 MB at 100 B a row; Spark holds each whole)
# Packed streams are compressed (Arrow IPC buffer compression; unpack reads them as they are). The
# JVM copies each packed value out of Python's output, into the shuffle and back to the next
# stage's Python. W2's route sends 41 MB with zstd, not 108 MB, for 0.18 s more of the route
# task's Python (0.95 s); its distributed upsert took 5.26-5.50 s, against 5.39-5.81 s
# uncompressed (means of 4: 5.34 / 5.60 s; lz4, 64% of the bytes: 5.49 s)
PACKED_COMPRESSION = pa.ipc.IpcWriteOptions(compression="zstd")


def assign_task(stage: StageRows, num_assigners: int, counted: bool, writer_routes: Sequence[int],
                packed: bool = False, record=None, lookup=None):
    """One assigner per Spark partition of the shuffle by ROUTE: its id is the partition id.
    counted: the bootstrap was filtered by the batch's keys and sends bucket counts.
    writer_routes: per writer, the value of TO the shuffle to the writers sends to it; the
    assigned rows leave packed (PACKED), whole buckets to one writer.
    packed: the routed rows come as PACKED (the key-index bootstrap: route_task), else as rows.
    record: a picklable callable (key_lookup.JobCommit.write) of (assigned rows, which of them are
    updates in place): the assigner holds each of its keys' old and new places, so it writes their
    share of the key index's record of the commit; what it returns goes to the first writer (RECORD).
    lookup: a key_lookup.JobLookup: the assigner looks its keys up in the key index and takes its
    buckets' counts from it (else the live keys and counts come routed)."""
    layout = stage.assigned()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        result = _assigned_share(stage, num_assigners, counted, list(batches), packed, lookup)
        if result is None:
            return
        rows = pa.concat_tables([conform(result.rows, layout), conform(summary_rows(result.counts), layout)])
        yield from pack(rows, stage.schema, writer_routes)
        if record is not None:
            yield record_packet(record(result.rows, result.in_place), writer_routes[0])
    return run


def assign_write_task(stage: StageRows, num_assigners: int, counted: bool, path: str, io: FileIO,
                      next_sequence: dict, packed: bool = False, record=None, lookup=None):
    """assign_task and write_task in one task, for a cross-partition table (KEY_DYNAMIC): the
    assigner writes the rows it assigned itself, and returns write_task's PAYLOAD row. No second
    shuffle. A key's rows all reach one assigner, so two assigners that write one bucket in a
    commit write disjoint keys; in a steady state even that does not happen, since an assigner
    opens only buckets b with b % assigners == its id and a key's existing bucket was opened by its
    assigner. Paimon allows several files with overlapping sequence numbers in one bucket's level 0
    (Levels orders such files by name: "two or more jobs writing the same merge tree"); a reader
    merges a key's records by sequence number among themselves only. Not for HASH_DYNAMIC (one
    index file per bucket, rewritten whole by its one writer) nor fixed buckets (every assigner
    would write every bucket).
    An assigner that refuses its rows (a duplicate or null key: DataError) returns Refused instead
    of failing the task: the other assigners finish and write, and the driver deletes their files
    before it raises the error. (A failed task would fail the job while others still write.)"""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        try:
            result = _assigned_share(stage, num_assigners, counted, list(batches), packed, lookup)
        except PaimonError as e:
            yield payload(Refused(e))
            return
        if result is None:
            yield payload(([], AssignCounts(), {}, []))
            return
        recorded = [record(result.rows, result.in_place)] if record is not None else []
        entries, _ = write_rows(path, stage.schema, io, next_sequence, None, result.rows)
        yield payload((entries, result.counts, {}, recorded))
    return run


@dataclass(frozen=True)
class Refused:
    """A task's payload in place of its result: the rows it got break a rule (the error says which)."""

    error: PaimonError


def _assigned_share(stage: StageRows, num_assigners: int, counted: bool, batches: list[pa.RecordBatch],
                    packed: bool, lookup=None) -> AssignResult | None:
    """The assign stage of one assigner (its id: the task's partition id) over its input batches:
    its result, None when it got no rows. lookup: see assign_task."""
    assign_id, _ = _task_id()
    routed = _rows_of(batches, packed)
    if routed is None or routed.num_rows == 0:
        return None
    if packed:  # packed rows carry only their kind's columns (route_task: batch rows)
        routed = conform(routed, stage.routed(True))
    batch = conform(of_source(routed, Source.BATCH), stage.batch())
    if lookup is not None:
        live = lookup.live_keys(batch)
        counts = lookup.counts(assign_id, num_assigners) if counted else None
    else:
        live = of_source(routed, Source.TABLE)
        counts = of_source(routed, Source.COUNT) if counted else None
    return assign(stage, num_assigners, assign_id, batch=batch, live=live, counts=counts,
                  index=of_source(routed, Source.INDEX) if stage.hashed else None)


def writer_of(rows: pa.Table, schema: TableSchema, writers: int) -> np.ndarray:
    """Per row, the writer of its (partition, bucket): the same in every assigner (a crc32 of the
    partition's binary row and the bucket, computed per bucket, not per row)."""
    codes, groups = group_codes(rows, list(schema.partition_keys) + [BUCKET])
    of_group = np.array([zlib.crc32(binary_row.serialize(list(g[:-1]), schema.partition_types)
                                    + int(g[-1]).to_bytes(4, "little", signed=True)) % writers for g in groups],
                        dtype=np.int64)
    return of_group[codes]


def pack(rows: pa.Table, schema: TableSchema, writer_routes: Sequence[int]) -> Iterator[pa.RecordBatch]:
    """Assigned rows as PACKED rows: per writer, its rows in Arrow IPC streams of PACKED_ROWS."""
    yield from pack_to(rows, writer_of(rows, schema, len(writer_routes)), writer_routes)


def pack_to(rows: pa.Table, target: np.ndarray, routes: Sequence[int]) -> Iterator[pa.RecordBatch]:
    """rows as PACKED rows: those of target t (an index into routes) with TO = routes[t]."""
    if rows.num_rows == 0:
        return
    order, runs = group_runs(target)
    for start, end in runs:  # one iteration per target task
        part = rows.take(pa.array(order[start:end]))
        route = routes[int(target[order[start]])]
        for at in range(0, part.num_rows, PACKED_ROWS):
            chunk = part.slice(at, PACKED_ROWS)
            sink = pa.BufferOutputStream()
            with pa.ipc.new_stream(sink, chunk.schema, options=PACKED_COMPRESSION) as out:
                out.write_table(chunk)
            data = sink.getvalue()  # one binary value over the stream's buffer, not a copy of it
            value = pa.Array.from_buffers(pa.binary(), 1,
                                          [None, pa.py_buffer(np.array([0, data.size], np.int32)), data])
            yield pa.RecordBatch.from_arrays([pa.array([route], pa.int32()), value, pa.nulls(1, pa.binary())],
                                             schema=PACKED)


def record_packet(record, route: int) -> pa.RecordBatch:
    """A PACKED row carrying `record` (pickled, RECORD) to the task of `route`, no rows."""
    return pa.RecordBatch.from_arrays([pa.array([route], pa.int32()), pa.nulls(1, pa.binary()),
                                       pa.array([pickle.dumps(record)], pa.binary())], schema=PACKED)


def records_of(batches: Sequence[pa.RecordBatch]) -> list:
    """The records (record_packet) among PACKED batches, unpickled."""
    return [pickle.loads(v.as_py()) for batch in batches for v in batch.column(RECORD) if v.is_valid]


def assigner_of(hashes: np.ndarray, assigners: int) -> np.ndarray:
    """Per key hash (Paimon's, as KeyIndex.hashes and the index's H), the assigner of its key (the
    hash mod the assigners): a batch row and the live key found for it meet there."""
    return np.mod(np.asarray(hashes).astype(np.int64), assigners)


def _rows_of(batches: list[pa.RecordBatch], packed: bool) -> pa.Table | None:
    """A task's input rows, PACKED or as they are (None when there are none)."""
    if packed:
        return unpack(batches)
    return pa.Table.from_batches(batches) if batches else None


def unpack(batches: Sequence[pa.RecordBatch]) -> pa.Table | None:
    """The rows of PACKED batches (None when there are none); streams of fewer columns than
    others (e.g. live keys beside batch rows) get the others' columns as nulls."""
    tables = [pa.ipc.open_stream(value.as_buffer()).read_all()
              for batch in batches for value in batch.column(1) if value.is_valid]
    return pa.concat_tables(tables, promote_options="default") if tables else None


def summary_rows(counts: AssignCounts) -> pa.Table:
    """An assigner's counts as assigned rows: BUCKET = SUMMARY_BUCKET, KIND = the count's index in
    COUNT_KINDS, COUNT its value; the writers add them up."""
    n = len(COUNT_KINDS)
    return pa.table({BUCKET: pa.array(np.full(n, SUMMARY_BUCKET, np.int32)),
                     KIND: pa.array(np.arange(n, dtype=np.int8)),
                     COUNT: pa.array([getattr(counts, k) for k in COUNT_KINDS], pa.int64())})


def add_summary(counts: AssignCounts, assigned: pa.Table) -> pa.Table:
    """Add the summary rows among assigned rows to counts; the data rows."""
    is_summary = pc.equal(assigned.column(BUCKET), SUMMARY_BUCKET)
    summary = assigned.filter(is_summary)
    for kind, total in zip(summary.column(KIND).to_pylist(), summary.column(COUNT).to_pylist()):  # 5 per assigner
        name = COUNT_KINDS[kind]
        setattr(counts, name, getattr(counts, name) + total)
    return assigned.filter(pc.invert(is_summary))


# ---- stage: write ------------------------------------------------------------------------------------

def write_task(path: str, schema: TableSchema, io: FileIO, next_sequence: dict, index_files: dict | None = None,
               update_index: bool = True, packed: bool = False, buckets: PartitionBuckets | None = None):
    """Writes the buckets of one Spark partition of the shuffle by (partition, bucket); returns one
    row (PAYLOAD): the pickled manifest entries, counts, (HASH_DYNAMIC) rewritten index files and
    the assigners' key-index records that came to it (record_packet), for the driver.

    index_files: (partition bytes, bucket) -> the bucket's HASH index entry in the bootstrap snapshot.
    packed: the rows come as PACKED (from assign_task), else as rows (a delete's).
    buckets: a postpone-bucket table's counts per partition, as the job planned them."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        counts = AssignCounts()
        entries, new_index = [], {}
        table = _rows_of(batches, packed)
        if table is not None and table.num_rows:
            data = add_summary(counts, table)
            entries, new_index = write_rows(path, schema, io, next_sequence, index_files, data, update_index,
                                            buckets=buckets)
        yield payload((entries, counts, new_index, records_of(batches) if packed else []))
    return run


def write_rows(path: str, schema: TableSchema, io: FileIO, next_sequence: dict, index_files: dict | None,
               data: pa.Table, update_index: bool = True, at: np.ndarray | None = None,
               buckets: PartitionBuckets | None = None) -> tuple[list, dict]:
    """Write assigned rows (the table's columns + BUCKET + KIND [+ HASH]) into their buckets' files:
    (manifest entries, rewritten HASH index files). at: only the rows at these positions (a
    driver-local writer thread's share of whole buckets). buckets: see write_task."""
    if not data.num_rows or (at is not None and not len(at)):
        return [], {}
    writer = FileStoreTable(path, schema, io).new_write(next_sequence, buckets)
    entries = writer.write(data.select(schema.field_names), data.column(BUCKET), data.column(KIND), at)
    # deletes keep their hashes, as in Paimon
    if schema.bucket_mode != BucketMode.HASH_DYNAMIC or not update_index:
        return entries, {}
    if at is not None:
        data = data.select(list(schema.partition_keys) + [BUCKET, HASH]).take(pa.array(at))
    return entries, _update_hash_index(path, schema, io, data, index_files or {})


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
