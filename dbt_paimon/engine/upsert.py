"""upsert(): one Spark job that upserts a DataFrame into a Paimon primary-key table, one snapshot.

    bootstrap live keys (executors) ─┐
                                     ├─ shuffle by key ─► assign buckets ─► shuffle by (partition, bucket)
    the batch, cast to the table ────┘                                        ─► write files ─► commit (driver)

The driver only plans (reads manifests), collects the small per-task results (manifest entries and
counts) and commits. If another writer committed after the bootstrap snapshot, the files written
may duplicate keys that moved meanwhile: they are deleted and the job re-runs on the new snapshot.
A job that fits in the driver of a local master runs the same steps there (local.py).
"""

from __future__ import annotations

import logging
import pickle
import time
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..store import options as opts
from ..store.errors import CommitConflictError, SchemaError
from ..store.fileio import FileIO
from ..store.schema import SchemaManager, TableSchema, build_schema, resolve_columns
from ..store.snapshot import APPEND
from ..store.table import FileStoreTable
from ..assign.global_index_assigner import BUCKET, HASH, KIND
from ..store.index import HashIndexFile, IndexManifestFile
from ..store.options import BucketMode, MergeEngine
from . import bloom, deploy, jobs, local, tasks
from .compaction import auto_compact, compact
from .settings import RUN_OPTIONS, Execution, RunSettings
from .spark_types import arrow_schema_of, fits, spark_schema

log = logging.getLogger(__name__)

MAX_JOB_ATTEMPTS = 3
# Test hook: called with the attempt number between the job and its commit (to land a racing commit).
_before_commit = None


@dataclass
class UpsertResult:
    table_path: str
    snapshot_id: int | None
    inserted: int = 0
    updated: int = 0
    moved: int = 0
    deleted: int = 0
    skipped: int = 0
    rows_written: int = 0
    attempts: int = 1
    seconds: float = 0.0
    extra_snapshots: list[int] = field(default_factory=list)
    plan: str = ""  # Spark's executed physical plan of the job (or the driver-local plan), for logs and tests
    execution: str = ""  # "distributed" (the Spark job) or "local" (its topology inside the driver)

    @property
    def rows_affected(self) -> int:
        return self.inserted + self.updated + self.moved + self.deleted

    def summary(self) -> str:
        total = self.inserted + self.updated + self.moved + self.deleted + self.skipped
        return (f"UPSERT {total}: {self.inserted} inserted, {self.updated} updated, {self.moved} moved, "
                f"{self.deleted} deleted, {self.skipped} skipped")


def _as_list(value: str | Sequence[str] | None) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return list(value)


def _check_against_table(schema: TableSchema, primary_keys: list[str], partition_keys: list[str],
                         options: Mapping[str, str], path: str) -> None:
    if primary_keys and set(primary_keys) != set(schema.primary_keys):
        raise SchemaError(f"unique_key/primary key {primary_keys} disagrees with the primary key "
                          f"{list(schema.primary_keys)} of the existing table {path}; a primary key cannot change "
                          f"(rebuild the table with --full-refresh)")
    if list(partition_keys) != list(schema.partition_keys):
        raise SchemaError(f"partition keys {partition_keys} disagree with the partition keys "
                          f"{list(schema.partition_keys)} of the existing table {path} (rebuild the table with "
                          f"--full-refresh)")
    for key, value in options.items():  # the run keys are not among them (settings.py)
        stored = schema.options.get(key)
        if stored != value:
            raise SchemaError(f"option {key!r} is {stored!r} on the existing table {path} but {value!r} was given; "
                              f"only {', '.join(sorted(RUN_OPTIONS))} may change between runs")


