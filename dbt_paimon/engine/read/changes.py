"""changes(): what a table's rows became between two snapshots, one record per key: the input of a
model that consumes its upstream's changes (the adapter's `paimon_changes`).

Paimon's incremental read (`incremental-between`, its audit log: store/read/incremental.py) gives
every record the range's commits wrote: a key written in three commits is there three times, an
update from a changelog as -U then +U, a key that moved partitions as -D where it was and +I where
it went. A downstream model wants each changed key once, as it is now, or its deletion. So the
records are folded, in Spark (cost in proportion to the changes, never the table):

1. within one bucket, a key's records are ordered by the snapshot that wrote them, then their
   sequence number (a bucket's sequence numbers only grow), a retraction (-U) before what follows
   it: the last one is the key's state in that bucket;
2. across buckets (a cross-partition table's key moves): the latest snapshot wins, and within one
   snapshot the bucket the key went to (its +I/+U) over the one it left (its -D).
A key whose last record is -D comes out as -D (its last values), others as their last +I/+U; -U
records never come out.

Folding is right only where the records are the rows' images: a `deduplicate` table without
`sequence.field` (its delta records are its rows), or any table whose changelog `lookup` or
`full-compaction` produces (full images, before and after). Elsewhere (partial-update,
aggregation, first-row, a sequence field deciding which record wins) the records are not what the
table reads, and changes() says which producer to set. An append table's changes are its new rows.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from ...store.common.errors import PaimonError
from ...store.common.fileio import FileIO
from ...store.common.options import MergeEngine
from ...store.read import incremental
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from ..settings import RunSettings
from .native import frame
from .source import CHANGE_ORDER

ROW_KIND = incremental.ROW_KIND
_SNAPSHOT, _BUCKET, _SEQUENCE = incremental.ORDER_SCHEMA.names
_IMAGES = ("lookup", "full-compaction")


def check_foldable(schema: TableSchema, name: str) -> None:
    """Refuse, naming what to set, a table whose records are not its rows' images (see above)."""
    core = schema.core
    if schema.is_append or core.changelog_producer in _IMAGES:
        return
    engine = str(core.merge_engine)
    why = (f"its merge-engine is {engine!r}" if engine != MergeEngine.DEDUPLICATE.value
           else f"its sequence.field {','.join(core.sequence_fields)!r} decides which record wins"
           if core.sequence_fields else None)
    if why:
        # lookup's changelog of partial-update and aggregation tables is not written here (option_validation)
        producer = ("'full-compaction'" if engine in (MergeEngine.PARTIAL_UPDATE.value, MergeEngine.AGGREGATION.value)
                    else "'lookup' (or 'full-compaction')")
        raise PaimonError(f"the changes of {name} cannot be read from what its commits wrote: {why}, so a "
                          f"record is not the row readers see; give it the option changelog-producer {producer}, "
                          f"whose changelog holds the rows as they became")


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
    check_foldable(schema, path)
    for snapshot in incremental.snapshots_between(table.snapshots, start, end):
        if snapshot.commit_kind == "OVERWRITE":  # rows replaced without a record of each: no change to read
            raise PaimonError(f"snapshot {snapshot.id} of {path} overwrote rows (an OVERWRITE commit records no "
                              f"change per row): read the table anew instead of its changes since snapshot {start}")
    records = (spark.read.format("paimon").options(**storage)
               .option("incremental-between", f"{start},{end}").option(CHANGE_ORDER, "true")
               .load(f"{path}$audit_log"))
    columns = [c for c in records.columns if c not in (ROW_KIND, _SNAPSHOT, _BUCKET, _SEQUENCE)]
    out = [F.col(ROW_KIND)] + [F.col(f"`{c}`") for c in columns]
    if schema.is_append:
        return records.select(*out)
    if schema.core.ignore_delete:  # the table never deletes: its -D records change nothing
        records = records.where(F.col(ROW_KIND) != "-D")
    keys = [F.col(f"`{k}`") for k in schema.primary_keys]
    where = keys + [F.col(f"`{p}`") for p in schema.partition_keys if p not in schema.primary_keys]
    last = Window.partitionBy(*where, F.col(_BUCKET)).orderBy(
        F.col(_SNAPSHOT).desc(), F.col(_SEQUENCE).desc(), (F.col(ROW_KIND) != "-U").desc())
    in_bucket = records.withColumn("__n", F.row_number().over(last)).where("__n = 1")
    latest = Window.partitionBy(*keys).orderBy(F.col(_SNAPSHOT).desc(), (F.col(ROW_KIND) != "-D").desc())
    folded = in_bucket.withColumn("__n", F.row_number().over(latest)).where("__n = 1")
    return folded.where(F.col(ROW_KIND) != "-U").select(*out)
