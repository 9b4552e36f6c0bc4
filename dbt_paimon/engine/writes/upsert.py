"""upsert(): upsert a Spark DataFrame into a Paimon primary-key table, one snapshot.

    plan (driver) ─► job (an executor: bootstrap ─► route by key ─► assign ─► route by (partition,
    bucket) ─► write) ─► commit (driver) ─► post-commit (compaction where the job ran, expiration)

This module checks the input against the table, plans, commits and retries; the job between plan
and commit runs on one of two executors (executor.py): in the driver on an Arrow batch (local.py)
or as one Spark job (distributed.py). If another writer committed after the bootstrap snapshot, the
job's files are committed on the new snapshot when those commits changed none of its keys
(recommit.py); else they are deleted and the job runs again on it.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame

from ...assign.global_index_assigner import AssignCounts
from ...assign.rows import StageRows
from ... import key_index
from ...store.snapshot.branches import branch_of_new_table
from ...store.common import options as opts
from ...store.schema.option_validation import validate as validate_options
from ...store.common.errors import SchemaError
from ...store.common.fileio import FileIO
from ...store.index.index import HashIndexFile, IndexManifestFile
from ...store.manifest.manifest import data_entries
from ...store.common.options import BucketMode
from ...store.write.postpone import PartitionBuckets
from ...store.schema.schema import SchemaManager, TableSchema, build_schema, check_writable, resolve_columns
from ...store.snapshot.snapshot import APPEND
from ...store.table import FileStoreTable
from . import commit_loop
from ..runtime import key_lookup, local, recommit
from ..runtime.distributed import DistributedExecutor
from ..runtime.executor import Executor
from ..runtime.local import LocalExecutor
from .post_commit import after_commit
from . import replace as replacing
from .replace import Replace, retractions
from ..settings import RUN_OPTIONS, Execution, RunSettings
from ..spark_types import arrow_schema_of, fits, spark_ddl, to_spark

log = logging.getLogger(__name__)

@dataclass
class UpsertResult(AssignCounts):
    """The counts (AssignCounts: inserted, updated, moved, deleted, skipped; summary()) and the commit."""

    table_path: str = ""
    snapshot_id: int | None = None
    rows_written: int = 0
    attempts: int = 1  # commit attempts (each conflict is one more, of commit.max-retries)
    recommits: int = 0  # conflicts after which the job's files were committed as they were, without re-running it
    seconds: float = 0.0
    extra_snapshots: list[int] = field(default_factory=list)
    plan: str = ""  # Spark's executed physical plan of the job (or the driver-local plan), for logs and tests
    execution: str = ""  # "distributed" (the Spark job) or "local" (its topology inside the driver)
    bootstrap: dict = field(default_factory=dict)  # driver-local: key index or table, seconds, bytes
    # where the time went, in seconds (PHASES, in order; a phase an upsert did not go through is
    # absent; retried attempts add up)
    phases: dict = field(default_factory=dict)


# prepare: the table's schema, the batch's projection, Spark's size estimate, the executor chosen (with
# a batch without an estimate past the local limit: its abandoned read, its persist and count);
# collect: the batch into the driver (driver-local); plan: the snapshot's files; job: the executor's
# job (driver-local also as bootstrap, assign, write); commit; post_commit: compaction, expiration;
# index_record: the commit carried into the key index
PHASES = ("prepare", "collect", "plan", "job", "bootstrap", "assign", "write", "commit", "post_commit",
          "index_record")


class TableMismatchError(SchemaError):
    """The keys or options given disagree with the existing table's. `mismatches` holds each as
    (what, given, stored): "primary key", "partition keys" or an option's name."""

    def __init__(self, message: str, mismatches: list[tuple[str, object, object]]):
        super().__init__(message)
        self.mismatches = mismatches


