"""Rows of a primary-key table replaced by an upsert, in its one snapshot: dbt's insert_overwrite and
microbatch on a key table.

The rows a run replaces (those a Spark SQL predicate holds for, such as a microbatch's time range, or
every row of the partitions the batch holds rows of) whose key the batch does not hold get -D records,
written on the job's base snapshot into the rows' own (partition, bucket) and committed with the job's
files: the batch's keys are upserted, every other replaced key is deleted. The -D records and the
job's files never share a key, so their sequence numbers need no order between them.

On a cross-partition table a batch key stored outside the replaced rows moves as in any upsert
(ExistingProcessor: -D where it was); the key index records the job's own placements, and the
buckets holding -D records of the run are read again by its next catch-up (key_index/catch_up.py:
files with deletes added), so the index never keeps a retracted key.

A table that merges rows (partial-update, aggregation, first-row) cannot take it: a -D record there
merges too (or is refused), and a batch row would merge with the stored one instead of replacing it;
nor can one ordering versions by `sequence.field`, where a batch row older than the stored version
would lose to it. Their partitions (or the whole table) are replaced as Paimon's INSERT OVERWRITE does instead
(`by_overwrite`): the job writes the batch as into a new table (its rows merged among themselves),
and an OVERWRITE commit drops every file of the partitions the batch wrote (all: the whole table)
for it, the HASH index of a dynamic-bucket table with them. A time range (microbatch) has no such
form; nor does a cross-partition table, whose keys may live outside the replaced rows.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from ...store.common.errors import SchemaError
from ...store.common.options import BucketMode, MergeEngine
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from .delete import delete_records


@dataclass(frozen=True)
class Replace:
    """What a run replaces: the rows `where` holds for (Spark SQL over the table's columns), and/or,
    with batch_partitions, the rows of the partitions the batch holds rows of, and/or the rows of
    the primary keys `keys` holds (a DataFrame of the key columns: MERGE INTO's deleted rows)."""
    where: str | None = None
    batch_partitions: bool = False
    what: str = "the replaced range"  # names `where` in errors
    keys: DataFrame | None = None


def _whole(replace: Replace) -> bool:
    """The run replaces whole partitions (or the whole table), and nothing else."""
    return replace.keys is None and (replace.batch_partitions or (replace.where or "").strip().lower() == "true")


def by_overwrite(schema: TableSchema, replace: Replace) -> bool:
    """Whether the run replaces its rows by an OVERWRITE commit, not by -D records: on a table that
    merges rows, and on one ordering versions by sequence.field when whole partitions are replaced
    (Paimon's INSERT OVERWRITE: the run's rows win whatever their sequence; -D records and the run's
    rows would leave a stored row newer by sequence in place). check() has refused what neither can do."""
    if schema.core.merge_engine != MergeEngine.DEDUPLICATE:
        return True
    return bool(schema.core.sequence_fields) and _whole(replace)


def check(schema: TableSchema, replace: Replace, path: str) -> None:
    """Refuse a replace the table cannot take, naming why."""
    if schema.core.merge_engine == MergeEngine.DEDUPLICATE:
        if schema.core.sequence_fields and replace.keys is None and not _whole(replace):
            raise SchemaError(f"table {path} orders a key's versions by sequence.field "
                              f"{','.join(schema.core.sequence_fields)!r}: {replace.what} can only be replaced a "
                              f"whole partition at a time (a row of the run older than the stored one would lose), "
                              f"or its rows upserted (the merge strategy)")
        return
    why = f"table {path} merges rows ({schema.core.merge_engine})"
    if not _whole(replace):
        raise SchemaError(f"{why}: {replace.what} can only be replaced a whole partition at a time (insert_overwrite "
                          f"with partition_by), or its rows upserted (the merge strategy)")
    if schema.bucket_mode == BucketMode.KEY_DYNAMIC:
        raise SchemaError(f"{why} and its key lacks a partition column: a key of the batch may live outside the "
                          f"rows it replaces, so they cannot be overwritten (use the merge strategy)")


def overwrite(at, job, replace: Replace):
    """The job's files (written as into a new table) committed by the attempt (commit_loop.Attempt)
    as an OVERWRITE of the partitions they are in (whole table without batch_partitions):
    CommitResult, or None when a batch without rows replaces no partition. On an error the job's
    files are the loop's to delete (the attempt kept them)."""
    partitions = {e.partition for e in job.entries} if replace.batch_partitions else None
    if partitions is not None and not partitions:
        return None
    return at.overwrite(job.entries, partitions, abort=lambda: None, index_files=job.index_changes)


def retractions(spark: SparkSession, table: FileStoreTable, plan, replace: Replace, batch: DataFrame) -> list:
    """The ADD entries of the -D records of the replaced rows whose key `batch` does not hold."""
    if plan is None or not plan.splits:
        return []
    schema = table.schema
    keys = list(schema.primary_keys)
    parts = list(schema.partition_keys) if replace.batch_partitions else []

    def narrow(rows: DataFrame) -> DataFrame:
        if replace.keys is not None:  # rows of the given keys
            given = replace.keys.select(*[replace.keys[f"`{k}`"].alias(f"__g{i}") for i, k in enumerate(keys)])
            rows = rows.join(given, [rows[f"`{k}`"].eqNullSafe(given[f"__g{i}"]) for i, k in enumerate(keys)],
                             "left_semi")
        if parts:  # rows of the batch's partitions (null partition values match each other)
            present = batch.select(*[batch[f"`{p}`"].alias(f"__p{i}") for i, p in enumerate(parts)]).distinct()
            rows = rows.join(present, [rows[f"`{p}`"].eqNullSafe(present[f"__p{i}"]) for i, p in enumerate(parts)],
                             "left_semi")
        held = batch.select(*[batch[f"`{k}`"].alias(f"__k{i}") for i, k in enumerate(keys)]).distinct()
        return rows.join(held, [rows[f"`{k}`"] == held[f"__k{i}"] for i, k in enumerate(keys)], "left_anti")

    return delete_records(spark, table, plan, replace.where, narrow, replace.what)
