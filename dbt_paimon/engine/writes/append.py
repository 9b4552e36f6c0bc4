"""write(): append a Spark DataFrame to a Paimon append table, or overwrite its partitions; one snapshot.

    create the table if absent ─► write (in the driver on an Arrow batch, or one Spark task per
    input partition: no shuffle, every task writes its rows' (partition, bucket) files) ─► commit
    (APPEND, or OVERWRITE of the batch's partitions / the whole table) ─► post-commit (small files
    merged, snapshots expired)

An append table keeps every row it is given (store/write/append.py), so nothing is read before writing
and concurrent appends never conflict: a lost race for snapshot-N is retried by the commit itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame

from ...assign.rows import PAYLOAD
from ...store.snapshot.branches import branch_of_new_table
from ...store.common import options as opts
from ...store.schema.option_validation import validate as validate_options
from ...store.write.append import AppendWrite
from ...store.common.errors import SchemaError
from ...store.common.fileio import FileIO
from ...store.manifest.manifest import ManifestEntry
from ...store.read.scan import next_sequences
from ...store.schema.schema import SchemaManager, build_schema, check_writable, resolve_columns
from ...store.snapshot.snapshot import APPEND, OVERWRITE
from ...store.table import FileStoreTable
from . import commit_loop
from ..runtime import deploy, jobs, local
from .append_files import append_task
from .post_commit import after_commit
from .rewrite import rewrite_where
from ..settings import Execution, RunSettings
from ..spark_types import arrow_schema_of, struct_of
from .upsert import as_list, check_table, prepare_input


APPEND_MODE, OVERWRITE_PARTITIONS, OVERWRITE_TABLE = "append", "overwrite-partitions", "overwrite-table"
REPLACE_WHERE = "replace-where"  # the rows where a predicate holds are replaced by the batch (rewrite.py)
MODES = (APPEND_MODE, OVERWRITE_PARTITIONS, OVERWRITE_TABLE, REPLACE_WHERE)


@dataclass
class WriteResult:
    table_path: str
    mode: str
    snapshot_id: int | None
    rows_written: int
    partitions_replaced: int | None = None  # an overwrite: the partitions it replaced (None: the whole table)
    rows_replaced: int = 0  # an overwrite: the rows its commit removed
    attempts: int = 1
    execution: str = ""
    extra_snapshots: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> str:
        if self.mode == APPEND_MODE:
            return f"appended {self.rows_written} rows"
        if self.mode == REPLACE_WHERE:
            return f"replaced {self.rows_replaced} rows with {self.rows_written}"
        where = "the table" if self.partitions_replaced is None else f"{self.partitions_replaced} partition(s)"
        return f"overwrote {where}: {self.rows_written} rows in place of {self.rows_replaced}"


def write(df: DataFrame, path: str, *, mode: str = APPEND_MODE, partition_keys: str | Sequence[str] | None = (),
          options: Mapping[str, object] | None = None, not_null: Sequence[str] = (),
          settings: RunSettings | None = None, where: str | None = None) -> WriteResult:
    """Write df into the append table at path (created if absent), one snapshot. mode: "append";
    "overwrite-partitions" replaces the partitions the batch holds rows of (a table without
    partitions: all of it); "overwrite-table" replaces the whole table; "replace-where" replaces
    the rows for which `where` (Spark SQL over the table's columns) holds, whatever their partition
    (a dbt microbatch's time range). options and settings as upsert() takes them."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if (mode == REPLACE_WHERE) != bool(where and where.strip()):
        raise ValueError("a predicate (where) goes with mode 'replace-where', and only with it")
    started = time.time()
    spark = df.sparkSession
    path = path.rstrip("/")
    settings, table_options = RunSettings.from_options(options, settings)
    io = FileIO.get(path, dict(settings.storage_options) if settings.storage_options else None)
    partition_keys = as_list(partition_keys)
    given, _ = opts.count_sugar(table_options)
    exists = FileStoreTable.exists(path, io)
    if exists:
        schema = SchemaManager(io, path, settings.branch).latest()
        if not schema.is_append:
            raise SchemaError(f"table {path} has the primary key {list(schema.primary_keys)}: rows go into it by "
                              "upsert (unique_key), not appended")
        check_writable(schema, path)
        given = validate_options(given, schema.field_names, stored=schema.options) if given else {}
        check_table(schema, [], partition_keys, given, path)
    else:
        partition_keys = resolve_columns("partition key", partition_keys, df.columns)
        arrow = arrow_schema_of(df.schema)
        required = {c.lower() for c in resolve_columns("not_null column", list(not_null), df.columns)}
        arrow = pa.schema([f.with_nullable(False) if f.name.lower() in required else f for f in arrow])
        schema = build_schema(arrow, [], partition_keys, {**given, **settings.run_options()})
        if settings.branch:  # the table made on main, its rows written to the branch
            schema, exists = branch_of_new_table(io, path, schema, settings.branch), True
    settings = settings.over(schema.options)
    batch = prepare_input(df, schema, [])
    table = FileStoreTable(path, schema, io)
    next_sequence = next_sequences(table.plan().splits) if exists else {}
    execution, rows = _where(spark, batch, settings.execution)
    if execution == Execution.LOCAL:
        writer = AppendWrite(io, path, schema, next_sequence)
        entries = writer.write(rows) if rows.num_rows else []
    else:
        deploy.prepare(spark, path)
        payloads = jobs.collect_payloads(spark, batch.mapInArrow(append_task(path, schema, io, next_sequence),
                                                                 struct_of(PAYLOAD)))
        entries = [e for p in payloads for e in p]
    if mode == REPLACE_WHERE:
        return _replace(spark, table, exists, entries, where, execution, settings, started)
    return _commit(spark, table, exists, mode, entries, execution, settings, started)


def _where(spark, batch: DataFrame, execution: Execution) -> tuple[Execution, pa.Table | None]:
    """Where the rows are written, and (driver-local) the rows: auto writes in the driver on a
    local master when the batch is within the local limit (local.py), as an upsert does."""
    size = None
    if execution == Execution.AUTO and local.may_run_here(spark, 0):
        size = local.estimated_bytes(batch)
        if local.unknown(size):  # no estimate: read up to the limit, or learn it is past it
            try:
                rows = local.collect_within(spark, batch, local.LOCAL_MAX_BATCH_BYTES)
            except local.StreamUnavailable:
                size = None
            else:
                return (Execution.LOCAL, rows) if rows is not None else (Execution.DISTRIBUTED, None)
    execution = local.choose(spark, batch, execution, 0, size)
    return execution, (local.collect(spark, batch) if execution == Execution.LOCAL else None)


def _commit(spark, table: FileStoreTable, exists: bool, mode: str, entries: list[ManifestEntry],
            execution: Execution, settings: RunSettings, started: float) -> WriteResult:
    """The batch's files as one APPEND snapshot, or an OVERWRITE of the partitions they write (the
    table); appends never conflict, so the loop's one attempt commits (a lost race for the
    snapshot id is retried inside the commit)."""
    path = table.path
    partitions = ({e.partition for e in entries} if mode == OVERWRITE_PARTITIONS and table.schema.partition_keys
                  else None)

    def attempt(at: commit_loop.Attempt):
        if not exists:
            SchemaManager(table.io, path).create(table.schema)
        if mode == APPEND_MODE:
            return at.commit(entries, APPEND)
        # an empty batch replaces no partition: nothing to commit
        return at.overwrite(entries, partitions) if partitions != set() else None
    result = _loop(table, exists, settings, "write", attempt, entries)
    extra = after_commit(spark, path, table.io, execution, table.branch) if result is not None else []
    written = sum(e.file.row_count for e in entries)
    replaced = (written - result.snapshot.delta_record_count) if result is not None and mode != APPEND_MODE else 0
    return WriteResult(table_path=path, mode=mode, snapshot_id=result.snapshot.id if result else None,
                       rows_written=written, partitions_replaced=None if mode == APPEND_MODE or partitions is None
                       else len(partitions), rows_replaced=replaced, attempts=result.attempts if result else 1,
                       execution=execution.value, extra_snapshots=extra, seconds=time.time() - started)


def _replace(spark, table: FileStoreTable, exists: bool, entries: list[ManifestEntry], where: str,
             execution: Execution, settings: RunSettings, started: float) -> WriteResult:
    """The batch's files and the rewrite of the files holding rows where `where` holds, as one
    OVERWRITE snapshot. A commit that removed one of the rewritten files first makes the rewrite
    run again on the new snapshot (commit.max-retries); the batch's files are written once."""
    path = table.path

    def attempt(at: commit_loop.Attempt):
        if not exists and at.number == 1:
            SchemaManager(table.io, path).create(table.schema)
        plan = at.table.plan()
        rewrite = rewrite_where(spark, at.table, plan, where, "the replaced range", next_sequences(plan.splits))
        commit = at.table.new_commit()
        result = at.commit(entries + rewrite.entries, OVERWRITE, abort=lambda: commit.abort(rewrite.adds))
        return at.number, result, rewrite.removed_rows
    attempts, result, replaced = _loop(table, exists, settings, "replace", attempt, entries)
    extra = after_commit(spark, path, table.io, execution, table.branch) if result is not None else []
    written = sum(e.file.row_count for e in entries)
    return WriteResult(table_path=path, mode=REPLACE_WHERE, snapshot_id=result.snapshot.id if result else None,
                       rows_written=written, rows_replaced=replaced, attempts=attempts,
                       execution=execution.value, extra_snapshots=extra, seconds=time.time() - started)


def _loop(table: FileStoreTable, exists: bool, settings: RunSettings, what: str, attempt, entries: list[ManifestEntry]):
    """commit_loop.run on the table as this write checked it (it may not exist yet); the batch's
    files deleted when no attempt commits them."""
    try:
        return commit_loop.run(table.path, table.io, what, attempt, retries=settings.commit_max_retries,
                               open_table=lambda: table)
    except BaseException:
        table.new_commit().abort(entries)
        raise