def as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def check_table(schema: TableSchema, primary_keys: Sequence[str], partition_keys: Sequence[str],
                options: Mapping[str, str], path: str) -> None:
    """The one check of what a run gives against an existing table: the primary key (any order;
    none given: the table's), the partition keys (in order) and the table options given (the run
    keys are not among them, settings.py). Names match case-insensitively, as Spark's do.
    Raises TableMismatchError naming every disagreement."""
    spelled = {n.lower(): n for n in schema.field_names}
    pk = [spelled.get(k.lower(), k) for k in primary_keys]
    parts = [spelled.get(k.lower(), k) for k in partition_keys]
    found, words = [], []
    if pk and set(pk) != set(schema.primary_keys):
        found.append(("primary key", list(primary_keys), list(schema.primary_keys)))
        words.append(f"unique_key/primary key {pk} disagrees with the primary key {list(schema.primary_keys)} of "
                     f"the existing table {path}; a primary key cannot change (rebuild the table with --full-refresh)")
    if parts != list(schema.partition_keys):
        found.append(("partition keys", list(partition_keys), list(schema.partition_keys)))
        words.append(f"partition keys {parts} disagree with the partition keys {list(schema.partition_keys)} of "
                     f"the existing table {path} (rebuild the table with --full-refresh)")
    for key, value in options.items():
        stored = schema.options.get(key)
        if stored != value:
            found.append((key, value, stored))
            held = f"is {stored!r}" if stored is not None else "is not set (Paimon's default)"
            words.append(f"option {key!r} {held} on the existing table {path} but {value!r} was given; "
                         f"only {', '.join(sorted(RUN_OPTIONS))} may change between runs")
    if found:
        raise TableMismatchError("; ".join(words), found)


def prepare_input(df: DataFrame, schema: TableSchema, counted: Sequence[str]) -> DataFrame:
    """The batch with exactly the table's columns and Spark types; a clear error otherwise."""
    fields = df.schema.fields
    by_name = {f.name: f for f in fields}
    lowered = {n.lower(): n for n in by_name}
    missing = [n for n in schema.field_names if n not in by_name and n.lower() not in lowered]
    extra = [n for n in by_name if n not in schema.field_names and n.lower() not in
             {x.lower() for x in schema.field_names}]
    if missing or extra:
        raise SchemaError(f"the batch's columns do not match the table: missing {missing}, unexpected {extra}")
    if [f.name for f in fields] == schema.field_names and not counted and all(
            src.dataType == to_spark(f.type) for src, f in zip(fields, schema.fields)):
        return df  # already the table's columns and types: no projection for Spark to analyze (~30 ms)
    # One selectExpr: SQL text is one call to the JVM, where building Column objects costs several
    # per column (the fixed cost of a small upsert).
    exprs = []
    for f in schema.fields:
        src = by_name.get(f.name) or by_name[lowered[f.name.lower()]]
        target = to_spark(f.type)
        col, name = _quoted(src.name), _quoted(f.name)
        if f.name in counted:
            exprs.append(f"CAST(CASE WHEN {col} IS NULL THEN 0 ELSE 1 END AS BIGINT) AS {name}")
            continue
        if not fits(src.dataType, f.type):
            raise SchemaError(f"column {f.name!r} is {src.dataType.simpleString()} in the batch but "
                              f"{f.type.sql()} in the table; cast it in the model (no lossy cast is done implicitly)")
        exprs.append(f"{col} AS {name}" if src.dataType == target else f"CAST({col} AS {spark_ddl(target)}) AS {name}")
    return df.selectExpr(*exprs)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _sequence_of(schema: TableSchema, sequence_by: str | None) -> str | None:
    """The run's sequence_by on a table with `sequence.field`: on a deduplicate table, one ascending
    field is the run's sequence_by (in-batch duplicates resolved and rows older than the stored
    version skipped: Paimon's merge would drop them); a sequence_by naming another column is
    refused. Several fields, a descending order, or a table whose older versions still count
    (partial-update, aggregation): rows are written as given and readers order the versions."""
    fields = schema.core.sequence_fields
    if not fields:
        return sequence_by
    simple = (len(fields) == 1 and schema.core.sequence_ascending and fields[0] not in schema.primary_keys
              and schema.core.merge_engine == opts.MergeEngine.DEDUPLICATE)
    if sequence_by is None:
        return fields[0] if simple else None
    if not simple or sequence_by != fields[0]:
        raise SchemaError(f"sequence_by {sequence_by!r} disagrees with the table's sequence.field "
                          f"{','.join(fields)!r}"
                          + ("" if schema.core.sequence_ascending else " (descending)")
                          + ": leave sequence_by out, the table's sequence.field orders its rows")
    return sequence_by


