"""delete(): Paimon's `DELETE FROM t WHERE <predicate>` as one Spark job and one snapshot.

Every live row matching the predicate gets a -D record written into its own (partition, bucket),
in new data files, an APPEND snapshot; no file or partition is removed (a later compaction drops
the deletes). An append table has no -D records: the files holding matching rows are written again
without them (rewrite.py), an OVERWRITE snapshot, as Paimon commits a write that removes files. The
predicate is Spark SQL over the table's columns, evaluated by Spark on the executors.
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...assign.rows import BUCKET, COUNT, KIND, PAYLOAD, StageRows, conform
from ...store.schema import foreign_options
from ...store.format.datafile import DELETE
from ...store.common.errors import SchemaError
from ...store.common.fileio import FileIO
from ...store.manifest.manifest import data_entries
from ...store.common.options import MergeEngine
from ...store.read.read import TableRead
from ...store.write.postpone import PartitionBuckets
from ...store.read.scan import DataSplit, next_sequences
from ...store.snapshot.snapshot import APPEND
from ...store.table import FileStoreTable
from . import commit_loop
from ..runtime import deploy, jobs, tasks
from .post_commit import after_commit
from ..qualified import Name, named
from .rewrite import require_deterministic, rewrite_where
from ..settings import Execution, RunSettings
from ..spark_types import struct_of



@dataclass
class DeleteResult:
    table_path: str
    snapshot_id: int | None
    deleted: int
    attempts: int = 1
    seconds: float = 0.0
    extra_snapshots: list[int] | None = None
    updated: int = 0  # an append table's UPDATE: the rows set
    kind: str = "delete"  # or "update"

    def summary(self) -> str:
        return f"UPDATE {self.updated}" if self.kind == "update" else f"DELETE {self.deleted}"


def _rows_task(path: str, stage: StageRows, io: FileIO):
    """Split descriptors -> every live row of those splits + BUCKET (stage.live_row)."""
    layout = stage.live_row()

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = TableRead(io, path, stage.schema)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                split: DataSplit
                for split in pickle.loads(blob):
                    live = reader.read_split(split)
                    if live.num_rows:
                        live = live.append_column(BUCKET, pa.array(np.full(live.num_rows, split.bucket, np.int32)))
                        yield from conform(live, layout).to_batches(max_chunksize=1 << 17)
    return run


def _check_engine(schema) -> None:
    core = schema.core
    engine = core.merge_engine
    if engine == MergeEngine.PARTIAL_UPDATE and not core.partial_update_remove_record_on_delete:
        raise SchemaError("a partial-update table cannot delete rows unless "
                          "'partial-update.remove-record-on-delete' = 'true' (as in Paimon)")
    if engine in (MergeEngine.AGGREGATION, MergeEngine.FIRST_ROW):
        raise SchemaError(f"a {engine} table cannot delete rows (Paimon refuses -D records for it)")
    if core.ignore_delete:
        raise SchemaError("the table sets 'ignore-delete' = 'true': deletes would be ignored")


def delete(spark: SparkSession, path: str, where: str, settings: RunSettings | None = None,
           alias: Name | None = None) -> DeleteResult:
    """Delete every live row of the table at path for which the Spark SQL predicate holds.
    settings: how it runs (the object store's settings, commit.max-retries; `execution` says where
    the compaction after it runs: auto is a Spark job); alias: a name the predicate may qualify the
    table's columns with (`DELETE FROM t AS x WHERE x.id = 1`), or the parts of the table's
    qualified name (`shop.t.id`: qualified.py)."""
    if not where or not where.strip():
        raise SchemaError("delete needs a predicate (where); to empty a table, say so: where='true'")
    return _rewrite_or_retract(spark, path, where, settings or RunSettings(), alias, None)


def update_append(spark: SparkSession, path: str, where: str, assignments: Mapping[str, str],
                  alias: Name | None = None, settings: RunSettings | None = None) -> DeleteResult:
    """Set columns ({column: Spark SQL expression}) of the rows of an append table for which the
    predicate holds: the files holding them written again (copy-on-write), one commit, retried on
    a conflict as a delete is. The result counts no deleted rows."""
    return _rewrite_or_retract(spark, path, where, settings or RunSettings(), alias, dict(assignments))


def _rewrite_or_retract(spark: SparkSession, path: str, where: str, settings: RunSettings, alias: Name | None,
                        update: dict | None) -> DeleteResult:
    io = FileIO.get(path, settings.storage_options)
    after = Execution.DISTRIBUTED if settings.execution == Execution.AUTO else settings.execution
    started = time.time()
    what = "update" if update is not None else "delete"
    deploy.prepare(spark, path)  # a cluster's executors: ship the engine, check their Python

    def attempt(at: commit_loop.Attempt) -> DeleteResult:
        table = at.table
        schema = table.schema
        foreign_options.check_writable(schema.options, path)  # before anything is written
        if update is not None and not schema.is_append:
            raise SchemaError(f"table {path} has a primary key: its rows are updated by upsert")
        if update is None:
            _check_engine(schema)
        plan = table.plan()
        if not plan.splits:
            return DeleteResult(table.path, plan.snapshot.id if plan.snapshot else None, 0, at.number, kind=what)
        if schema.is_append:  # no -D records there: the files holding the rows are written again
            rewrite = rewrite_where(spark, table, plan, where, f"{what} predicate", next_sequences(plan.splits),
                                    alias, update)
            entries, deleted, updated = rewrite.entries, rewrite.removed_rows, rewrite.matched_rows if update else 0
        else:
            entries = delete_records(spark, table, plan, where, alias=alias)
            deleted, updated = sum(e.file.row_count for e in data_entries(entries)), 0
        if not entries:
            return DeleteResult(table.path, plan.snapshot.id, 0, at.number, time.time() - started, kind=what)
        result = at.commit(entries, APPEND, expected_latest=plan.snapshot.id)
        extra = after_commit(spark, table.path, table.io, after, settings.branch)
        return DeleteResult(table.path, result.snapshot.id, deleted, at.number, time.time() - started, extra,
                            updated, what)

    return commit_loop.run(path, io, f"{what} job", attempt, retries=settings.commit_max_retries,
                           branch=settings.branch)


def delete_records(spark: SparkSession, table: FileStoreTable, plan, where: str | None,
                   narrow: Callable[[DataFrame], DataFrame] | None = None, what: str = "delete predicate",
                   alias: Name | None = None) -> list:
    """The -D records of every live row of a primary-key table matching `where` (and kept by
    `narrow`, a further filter of the rows as a DataFrame), written as files in the rows' own
    (partition, bucket): their ADD entries. `what` names the predicate in errors."""
    schema = table.schema
    parallelism = spark.sparkContext.defaultParallelism
    stage = StageRows(schema)
    rows = jobs.descriptors(spark, tasks.chunk_splits(plan.splits, parallelism * 2)).mapInArrow(
        _rows_task(table.path, stage, table.io), struct_of(stage.live_row()))
    matched = named(rows, alias) if alias else rows
    if where is not None:
        try:
            # analysed over the table's columns alone first: Spark's "did you mean" then names no
            # column of ours (the rows' bucket)
            selected = matched.drop(BUCKET).select(F.expr(where))
            matched = matched.filter(F.expr(where))
        except Exception as e:  # noqa: BLE001 - Spark's analysis error names the problem
            raise SchemaError(f"{what} {where!r} is not valid Spark SQL over the table's columns: "
                              f"{str(e).splitlines()[0]}") from None
        require_deterministic(selected, where, what)
    if narrow is not None:
        matched = narrow(matched)
    doomed = matched.withColumn(KIND, F.lit(DELETE).cast("tinyint")).withColumn(COUNT, F.lit(None).cast("bigint"))
    next_sequence = next_sequences(plan.splits)
    part_cols = [F.col(f"`{p}`") for p in schema.partition_keys] + [F.col(BUCKET)]
    written = doomed.repartition(max(parallelism * 2, 1), *part_cols).mapInArrow(
        tasks.write_task(table.path, schema, table.io, next_sequence, index_files=None, update_index=False,
                         buckets=PartitionBuckets.of_plan(schema, plan)),
        struct_of(PAYLOAD))
    return [e for payload in jobs.collect_payloads(spark, written) for e in payload[0]]
