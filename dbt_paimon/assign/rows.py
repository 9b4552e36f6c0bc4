"""The rows that cross an upsert's stages, declared once: their columns' names and Arrow types.

Both executors (the Spark job and its driver-local run, engine/) and the tests build and read the
stage rows through this module; the Spark job's schemas are derived from these Arrow layouts
(engine/spark_types.py struct_of), never written by hand.

    batch row        the table's columns [+ HASH]                                    ─┐
    live key         key + partition fields (where the key lives) [+ sequence_by]     │ shuffle by ROUTE
                     + BUCKET + SOURCE=TABLE [+ HASH]                                  ├─► assigners
    bucket count     partition fields + BUCKET + COUNT + SOURCE=COUNT (one per bucket) │
    index entry      partition fields + HASH + BUCKET + SOURCE=INDEX (HASH_DYNAMIC)   ─┘
    assigned row     the table's columns [+ HASH] + BUCKET + KIND + COUNT   ─► shuffle by (partition, BUCKET) ─► writers
                     (BUCKET = -1: one per count kind, COUNT its value: an assigner's counts)

Live keys, bucket counts and index entries travel in the batch rows' columns (a key's current
partition in the partition fields, its stored sequence in the sequence_by column), so one shuffle
carries all four; SOURCE tells them apart.

The table's columns take the Arrow types Spark exchanges with Python workers (`exchange_type`):
microsecond timestamps, TIMESTAMP_LTZ as UTC instants. Both executors carry identical rows.
"""

from __future__ import annotations

import copy
from enum import IntEnum
from typing import Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..store.common.options import BucketMode
from ..store.write.postpone import PartitionBuckets
from ..store.schema.schema import TableSchema
from ..store.common.types import DataType, cast_to

BUCKET = "__bucket"  # the bucket a row is written to (assigned row) or lives in (live key, index entry)
KIND = "__kind"      # the row kind written: INSERT or DELETE (store/format/datafile.py)
HASH = "__hash"      # Paimon's hash of the trimmed key (the dynamic-bucket HASH index), HASH_DYNAMIC only
SOURCE = "__source"  # what a row routed to the assigners is (Source)
COUNT = "__count"    # a bucket's live rows (bucket count); an assigner's count (assigned row, BUCKET = -1)
ROUTE = "__route"    # the value the shuffle to the assigners hashes: the key's hash, or a chosen owner
SUMMARY_BUCKET = -1  # BUCKET of the assigned rows that carry an assigner's counts

TYPES = {BUCKET: pa.int32(), KIND: pa.int8(), HASH: pa.int32(), SOURCE: pa.int8(), COUNT: pa.int64(),
         ROUTE: pa.int32()}

# The assigner's view of a live key: where it lives, under names apart from the batch row's
OLD_BUCKET = "__old_bucket"
OLD_SEQUENCE = "__old_sequence"


def old_column(partition_key: str) -> str:
    """Name of the column that holds a key's current value of a partition field (assigner input)."""
    return f"__old_{partition_key}"


class Source(IntEnum):
    TABLE = 0   # a live key of the table (bootstrap)
    BATCH = 1   # a row of the batch
    INDEX = 2   # a HASH index entry (HASH_DYNAMIC)
    COUNT = 3   # a bucket's live-row count (a bootstrap filtered by the batch's keys)


def exchange_type(t: DataType) -> pa.DataType:
    """The Arrow type of a table column between stages: what Spark hands to and takes from a Python
    worker (microseconds; TIMESTAMP_LTZ as UTC instants)."""
    return t.to_arrow(_exchange_leaf)


def _exchange_leaf(t: DataType) -> pa.DataType:
    if t.root == "TIMESTAMP":
        return pa.timestamp("us")
    if t.root == "TIMESTAMP_LTZ":
        return pa.timestamp("us", tz="UTC")
    return t.to_arrow()


