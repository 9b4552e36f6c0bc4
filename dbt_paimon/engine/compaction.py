"""Compaction on Spark: one task per bucket merges the bucket's files into one sorted run at the
top level; the driver commits the result as one COMPACT snapshot.

first-row tables need it after every write: Paimon's batch readers (Java and pypaimon) skip level-0
files of a first-row table, so rows an upsert wrote stay invisible to them until compacted.
"""

from __future__ import annotations

import pickle
from typing import Iterable, Iterator, Mapping

import pyarrow as pa
from pyspark.sql import SparkSession

from ..store.compact import abort_compaction, compact_bucket, max_level
from ..store.errors import CommitConflictError
from ..store.fileio import FileIO
from ..store.snapshot import COMPACT
from ..store.table import FileStoreTable
from . import deploy, jobs


def _compact_task(path: str, schema, io, level: int):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = FileStoreTable(path, schema, io)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                split = pickle.loads(blob)
                entries = compact_bucket(table, split, level)
                yield pa.RecordBatch.from_arrays([pa.array([pickle.dumps((split, entries))], pa.binary())],
                                                 names=["payload"])
    return run


def sorted_runs(split) -> int:
    """Sorted runs of a bucket as Paimon counts them: each level-0 file, plus each non-empty level."""
    level0 = sum(1 for f in split.files if f.level == 0)
    return level0 + len({f.level for f in split.files if f.level > 0})


def auto_compact(spark: SparkSession, path: str, io: FileIO | None = None) -> int | None:
    """After a commit: fully compact every bucket holding num-sorted-run.compaction-trigger or more
    sorted runs (Paimon's trigger; we then merge the whole bucket into the top level rather than
    pick runs as its universal compaction does). `write-only` tables are left alone."""
    table = FileStoreTable.open(path, io)
    core = table.schema.core
    if (core.get("write-only") or "false").lower() == "true":
        return None
    delta_commits = core.get("full-compaction.delta-commits")
    if delta_commits and _appends_since_compaction(table) >= int(delta_commits):
        return compact(spark, path, io=io)  # every bucket, as Paimon's full-compaction.delta-commits does
    trigger = core.num_sorted_run_compaction_trigger
    due = [(s.partition, s.bucket) for s in table.plan().splits if sorted_runs(s) >= trigger]
    return compact(spark, path, due, io=io) if due else None


def _appends_since_compaction(table: FileStoreTable) -> int:
    """APPEND snapshots since the latest COMPACT one (walking back over retained snapshots only)."""
    mgr = table.snapshots
    latest, earliest = mgr.latest_id(), mgr.earliest_id() or 1
    count = 0
    for sid in range(latest or 0, earliest - 1, -1):  # per snapshot (metadata), newest first
        snap = mgr.try_snapshot(sid)
        if snap is None or snap.commit_kind == COMPACT:
            break
        count += 1
    return count


def compact(spark: SparkSession, path: str, buckets: Iterable[tuple[bytes, int]] | None = None,
            io: FileIO | None = None, storage_options: Mapping[str, object] | None = None) -> int | None:
    """Fully compact the given (partition bytes, bucket)s (all when None); returns the COMPACT
    snapshot id, or None when nothing needed rewriting. A commit that raced it and removed one of
    its input files makes the commit fail cleanly (CommitConflictError) and its outputs are deleted.
    storage_options: the object store's settings (Paimon's names: s3.endpoint, ...)."""
    table = FileStoreTable.open(path, io or FileIO.get(path, storage_options))
    plan = table.plan()
    wanted = None if buckets is None else set(buckets)
    level = max_level(table.schema)
    splits = [s for s in plan.splits if (wanted is None or (s.partition, s.bucket) in wanted)
              and not (len(s.files) == 1 and s.files[0].level == level)]
    if not splits:
        return None
    deploy.prepare(spark, path)  # a cluster's executors: ship the engine, check their Python
    tasks = jobs.descriptors(spark, [pickle.dumps(s) for s in splits])
    done = jobs.collect_payloads(spark, tasks.mapInArrow(_compact_task(table.path, table.schema, table.io, level),
                                                         "payload binary"))
    entries = [e for _, es in done for e in es]
    if not entries:
        return None
    try:
        result = table.new_commit().commit(entries, COMPACT)
    except CommitConflictError:
        for split, es in done:
            abort_compaction(table, split, es)
        raise
    return result.snapshot.id if result else None