def _prepare_input(df: DataFrame, schema: TableSchema, counted: Sequence[str]) -> DataFrame:
    """The batch with exactly the table's columns and Spark types; a clear error otherwise."""
    by_name = {f.name: f for f in df.schema.fields}
    lowered = {n.lower(): n for n in by_name}
    missing = [n for n in schema.field_names if n not in by_name and n.lower() not in lowered]
    extra = [n for n in by_name if n not in schema.field_names and n.lower() not in
             {x.lower() for x in schema.field_names}]
    if missing or extra:
        raise SchemaError(f"the batch's columns do not match the table: missing {missing}, unexpected {extra}")
    cols = []
    for f in schema.fields:
        src = by_name.get(f.name) or by_name[lowered[f.name.lower()]]
        target = spark_schema(schema, [f.name]).fields[0].dataType
        if f.name in counted:
            cols.append(F.when(F.col(src.name).isNull(), F.lit(0)).otherwise(F.lit(1)).cast("bigint").alias(f.name))
            continue
        if not fits(src.dataType, f.type):
            raise SchemaError(f"column {f.name!r} is {src.dataType.simpleString()} in the batch but "
                              f"{f.type.sql()} in the table; cast it in the model (no lossy cast is done implicitly)")
        col = F.col(f"`{src.name}`")
        cols.append((col if src.dataType == target else col.cast(target)).alias(f.name))
    return df.select(*cols)


def upsert(df: DataFrame, path: str, *, primary_keys: str | Sequence[str] | None = None,
           partition_keys: str | Sequence[str] | None = (), options: Mapping[str, object] | None = None,
           sequence_by: str | None = None, execution: str | Execution = Execution.AUTO,
           storage_options: Mapping[str, object] | None = None,
           settings: RunSettings | None = None) -> UpsertResult:
    """Upsert df into the Paimon table at path (created if absent); commits one snapshot.

    storage_options: the object store's settings by Paimon's names (s3.endpoint, s3.access-key,
    ...); they may also be given among `options`, and are never stored with the table.

    execution: "distributed" runs the Spark job; "local" runs its topology inside the driver
    (engine/local.py); "auto" picks local on a local master when the batch and the table's keys
    fit in the driver.

    settings: the run's settings (settings.py) as one object, instead of execution and
    storage_options. Run keys among `options` (dynamic-bucket.assigner-parallelism,
    sink.parallelism, cross-partition-upsert.bootstrap-parallelism, commit.max-retries) go to
    the run's settings: they may differ from the table's stored options."""
    started = time.time()
    spark = df.sparkSession
    path = path.rstrip("/")
    if settings is None:
        settings = RunSettings(execution=execution, storage_options=storage_options)
    elif execution != Execution.AUTO or storage_options:  # given as well: they override
        settings = replace(settings, execution=settings.execution if execution == Execution.AUTO else execution,
                           storage_options={**(settings.storage_options or {}), **(storage_options or {})} or None)
    settings, table_options = RunSettings.from_options(options, settings)
    io = FileIO.get(path, dict(settings.storage_options) if settings.storage_options else None)
    primary_keys, partition_keys = _as_list(primary_keys), _as_list(partition_keys)
    given, counted = opts.count_sugar(table_options)
    exists = FileStoreTable.exists(path, io)
    if exists:
        schema = SchemaManager(io, path).latest()
        # the table's spelling of names that match case-insensitively; others stay as given, so
        # the check below names the disagreement
        spelled = {n.lower(): n for n in schema.field_names}
        primary_keys = [spelled.get(k.lower(), k) for k in primary_keys]
        partition_keys = [spelled.get(k.lower(), k) for k in partition_keys]
        given = opts.validate(given, schema.field_names) if given else {}
        _check_against_table(schema, primary_keys, partition_keys, given, path)
        counted = [f.name for f in schema.fields if schema.core.is_count(f.name)]
    else:
        if not primary_keys:
            raise SchemaError(f"table {path} does not exist and no primary key (unique_key) was given")
        primary_keys = resolve_columns("primary key", primary_keys, df.columns)
        partition_keys = resolve_columns("partition key", partition_keys, df.columns)
        arrow = arrow_schema_of(df.schema)
        if counted:
            arrow = pa.schema([pa.field(f.name, pa.int64()) if f.name in counted else f for f in arrow])
        # the run keys given are stored with a new table, as Paimon stores them
        schema = build_schema(arrow, primary_keys, partition_keys, {**given, **settings.run_options()})
    if sequence_by is not None:
        [sequence_by] = resolve_columns("sequence_by", [sequence_by], schema.field_names)
        if sequence_by in schema.primary_keys:
            raise SchemaError(f"sequence_by column {sequence_by!r} is part of the primary key")
    settings = settings.over(schema.options)
    batch = _prepare_input(df, schema, counted)
    latest = FileStoreTable(path, schema, io).latest_snapshot() if exists else None
    # The batch is read twice when the table has keys (its Bloom filter, then the job), and once
    # more when auto must count it: keep it.
    cached = (exists and schema.bucket_mode != BucketMode.HASH_DYNAMIC) or (
        settings.execution == Execution.AUTO and local.unknown_size(batch))
    if cached:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        mode = local.choose(spark, batch, settings.execution, latest.total_record_count if latest else 0)
        if mode == Execution.LOCAL:
            with jobs.spark_conf(spark, jobs.JOB_SETTINGS):
                try:
                    rows = batch.toArrow()
                except Exception as e:  # noqa: BLE001 - translated when it is one of ours
                    jobs.reraise_task_error(e)
                    raise
            if cached:
                batch.unpersist()
                cached = False
            return _attempts(spark, io, path, schema, exists, rows, sequence_by, settings, started, mode)
        deploy.prepare(spark, path)  # a cluster's executors: ship the engine, check their Python
        return _attempts(spark, io, path, schema, exists, batch, sequence_by, settings, started, mode)
    finally:
        if cached:
            batch.unpersist()


