"""changes(): what a table's rows became between two snapshots, one record per key: the input of a
model that consumes its upstream's changes (the adapter's `paimon_changes`).

Paimon's incremental read (`incremental-between`, its audit log: store/read/incremental.py) gives
every record the range's commits wrote: a key written in three commits is there three times, an
update from a changelog as -U then +U, a key that moved partitions as -D where it was and +I where
it went. A downstream model wants each changed key once, as it is now, or its deletion. So the
records are folded (the rules: store/read/fold.py), at a cost in proportion to the changes, never
the table: where one task reads all of them (up to a million records), that task folds them with
pyarrow; else Spark does, by the same rules, after one shuffle by key.

Folding is right only where the records are the rows' images: a `deduplicate` table without
`sequence.field` (its delta records are its rows), or any table whose changelog `lookup` or
`full-compaction` produces (full before and after images). Elsewhere (partial-update,
aggregation, first-row, a sequence field deciding which record wins), and across an OVERWRITE
commit (rows replaced with no record each), the two snapshots are compared instead (Paimon's
`diff` mode, store/read/diff.py): each key whose row differs, as at the end, or -D; its cost
follows the buckets the range changed. An append table's changes are its new rows.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ...store.common.errors import PaimonError
from ...store.common.fileio import FileIO
from ...store.common.options import MergeEngine
from ...store.read import between, incremental
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from ..settings import RunSettings
from .native import frame
from .source import CHANGE_ORDER, FOLDED, tasks_for

ROW_KIND = incremental.ROW_KIND
_SNAPSHOT, _BUCKET, _SEQUENCE = incremental.ORDER_SCHEMA.names
_IMAGES = ("lookup", "full-compaction")


def foldable(schema: TableSchema) -> bool:
    """Whether the table's records are its rows' images (see above)."""
    core = schema.core
    if core.changelog_producer in _IMAGES:
        return True
    return str(core.merge_engine) == MergeEngine.DEDUPLICATE.value and not core.sequence_fields


def changes(spark: SparkSession, path: str, start: Optional[int], end: int,
            settings: Optional[RunSettings] = None) -> DataFrame:
    """The table's changes after snapshot `start` up to `end`, one record per key (see above), its
    row kind in a first column `rowkind`; start None: every row of snapshot `end`, as +I."""
    storage = ({str(k): str(v) for k, v in settings.storage_options.items()}
               if settings is not None and settings.storage_options else {})
    if start is None:
        rows = frame(spark, path, snapshot_id=end, settings=settings)
        return rows.select(F.lit("+I").alias(ROW_KIND), *[F.col(f"`{c}`") for c in rows.columns])
    table = FileStoreTable.open(path, FileIO.get(path, storage or None))
    schema = table.schema
    ranged = list(incremental.snapshots_between(table.snapshots, start, end))
    overwritten = [s.id for s in ranged if s.commit_kind == "OVERWRITE"]
    if schema.is_append:
        if overwritten:  # rows replaced with no record each, and no key to compare them by
            raise PaimonError(f"snapshot {overwritten[0]} of {path} overwrote rows of an append table (an OVERWRITE "
                              f"commit records no change per row): read the table anew instead of its changes "
                              f"since snapshot {start}")
        return _read(spark, path, storage, start, end).select(F.col(ROW_KIND), *_values(schema))
    if start == 0:  # before the first snapshot: every row of the end is new
        return changes(spark, path, None, end, settings)
    keys = [F.col(f"`{k}`") for k in schema.primary_keys]
    if overwritten or not foldable(schema):
        differing = _read(spark, path, storage, start, end, {"incremental-between-scan-mode": "diff",
                                                              between.WHOLE_DIFF: "true"})
        # a key that moved partitions differs in both: gone where it was, there where it went
        first = Window.partitionBy(*keys).orderBy((F.col(ROW_KIND) != "-D").desc())
        return (differing.withColumn("__n", F.row_number().over(first)).where("__n = 1")
                .select(F.col(ROW_KIND), *_values(schema)))
    # The records' count from the snapshots' own counts (no manifest read again here: the source
    # plans the read): a changelog's where the table produces one, else the commits' delta
    changelog = schema.core.changelog_producer != "none"
    count = sum((s.changelog_record_count or 0) if changelog else s.delta_record_count for s in ranged)
    tasks = tasks_for(count)
    if tasks == 1:  # one task reads them all: it folds them too (store/read/fold.py), no shuffle
        return _read(spark, path, storage, start, end, {FOLDED: "true"})
    records = _read(spark, path, storage, start, end, {CHANGE_ORDER: "true"})  # -D dropped if ignore-delete
    # Else the same fold in Spark: one shuffle by key serves both windows below (each is clustered
    # by the key and more), into as many tasks as read the records: a million records a task, not
    # spark.sql.shuffle.partitions (200 by default: 1.8 s to fold 125K records that way)
    records = records.repartition(tasks, *keys)
    where = keys + [F.col(f"`{p}`") for p in schema.partition_keys if p not in schema.primary_keys]
    last = Window.partitionBy(*where, F.col(_BUCKET)).orderBy(
        F.col(_SNAPSHOT).desc(), F.col(_SEQUENCE).desc(), (F.col(ROW_KIND) != "-U").desc())
    in_bucket = records.withColumn("__n", F.row_number().over(last)).where("__n = 1")
    latest = Window.partitionBy(*keys).orderBy(F.col(_SNAPSHOT).desc(), (F.col(ROW_KIND) != "-D").desc())
    folded = in_bucket.withColumn("__n", F.row_number().over(latest)).where("__n = 1")
    return folded.where(F.col(ROW_KIND) != "-U").select(F.col(ROW_KIND), *_values(schema))


def _read(spark: SparkSession, path: str, storage: dict, start: int, end: int,
          options: Optional[dict] = None) -> DataFrame:
    return (spark.read.format("paimon").options(**storage).options(**(options or {}))
            .option("incremental-between", f"{start},{end}").load(f"{path}$audit_log"))


def _values(schema: TableSchema) -> list:
    return [F.col(f"`{f.name}`") for f in schema.fields]
