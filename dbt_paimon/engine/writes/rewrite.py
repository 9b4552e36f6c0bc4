"""Copy-on-write on an append table: the files holding rows a Spark SQL predicate matches are written
again without those rows (or with those rows updated), as Paimon's Spark connector deletes from and
updates an append table that has no deletion vectors. A microbatch run (engine/writes/append.py) replaces
its time range this way; the `delete` operation (engine/writes/delete.py) removes rows this way, and Spark
SQL's UPDATE (sql/dml.py) updates them.

    the table's files ─► their rows, each with its file's name (one Spark task per group of splits)
      ─► Spark: the files where the predicate holds for some row
      ─► those files' rows where it does not (null counts as not) ─► written again (engine/writes/append.py)
      ─► DELETE entries of those files + ADD entries of their rewrite, for one commit

A file without a matching row is left as it is. The predicate is Spark SQL over the table's columns,
evaluated by Spark, so it means what the same predicate means in a model.
"""

from __future__ import annotations

import pickle
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ...assign.rows import PAYLOAD, exchange_type
from ...store.common.errors import SchemaError
from ...store.common.fileio import FileIO
from ...store.manifest.manifest import DELETE, ManifestEntry
from ...store.read.read import TableRead
from ...store.read.scan import DataSplit, Plan
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from ..runtime import jobs, tasks
from . import store_assignment
from .append_files import append_task
from ..qualified import Name, named
from ..spark_types import struct_of, to_spark

FILE = "__paimon_file"  # the name of the data file a row was read from
_HIT, _SET = "__paimon_hit", "__paimon_set"  # an updated file's row: whether the predicate holds; a value set


@dataclass
class Rewrite:
    """What a copy-on-write changes: the files it replaces and the files replacing them."""
    deletes: list[ManifestEntry] = field(default_factory=list)
    adds: list[ManifestEntry] = field(default_factory=list)
    removed_rows: int = 0
    matched_rows: int = 0  # rows the predicate held for (an update's updated rows)

    @property
    def entries(self) -> list[ManifestEntry]:
        return self.deletes + self.adds


def row_layout(schema: TableSchema) -> pa.Schema:
    """The rows of the table's files as Spark takes them, with their file's name."""
    return pa.schema([pa.field(f.name, exchange_type(f.type)) for f in schema.fields] + [pa.field(FILE, pa.string())])


def _file_rows_task(path: str, schema: TableSchema, io: FileIO):
    layout = row_layout(schema)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        reader = TableRead(io, path, schema)
        for batch in batches:
            for blob in batch.column(0).to_pylist():
                for split in pickle.loads(blob):
                    for f in split.files:  # per file, not per row
                        rows = reader.read_files(split, [f])
                        if rows.num_rows:
                            arrays = [rows.column(n).cast(layout.field(n).type) for n in schema.field_names]
                            arrays.append(pa.array([f.file_name] * rows.num_rows, pa.string()))
                            yield from pa.Table.from_arrays(arrays, schema=layout).to_batches(max_chunksize=1 << 17)
    return run


def file_rows(spark: SparkSession, table: FileStoreTable, splits: list[DataSplit]) -> DataFrame:
    """Every row of the splits' files, with its file's name (FILE)."""
    parallelism = spark.sparkContext.defaultParallelism
    return jobs.descriptors(spark, tasks.chunk_splits(splits, parallelism * 2)).mapInArrow(
        _file_rows_task(table.path, table.schema, table.io), struct_of(row_layout(table.schema)))


def matched(rows: DataFrame, predicate: str, what: str):
    """The predicate as a Spark column over the rows; a clear error naming it when Spark cannot read it."""
    try:
        condition = F.expr(predicate)
        selected = rows.select(condition)  # analysed here: a bad predicate fails before any job runs
    except Exception as e:  # noqa: BLE001 - Spark's analysis error names the problem
        raise SchemaError(f"{what} {predicate!r} is not valid Spark SQL over the table's columns: "
                          f"{str(e).splitlines()[0]}") from None
    require_deterministic(selected, predicate, what)
    return condition


