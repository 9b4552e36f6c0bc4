"""The distributed executor: the upsert job as one Spark job (mapInArrow stages and shuffles).

    live keys (bootstrap tasks) ─┐
    HASH index entries ──────────┼─ shuffle by ROUTE ─► assign ─► shuffle by writer (packed rows) ─► write
    the batch, cast to the table ┘

A cross-partition table (KEY_DYNAMIC) has no writer stage: its assigners write the rows they
assign (tasks.assign_write_task), one shuffle in all; `sink.parallelism` asks for writers of their
own. A cross-partition table with a key index (dbt_paimon/key_index/) bootstraps from it instead of
the bootstrap tasks: the driver catches the index up to the job's snapshot; one stage over the
batch sends its rows to their assigners packed (key_lookup.route_task), replacing the bootstrap
tasks, the Bloom-filter pass over the batch and the row-by-row shuffle; each assigner looks its
keys up in the index and counts its buckets' keys from it (key_lookup.JobLookup), and each
assigner writes its keys' share of the commit's record in the index (runs the driver then names
in it; it holds each of its keys' old and new places).

    the batch ─► route (pack per assigner) ─► shuffle by TO ─► look up, count, assign and write

The driver only plans (reads manifests), collects the small per-task results (manifest entries and
counts) and commits (upsert.py). Every stage runs the functions of tasks.py; the rows between
stages are assign/rows.py's layouts, their Spark schemas derived from them (spark_types.struct_of).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass

import numpy as np
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ...assign.global_index_assigner import AssignCounts
from ...assign.rows import BUCKET, DIGEST, HASH, PACKED, PAYLOAD, ROUTE, SOURCE, TO, Source, StageRows
from ... import key_index
from ...store.common import key_hash
from ...store.common.options import BucketMode
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from . import bloom, deploy, index_build, jobs, key_lookup, local, recommit, tasks
from .executor import JobOutput
from .key_lookup import KeyLookup
from ..settings import Execution, RunSettings
from ..spark_types import struct_of


# An assign or write task holds its whole share of the batch (Arrow tables in its Python worker,
# ~7x the share's Arrow size at peak, which is ~3x its Parquet size), so past TASK_BYTES of Spark's
# estimate per core the job runs more tasks: 100M rows (3.2 GB of Parquet) on 2 cores were two
# assign tasks of ~11 GB each, killed by the kernel. More assigners mean more buckets per partition
# (a bucket b belongs to assigner b % n, and each opens its own, as in Paimon): a big first load
# gets smaller buckets rather than a killed job. A streaming assigner would need neither.
TASK_BYTES = 128 << 20
MAX_SIZED_TASKS = 4096  # an estimate near Long.MaxValue (unknown sizes vary) must not ask for more


def sized_tasks(size: int | None, at_least: int) -> int:
    """Tasks for a batch of Spark's estimated size (None or unknown: at_least)."""
    if size is None or local.unknown(size):
        return at_least
    return int(min(max(at_least, -(-size // TASK_BYTES)), MAX_SIZED_TASKS))  # Spark takes an int


class DistributedExecutor:
    """Runs upsert jobs on Spark over a DataFrame batch (the table's columns, its Spark types).
    size: Spark's estimate of the batch's bytes, when the caller has it (None: estimated here)."""

    execution = Execution.DISTRIBUTED

    def __init__(self, spark: SparkSession, batch: DataFrame, settings: RunSettings, path: str,
                 size: int | None = None):
        self.spark = spark
        self.batch = batch
        self.settings = settings
        self.size = local.estimated_bytes(batch) if size is None else size
        deploy.prepare(spark, path)  # a cluster's executors: ship the engine, check their Python
        self._keys = 0  # the batch's keys, as the last job counted them
        self._digest: np.ndarray | None = None  # of the batch's key hashes, once a commit conflicted

    def run_job(self, table: FileStoreTable, plan, stage: StageRows) -> JobOutput:
        job = _run_job(self.spark, table, self.batch, plan, stage, self.settings, self.size)
        self._keys = sum(job.counts.as_dict().values())
        return job

    def holds_any(self, schema: TableSchema, hashes: np.ndarray) -> bool:
        keys = self.batch.select(*[F.col(f"`{k}`") for k in schema.primary_keys])
        if self._digest is None:  # one pass, at the first conflict; the checks after it are the driver's
            cores, bits = max(self.spark.sparkContext.defaultParallelism, 1), recommit.digest_bits(self._keys)
            self._digest = np.zeros(bits // 8, dtype=np.uint8)
            for digest in jobs.collect_payloads(self.spark, keys.coalesce(cores).mapInArrow(
                    recommit.digest_task(schema, bits), struct_of(PAYLOAD))):
                self._digest |= np.frombuffer(digest, dtype=np.uint8)
        if not recommit.digest_may_hold(self._digest, hashes):
            return False
        hits = jobs.collect_payloads(self.spark,
                                     keys.mapInArrow(recommit.hits_task(schema, hashes), struct_of(PAYLOAD)))
        return sum(hits) > 0


def _batch_digest(spark: SparkSession, batch: DataFrame, schema: TableSchema, plan):
    """(Bloom filter of the batch's keys or None, the batch's partitions or None) for the bootstrap,
    from one pass over the batch: per-task digests, OR-ed and united in the driver."""
    bits = bloom.size_bits(plan.snapshot.total_record_count) if bloom.supports(schema) else None
    pruning = tasks.partition_pruning(schema)
    if bits is None and not pruning:
        return None, None
    # One partial digest per core, not per input partition: the driver ORs at most `cores` bitsets.
    cores = max(spark.sparkContext.defaultParallelism, 1)
    keyed = batch.select(*[F.col(f"`{c}`")
                           for c in dict.fromkeys(list(schema.primary_keys) + list(schema.partition_keys))])
    if keyed.rdd.getNumPartitions() > cores:
        keyed = keyed.coalesce(cores)
    out = np.zeros(bits // 8, dtype=np.uint8) if bits else None
    partitions: set | None = set() if pruning else None
    for row in keyed.mapInArrow(tasks.digest_task(schema, bits, pruning), struct_of(DIGEST)).collect():  # one per task
        if out is not None:
            out |= np.frombuffer(row.bits, dtype=np.uint8)
        if partitions is not None:
            partitions |= pickle.loads(row.partitions)
    return out, partitions


def _one_run_per_shard(spark: SparkSession, table: FileStoreTable, stage: StageRows, commit,
                       recorded: list) -> tuple[list, frozenset]:
    """The assigners' (runs, count changes), with the runs of each shard that got several (one per
    assigner touching it) merged into one by a Spark task per shard: the index's LSM gets one run
    per commit, as from a driver-local commit, whatever the number of assigners. (Left as they
    were, 25 tasks over 9 commits made 225 runs per shard, and a lookup of 10K keys into 100M
    searched them all.) A key's assigner is its hash mod the assigners and its shard its hash's
    low bits, so with a power of two of assigners up to the shards' number every shard gets one
    run and no task runs here. When the commit is a bulk load (key_index.full_merge_due), the same
    tasks merge each touched shard's older runs in as well: the shards it names are returned, their
    runs replaced by the merged one. The runs merged away are named nowhere: clean() sweeps them."""
    by_shard: dict[int, list[str]] = {}
    for runs, _ in recorded:
        for s, name in runs:
            by_shard.setdefault(s, []).append(name)
    new_keys = sum(max(n, 0) for _, deltas in recorded for n in deltas.values())
    full = key_index.full_merge_due(commit.state, new_keys)
    items = sorted((s, names, commit.state.runs[s] if full else []) for s, names in by_shard.items()
                   if len(names) > 1 or (full and commit.state.runs[s]))
    if not items:
        return recorded, frozenset()
    merged = dict(by_shard)
    job = jobs.descriptors(spark, items).mapInArrow(
        key_lookup.merge_runs_task(table.path, table.io, stage, dict(key_lookup.INDEX_TUNING), commit.seq,
                                   commit.state if full else None, commit.gen),
        struct_of(PAYLOAD))
    for part in jobs.collect_payloads(spark, job):
        for s, name in part:
            merged[s] = [name] if name else []
    runs = [(s, name) for s, names in sorted(merged.items()) for name in names]
    replaced = frozenset(s for s, _, older in items if older)
    return [(runs, {})] + [([], deltas) for _, deltas in recorded], replaced


def _routes(n: int) -> list[int]:
    """Per task id below n, an int that Spark's hash partitioning (pmod(murmur3, n)) sends
    there. Spark's murmur3 of an int is Murmur3 of one 4-byte word, seed 42: store/key_hash's,
    so no Spark job per shuffle asks Spark for it."""
    span = 16 * n
    while True:
        ints = np.arange(span, dtype=np.int64)
        to = np.mod(key_hash.hash_words(ints.astype(np.uint32)[:, None]).astype(np.int64), n)
        tasks_hit, first = np.unique(to, return_index=True)
        if len(tasks_hit) == n:  # tasks_hit is 0..n-1, in order
            return ints[first].tolist()
        span *= 4


@dataclass(frozen=True)
class _Sizes:
    """How many tasks each stage of one job runs."""

    parallelism: int
    assigners: int
    writers: int
    bootstrap_tasks: int


@dataclass
class _Routed:
    """The batch's rows (and what their assigners must learn) shuffled to the assigners."""

    to_assigners: DataFrame
    counted: bool  # the assigners count their buckets' keys (a cross-partition table with data)
    packed: bool   # rows packed per assigner (key_lookup.route_task), not one Spark row each
    boot: dict     # where the job learnt where keys live (UpsertResult.bootstrap)
    lookup: KeyLookup | None = None  # the key index the assigners look their keys up in
    commit: key_lookup.JobCommit | None = None  # and record their keys' share of the commit in


def _run_job(spark: SparkSession, table: FileStoreTable, batch: DataFrame, plan, stage: StageRows,
             settings: RunSettings, size: int | None) -> JobOutput:
    """One job of one of two shapes, by how the assigners learn where the table's keys live: from
    the key index (a cross-partition table whose keys it can hold), or from a bootstrap that reads
    the table's keys (any other cross-partition table; HASH_DYNAMIC, from its hash index). Then the
    assigners assign, and write or hand over to writers; the driver collects what was written."""
    parallelism = spark.sparkContext.defaultParallelism
    sizes = _Sizes(parallelism, settings.assigner_parallelism or sized_tasks(size, parallelism),
                   settings.sink_parallelism or sized_tasks(size, max(parallelism * 2, 1)),
                   settings.bootstrap_parallelism or parallelism * 2)
    splits, next_sequence, index_files = tasks.bucket_state(table, plan)
    if settings.key_index and key_lookup.usable(stage):
        routed = _routed_by_key_index(spark, table, batch, plan, stage, sizes, splits)
    else:
        routed = _routed_with_bootstrap(spark, table, batch, plan, stage, sizes, splits, index_files)
    written = _assigned_and_written(table, stage, routed, sizes, next_sequence, index_files, settings)
    return _job_output(spark, table, stage, batch, routed, written)


def _routed_by_key_index(spark: SparkSession, table: FileStoreTable, batch: DataFrame, plan, stage: StageRows,
                         sizes: _Sizes, splits) -> _Routed:
    """Cross-partition, bootstrapped from the key index: built first by a Spark job when the table
    has none (index_build.py: the table's keys never reach the driver), else caught up by the
    driver to this snapshot. No pass over the batch for a Bloom filter, no read of the table's
    keys: one pass over the batch, each task sending its rows, packed, to their assigners by
    Paimon's key hash (key_lookup.route_task), who look their keys up (JobLookup: in parallel,
    whatever the batch's partitions: a batch read from one file is one partition), take the counts
    of the buckets they own (b % assigners) from the index's state, and write their keys' share of
    the index's record; the driver adds the runs' names and the counts. A new table's first load is
    routed the same way with nothing to look up: its assigners open the buckets of the keys that
    reach them in the next runs too (tasks.assign_write_task)."""
    lookup, commit, boot = None, None, {}
    if splits:
        started = time.perf_counter()
        lookup = KeyLookup(table, plan, stage)
        lookup.refresh(lambda at: index_build.build(spark, table, at, sizes.bootstrap_tasks))
        boot = {"source": "key index", **lookup.stats(), "seconds": round(time.perf_counter() - started, 4)}
        commit = lookup.job_commit()
    # Few, big tasks, which stream their rows in chunks (coalesce never adds partitions; asking
    # costs a round of planning)
    source = batch.coalesce(sizes.parallelism) if lookup is not None else batch
    packed = source.mapInArrow(key_lookup.route_task(table.path, table.io, stage, dict(key_lookup.INDEX_TUNING),
                                                     _routes(sizes.assigners)),
                               struct_of(PACKED))
    return _Routed(packed.repartition(sizes.assigners, F.col(TO)), counted=bool(splits), packed=True, boot=boot,
                   lookup=lookup, commit=commit)


def _routed_with_bootstrap(spark: SparkSession, table: FileStoreTable, batch: DataFrame, plan, stage: StageRows,
                           sizes: _Sizes, splits, index_files: dict) -> _Routed:
    """Bootstrapped from the table, as Paimon's IndexBootstrap: the live keys of the batch's
    partitions (a Bloom filter of the batch's keys prunes them in the reading tasks) join the
    batch's rows on their way to the assigners; a HASH_DYNAMIC table's hash index entries instead.
    Every row reaches its assigner through ROUTE (a value the shuffle hashes): a row by its key
    (cross-partition) or by (partition, key hash) (HASH_DYNAMIC), as Paimon routes them; and what
    an assigner must count for the buckets it owns (b % assigners == its id) goes to the owner by a
    chosen ROUTE value: one count row per bucket (cross-partition), the index entries of its
    buckets (HASH_DYNAMIC, Paimon's PartitionIndex.loadIndex bucketFilter)."""
    schema, hashed = table.schema, stage.hashed
    boot = {"source": "table"} if splits else {}
    bloom_bits, partitions = _batch_digest(spark, batch, schema, plan) if splits else (None, None)
    splits, boot_index = tasks.prune(splits, index_files, partitions, schema)
    counted = bool(splits) and not hashed
    rows = batch.mapInArrow(tasks.hash_task(stage), struct_of(stage.batch())) if hashed else batch
    # packed columns added at once (each column added is a round of Spark's analyzer in the driver)
    rows = rows.withColumn(BUCKET, F.lit(None).cast("int")).withColumn(SOURCE, F.lit(int(Source.BATCH)).cast("tinyint"))
    routes = _routes(sizes.assigners) if counted or boot_index else None
    route_of_row = (F.hash(*[F.col(f"`{p}`") for p in schema.partition_keys], F.col(HASH)) if hashed
                    else F.hash(*[F.col(f"`{k}`") for k in schema.primary_keys]))
    rows = rows.withColumn(ROUTE, route_of_row)
    if splits:
        groups = tasks.chunk_splits(splits, sizes.bootstrap_tasks)
        live = jobs.descriptors(spark, groups).mapInArrow(
            tasks.live_keys_task(table.path, table.io, stage, bloom_bits, routes if counted else None),
            struct_of(stage.live_key(counted)))
        # a count row carries its owner's ROUTE; a live key is routed as the batch rows are
        live = live.withColumn(ROUTE, F.coalesce(F.col(ROUTE), route_of_row) if counted else route_of_row)
        rows = rows.unionByName(live, allowMissingColumns=True)
    if boot_index:
        entries = list(boot_index.values())
        step = max(1, len(entries) // sizes.bootstrap_tasks + 1)
        indexed = jobs.descriptors(spark, [entries[i:i + step] for i in range(0, len(entries), step)]).mapInArrow(
            tasks.index_entries_task(table.path, table.io, stage), struct_of(stage.index_entry()))
        indexed = indexed.withColumn(ROUTE, route_of_row)
        # An entry whose hash routes to another assigner than its bucket's owner goes to both:
        # the router maps the hash, the owner counts it (an assigner's extra hashes map nothing,
        # no batch row of theirs reaches it).
        router = F.pmod(F.hash(F.col(ROUTE)), F.lit(sizes.assigners))
        owner = F.pmod(F.col(BUCKET), F.lit(sizes.assigners))
        owner_route = F.element_at(F.array(*[F.lit(r) for r in routes]), owner + 1)
        to_owner = indexed.where(router != owner).withColumn(ROUTE, owner_route)
        rows = rows.unionByName(indexed, allowMissingColumns=True).unionByName(to_owner, allowMissingColumns=True)
    rows = rows.select(*[F.col(f"`{f.name}`") for f in stage.routed(counted)])
    return _Routed(rows.repartition(sizes.assigners, F.col(ROUTE)), counted=counted, packed=False, boot=boot)


def _assigned_and_written(table: FileStoreTable, stage: StageRows, routed: _Routed, sizes: _Sizes,
                          next_sequence, index_files: dict, settings: RunSettings) -> DataFrame:
    """The assign stage, and the write stage after it: a cross-partition table's assigners write
    the rows they assign themselves (tasks.assign_write_task: one stage and one shuffle less);
    `sink.parallelism` asks for writers of their own, to which the assigners send each writer its
    buckets' rows packed (PACKED): whole buckets per writer, as a shuffle by (partition, bucket)
    would, in a few large values."""
    recording = routed.commit.write if routed.commit is not None else None  # each assigner's share of the record
    looking_up = routed.lookup.job_lookup() if routed.lookup is not None else None  # its keys and counts
    if table.schema.bucket_mode == BucketMode.KEY_DYNAMIC and not settings.sink_parallelism:
        return routed.to_assigners.mapInArrow(
            tasks.assign_write_task(stage, sizes.assigners, routed.counted, table.path, table.io, next_sequence,
                                    packed=routed.packed, record=recording, lookup=looking_up),
            struct_of(PAYLOAD))
    to_writers = _routes(sizes.writers)
    assigned = routed.to_assigners.mapInArrow(
        tasks.assign_task(stage, sizes.assigners, routed.counted, to_writers, packed=routed.packed,
                          record=recording, lookup=looking_up),
        struct_of(PACKED))
    return assigned.repartition(sizes.writers, F.col(TO)).mapInArrow(
        tasks.write_task(table.path, table.schema, table.io, next_sequence, index_files, packed=True,
                         buckets=stage.buckets),
        struct_of(PAYLOAD))


def _job_output(spark: SparkSession, table: FileStoreTable, stage: StageRows, batch: DataFrame, routed: _Routed,
                written: DataFrame) -> JobOutput:
    """Runs the job and gathers what its tasks wrote; a task's refusal aborts what the others wrote."""
    # Arrow batches sized in rows from the batch's row width, not by Spark's per-row byte check
    payloads = jobs.collect_payloads(spark, written, settings=jobs.rows_settings(spark, batch.schema))
    refused = [p.error for p in payloads if isinstance(p, tasks.Refused)]
    if refused:  # an assigner refused its rows after the others wrote theirs: nothing stays behind
        table.new_commit().abort([e for p in payloads if not isinstance(p, tasks.Refused) for e in p[0]])
        raise refused[0]
    entries, counts, index_changes, recorded = [], AssignCounts(), {}, []
    for part_entries, part_counts, part_index, part_recorded in payloads:
        entries += part_entries
        counts += part_counts
        index_changes.update(part_index)
        recorded += part_recorded
    record = None
    if routed.commit is not None:
        recorded, replaced = _one_run_per_shard(spark, table, stage, routed.commit, recorded)
        record = routed.lookup.job_recorder(routed.commit, recorded, entries, replaced)
    return JobOutput(entries, counts, index_changes, written._jdf.queryExecution().executedPlan().toString(),
                     record, routed.boot)
