"""The `paimon` Spark data source: merge-on-read of a Paimon table as a DataFrame.

    spark.read.format("paimon").load(path)                             # latest snapshot
    spark.read.format("paimon").option("snapshot-id", 3).load(path)   # time travel
    spark.read.format("paimon").option("tag", "v1").load(path)         # ... to a tag
    spark.read.format("paimon").option("scan.timestamp-millis", ms).load(path)  # ... to a time (travel.py)
    spark.read.format("paimon").load(path + "$files")                  # a system table
    spark.read.format("paimon").load(path + "$audit_log")              # rows with their row kinds
    spark.read.format("paimon").load(path + "$ro")                     # the top level only: no merge
    spark.read.format("paimon").load(path + "$binlog")                 # the audit log, values in arrays
    spark.read.format("paimon").option("branch", "b").load(path)       # a branch (or path + "$branch_b")
    spark.read.format("paimon").load(path + "$branch_b$snapshots")     # a branch's system table
    spark.read.format("paimon").option("incremental-between", "3,7").load(path)  # what 4..7 wrote
    spark.read.format("paimon").option("incremental-between", "v1,v2").load(path)  # tags: their diff

The driver plans the snapshot (manifests only); each input partition carries a few splits, one
split being one (partition, bucket), which an executor reads and merges with the table's merge
engine (vectorised, store.read.TableRead) and hands to Spark as Arrow batches. An incremental read
(Paimon's options `incremental-between`, `-timestamp`, `-scan-mode`, `-tag-to-snapshot`:
store/read/between.py) hands Spark the inserted and updated records (+I, +U), as Paimon's batch
reads do; the audit log (`path$audit_log`) every record with its row kind.
"""

from __future__ import annotations

import difflib
import pickle
import re
from typing import Iterator, Mapping

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from pyspark.sql.types import ArrayType, StringType, StructField, StructType

from ...store.common.errors import PaimonError
from ...store.common import fileio
from ...store.common.fileio import FileIO, is_storage_option
from ...store.read import audit_log, between, fold, incremental, read_optimized, travel
from ...store.read.read_optimized import READ_OPTIMIZED
from ...store.read.read import TableRead
from ...store import system_tables
from ...store.schema.schema import SchemaManager, TableSchema
from ...store.table import FileStoreTable
from .native import MERGED, SCHEMA_OPTION, SPLITS_OPTION, Splits
from ..spark_types import for_spark, spark_schema
from pyspark.sql.pandas.types import from_arrow_schema

SOURCE_NAME = "paimon"
# An incremental read of the audit log with each record's snapshot, bucket and sequence number after
# its row kind (a table with ignore-delete: without its -D records, which change nothing): ours, for
# folding changes per key (changes.py), not one of Paimon's options
CHANGE_ORDER = "dbt-paimon.change-order"
# ... or its records folded to one per key (store/read/fold.py) in one task: no shuffle, where a
# task's share of records is all of them (changes.py chooses)
FOLDED = "dbt-paimon.folded"
_ROWS_PER_PARTITION = 1_000_000
# The read options the source takes (Paimon's names): an option one character or a separator away
# from one of them is a misspelling (`snapshot_id`), refused, where it would otherwise be ignored and
# the read give the latest snapshot; other options pass as Spark's readers let them pass
READ_OPTIONS = travel.OPTIONS + ("branch", between.BETWEEN, between.BETWEEN_TIMESTAMP, between.SCAN_MODE,
                                  between.TAG_TO_SNAPSHOT)


# Paimon's scan options that choose other rows than the latest snapshot's, which this source does
# not honour: refused, where ignoring them would give the latest rows as if they were those
_UNHONOURED = ("scan.watermark", "scan.file-creation-time-millis", "scan.creation-time-millis")


def check_options(options) -> None:
    """Refuse a misspelt read option, naming the option meant, and one of Paimon's that would read
    other rows than the source gives."""
    for name in options:
        key = str(name).lower()
        if key in _UNHONOURED:
            raise PaimonError(f"read option {name!r} is not supported: travel in time with 'scan.snapshot-id', "
                              f"'scan.tag-name' or 'scan.timestamp-millis', or read changes with "
                              f"'incremental-between'")
        if key in READ_OPTIONS or key == "path" or key.startswith("dbt-paimon."):
            continue
        plain = re.sub(r"[\s_]+", "-", key.strip())
        meant = [o for o in READ_OPTIONS if o == plain] or difflib.get_close_matches(plain, READ_OPTIONS, 1, 0.9)
        if meant:
            raise PaimonError(f"unknown read option {name!r} (did you mean {meant[0]!r}?)")
    travel.check(options)