def require_deterministic(selected: DataFrame, text: str, what: str) -> None:
    """Refuse an expression (the one column of `selected`, analysed) whose value may differ between
    evaluations (rand(), uuid()), as Spark refuses it in its own DELETE, UPDATE and MERGE: a write
    evaluates its condition more than once (to find the files, then to rewrite them; a retried task
    again), so the rows changed would not be one set."""
    if not selected._jdf.queryExecution().analyzed().expressions().apply(0).deterministic():
        raise SchemaError(f"{what} {text!r} is not deterministic (it may give another value each time it is "
                          f"evaluated); Spark's own statements refuse it too")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def resolved(rows: DataFrame, text: str, what: str) -> Column:
    """The Spark SQL expression `text` as a Column, checked to resolve over `rows`; else SchemaError,
    `what` (e.g. "UPDATE t: SET v =") and the text first."""
    try:
        column = F.expr(text)
        selected = rows.select(column)
    except Exception as e:  # noqa: BLE001 - Spark's analysis error names the problem
        raise SchemaError(f"{what} {text!r} is not valid Spark SQL over the table's columns: "
                          f"{str(e).splitlines()[0]}") from None
    require_deterministic(selected, text, what)
    return column


def rewrite_where(spark: SparkSession, table: FileStoreTable, plan: Plan, predicate: str, what: str,
                  next_sequence: dict, alias: Name | None = None, update: dict | None = None) -> Rewrite:
    """The Rewrite that removes the rows of plan's files where `predicate` holds (with `update`,
    {column: Spark SQL expression}: sets those columns of those rows instead). `what` names the
    predicate in errors (e.g. "delete predicate"); next_sequence: each bucket's next number;
    alias: the name the predicate and expressions may qualify the table's columns with (`t.id`; the
    parts of a qualified name: qualified.py)."""
    if not plan.splits:
        return Rewrite()
    rows = file_rows(spark, table, plan.splits)
    rows = named(rows, alias) if alias else rows
    condition = matched(rows, predicate, what)
    with jobs.spark_conf(spark, jobs.JOB_SETTINGS):
        try:
            hits = {r[0]: r[1] for r in rows.filter(condition).groupBy(FILE).count().collect()}
        except Exception as e:  # noqa: BLE001 - translated when it is one of ours
            jobs.reraise_task_error(e)
            raise
    if not hits:
        return Rewrite()
    affected = [DataSplit(s.snapshot_id, s.partition, s.partition_values, s.bucket, s.total_buckets, s.bucket_path,
                          [f for f in s.files if f.file_name in hits]) for s in plan.splits]
    affected = [s for s in affected if s.files]
    kept = file_rows(spark, table, affected)
    kept = named(kept, alias) if alias else kept
    if update:  # every row of those files, the matching ones with their columns set
        # the statement's values first, in the session's mode; then their casts (store_assignment.py)
        fields = table.schema.fields
        staged = kept.select(*[F.col(_quoted(f.name)) for f in fields], F.coalesce(condition, F.lit(False)).alias(_HIT),
                             *[resolved(kept, update[f.name], f"{what}:").alias(f"{_SET}{i}")
                               for i, f in enumerate(fields) if f.name in update])
        with store_assignment.casting(spark, store_assignment.policy(spark)):
            kept = staged.select(*[(F.when(F.col(_HIT), F.col(f"{_SET}{i}").cast(to_spark(f.type)))
                                    .otherwise(F.col(_quoted(f.name))) if f.name in update
                                    else F.col(_quoted(f.name))).alias(f.name) for i, f in enumerate(fields)])
    else:
        kept = kept.filter(~F.coalesce(condition, F.lit(False))).drop(FILE)
    payloads = jobs.collect_payloads(spark, kept.mapInArrow(
        append_task(table.path, table.schema, table.io, next_sequence), struct_of(PAYLOAD)))
    adds = [e for p in payloads for e in p]
    deletes = [ManifestEntry(DELETE, s.partition, s.bucket, s.total_buckets, f) for s in affected for f in s.files]
    removed = 0 if update else sum(e.file.row_count for e in deletes) - sum(e.file.row_count for e in adds)
    return Rewrite(deletes, adds, removed, sum(hits.values()))