def _attempts(spark, io, path, schema, exists, batch, sequence_by, settings: RunSettings, started,
              execution: Execution) -> UpsertResult:
    """execution DISTRIBUTED: batch is a DataFrame and the Spark job runs; LOCAL: batch is an
    Arrow table and the driver-local job runs. The post-commit compaction runs the same way."""
    on_driver = execution == Execution.LOCAL
    for attempt in range(1, MAX_JOB_ATTEMPTS + 1):
        table = FileStoreTable(path, schema, io)
        plan = table.plan() if exists else None
        snapshot_id = plan.snapshot.id if plan and plan.snapshot else None
        if on_driver:
            entries, counts, index_changes, job_plan = local.run_job(table, batch, plan, sequence_by)
        else:
            entries, counts, index_changes, job_plan = _run_job(spark, table, batch, plan, sequence_by, settings)
        if _before_commit is not None:
            _before_commit(attempt)
        commit = table.new_commit()

        def abandon():
            commit.abort(entries)
            for meta in index_changes.values():
                HashIndexFile(io, path).delete(meta)

        if not exists:
            try:
                SchemaManager(io, path).create(schema)
            except SchemaError:
                abandon()
                raise
            exists = True
        index_manifest = ...
        if index_changes:
            previous = plan.snapshot.index_manifest if plan and plan.snapshot else None
            index_manifest = IndexManifestFile(io, path).combine(previous, index_changes)
            written_manifest = f"{path}/manifest/{index_manifest}"
            drop_index_files = abandon

            def abandon():
                drop_index_files()
                io.delete(written_manifest)
        try:
            result = commit.commit(entries, APPEND, expected_latest=snapshot_id, index_manifest=index_manifest)
        except CommitConflictError as e:
            abandon()
            if attempt == MAX_JOB_ATTEMPTS:
                raise CommitConflictError(f"{e}; gave up after {attempt} attempts of the upsert job") from None
            log.warning("upsert into %s conflicted with a concurrent commit (%s); re-running on the new snapshot",
                        path, e)
            continue
        except BaseException:
            abandon()
            raise
        written = sum(e.file.row_count for e in entries)
        new_id = result.snapshot.id if result else snapshot_id
        extra = after_commit(spark, path, schema, io, execution) if result is not None else []
        return UpsertResult(path, new_id, rows_written=written, attempts=attempt, extra_snapshots=extra,
                            seconds=time.time() - started, plan=job_plan, execution=execution.value, **counts)
    raise AssertionError("unreachable")