def upsert(df: DataFrame, path: str, *, primary_keys: str | Sequence[str] | None = None,
           partition_keys: str | Sequence[str] | None = (), options: Mapping[str, object] | None = None,
           sequence_by: str | None = None, not_null: Sequence[str] = (),
           settings: RunSettings | None = None, replace: Replace | None = None) -> UpsertResult:
    """Upsert df into the Paimon table at path (created if absent); commits one snapshot.

    replace: rows the run replaces (replace.py): those of them whose key df does not hold are
    deleted in the same snapshot (dbt's insert_overwrite and microbatch on a key table); on a table
    that merges rows, the batch's partitions are overwritten (Paimon's INSERT OVERWRITE).

    not_null: columns that must not be null (dbt's not_null constraints): NOT NULL in a new table's
    schema; checked before anything is written, with the table's own NOT NULL columns.

    settings: the run's settings (settings.py RunSettings): where the job runs (`execution`:
    "distributed" the Spark job; "local" its topology inside the driver, engine/runtime/local.py; "auto",
    the default, local on a local master when the batch and the table's keys fit in the driver),
    the object store's settings (`storage_options`, by Paimon's names: s3.endpoint, ...; never
    stored with the table), parallelism, retries, the key index. Run keys and store settings
    given among `options` (dynamic-bucket.assigner-parallelism, sink.parallelism,
    cross-partition-upsert.bootstrap-parallelism, commit.max-retries, s3.*) join the run's settings,
    as Paimon users give them: they may differ from the table's stored options."""
    started, started_perf = time.time(), time.perf_counter()
    spark = df.sparkSession
    path = path.rstrip("/")
    settings, table_options = RunSettings.from_options(options, settings)
    io = FileIO.get(path, dict(settings.storage_options) if settings.storage_options else None)
    primary_keys, partition_keys = as_list(primary_keys), as_list(partition_keys)
    given, counted = opts.count_sugar(table_options)
    exists = FileStoreTable.exists(path, io)
    if exists:
        schema = SchemaManager(io, path, settings.branch).latest()
        check_writable(schema, path)
        given = validate_options(given, schema.field_names, stored=schema.options) if given else {}
        check_table(schema, primary_keys, partition_keys, given, path)
        counted = [f.name for f in schema.fields if schema.core.is_count(f.name)]
    else:
        if not primary_keys:
            raise SchemaError(f"table {path} does not exist and no primary key (unique_key) was given")
        primary_keys = resolve_columns("primary key", primary_keys, df.columns)
        partition_keys = resolve_columns("partition key", partition_keys, df.columns)
        arrow = arrow_schema_of(df.schema)
        required = {c.lower() for c in resolve_columns("not_null column", list(not_null), df.columns)}
        arrow = pa.schema([f.with_nullable(False) if f.name.lower() in required else f for f in arrow])
        if counted:
            arrow = pa.schema([pa.field(f.name, pa.int64()) if f.name in counted else f for f in arrow])
        # the run keys given are stored with a new table, as Paimon stores them
        schema = build_schema(arrow, primary_keys, partition_keys, {**given, **settings.run_options()})
        if settings.branch:  # the table made on main, its rows written to the branch
            schema, exists = branch_of_new_table(io, path, schema, settings.branch), True
    if replace is not None:
        replacing.check(schema, replace, path)
    if sequence_by is not None:
        [sequence_by] = resolve_columns("sequence_by", [sequence_by], schema.field_names)
        if sequence_by in schema.primary_keys:
            raise SchemaError(f"sequence_by column {sequence_by!r} is part of the primary key")
        if schema.field(sequence_by).type.is_nested:
            raise SchemaError(f"sequence_by column {sequence_by!r} is {schema.field(sequence_by).type.sql()}: rows "
                              "are ordered by an atomic column only")
    sequence_by = _sequence_of(schema, sequence_by)
    settings = settings.over(schema.options)
    stage = StageRows(schema, sequence_by, resolve_columns("not_null column", list(not_null), schema.field_names))
    batch = prepare_input(df, schema, counted)
    latest = FileStoreTable(path, schema, io).latest_snapshot() if exists else None
    table_rows = latest.total_record_count if latest else 0
    if table_rows and settings.key_index and key_lookup.usable(stage) \
            and key_index.exists(io, path, schema.branch):
        table_rows = 0  # the driver-local job then holds the batch's keys only, never the table's
    size = local.estimated_bytes(batch) if settings.execution == Execution.AUTO else None
    cached, rows, mode = False, None, None
    try:
        if size is not None and local.unknown(size) and local.may_run_here(spark, table_rows):
            # auto without Spark's size estimate: the batch is read into the driver up to the
            # local limit; past it the job runs on Spark, on the batch persisted and counted (the
            # cache's size gives the job its task count)
            collecting = time.perf_counter()
            try:
                rows = local.collect_within(spark, batch, local.LOCAL_MAX_BATCH_BYTES)
            except local.StreamUnavailable as e:
                log.debug("this Spark's Arrow stream is not the one expected (%s): counting the batch", e)
            else:
                mode = Execution.LOCAL if rows is not None else Execution.DISTRIBUTED
                if rows is None:
                    batch, cached = batch.persist(StorageLevel.MEMORY_AND_DISK), True
                    batch.count()
                    size = local.estimated_bytes(batch)
        if mode is None:
            if size is not None and local.unknown(size):  # counted before choosing: keep it for the job
                batch, cached, size = batch.persist(StorageLevel.MEMORY_AND_DISK), True, None
            mode = local.choose(spark, batch, settings.execution, table_rows, size)
        phases = {"prepare": (collecting if rows is not None else time.perf_counter()) - started_perf}
        if mode == Execution.LOCAL:  # the batch is read once, into the driver
            if rows is None:
                collecting = time.perf_counter()
                rows = local.collect(spark, batch)
            phases["collect"] = time.perf_counter() - collecting
            executor: Executor = LocalExecutor(rows, settings.key_index)
        else:
            # the Spark job reads the batch twice when the table has keys (its Bloom filter, then
            # the job): keep it
            if not cached and exists and schema.bucket_mode != BucketMode.HASH_DYNAMIC:
                batch, cached = batch.persist(StorageLevel.MEMORY_AND_DISK), True
            executor = DistributedExecutor(spark, batch, settings, path, size)
        retract, overwriting = None, None
        if replace is not None and replacing.by_overwrite(schema, replace):
            overwriting = replace
        elif replace is not None:
            # the replaced rows' -D records, on the job's base, against the batch as Spark holds it
            retract = functools.partial(retractions, spark, replace=replace, batch=batch)
        return _attempts(spark, executor, io, path, schema, exists, stage, started, phases,
                         settings.commit_max_retries, retract, overwriting)
    finally:
        if cached:
            batch.unpersist()


