"""The key index built by a Spark job, for a table whose upserts run on Spark and has none yet.

A driver-local upsert builds a missing index in the driver (key_index/build.py `build`: every live
key read once, in threads). The Spark job must not pull the table's keys into the driver, so it
builds the index with two stages, then bootstraps from it as from any index:

    split groups ─► read each split's live keys, one entry per key (H, key, partition, P,
                    BUCKET, GEN, LIVE) and its shard ─► shuffle by shard ─► per shard one sorted
                    run (Arrow IPC) written by the task that holds it ─► the driver names the runs
                    and the counts in a manifest

The driver draws the generations (one per bucket) and the runs' seq before the job, so the tasks
need no state back; it saves the manifest only once every run is written: a failed or killed
build leaves unnamed runs, which `KeyIndex.clean` deletes later, and no index.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator

import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from ...assign.rows import PAYLOAD
from ...key_index import BUCKET, GEN, H, LIVE, P, IndexState, KeyIndex
from ...store.common.fileio import FileIO
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from . import jobs, key_lookup, tasks
from ..spark_types import struct_of, to_spark

SHARD = "_shard"


def entry_struct(index: KeyIndex) -> T.StructType:
    """The Spark schema of an entry row (KeyIndex.entry_schema) plus its shard."""
    types = {H: T.IntegerType(), P: T.BinaryType(), BUCKET: T.IntegerType(), GEN: T.IntegerType(),
             LIVE: T.BooleanType()}
    fields = [T.StructField(f.name, types[f.name] if f.name in types
                            else to_spark(index.schema.field(f.name).type), True) for f in index.entry_schema]
    return T.StructType(fields + [T.StructField(SHARD, T.IntegerType(), False)])


def build(spark: SparkSession, table: FileStoreTable, plan, read_tasks: int) -> IndexState:
    """Build the key index of `table` at `plan` on Spark, save it, and return its state."""
    started = time.perf_counter()
    tuning = dict(key_lookup.INDEX_TUNING)
    index = KeyIndex(table.io, table.path, table.schema, **tuning)
    state = index.new_build(plan)
    seq = state.new_seq()
    gens = {key: b.gen for key, b in state.buckets.items()}
    struct = entry_struct(index)
    groups = tasks.chunk_splits(plan.splits, read_tasks)
    entries = jobs.descriptors(spark, groups).mapInArrow(
        _entries_task(table.path, table.io, table.schema, tuning, gens, state.shards, struct), struct)
    written = entries.repartition(state.shards, F.col(SHARD)).mapInArrow(  # a task holds ~1 shard
        _runs_task(table.path, table.io, table.schema, tuning, state.shards, seq), struct_of(PAYLOAD))
    runs, counts = [], {}
    for part_runs, part_counts in jobs.collect_payloads(spark, written):
        runs += part_runs
        for key, n in part_counts.items():
            counts[key] = counts.get(key, 0) + n
    index.adopt_build(state, runs, counts, seq)
    state.stats["seconds"] = round(time.perf_counter() - started, 4)
    return state


def _entries_task(path: str, io: FileIO, schema: TableSchema, tuning: dict, gens: dict, shards: int,
                  struct: T.StructType):
    """Rows of pickled split lists -> the entries of their live keys, each with its shard."""
    arrow_schema = to_arrow_schema(struct)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        index = KeyIndex(io, path, schema, **tuning)
        reader = index.key_reader()
        for splits in tasks.blobs(batches):
            with ThreadPoolExecutor(max_workers=tasks.SPLIT_READ_THREADS) as pool:  # reads release the GIL
                for split, live in zip(splits, pool.map(reader.read_split, splits)):
                    if not live.num_rows:
                        continue
                    t = index.split_entries(split, live, gens[(split.partition, split.bucket)])
                    t = t.append_column(SHARD, pa.array(KeyIndex.shard_of(t.column(H).to_numpy(), shards), pa.int32()))
                    yield from t.cast(arrow_schema).to_batches()
    return run


def _runs_task(path: str, io: FileIO, schema: TableSchema, tuning: dict, shards: int, seq: int):
    """Entries of whole shards -> one run per shard written, and the keys per (partition, bucket)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        index = KeyIndex(io, path, schema, **tuning)
        received = [b for b in batches if b.num_rows]
        entries = (pa.Table.from_batches(received).drop_columns([SHARD]) if received
                   else index.entry_schema.empty_table())
        runs, counts = index.shard_runs(entries, shards, seq)
        yield tasks.payload((runs, counts))
    return run