def after_commit(spark: SparkSession, path: str, schema: TableSchema, io: FileIO, execution: str) -> list[int]:
    """What Paimon's writers do after a commit: compaction (first-row tables always, since Paimon's
    batch readers skip their level-0 files; others when a bucket reached
    num-sorted-run.compaction-trigger sorted runs), then snapshot expiration by the snapshot.*
    options. A compaction that loses a race is logged; the next commit tries again.
    execution: where the job that committed ran, and so where compaction runs: "local" in driver
    threads (no Spark job), "distributed" as a Spark job (engine/compaction.py)."""
    extra = []
    try:
        if schema.core.merge_engine == MergeEngine.FIRST_ROW:
            sid = compact(spark, path, io=io, execution=execution)
        else:
            sid = auto_compact(spark, path, io, execution=execution)
        extra = [sid] if sid else []
    except CommitConflictError as e:
        log.warning("compaction of %s lost a race with another commit and will run after the next one: %s", path, e)
    expired = FileStoreTable.open(path, io).expire_snapshots()
    if expired.expired:
        log.info("expired snapshots %s of %s", list(expired.expired), path)
    return extra


def _batch_bloom(spark: SparkSession, batch: DataFrame, schema: TableSchema, plan):
    """OR of the per-task Bloom filters of the batch's keys (None when the key cannot be hashed)."""
    if not bloom.supports(schema):
        return None
    bits = bloom.size_bits(plan.snapshot.total_record_count if plan and plan.snapshot else 0)
    keys = [F.col(f"`{k}`") for k in schema.primary_keys]
    # One partial filter per core, not per input partition: the driver ORs at most `cores` bitsets.
    cores = max(spark.sparkContext.defaultParallelism, 1)
    keyed = batch.select(*keys)
    if keyed.rdd.getNumPartitions() > cores:
        keyed = keyed.coalesce(cores)
    parts = keyed.mapInArrow(bloom.build_task(schema, bits), "bits binary").collect()
    out = np.zeros(bits // 8, dtype=np.uint8)
    for row in parts:  # one per task
        out |= np.frombuffer(row.bits, dtype=np.uint8)
    return out


def _routes(spark: SparkSession, n: int) -> dict[int, int]:
    """For each assigner id, an int whose Spark hash partitioning (pmod(murmur3, n)) sends it there."""
    found: dict[int, int] = {}
    span = 16 * n
    while len(found) < n:
        rows = spark.range(0, span).selectExpr("cast(id as int) as r", f"pmod(hash(cast(id as int)), {n}) as p")
        for r in rows.collect():  # a few dozen ints
            found.setdefault(r.p, r.r)
        span *= 4
    return found


def _run_job(spark: SparkSession, table: FileStoreTable, batch: DataFrame, plan, sequence_by: str | None,
             settings: RunSettings):
    schema = table.schema
    parallelism = spark.sparkContext.defaultParallelism
    num_assigners = settings.assigner_parallelism or parallelism
    num_writers = settings.sink_parallelism or max(parallelism * 2, 1)
    splits, next_sequence, index_files = tasks.bucket_state(table, plan)
    hashed = schema.bucket_mode == BucketMode.HASH_DYNAMIC
    hash_field = [T.StructField(HASH, T.IntegerType())] if hashed else []
    union_schema = T.StructType(spark_schema(schema).fields + hash_field + [
        T.StructField(BUCKET, T.IntegerType()), T.StructField(tasks.SOURCE, T.ByteType())])

    rows = batch.withColumn(BUCKET, F.lit(None).cast("int")).withColumn(tasks.SOURCE, F.lit(1).cast("tinyint"))
    if hashed:
        rows = rows.mapInArrow(tasks.hash_task(schema), T.StructType(
            spark_schema(schema).fields + [union_schema[BUCKET], union_schema[tasks.SOURCE], union_schema[HASH]]))
    bootstrap_parallelism = settings.bootstrap_parallelism or parallelism * 2

    key_cols = [F.col(f"`{k}`") for k in schema.primary_keys]
    part_key_cols = [F.col(f"`{p}`") for p in schema.partition_keys]
    bloom_bits = _batch_bloom(spark, batch, schema, plan) if splits and not hashed else None
    # Every row reaches its assigner through ROUTE (a value the shuffle hashes): a row by its key
    # (cross-partition) or by (partition, key hash) (HASH_DYNAMIC), as Paimon routes them; and
    # what an assigner must count for the buckets it owns (b % assigners == its id) goes to the
    # owner by a chosen ROUTE value: one count row per bucket (cross-partition), the index
    # entries of its buckets (HASH_DYNAMIC, Paimon's PartitionIndex.loadIndex bucketFilter).
    counted = bool(splits) and not hashed
    routes = _routes(spark, num_assigners) if counted or index_files else None
    route_of_row = F.hash(*part_key_cols, F.col(HASH)) if hashed else F.hash(*key_cols)
    rows = rows.withColumn(tasks.ROUTE, route_of_row)
    if splits:
        boot_cols = list(dict.fromkeys(list(schema.primary_keys) + list(schema.partition_keys)
                                       + ([sequence_by] if sequence_by else [])))
        count_fields = [T.StructField(tasks.COUNT, T.LongType()), T.StructField(tasks.ROUTE, T.IntegerType())]
        boot_schema = T.StructType([union_schema[c] for c in boot_cols] + [union_schema[BUCKET],
                                                                           union_schema[tasks.SOURCE]] + hash_field
                                   + (count_fields if counted else []))
        blobs = tasks.chunk_splits(splits, bootstrap_parallelism)
        existing = jobs.descriptors(spark, blobs).mapInArrow(
            tasks.bootstrap_task(table.path, schema, table.io, sequence_by, with_hash=hashed, bloom_bits=bloom_bits,
                                 routes=routes if counted else None), boot_schema)
        if counted:
            existing = existing.withColumn(tasks.ROUTE, F.coalesce(F.col(tasks.ROUTE), route_of_row))
            rows = rows.withColumn(tasks.COUNT, F.lit(None).cast("bigint"))
        else:
            existing = existing.withColumn(tasks.ROUTE, route_of_row)
        rows = rows.unionByName(existing, allowMissingColumns=True)
    if index_files:
        entries = list(index_files.values())
        step = max(1, len(entries) // bootstrap_parallelism + 1)
        blobs = [pickle.dumps(entries[i:i + step]) for i in range(0, len(entries), step)]
        index_schema = T.StructType([union_schema[p] for p in schema.partition_keys] + [
            union_schema[HASH], union_schema[BUCKET], union_schema[tasks.SOURCE]])
        indexed = jobs.descriptors(spark, blobs).mapInArrow(tasks.index_bootstrap_task(table.path, schema, table.io), index_schema)
        indexed = indexed.withColumn(tasks.ROUTE, route_of_row)
        # An entry whose hash routes to another assigner than its bucket's owner goes to both:
        # the router maps the hash, the owner counts it (an assigner's extra hashes map nothing,
        # no batch row of theirs reaches it).
        router = F.pmod(F.hash(F.col(tasks.ROUTE)), F.lit(num_assigners))
        owner = F.pmod(F.col(BUCKET), F.lit(num_assigners))
        owner_route = F.element_at(F.array(*[F.lit(routes[i]) for i in range(num_assigners)]), owner + 1)
        to_owner = indexed.where(router != owner).withColumn(tasks.ROUTE, owner_route)
        rows = rows.unionByName(indexed, allowMissingColumns=True).unionByName(to_owner, allowMissingColumns=True)
    assigned_schema = T.StructType(spark_schema(schema).fields + hash_field + [
        T.StructField(BUCKET, T.IntegerType()), T.StructField(KIND, T.ByteType()),
        T.StructField(tasks.COUNT, T.LongType())])
    assigned = rows.repartition(num_assigners, F.col(tasks.ROUTE)).mapInArrow(
        tasks.assign_task(schema, num_assigners, sequence_by, counted=counted), assigned_schema)
    part_cols = [F.col(f"`{p}`") for p in schema.partition_keys] + [F.col(BUCKET)]
    written = assigned.repartition(num_writers, *part_cols).mapInArrow(
        tasks.write_task(table.path, schema, table.io, next_sequence, index_files), "payload binary")
    entries, counts, index_changes = [], {}, {}
    for part_entries, part_counts, part_index in jobs.collect_payloads(spark, written):
        entries += part_entries
        index_changes.update(part_index)
        for k, v in part_counts.items():
            counts[k] = counts.get(k, 0) + v
    return entries, counts, index_changes, written._jdf.queryExecution().executedPlan().toString()