def _attempts(spark, executor: Executor, io: FileIO, path: str, schema: TableSchema, exists: bool,
              stage: StageRows, started: float, phases: dict, retries: int | None,
              retract=None, overwriting: Replace | None = None) -> UpsertResult:
    """Plan, run the job on the executor, commit, in the engine's commit loop (commit_loop.py). A
    commit conflict (another writer committed after the job's snapshot) is one attempt of
    commit.max-retries (`retries`: the run's, None: the table's), waited for as Paimon's writers do;
    the next attempt commits the job's files on the new snapshot as they are when the commits
    between changed nothing the job read or wrote (recommit.py), else runs the job again on it.
    phases: the seconds spent so far by phase.
    retract(table, plan): the -D records of the rows the run replaces (replace.py), committed with
    the job's files; they were found on the job's base, so a conflict always runs the job again.
    overwriting: the job is written as into a new table and overwrites what `overwriting` replaces
    (replace.py), as Paimon's overwrite does: whatever another writer committed there meanwhile."""
    clock = _PhaseClock(phases)
    made = {"exists": exists, "recommits": 0}

    def attempt(at: commit_loop.Attempt) -> UpsertResult:
        table = at.table
        job = base = None
        if at.carried is not None:  # the job of the attempt that conflicted: commit it again?
            job, base = at.carried.value
            latest, why = _recheck(table, base, job, retract, executor, schema)
            clock.lap("commit")
            if why is None:  # committed again as it is, and kept again should this commit conflict too
                made["recommits"] += 1
                base = latest
                at.carried.value = (job, base)
                at.keep(at.carried)
            else:
                log.info("%s: running the upsert job again on snapshot %s: %s", path,
                         latest.id if latest else None, why)
                at.carried.discard()
                job = None
        if job is None:
            job, base = _run_job(table, at)
        if overwriting is not None:
            result = replacing.overwrite(at, job, overwriting)
        else:
            result = _commit(at, job, base)
        clock.lap("commit")
        return _finished(spark, executor, io, path, job, result, base,
                         result.attempts if overwriting is not None and result else at.number,
                         made["recommits"], started, phases, clock, schema.branch)

    def _run_job(table: FileStoreTable, at: commit_loop.Attempt):
        plan = table.plan() if made["exists"] else None
        base = plan.snapshot if plan else None
        clock.lap("plan")
        planned = None if overwriting is not None else plan
        job = executor.run_job(table, planned, stage.with_buckets(PartitionBuckets.of_plan(schema, planned)))
        # from here the job's files are the loop's to delete, should no attempt commit them
        at.keep((job, base), lambda: _abandon(io, path, table, job))
        retracted = retract(table, plan) if retract is not None and plan is not None else []
        if retracted:
            counts = AssignCounts(**job.counts.as_dict())
            counts.deleted += sum(e.file.row_count for e in data_entries(retracted))
            job = dataclasses.replace(job, entries=job.entries + retracted, counts=counts)
            at.keep((job, base), lambda: _abandon(io, path, table, job))
        clock.lap("job")
        for name, seconds in job.phases.items():
            phases[name] = phases.get(name, 0.0) + seconds
        if not made["exists"]:
            SchemaManager(io, path).create(schema)
            made["exists"] = True
        return job, base

    return commit_loop.run(path, io, "upsert job", attempt, retries=retries,
                           open_table=lambda: FileStoreTable(path, schema, io))


