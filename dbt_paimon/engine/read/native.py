"""A snapshot of a Paimon table as a Spark plan: its data files read by Spark's own Parquet reader.

Spark's vectorised Parquet reader prunes columns, pushes filters into row groups and runs the
query's aggregates in the JVM: no row crosses to Python. It reads a split (a bucket's files) as it is
where the split needs no merge (Paimon's raw-convertible splits: every file of an append table;
every file a batch read of a table with deletion vectors or the first-row engine plans, level 0
left out; the one file of a bucket without -D/-U rows), less the rows its deletion vectors delete.
A split of a deduplicate table written since its last compaction is read the same way, less every
version of a key its merge would not keep (deletions.py). Every other split (partial-update and
aggregation merges, ORC and Avro files, files in external paths, and whole tables on object stores
or with types Spark reads otherwise than Paimon: nested, timestamps beyond microseconds) is read by
the `paimon` Python source, told to read only those splits of the same snapshot. The parts are one
DataFrame (UNION ALL).

A Paimon data file holds every field of the row, partition fields too, under the names of the
schema it was written with: each file schema is read by its names and types, renamed to the
table's (matched by field id), and a field added since reads as null; a file whose field changed
type is left to the Python source. Rows are left out by position: each row of a file that loses
rows is tested against a bitmap of the rows lost (lost_rows.py).

Where every partition directory's name reads in Spark as the partition's value (strings, integers,
ISO dates: not Paimon's legacy day numbers or its default-partition name), Spark is told the
partition fields come from the `k=v` directories: a query's filter on them then leaves out whole
directories when Spark plans it, instead of opening every file of the snapshot.
"""
from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import threading
from collections import OrderedDict, defaultdict
from typing import Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...store.common import fileio
from ...store.common.branch import MAIN
from ...store.common.errors import PaimonError
from ...store.common.paths import data_file_path, partition_value_string
from ...store.read.read import raw_convertible
from ...store.read.scan import DataSplit, batch_scan_skip_level0
from ...store.schema.schema import SchemaManager, TableSchema
from ...store.table import FileStoreTable
from ..settings import RunSettings
from ..spark_types import spark_schema, to_spark
from . import deletions
from .lost_rows import LostRows, groups_of

# the `paimon` source's option telling it to read only the splits this module leaves to it (MERGED:
# all but the raw splits and those merged by position)
SPLITS_OPTION = "dbt-paimon.splits"
MERGED = "merged"
# ... and the schema it reads them with: the frame's. A snapshot id alone would make the source's read
# a time travel, read with the snapshot's schema (Paimon's rule), where a read of the latest snapshot
# takes the table's: a column dropped since would come back, and the two sides would tell native
# splits apart by different schemas
SCHEMA_OPTION = "dbt-paimon.schema-id"
# Paimon types Spark's Parquet reader reads as Paimon writes them (timestamps up to microseconds:
# Paimon writes nanoseconds as INT96 or nanos, which Spark reads otherwise)
_NATIVE_ROOTS = {"BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "STRING", "BYTES", "DATE",
                 "DECIMAL", "TIMESTAMP", "TIMESTAMP_LTZ"}


def _native_type(t) -> bool:
    return t.root in _NATIVE_ROOTS and not (t.root.startswith("TIMESTAMP") and t.precision > 6)


def _same_type(a, b) -> bool:
    """Whether a file's column reads as the table's as it is (a NOT NULL dropped since is no change)."""
    return dataclasses.replace(a, nullable=True) == dataclasses.replace(b, nullable=True)


def table_is_native(schema: TableSchema, path: str) -> bool:
    """Whether Spark's reader may read files of this table at all (local files, plain types)."""
    return fileio.scheme_of(path) == "" and all(_native_type(f.type) for f in schema.fields)


