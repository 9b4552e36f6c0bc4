"""Compaction: a bucket's files (all of them, or the sorted runs universal compaction picks after a
write: store/compaction/compact_strategy.py) are merged into one sorted run
(store/compaction/compact.py compact_bucket), then the driver commits the result as one COMPACT snapshot.

Where the buckets are rewritten follows the job that committed before (`execution`, chosen once by
the caller): "distributed" runs one Spark task per bucket; "local" runs the same function in driver
threads, so a driver-local upsert's post-commit compaction starts no Spark job. Both feed the same
commit, which deletes every rewritten file when it loses a race.

first-row tables need it after every write: Paimon's batch readers (Java and pypaimon) skip level-0
files of a first-row table, so rows an upsert wrote stay invisible to them until compacted up.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import SparkSession

from ...assign.rows import PAYLOAD
from ...store.write import append
from ...store.compaction import postpone_compact
from ...store.schema import foreign_options
from ...store.compaction.compact import abort_compaction, compact_bucket, compact_bucket_dv, max_level
from ...store.index.deletion_vectors import DeletionVectorsIndexFile, ranges
from ...store.compaction.compact_strategy import UniversalCompaction
from ...store.common.fileio import FileIO
from ...store.common.options import BucketMode
from ...store.read.scan import DataSplit
from ...store.snapshot.snapshot import COMPACT, OVERWRITE
from ...store.table import FileStoreTable
from . import commit_loop
from ..runtime import deploy, jobs
from ..runtime.executor import driver_threads
from ..settings import Execution, RunSettings
from ..spark_types import struct_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Rewrite:
    """One bucket's compaction: `split` holds the files to rewrite (all of the bucket's, or the
    runs universal compaction picked), written as one run at `level`; `bucket_files` all the
    bucket's files when `split` holds only some (compact_bucket). An append table's bucket has its
    small files merged instead (store/write/append.py; `full`: all its files)."""
    split: DataSplit
    level: int
    drop_deletes: bool
    full: bool = False
    bucket_files: tuple | None = None
    derive_changelog: bool = True
    moved: pa.Table | None = None  # rows a postpone compaction moves into the bucket (postpone_compact.py)

    def run(self, table: FileStoreTable) -> tuple[list, list]:
        """(the entries to commit, the deletion vectors changed)."""
        if table.schema.is_append:
            return append.compact_split(table.io, table.path, table.schema, self.split, self.full), []
        if table.schema.core.deletion_vectors:
            return compact_bucket_dv(table, self.split, self.level, self.bucket_files, self.derive_changelog)
        return compact_bucket(table, self.split, self.level, self.drop_deletes, self.bucket_files,
                              self.derive_changelog, self.moved), []


def _compact_task(path: str, schema, io):
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = FileStoreTable(path, schema, io)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                rewrite = pickle.loads(blob)
                entries, vectors = rewrite.run(table)
                yield pa.RecordBatch.from_arrays(
                    [pa.array([pickle.dumps((rewrite.split, entries, vectors))], pa.binary())], schema=PAYLOAD)
    return run


def _on_spark(spark: SparkSession, table: FileStoreTable, rewrites: list[Rewrite]) -> list:
    """One Spark task per bucket: [(split, entries, deletion vectors changed)]."""
    deploy.prepare(spark, table.path)  # a cluster's executors: ship the engine, check their Python
    tasks = jobs.descriptors(spark, rewrites)
    return jobs.collect_payloads(spark, tasks.mapInArrow(_compact_task(table.path, table.schema, table.io),
                                                         struct_of(PAYLOAD)))


def _in_driver(spark: SparkSession, table: FileStoreTable, rewrites: list[Rewrite]) -> list:
    """The same per-bucket rewrite in driver threads: [(split, entries, deletion vectors changed)].
    If a bucket fails, the files the others wrote are deleted before the error propagates."""
    with ThreadPoolExecutor(min(driver_threads(), len(rewrites))) as pool:
        futures = [pool.submit(r.run, table) for r in rewrites]
    done, error = [], None
    for rewrite, future in zip(rewrites, futures):
        try:
            done.append((rewrite.split, *future.result()))
        except BaseException as e:  # noqa: BLE001 - re-raised below, once the others are cleaned up
            error = error or e
    if error is not None:
        _abort(table, done)
        raise error
    return done


def _abort(table: FileStoreTable, done: list) -> None:
    """Delete what the rewrites wrote (data, changelog and deletion vector files)."""
    for split, entries, vectors in done:
        abort_compaction(table, split, entries)
        for v in vectors:
            if v.new is not None:
                DeletionVectorsIndexFile(table.io, table.path).delete(v.new)


# where the buckets are rewritten (no AUTO: the caller decides)
EXECUTIONS: dict[Execution, Callable[[SparkSession, FileStoreTable, list[Rewrite]], list]] = {
    Execution.DISTRIBUTED: _on_spark, Execution.LOCAL: _in_driver}


def auto_compact(spark: SparkSession, path: str, io: FileIO | None = None,
                 execution: str | Execution = Execution.DISTRIBUTED, retry: bool = True,
                 branch: str | None = None) -> int | None:
    """After a commit, what Paimon's writers compact: per bucket, the sorted runs universal
    compaction picks (store/compaction/compact_strategy.py; first-row tables: every level-0 file up, since
    Paimon's batch readers skip them), or every bucket fully when full-compaction.delta-commits
    appends have passed. `write-only` tables are left alone, and postpone-bucket ones (Paimon's batch
    writes into them are write-only: store/write/postpone.py). A small upsert into a big bucket thus
    rewrites the bucket's small runs, not the bucket (the first rule here rewrote the whole bucket
    once it held num-sorted-run.compaction-trigger runs: 31 s every fifth 10K upsert into 100M rows).
    execution: where the buckets are rewritten, as in compact(). retry: a conflict plans again on
    the new snapshot (commit.max-retries); else it is raised at once (the next commit compacts)."""
    def attempt(at: commit_loop.Attempt) -> int | None:
        table = at.table
        core = table.schema.core
        if core.write_only or table.schema.bucket_mode == BucketMode.POSTPONE_MODE:
            return None
        if table.schema.is_append:  # small files merged, per bucket (store/write/append.py pick_bins)
            rewrites = [Rewrite(s, 0, False) for s in table.plan().splits if append.pick_bins(table.schema, s.files)]
            return _rewrite_and_commit(spark, at, rewrites, [], execution)
        delta_commits = core.get("full-compaction.delta-commits")
        if delta_commits and _appends_since_compaction(table) >= int(delta_commits):
            # every bucket, as Paimon's full-compaction.delta-commits does (as compact() checks it)
            foreign_options.check_writable(table.schema.options, path)
            return _rewrite_and_commit(spark, at, *_full(table, None), execution)
        # every level-0 file up after each write: first-row and deletion vectors (Paimon's batch readers
        # skip level 0) and changelog-producer lookup (its changelog is derived when level 0 is compacted)
        strategy = UniversalCompaction.of(core, force_up_level0=core.force_up_level0)
        # a lookup table's changelog says nothing of what an OVERWRITE wrote (Paimon compacts those
        # files within the overwrite's commit, whose changelog it drops)
        plan = table.plan()
        derive = plan.snapshot is None or plan.snapshot.commit_kind != OVERWRITE
        rewrites = []
        for split in plan.splits:
            unit = strategy.pick(split.files)
            if unit is not None:
                rewrites.append(Rewrite(dataclasses.replace(split, files=list(unit.files)), unit.output_level,
                                        unit.drop_deletes, bucket_files=tuple(split.files), derive_changelog=derive))
        return _rewrite_and_commit(spark, at, rewrites, [], execution)
    io = io or FileIO.get(path)
    return commit_loop.run(path, io, "compaction", attempt, rerun=retry, branch=branch)


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
            settings: RunSettings | None = None, io: FileIO | None = None) -> int | None:
    """Fully compact the given (partition bytes, bucket)s (all when None: then rows other writers
    parked in bucket -2 of a postpone-bucket table are moved into their buckets in the same
    snapshot, store/compaction/postpone_compact.py); returns the COMPACT snapshot id, or None when nothing
    needed rewriting. A commit that raced it and removed one of its input files makes its commit
    fail cleanly and its outputs deleted; it then plans and rewrites again on the new snapshot, up
    to commit.max-retries times (engine/writes/commit_loop.py).
    settings: how it runs: `execution` "local" rewrites each bucket in a driver thread (what an
    upsert that ran in the driver uses: no Spark job), "distributed" (and auto) in a Spark task;
    the object store's settings; commit.max-retries. io: the table's (else made from settings)."""
    settings = settings or RunSettings()
    io = io or FileIO.get(path, settings.storage_options)
    execution = Execution.DISTRIBUTED if settings.execution == Execution.AUTO else settings.execution
    wanted = None if buckets is None else set(buckets)

    def attempt(at: commit_loop.Attempt) -> int | None:
        foreign_options.check_writable(at.table.schema.options, path)  # before anything is rewritten
        return _rewrite_and_commit(spark, at, *_full(at.table, wanted), execution)
    return commit_loop.run(path, io, "compaction", attempt, retries=settings.commit_max_retries,
                           branch=settings.branch)


def _full(table: FileStoreTable, wanted: set | None) -> tuple[list[Rewrite], list]:
    """A full compaction's rewrites of the `wanted` (partition, bucket)s (None: all, rows parked
    in bucket -2 moved into their buckets) and the parked files' DELETE entries."""
    plan = table.plan()
    moving, parked = {}, []
    if plan.parked and wanted is None:  # rows parked in bucket -2 go into their buckets
        postpone_compact.check_movable(table.schema, table.path)
        moving, parked = postpone_compact.moved(table, plan)
    level = max_level(table.schema)
    if table.schema.is_append:  # every file under target-file-size (store/write/append.py pick_bins)
        rewrites = [Rewrite(s, 0, False, full=True) for s in plan.splits
                    if (wanted is None or (s.partition, s.bucket) in wanted)
                    and append.pick_bins(table.schema, s.files, full=True)]
    else:  # a bucket that is one file at the top level is done, unless rows of it are deleted
        rewrites = [Rewrite(s, level, True) for s in plan.splits
                    if (wanted is None or (s.partition, s.bucket) in wanted)
                    and (s.partition, s.bucket) not in moving
                    and not (len(s.files) == 1 and s.files[0].level == level
                             and s.files[0].file_name not in _with_vectors(s))]
        rewrites += [Rewrite(split, level, True, moved=rows) for split, rows in moving.values()]
    return rewrites, parked


def _rewrite_and_commit(spark: SparkSession, at: commit_loop.Attempt, rewrites: list[Rewrite],
                        removed: list, execution: str | Execution = Execution.DISTRIBUTED) -> int | None:
    """The rewrites run where `execution` says, then one COMPACT commit (with `removed`: the
    DELETE entries of parked files whose rows the rewrites moved); on any error every file
    written is deleted (a lost race: CommitConflictError, for the loop to plan again)."""
    if execution not in EXECUTIONS:
        raise ValueError(f"execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
    if not rewrites and not removed:
        return None
    table = at.table
    done = EXECUTIONS[execution](spark, table, rewrites) if rewrites else []
    entries = [e for _, es, _ in done for e in es] + list(removed)
    vectors = [v for _, _, vs in done for v in vs]
    if not entries and not vectors:
        return None
    result = at.commit(entries, COMPACT, abort=lambda: _abort(table, done), vectors=vectors)
    return result.snapshot.id if result else None


def _with_vectors(split: DataSplit) -> set[str]:
    """The files of a split with a deletion vector."""
    return set(ranges(split.deletion_index)) if split.deletion_index is not None else set()