def _recheck(table: FileStoreTable, base, job, retract, executor: Executor, schema: TableSchema):
    """(the latest snapshot, why the job must run again on it: None when its files stay right)."""
    try:
        if retract is not None:
            return table.snapshots.latest(), "the rows it replaces are found again on the new snapshot"
        return recommit.newest_right(table, base, job, lambda h: executor.holds_any(schema, h))
    except Exception as check_error:  # noqa: BLE001 - what cannot be checked is run again
        return table.snapshots.latest(), f"the commits between could not be checked ({check_error})"


def _commit(at: commit_loop.Attempt, job, base):
    """The job's files and HASH index changes as one APPEND snapshot on `base` (CommitConflictError
    when the latest snapshot is another by then; the job's files then stay, kept for the next
    attempt: Attempt.keep)."""
    io, path = at.table.io, at.table.path
    index_manifest, written = ..., None
    if job.index_changes:
        index_manifest = IndexManifestFile(io, path).combine(base.index_manifest if base else None, job.index_changes)
        written = f"{path}/manifest/{index_manifest}"

    def abort() -> None:
        if written is not None:  # built on `base`: the next attempt builds its own
            io.delete(written)
    return at.commit(job.entries, APPEND, expected_latest=base, abort=abort, index_manifest=index_manifest)


def _abandon(io: FileIO, path: str, table: FileStoreTable, job) -> None:
    """The job's files and HASH index files deleted: it is run again or given up."""
    table.new_commit().abort(job.entries)
    for meta in job.index_changes.values():
        HashIndexFile(io, path).delete(meta)


def _finished(spark, executor: Executor, io: FileIO, path: str, job, result, base, attempt: int, recommits: int,
              started: float, phases: dict, clock: "_PhaseClock", branch: str | None = None) -> UpsertResult:
    """After the commit: post-commit work where the job ran, the key index's record, the result."""
    extra = after_commit(spark, path, io, executor.execution, branch) if result is not None else []
    clock.lap("post_commit")
    if job.record is not None and result is not None:
        try:
            job.record(result.snapshot.id, extra)
        except Exception as e:  # noqa: BLE001 - the index catches up next time; the upsert is done
            log.warning("the key index of %s was not updated (%s); the next upsert catches it up", path, e)
        clock.lap("index_record")
    return UpsertResult(**job.counts.as_dict(), table_path=path,
                        snapshot_id=result.snapshot.id if result else (base.id if base else None),
                        rows_written=sum(e.file.row_count for e in data_entries(job.entries)), attempts=attempt,
                        recommits=recommits, extra_snapshots=extra, seconds=time.time() - started, plan=job.plan,
                        execution=executor.execution.value, bootstrap=job.bootstrap,
                        phases={name: round(phases[name], 4) for name in PHASES if name in phases})


class _PhaseClock:
    """Adds the time since its last lap to a phase's total."""

    def __init__(self, phases: dict):
        self.phases, self.last = phases, time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now
