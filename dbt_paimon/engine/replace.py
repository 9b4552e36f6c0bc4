"""Rows of a primary-key table replaced by an upsert, in its one snapshot: dbt's insert_overwrite and
microbatch on a key table.

The rows a run replaces (those a Spark SQL predicate holds for, such as a microbatch's time range, or
every row of the partitions the batch holds rows of) whose key the batch does not hold get -D records,
written on the job's base snapshot into the rows' own (partition, bucket) and committed with the job's
files: the batch's keys are upserted, every other replaced key is deleted. The -D records and the
job's files never share a key, so their sequence numbers need no order between them.

Only a deduplicate table takes it: on partial-update, aggregation and first-row tables a batch row
merges with the stored one instead of replacing it. A cross-partition table is refused too: its key
index would not learn of the -D records.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from ..store.errors import SchemaError
from ..store.options import BucketMode, MergeEngine
from ..store.schema import TableSchema
from ..store.table import FileStoreTable
from .delete import delete_records


@dataclass(frozen=True)
class Replace:
    """What a run replaces: the rows `where` holds for (Spark SQL over the table's columns), and/or,
    with batch_partitions, the rows of the partitions the batch holds rows of."""
    where: str | None = None
    batch_partitions: bool = False
    what: str = "the replaced range"  # names `where` in errors


def check(schema: TableSchema, path: str) -> None:
    """Refuse a table whose rows cannot be replaced this way, naming why."""
    if schema.core.merge_engine != MergeEngine.DEDUPLICATE:
        raise SchemaError(f"table {path} merges rows ({schema.core.merge_engine}): its rows can be upserted, not "
                          f"replaced (use the merge strategy)")
    if schema.bucket_mode == BucketMode.KEY_DYNAMIC:
        raise SchemaError(f"table {path} is a cross-partition table (its key lacks a partition column): replacing "
                          f"its rows is not supported yet (use the merge strategy)")


def retractions(spark: SparkSession, table: FileStoreTable, plan, replace: Replace, batch: DataFrame) -> list:
    """The ADD entries of the -D records of the replaced rows whose key `batch` does not hold."""
    if plan is None or not plan.splits:
        return []
    schema = table.schema
    keys = list(schema.primary_keys)
    parts = list(schema.partition_keys) if replace.batch_partitions else []

    def narrow(rows: DataFrame) -> DataFrame:
        if parts:  # rows of the batch's partitions (null partition values match each other)
            present = batch.select(*[batch[f"`{p}`"].alias(f"__p{i}") for i, p in enumerate(parts)]).distinct()
            rows = rows.join(present, [rows[f"`{p}`"].eqNullSafe(present[f"__p{i}"]) for i, p in enumerate(parts)],
                             "left_semi")
        held = batch.select(*[batch[f"`{k}`"].alias(f"__k{i}") for i, k in enumerate(keys)]).distinct()
        return rows.join(held, [rows[f"`{k}`"] == held[f"__k{i}"] for i, k in enumerate(keys)], "left_anti")

    return delete_records(spark, table, plan, replace.where, narrow, replace.what)