class Splits:
    """Which splits of a plan Spark reads itself: the same answer here (the driver, planning the
    native scans) and in the `paimon` source (reading the rest)."""

    def __init__(self, table_path: str, io, schema: TableSchema):
        self.schema = schema
        self.schemas = SchemaManager(io, table_path, schema.branch)
        self._file_schemas: dict[int, TableSchema] = {schema.id: schema}
        self.native_table = table_is_native(schema, table_path)
        self.unmerged = schema.is_append or batch_scan_skip_level0(schema)
        self.by_position = deletions.merges_by_position(schema)

    def file_schema(self, schema_id: int) -> TableSchema:
        if schema_id not in self._file_schemas:
            self._file_schemas[schema_id] = self.schemas.schema(schema_id)
        return self._file_schemas[schema_id]

    def _file_native(self, file) -> bool:
        if not file.file_name.endswith(".parquet") or file.external_path:
            return False
        if file.schema_id == self.schema.id:
            return True
        by_id = {f.id: f for f in self.file_schema(file.schema_id).fields}
        return all(f.id not in by_id or _same_type(by_id[f.id].type, f.type) for f in self.schema.fields)

    def raw(self, split: DataSplit) -> bool:
        """Whether the split's files are its rows as they are (less their deletion vectors')."""
        return self.unmerged or raw_convertible(split)

    def native(self, split: DataSplit) -> bool:
        """Whether Spark reads the split: its rows as they are, or less the versions its merge drops
        (deletions.py)."""
        if not self.native_table or not (self.raw(split) or self.by_position):
            return False
        return all(self._file_native(f) for f in split.files)


def frame(spark: SparkSession, path: str, snapshot_id: Optional[int] = None, tag: Optional[str] = None,
          settings: Optional[RunSettings] = None, branch: Optional[str] = None) -> DataFrame:
    """The table (its `branch`, main by default) at its latest snapshot (or `snapshot_id`, or `tag`) as
    a DataFrame; `settings`: how it is read (its storage_options, the object store's settings, else
    those fileio.configure() set).

    A snapshot never changes, so its DataFrame is made once per session and schema and handed out
    again (a DataFrame answers every query as when it was made): a dbt run reads the same snapshot
    in many queries, and planning a read costs Spark ~0.1 s per Parquet scan, and finding the rows
    a merge leaves out seconds at 10M rows. Readers that ask for a snapshot being planned wait for
    that plan rather than make their own: dbt's threads start a model's tests and downstream
    models together, each the first reader of the snapshot the model just wrote."""
    source_options = ({str(k): str(v) for k, v in settings.storage_options.items()}
                      if settings is not None and settings.storage_options else None)
    branch = branch or (settings.branch if settings is not None else None)
    table = FileStoreTable.open(path, fileio.FileIO.get(path, source_options), branch)
    if tag is not None:
        if snapshot_id is not None:
            raise PaimonError("read as of a snapshot id or a tag, not both")
        snapshot = table.tags.get_or_throw(tag).snapshot
    else:
        snapshot = table.snapshots.travelled(snapshot_id) if snapshot_id is not None else table.snapshots.latest()
    schema = table.read_schema(snapshot, snapshot_id is not None or tag is not None)
    key = (table.path, table.branch, _identity(snapshot), tag, schema.id, schema.time_millis,
           tuple(sorted((source_options or {}).items())))
    if snapshot is None:  # an empty table: nothing to keep
        return _plan(spark, table, schema, snapshot, tag, source_options)
    frames, planning = _frames(spark)
    mine = None
    try:
        while True:
            with _lock:
                if key in frames:
                    frames.move_to_end(key)
                    return frames[key]
                underway = planning.get(key)
                if underway is None:
                    mine = planning[key] = threading.Event()
                    break
            # another thread plans this snapshot: its DataFrame, once made (if that plan failed,
            # this thread plans it and meets the error itself)
            underway.wait()
        out = _plan(spark, table, schema, snapshot, tag, source_options)
        with _lock:
            frames[key] = out
            while len(frames) > _FRAMES_KEPT:
                frames.popitem(last=False)
        return out
    finally:
        if mine is not None:
            with _lock:
                if planning.get(key) is mine:
                    del planning[key]
            mine.set()