def tasks_for(rows: int, units: int | None = None) -> int:
    """How many tasks read (or fold) `rows` rows held in `units` files or splits: one per million rows,
    not per unit (a task costs Spark a Python worker's round trip), at most 256."""
    return max(1, min(units if units is not None else 256, rows // _ROWS_PER_PARTITION + 1, 256))


class PaimonDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def _path(self) -> tuple[str, str | None]:
        """The table's path and the system table named after it (`t$files`), if any."""
        base, _, system = self._name()
        return base, system

    def _name(self) -> tuple[str, str | None, str | None]:
        path = self.options.get("path")
        if not path:
            raise PaimonError("the paimon source needs a table path: spark.read.format('paimon').load(path)")
        return system_tables.split_name(path)

    def _branch(self) -> str | None:
        """The branch read: `t$branch_b` in the path, or Paimon's `branch` option."""
        named, given = self._name()[1], self.options.get("branch") or None
        if named and given and named != given:
            raise PaimonError(f"the path names branch {named!r} and the option branch {given!r}: give one")
        return named or given

    def _table(self) -> FileStoreTable:
        path = self._path()[0]
        # store settings given as reader options (Paimon's names: s3.endpoint, ...) win over the
        # process's configured ones
        given = {k: v for k, v in self.options.items() if is_storage_option(k)}
        return FileStoreTable.open(path, FileIO.get(path, given or None), self._branch())

    def _travel(self, table: FileStoreTable) -> travel.Travel:
        """The snapshot or tag the read's options name (store/read/travel.py)."""
        return travel.resolve(self.options, table.snapshots, table.tags)

    def _frame_schema_id(self) -> int | None:
        """The schema a native frame's other part reads with (read/native.py): the frame's."""
        given = self.options.get(SCHEMA_OPTION)
        return int(given) if given not in (None, "") else None

    def _schema_id(self, table: FileStoreTable) -> int | None:
        if self._frame_schema_id() is not None:
            return self._frame_schema_id()
        to = self._travel(table)
        if to.tag is not None:  # the tag holds its snapshot, which may have expired since
            return table.tags.get_or_throw(to.tag).snapshot.schema_id
        return table.snapshots.travelled(to.snapshot_id).schema_id if to.snapshot_id is not None else None

    def schema(self) -> StructType:
        check_options(self.options)
        if self._path()[1] not in (None, *system_tables.DATA_TABLES):
            # a system table's times are Paimon's TIMESTAMP (no zone) whatever pyspark's default (4.3: ntz)
            return from_arrow_schema(system_tables.SCHEMAS[self._path()[1]], prefer_timestamp_ntz=True)
        table = self._table()
        schema_id = self._schema_id(table)
        schema = table.schema
        if schema_id is not None:  # time travel reads with the schema of that snapshot
            schema = SchemaManager(table.io, table.path, table.branch).schema(schema_id)
        if self._path()[1] in (audit_log.AUDIT_LOG, audit_log.BINLOG):
            order = from_arrow_schema(incremental.ORDER_SCHEMA).fields if self._ordered() and not self._folded() else []
            fields = spark_schema(schema).fields
            if self._path()[1] == audit_log.BINLOG:  # each value in an array (Paimon's BinlogTable)
                fields = [StructField(f.name, ArrayType(f.dataType, True), True) for f in fields]
            return StructType([StructField(audit_log.ROW_KIND, StringType(), False)] + order + fields)
        return spark_schema(schema)

    def _ordered(self) -> bool:
        """The audit log of an incremental read with where each record stands (CHANGE_ORDER), or
        folded by it (FOLDED)."""
        given = [o for o in (CHANGE_ORDER, FOLDED) if str(self.options.get(o, "")).lower() == "true"]
        if not given:
            return False
        if self._path()[1] != audit_log.AUDIT_LOG or not between.given(self.options):
            raise PaimonError(f"{given[0]} is an option of an incremental read of the audit log")
        return True

    def _folded(self) -> bool:
        return self._ordered() and str(self.options.get(FOLDED, "")).lower() == "true"

    def writer(self, schema: StructType, overwrite: bool):
        """Refused with what to do instead: a Paimon table is written through `spark.sql` (INSERT,
        MERGE INTO, ...: sql/) or the engine's upsert/write, which see the whole batch and
        commit it once; a data source writer sees one task's rows at a time."""
        raise PaimonError(f"the Paimon table at {self._path()[0]} is not written through the DataFrame writer API: "
                          f"use spark.sql('INSERT INTO ...') (in a session where dbt_paimon.sql.register(spark) "
                          f"ran) or dbt_paimon.engine.upsert / write")

    def reader(self, schema: StructType) -> DataSourceReader:
        check_options(self.options)  # here too: a read given its schema never asks for one
        system = self._path()[1]
        if system not in (None, *system_tables.DATA_TABLES):
            table = self._table()
            to = self._travel(table)
            at = table.tags.get_or_throw(to.tag).snapshot.id if to.tag is not None else to.snapshot_id
            return SystemTableReader(system_tables.read(table, system, at))
        # the audit log: the table's rows, each with its row kind in a first column
        kinds = system in (audit_log.AUDIT_LOG, audit_log.BINLOG)
        binlog = system == audit_log.BINLOG
        ordered, folded = self._ordered(), self._folded()
        columns = schema.fieldNames()[1 + (len(incremental.ORDER_SCHEMA) if ordered and not folded else 0):] \
            if kinds else schema.fieldNames()
        # No reader here takes Spark's filters: Spark 4.1-4.3 keep the read a reader planned after
        # taking a query's filters on the DataFrame's source object, and a later query on the same
        # DataFrame that pushes no filter reads what the earlier one narrowed (df.where(...).count(),
        # then df.count()). Queries are narrowed before they reach the source (sql/query.py).
        if between.given(self.options):
            if system == READ_OPTIMIZED:
                raise PaimonError("the ro system table reads a snapshot's top level; read a table's changes from "
                                  "the table or its audit_log")
            if travel.given(self.options):
                raise PaimonError("give either an incremental read or a snapshot-id / tag / timestamp, not both")
            return IncrementalReader(self._table(), dict(self.options), columns, kinds=kinds, order=ordered,
                                     binlog=binlog, folded=folded)
        table = self._table()
        to = self._travel(table)
        return PaimonReader(table, to.snapshot_id, columns, to.tag,
                            merged_only=self.options.get(SPLITS_OPTION) == MERGED, kinds=kinds,
                            schema_id=self._frame_schema_id(),
                            top_level=system == READ_OPTIMIZED, binlog=binlog)


class SystemTableReader(DataSourceReader):
    """Metadata is small and computed on the driver; one partition hands it to Spark."""

    def __init__(self, table: pa.Table):
        self.blob = pickle.dumps(table)

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from pickle.loads(self.blob).to_batches()


class IncrementalReader(DataSourceReader):
    """An incremental read (store/read/between.py) planned on the driver: files (delta, changelog)
    or buckets (diff), a few per task; each task hands Spark their inserted and updated records, or
    every record with its row kind (the audit log)."""

    def __init__(self, table: FileStoreTable, options: dict, columns: list[str], kinds: bool = False,
                 order: bool = False, binlog: bool = False, folded: bool = False):
        """kinds: every record, its row kind first (the audit log's); order: and where it stands;
        folded: and folded by it to one record per key (in one task); binlog: each value in an
        array (the binlog's)."""
        self.path, self.io, self.table_schema = table.path, table.io, table.schema
        self.planned = between.plan(table.io, table.path, table.schema, options)
        self.columns, self.kinds, self.order, self.binlog = columns, kinds, order, binlog
        self.folded = folded

    def partitions(self) -> list[SplitsPartition]:
        # a task per million rows, not per file: a range's files are many and small (one per
        # bucket a commit touched), and a task costs Spark a Python worker's round trip; a fold
        # reads every record of the range in one task, where each key's records all are
        units = self.planned.units
        chunks = 1 if self.folded else tasks_for(between.row_count(self.planned), len(units))
        return [SplitsPartition(pickle.dumps(units[i::chunks])) for i in range(chunks)]

    def read(self, partition: SplitsPartition) -> Iterator[pa.RecordBatch]:
        rows = between.read_units(self.io, self.path, self.table_schema, self.planned, pickle.loads(partition.value),
                                  self.columns, kinds=self.kinds, order=self.order)
        schema = self.table_schema
        if self.order and schema.core.ignore_delete:  # records to fold: a table that never deletes
            rows = rows.filter(pc.not_equal(rows.column(incremental.ROW_KIND), "-D"))  # ignores its -D
        if self.folded:
            rows = fold.fold(rows, schema.primary_keys, schema.partition_keys)
        if rows.num_rows:
            yield from _for_spark(rows, self.table_schema, self.binlog).to_batches(max_chunksize=1 << 16)


class SplitsPartition(InputPartition):
    def __init__(self, blob: bytes):
        super().__init__(blob)


class PaimonReader(DataSourceReader):
    def __init__(self, table: FileStoreTable, snapshot_id: int | None, columns: list[str], tag: str | None = None,
                 merged_only: bool = False, kinds: bool = False, top_level: bool = False, binlog: bool = False,
                 schema_id: int | None = None):
        """merged_only: read only the splits Spark's Parquet reader does not (read/native.py), with
        the schema the native part was planned with (schema_id: the frame's); kinds:
        each key's merged record, deletes kept, its row kind first (the audit log's); top_level:
        only the files a full compaction wrote (the `ro` system table)."""
        self.path = table.path
        self.io = table.io  # travels to the executors with the store's settings
        # A batch read: level-0 files of a first-row table stay out, as in Java and pypaimon.
        plan = table.plan(snapshot_id, tag=tag, batch_read=True)
        self.splits = read_optimized.top_level(table.schema, plan.splits) if top_level else plan.splits
        if schema_id is not None:
            self.table_schema = SchemaManager(table.io, table.path, table.branch).schema(schema_id)
        else:
            self.table_schema = table.read_schema(plan.snapshot, snapshot_id is not None or tag is not None)
        self.columns, self.kinds, self.binlog = columns, kinds, binlog
        if merged_only:
            native = Splits(table.path, table.io, self.table_schema)
            self.splits = [s for s in self.splits if not native.native(s)]

    def partitions(self) -> list[SplitsPartition]:
        if not self.splits:
            return [SplitsPartition(pickle.dumps([]))]
        total = sum(s.row_count for s in self.splits)
        chunks = tasks_for(total, len(self.splits))
        groups: list[list] = [[] for _ in range(chunks)]
        for i, s in enumerate(self.splits):  # per split (metadata), not per row
            groups[i % chunks].append(s)
        return [SplitsPartition(pickle.dumps(g)) for g in groups]

    def read(self, partition: SplitsPartition) -> Iterator[pa.RecordBatch]:
        reader = TableRead(self.io, self.path, self.table_schema, self.columns)
        for split in pickle.loads(partition.value):
            part = audit_log.read_split(reader, split) if self.kinds else reader.read_split(split)
            if part.num_rows:
                yield from _for_spark(part, self.table_schema, self.binlog).to_batches(max_chunksize=1 << 16)


def register(spark, storage_options: Mapping[str, object] | None = None) -> None:
    """Make `spark.read.format("paimon")` available in this SparkSession.

    Spark runs a Python data source in worker processes that know nothing of this process's
    configured store settings, so the source registered here carries them (storage_options, else
    those fileio.configure() set): a class made here is pickled by value, its settings with it.
    Options given to a read (`.option("s3.endpoint", ...)`) win over them."""
    from ..runtime import deploy
    # pyspark copies the application's shipped files into a data source when it is registered:
    # on a cluster, ship the engine first so the source's workers can import it
    deploy.ship(spark)
    defaults = {str(k): str(v) for k, v in (storage_options if storage_options is not None
                                            else fileio.configured()).items()}
    if not defaults:
        spark.dataSource.register(PaimonDataSource)
        return

    class ConfiguredPaimonDataSource(PaimonDataSource):
        def __init__(self, options):
            super().__init__({**defaults, **dict(options or {})})

    spark.dataSource.register(ConfiguredPaimonDataSource)


def _for_spark(rows: pa.Table, schema: TableSchema, binlog: bool = False) -> pa.Table:
    """Rows in the Arrow types Spark expects back; the audit log's row kind and order columns as they
    are; binlog: each value in a one-element array (a batch read's binlog)."""
    if rows.column_names[:1] != [incremental.ROW_KIND]:
        return for_spark(rows, schema)
    head = [incremental.ROW_KIND] + [n for n in incremental.ORDER_SCHEMA.names if n in rows.column_names]
    out = for_spark(rows.drop_columns(head), schema)
    if binlog:
        out = audit_log.as_binlog(out)
    for i, name in enumerate(head):
        out = out.add_column(i, rows.schema.field(name), rows.column(name))
    return out
