"""The upsert job's topology run inside the driver, for jobs that fit in it.

On a local master, Spark's executors are threads of the same machine and every task of the job is a
round trip through a Python worker; for a batch of a few hundred MB the five stages' fixed costs
dominate the upsert (see BENCHMARKS.md). When the batch and the table's key index fit in the driver,
the same steps run here on Arrow tables, with the same code the Spark tasks run:

    bootstrap (tasks.bootstrap_task, thread pool) ─► assign (tasks.assign, one assigner owning
    every bucket) ─► write (tasks.write_rows, thread pool over buckets) ─► commit (upsert.py)
    ─► post-commit compaction (compaction.py, execution="local": compact_bucket, thread pool over buckets)

The shuffles have nothing to do: one assigner sees every key, and each writer thread gets whole
buckets. `execution="distributed"` forces the Spark job; a non-local master always runs it.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from ..assign.global_index_assigner import BUCKET, group_codes
from ..store.index import HashIndexFile
from ..store.options import BucketMode
from ..store.schema import TableSchema
from ..store.table import FileStoreTable
from . import bloom, deploy, tasks
from .settings import Execution

# Above these the job runs on Spark even on a local master: the batch (Spark's estimate of its
# size) and the table's keys would be held by the driver process.
LOCAL_MAX_BATCH_BYTES = 512 << 20
LOCAL_MAX_TABLE_ROWS = 50_000_000


_UNKNOWN = 1 << 62


def estimated_bytes(df: DataFrame) -> int:
    """Spark's size estimate of a DataFrame (from files, a cache or literal rows); _UNKNOWN when it
    has none (Spark then says Long.MaxValue, e.g. for RDDs and Python data sources)."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        size = int(size if isinstance(size, int) else size.toString())  # py4j: int, or a Scala BigInt
    except Exception:  # noqa: BLE001 - no estimate
        return _UNKNOWN
    return _UNKNOWN if size >= (1 << 63) - 1 else size


def unknown_size(df: DataFrame) -> bool:
    return estimated_bytes(df) >= _UNKNOWN


def choose(spark: SparkSession, df: DataFrame, execution: str | Execution, table_rows: int) -> Execution:
    """Where the job runs (LOCAL or DISTRIBUTED). Without Spark's size estimate, auto counts the
    (persisted) batch and takes Spark's default row width."""
    execution = Execution.parse(execution)
    if execution != Execution.AUTO:
        return execution
    if deploy.is_cluster(spark) or table_rows > LOCAL_MAX_TABLE_ROWS:  # local-cluster[...] is a cluster
        return Execution.DISTRIBUTED
    size = estimated_bytes(df)
    if size >= _UNKNOWN:
        size = df.count() * int(df._jdf.schema().defaultSize())
    return Execution.LOCAL if size <= LOCAL_MAX_BATCH_BYTES else Execution.DISTRIBUTED


def threads() -> int:
    """Threads of a driver-local job (its writers, bootstrap chunks, compacted buckets)."""
    return max(2, min(8, os.cpu_count() or 2))


def run_job(table: FileStoreTable, batch: pa.Table, plan, sequence_by: str | None):
    """The job of upsert._run_job on an Arrow batch (the table's columns, Spark's Arrow types):
    (manifest entries, counts, rewritten HASH index files, a one-line plan)."""
    schema: TableSchema = table.schema
    splits, next_sequence, index_files = tasks.bucket_state(table, plan)
    hashed = schema.bucket_mode == BucketMode.HASH_DYNAMIC
    stored, count_rows = _bootstrap(table, batch, plan, splits, sequence_by) if splits else (None, None)
    indexed = None
    if index_files:
        files = HashIndexFile(table.io, table.path)
        indexed = pa.concat_tables([tasks.index_entry_rows(files, schema, e) for e in index_files.values()])
    result = tasks.assign(schema, 1, 0, sequence_by, rows=tasks.with_key_hash(batch, schema) if hashed else batch,
                          stored=stored, count_rows=count_rows, indexed=indexed)
    groups = _writer_groups(result.rows, schema, threads())
    with ThreadPoolExecutor(threads()) as pool:
        written = list(pool.map(lambda part: tasks.write_rows(table.path, schema, table.io, next_sequence, index_files, part),
                                groups))
    entries, index_changes = [], {}
    for part_entries, part_index in written:
        entries += part_entries
        index_changes.update(part_index)
    return entries, result.counts.as_dict(), index_changes, f"driver-local ({len(groups)} writer threads)"


def _bootstrap(table: FileStoreTable, batch: pa.Table, plan, splits, sequence_by: str | None):
    """(stored keys, per-bucket count rows) as the Spark bootstrap ships them: with the batch's
    Bloom filter (when the key can be hashed) only the keys the batch may touch plus each
    bucket's count; else every live key. The bootstrap task runs in threads, a chunk each."""
    schema = table.schema
    bits = None
    if schema.bucket_mode != BucketMode.HASH_DYNAMIC and bloom.supports(schema):
        bits = np.zeros(bloom.size_bits(plan.snapshot.total_record_count) // 8, dtype=np.uint8)
        bloom.add(bits, batch, list(schema.primary_keys), schema)
    boot = tasks.bootstrap_task(table.path, schema, table.io, sequence_by, with_hash=schema.bucket_mode == BucketMode.HASH_DYNAMIC,
                                bloom_bits=bits, routes={0: 0} if bits is not None else None)

    def chunk(blob: bytes) -> list[pa.RecordBatch]:  # one bootstrap task's input: a row of pickled splits
        return list(boot(iter([pa.RecordBatch.from_arrays([pa.array([blob], pa.binary())], ["blob"])])))

    with ThreadPoolExecutor(threads()) as pool:
        found = [b for part in pool.map(chunk, tasks.chunk_splits(splits, threads())) for b in part]
    if not found:
        return None, None
    existing = pa.Table.from_batches(found)
    source = existing.column(tasks.SOURCE)
    count_rows = existing.filter(pc.equal(source, tasks.FROM_COUNT)) if bits is not None else None
    return existing.filter(pc.equal(source, tasks.FROM_TABLE)), count_rows


def _writer_groups(data: pa.Table, schema: TableSchema, n: int) -> list[pa.Table]:
    """The assigned rows cut into at most n parts of whole buckets (as the shuffle by (partition,
    bucket) would), so writer threads never share a bucket."""
    if data.num_rows == 0:
        return []
    codes, _ = group_codes(data, list(schema.partition_keys) + [BUCKET])
    part = np.asarray(codes, dtype=np.int64) % n
    out = []
    for i in range(n):
        mask = part == i
        if mask.any():
            out.append(data.filter(pa.array(mask)))
    return out