_FRAMES_KEPT = 64


def _identity(snapshot) -> Optional[tuple]:
    """A snapshot, told apart from one that reuses its id (a rollback; a table made anew at the path),
    as Snapshot.same_as tells them apart."""
    if snapshot is None:
        return None
    return snapshot.id, snapshot.time_millis, snapshot.commit_user, snapshot.base_manifest_list


def _frames(spark: SparkSession) -> "tuple[OrderedDict[tuple, DataFrame], dict[tuple, threading.Event]]":
    """This session's DataFrames of snapshots read, and the plans under way (kept on the session
    object: they belong to it)."""
    with _lock:
        found = getattr(spark, "_dbt_paimon_frames", None)
        if found is None:
            found = (OrderedDict(), {})
            spark._dbt_paimon_frames = found
        return found


def _plan(spark: SparkSession, table: FileStoreTable, schema: TableSchema, snapshot, tag: Optional[str],
          source_options: Optional[dict]) -> DataFrame:
    plan = table.new_scan(True).plan_snapshot(snapshot)
    columns = spark_schema(schema)
    splits = Splits(table.path, table.io, schema)
    native = [s for s in plan.splits if splits.native(s)]
    parts = []
    if native:
        base = table.path if partitions_read_by_spark(table.path, schema, native) else None
        parts = _native_parts(spark, schema, splits, native, _deleted(table, schema, splits, native), base)
    if len(native) < len(plan.splits) or not parts:
        reader = spark.read.format("paimon").options(**(source_options or {}))
        if table.branch != MAIN:
            reader = reader.option("branch", table.branch)
        if plan.snapshot is not None:
            reader = reader.option("snapshot-id", plan.snapshot.id) if tag is None else reader.option("tag", tag)
            reader = reader.option(SCHEMA_OPTION, schema.id)
        if parts:
            reader = reader.option(SPLITS_OPTION, MERGED)
        parts.append(reader.load(table.path))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out.select(*[F.col(f"`{f.name}`") for f in columns.fields])


_lock = threading.Lock()


def _deleted(table: FileStoreTable, schema: TableSchema, splits: "Splits", native: list[DataSplit]) -> list[LostRows]:
    """The files of `native` that lose rows, with the positions they lose (once per snapshot and
    session: frame() keeps the DataFrame made of them)."""
    gone = deletions.of_splits(table.io, table.path, schema, native, lambda split: not splits.raw(split))
    rows, sizes = {}, {}
    for split in native:
        for f in split.files:
            if f.file_name in gone:
                rows[f.file_name] = f.row_count
                sizes[f.file_name] = os.path.getsize(fileio.local_path(data_file_path(split.bucket_path, f)))
    return [LostRows({name: rows[name] for name in group}, gone, sizes) for group in groups_of(rows)]


