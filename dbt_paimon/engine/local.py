"""The upsert job's topology run inside the driver, for jobs that fit in it.

On a local master, Spark's executors are threads of the same machine and every task of the job is a
round trip through a Python worker; for a batch of a few hundred MB the five stages' fixed costs
dominate the upsert (see BENCHMARKS.md). When the batch and the table's key index fit in the driver,
the same steps run here on Arrow tables, with the same code the Spark tasks run:

    bootstrap (tasks.bootstrap_task, thread pool) ─► assign (tasks.assign, one assigner owning
    every bucket) ─► write (tasks.write_rows, thread pool over buckets) ─► commit (upsert.py)

The shuffles have nothing to do: one assigner sees every key, and each writer thread gets whole
buckets. `execution="distributed"` forces the Spark job; a non-local master always runs it.
"""

from __future__ import annotations

import os
import pickle
from concurrent.futures import ThreadPoolExecutor
from typing import Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from ..assign.global_index_assigner import BUCKET, group_codes
from ..store.index import read_hash_index
from ..store.schema import TableSchema
from ..store.table import FileStoreTable
from . import bloom, tasks

EXECUTIONS = ("auto", "local", "distributed")
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


def check_execution(execution: str) -> None:
    if execution not in EXECUTIONS:
        raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")


def choose(spark: SparkSession, df: DataFrame, execution: str, table_rows: int) -> str:
    """Where the job runs. Without Spark's size estimate, auto counts the (persisted) batch and
    takes Spark's default row width."""
    check_execution(execution)
    if execution != "auto":
        return execution
    if not spark.sparkContext.master.startswith("local") or table_rows > LOCAL_MAX_TABLE_ROWS:
        return "distributed"
    size = estimated_bytes(df)
    if size >= _UNKNOWN:
        size = df.count() * int(df._jdf.schema().defaultSize())
    return "local" if size <= LOCAL_MAX_BATCH_BYTES else "distributed"


def _threads() -> int:
    return max(2, min(8, os.cpu_count() or 2))


def run_job(table: FileStoreTable, batch: pa.Table, plan, sequence_by: str | None, options: Mapping[str, str]):
    """The job of upsert._run_job on an Arrow batch (the table's columns, Spark's Arrow types):
    (manifest entries, counts, rewritten HASH index files, a one-line plan)."""
    schema: TableSchema = table.schema
    splits = plan.splits if plan else []
    snapshot = plan.snapshot if plan else None
    next_sequence = {(s.partition, s.bucket): s.max_sequence_number + 1 for s in splits}
    hashed = schema.bucket_mode == "HASH_DYNAMIC"
    rows = tasks.with_key_hash(batch, schema) if hashed else batch

    stored = count_rows = indexed = None
    index_files = {}
    if splits:
        bits = None
        if not hashed and bloom.supports(schema):  # as on Spark: only the keys the batch may touch + bucket counts
            bits = np.zeros(bloom.size_bits(snapshot.total_record_count) // 8, dtype=np.uint8)
            bloom.add(bits, batch, list(schema.primary_keys), schema)
        boot = tasks.bootstrap_task(table.path, schema, sequence_by, with_hash=hashed, bloom_bits=bits,
                                    routes={0: 0} if bits is not None else None)
        chunks = tasks.chunk_splits(splits, _threads())
        with ThreadPoolExecutor(_threads()) as pool:
            parts = list(pool.map(lambda blob: list(boot(iter([_blob_batch(blob)]))), chunks))
        found = [b for part in parts for b in part]
        if found:
            existing = pa.Table.from_batches(found)
            source = existing.column(tasks.SOURCE)
            stored = existing.filter(pc.equal(source, tasks.FROM_TABLE))
            if bits is not None:
                count_rows = existing.filter(pc.equal(source, tasks.FROM_COUNT))
    if hashed:
        index_files = read_hash_index(table.io, table.path, snapshot) if snapshot else {}
        if index_files:
            read = tasks.index_bootstrap_task(table.path, schema)
            entries = list(index_files.values())
            found = list(read(iter([_blob_batch(pickle.dumps(entries))])))
            indexed = pa.Table.from_batches(found) if found else None

    result = tasks.assign(schema, 1, 0, sequence_by, rows=rows, stored=stored, count_rows=count_rows,
                          indexed=indexed)
    data = result.rows
    groups = _writer_groups(data, schema, _threads())
    with ThreadPoolExecutor(_threads()) as pool:
        written = list(pool.map(lambda part: tasks.write_rows(table.path, schema, next_sequence, index_files, part),
                                groups))
    entries, index_changes = [], {}
    for part_entries, part_index in written:
        entries += part_entries
        index_changes.update(part_index)
    return entries, result.counts.as_dict(), index_changes, f"driver-local ({len(groups)} writer threads)"


def _blob_batch(blob: bytes) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([blob], pa.binary())], names=["blob"])


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