class StageRows:
    """The stage layouts of one upsert into one table (with its sequence_by column, if any)."""

    def __init__(self, schema: TableSchema, sequence_by: str | None = None, not_null: Sequence[str] = ()):
        self.schema = schema
        self.sequence_by = sequence_by
        self.not_null = tuple(not_null)  # columns the run declares NOT NULL (the assigners check them)
        self.hashed = schema.bucket_mode == BucketMode.HASH_DYNAMIC
        keys = list(schema.primary_keys)
        columns = keys + [p for p in schema.partition_keys if p not in keys]
        if sequence_by and sequence_by not in columns:
            columns.append(sequence_by)
        self.live_key_columns = columns  # the table's columns a live key carries
        # POSTPONE_MODE: each partition's bucket count as of the job's plan (store/write/postpone.py)
        self.buckets: PartitionBuckets | None = None

    def with_buckets(self, buckets: PartitionBuckets | None) -> "StageRows":
        """These layouts for a job that writes with `buckets` (a postpone-bucket table's counts)."""
        staged = copy.copy(self)
        staged.buckets = buckets
        return staged

    def _fields(self, names: Iterable[str]) -> list[pa.Field]:
        return [pa.field(n, TYPES[n] if n in TYPES else exchange_type(self.schema.field(n).type)) for n in names]

    def _hash(self) -> list[str]:
        return [HASH] if self.hashed else []

    def batch(self) -> pa.Schema:
        """A batch row as the assigners take it."""
        return pa.schema(self._fields(self.schema.field_names + self._hash()))

    def live_key(self, counted: bool) -> pa.Schema:
        """What the bootstrap sends: live keys, and with `counted` bucket counts and ROUTE too."""
        extra = [BUCKET, SOURCE] + self._hash() + ([COUNT, ROUTE] if counted else [])
        return pa.schema(self._fields(self.live_key_columns + extra))

    def index_entry(self) -> pa.Schema:
        return pa.schema(self._fields(list(self.schema.partition_keys) + [HASH, BUCKET, SOURCE]))

    def routed(self, counted: bool) -> pa.Schema:
        """What the shuffle to the assigners carries: every row kind in the batch row's columns."""
        extra = [BUCKET, SOURCE] + ([COUNT] if counted else []) + [ROUTE]
        return pa.schema(self._fields(self.schema.field_names + self._hash() + extra))

    def live_row(self) -> pa.Schema:
        """A whole live row of the table and its bucket (what a delete job retracts)."""
        return pa.schema(self._fields(self.schema.field_names + [BUCKET]))

    def assigned(self) -> pa.Schema:
        return pa.schema(self._fields(self.schema.field_names + self._hash() + [BUCKET, KIND, COUNT]))


PAYLOAD = pa.schema([pa.field("payload", pa.binary())])  # a writer's result: pickled entries and counts
# A shuffle of packed rows: the rows bound for one task (an assigner: StageRows.routed; a writer:
# StageRows.assigned) as Arrow IPC streams, each in a row with the value of TO that sends it to that
# task. Spark then moves a few large values instead of converting every row to its rows and back.
# A row with RECORD instead of rows carries an assigner's key-index record of the commit (its runs
# and count changes, pickled) to a writer, whose payload brings it to the driver exactly once.
TO = "_to"
RECORD = "record"
PACKED = pa.schema([pa.field(TO, pa.int32()), pa.field("rows", pa.binary()), pa.field(RECORD, pa.binary())])
# what one task of the batch tells the bootstrap: a partial Bloom filter of its keys, its partitions
DIGEST = pa.schema([pa.field("bits", pa.binary()), pa.field("partitions", pa.binary())])


def conform(table: pa.Table, layout: pa.Schema) -> pa.Table:
    """table in exactly `layout` (its columns and types, all nullable, in its order); a column the
    table lacks is null. Spark refuses any other Arrow schema from a Python worker."""
    n = table.num_rows
    arrays = []
    for f in layout:
        if f.name in table.column_names:
            col = table.column(f.name)
            arrays.append(cast_to(col, f.type))
        else:
            arrays.append(pa.nulls(n, f.type))
    return pa.Table.from_arrays(arrays, schema=pa.schema([f.with_nullable(True) for f in layout]))


def of_source(rows: pa.Table, source: Source) -> pa.Table:
    """The rows of one kind among those routed to an assigner."""
    return rows.filter(pc.equal(rows.column(SOURCE), int(source)))