# the partition types whose directory text Spark reads back as the value itself (checked per value)
_SPARK_PARTITION_ROOTS = {"STRING", "TINYINT", "SMALLINT", "INT", "BIGINT", "DATE"}
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _unescaped(text: str) -> str:
    """A directory name as Spark reads it (ExternalCatalogUtils.unescapePathName: each %XX one char)."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)


def _spark_text(value, t) -> Optional[str]:
    """The directory text Spark reads as `value` of Paimon type `t` (None: no such text here)."""
    if value is None:
        return None
    if t.root == "DATE":
        return value.isoformat() if isinstance(value, dt.date) else None
    return partition_value_string(value, t)


def partitions_read_by_spark(table_path: str, schema: TableSchema, splits: list[DataSplit]) -> bool:
    """Whether Spark's partition discovery, given the table's directory as its base, reads every
    split's partition values from its directories exactly as Paimon holds them: the field names in
    order, each value's text its own (a null, a legacy DATE's day number or a type Spark spells
    otherwise would read differently: those tables keep the values the files hold)."""
    keys = schema.partition_keys
    if not keys:
        return False
    types = [schema.field(k).type for k in keys]
    if any(t.root not in _SPARK_PARTITION_ROOTS for t in types):
        return False
    prefix = table_path.rstrip("/") + "/"
    for split in splits:
        if not split.bucket_path.startswith(prefix):
            return False
        dirs = split.bucket_path[len(prefix):].split("/")[:-1]
        if len(dirs) != len(keys):
            return False
        for text, key, value, t in zip(dirs, keys, split.partition_values, types):
            name, eq, raw = text.partition("=")
            if not eq or _unescaped(name) != key or _unescaped(raw) != _spark_text(value, t):
                return False
    return True


def _native_parts(spark: SparkSession, schema: TableSchema, splits: "Splits", native: list[DataSplit],
                  deleted: list[LostRows], base: Optional[str]) -> list[DataFrame]:
    """One Parquet scan per file schema of the files read whole, and per file schema and group of
    those that lose rows, each row tested against the group's lost rows; `base`: the table's
    directory, where Spark reads the partition fields from the directories below it."""
    group_of = {name: i for i, lost in enumerate(deleted) for name in lost.names}
    whole: dict[int, list[str]] = defaultdict(list)
    partial: dict[tuple[int, int], list[str]] = defaultdict(list)
    for split in native:
        for f in split.files:
            where = fileio.local_path(data_file_path(split.bucket_path, f))
            if f.file_name in group_of:
                partial[(group_of[f.file_name], f.schema_id)].append(where)
            else:
                whole[f.schema_id].append(where)
    parts = [_renamed(schema, splits.file_schema(sid), _read(spark, splits.file_schema(sid), schema, paths, base))
             for sid, paths in sorted(whole.items())]
    bits = {}
    for (group, sid), paths in sorted(partial.items()):
        lost = deleted[group]
        if group not in bits:
            bits[group] = lost.relation(spark).scalar()
        file_schema = splits.file_schema(sid)
        rows = _read(spark, file_schema, schema, paths, base).where(lost.kept(bits[group]))
        parts.append(_renamed(schema, file_schema, rows))
    return parts


# Spark lists every path a read is given; beyond this many paths it lists them in a Spark job of a
# task per path: ~2 s in a fresh session for a table of 100 partitions, what the first read of each
# new snapshot cost (a dbt test right after its model's run). Our paths are files on the local disk
# that the manifests name (Spark's own listing of them in the driver takes milliseconds), so our
# reads are planned with the threshold out of reach, under a lock that keeps the session's value.
_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
_listing = threading.Lock()


def _read(spark: SparkSession, file_schema: TableSchema, schema: TableSchema, paths: list[str],
          base: Optional[str]) -> DataFrame:
    """The files' columns of the table's fields, by the names and types they were written with;
    the partition fields from the `k=v` directories below `base`, or (no `base`) from the files
    themselves, recursiveFileLookup turning Spark's partition discovery off."""
    ids = {f.id for f in schema.fields}
    present = [f.name for f in file_schema.fields if f.id in ids]
    reader = spark.read.schema(spark_schema(file_schema, present))
    if base is None:
        reader = reader.option("recursiveFileLookup", "true")
    else:
        reader = reader.option("basePath", fileio.local_path(base))
    with _listing:
        before = spark.conf.get(_LISTING_THRESHOLD)
        spark.conf.set(_LISTING_THRESHOLD, str(1 << 30))
        try:
            return reader.parquet(*paths)   # Spark lists the files here, when the read is planned
        finally:
            spark.conf.set(_LISTING_THRESHOLD, before)


def _renamed(schema: TableSchema, file_schema: TableSchema, df: DataFrame) -> DataFrame:
    """The table's fields (matched by id) under their names now; one added since reads as null."""
    by_id = {f.id: f for f in file_schema.fields}
    out = []
    for f in schema.fields:
        old = by_id.get(f.id)
        out.append((F.col(f"`{old.name}`") if old is not None
                    else F.lit(None).cast(to_spark(f.type, loose=True))).alias(f.name))
    return df.select(*out)
