"""The driver-local executor: the upsert job's stages inside the driver, for jobs that fit in it.

On a local master, Spark's executors are threads of the same machine and every task of the job is a
round trip through a Python worker; for a batch of a few hundred MB the stages' fixed costs
dominate the upsert (see BENCHMARKS.md). When the batch and the table's key index fit in the driver,
the same stage functions (tasks.py) run here on Arrow tables:

    live keys (thread pool over splits, or the key index) ─► assign (one assigner owning every bucket)
    ─► write (thread pool over shares of whole buckets, taken by position; the key index's runs
       of the commit in one more thread; a small batch in the driver's thread) ─► commit
       (upsert.py) ─► post-commit compaction (compaction.py, LOCAL: thread pool over buckets)
       ─► the key index names the runs (key_lookup.py)

The shuffles have nothing to do: one assigner sees every key, and each writer thread gets whole
buckets. `execution="distributed"` forces the Spark job; a non-local master always runs it.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
from pyspark.errors.exceptions.captured import convert_exception
from pyspark.serializers import UTF8Deserializer, read_int
from pyspark.sql import DataFrame, SparkSession

from ...store.common.groups import group_codes
from ...assign.rows import BUCKET, Source, StageRows, conform, of_source
from ...store.index.index import HashIndexFile
from ...store.read.read import TableRead
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from . import bloom, deploy, jobs, key_lookup, recommit, tasks
from .executor import JobOutput, driver_threads
from .key_lookup import KeyLookup
from ..settings import Execution

log = logging.getLogger(__name__)

# Above these the job runs on Spark even on a local master: the batch (Spark's estimate of its
# size) and the table's keys would be held by the driver process.
LOCAL_MAX_BATCH_BYTES = 512 << 20
LOCAL_MAX_TABLE_ROWS = 50_000_000
# Fewer assigned rows than this are written in the driver's thread, the key index's runs after
# the data files: a small batch's writes are mostly per-file Python, for which threads only take
# turns at the GIL. Write phase, sequential against threaded (W1's batch, 7 upserts each): 12.5K
# rows 0.034 / 0.041 s, 62K rows 0.090 / 0.075 s, 250K rows 0.27 (one thread's sum) / 0.17 s.
PARALLEL_WRITE_ROWS = 32_768


_UNKNOWN = 1 << 62
# Spark says Long.MaxValue (spark.sql.defaultSizeInBytes) for a relation it cannot size (RDDs,
# Python data sources, so our own `paimon` source), and a projection or filter over one scales
# that down by row width: 3 rows read from a Paimon table and projected were "4.2e18 bytes", so
# 4,096 tasks of a few rows each (a 327 s run of a 3-row model). No real batch reaches this.
_NO_ESTIMATE_ABOVE = 1 << 50  # 1 PiB


def estimated_bytes(df: DataFrame) -> int:
    """Spark's size estimate of a DataFrame (from files, a cache or literal rows); _UNKNOWN when it
    has none."""
    try:
        size = df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        size = int(size if isinstance(size, int) else size.toString())  # py4j: int, or a Scala BigInt
    except Exception:  # noqa: BLE001 - no estimate
        return _UNKNOWN
    return _UNKNOWN if size >= _NO_ESTIMATE_ABOVE else size


def unknown(size: int) -> bool:
    return size >= _UNKNOWN


def choose(spark: SparkSession, df: DataFrame, execution: str | Execution, table_rows: int,
           size: int | None = None) -> Execution:
    """Where the job runs (LOCAL or DISTRIBUTED). Without Spark's size estimate, auto counts the
    (persisted) batch and takes Spark's default row width. size: the estimate, when the caller
    has it already (each estimate is a round of Spark's optimizer)."""
    execution = Execution.parse(execution)
    if execution != Execution.AUTO:
        return execution
    if not may_run_here(spark, table_rows):
        return Execution.DISTRIBUTED
    size = estimated_bytes(df) if size is None else size
    if size >= _UNKNOWN:
        size = df.count() * int(df._jdf.schema().defaultSize())
    return Execution.LOCAL if size <= LOCAL_MAX_BATCH_BYTES else Execution.DISTRIBUTED


def may_run_here(spark: SparkSession, table_rows: int) -> bool:
    """Whether auto may run a job over a table of table_rows in the driver: on a local master
    (local-cluster[...] is a cluster), with the table's keys within LOCAL_MAX_TABLE_ROWS."""
    return not deploy.is_cluster(spark) and table_rows <= LOCAL_MAX_TABLE_ROWS


@functools.cache
def _utc_argument(to_arrow_schema) -> dict:
    """to_arrow_schema's argument for UTC instants in the installed pyspark (read once)."""
    takes_zone = "timezone" in inspect.signature(to_arrow_schema).parameters
    return {"timezone": "UTC"} if takes_zone else {"timestamp_utc": True}


def collect_within(spark: SparkSession, batch: DataFrame, limit: int) -> pa.Table | None:
    """The batch as one Arrow table if it holds at most `limit` bytes of Arrow, else None.

    For a batch Spark has no size estimate of (rows of a Paimon table, or of Python data), auto
    would otherwise persist and count the batch before choosing, then convert it from the cache:
    a 200K-row batch over a Paimon table took 1.67-2.51 s that way against 1.12-1.75 s read once
    (the git history of BENCHMARKS.md). Here the rows are read once, as toArrow reads them, but
    counted as they stream in: past the limit the read is abandoned and its Spark job cancelled.
    This reads Spark's Arrow collect stream itself (Dataset.collectAsArrowToPython, as toArrow
    does): if a Spark version changes it, StreamUnavailable is raised before any job runs, and
    the caller counts the batch instead."""
    try:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.util import _create_local_socket
        serve = batch._jdf.collectAsArrowToPython
    except (ImportError, AttributeError) as e:
        raise StreamUnavailable(str(e)) from None
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    # as toArrow: timestamps as UTC instants (pyspark 4.3 says so with timezone=, 4.0-4.1 with
    # timestamp_utc=), strings as the conf says
    utc = _utc_argument(to_arrow_schema)
    schema = to_arrow_schema(batch.schema, error_on_duplicated_field_names_in_struct=True, prefers_large_types=large,
                             **utc)
    sc = spark.sparkContext
    tag = f"dbt-paimon-collect-{uuid.uuid4().hex}"
    # the JVM thread that serves the stream runs the job; it inherits the tag when it is created
    sc.addJobTag(tag)
    try:
        with jobs.spark_conf(spark, jobs.JOB_SETTINGS):
            port, secret, server = serve()
    finally:
        sc.removeJobTag(tag)
    parts, error = None, None
    try:
        opened = _create_local_socket((port, secret))  # pyspark 4.3: (file, socket); 4.0-4.1: the file
        sockfile, sock = opened if isinstance(opened, tuple) else (opened, None)
        try:
            parts = _read_stream(sockfile, limit)
        finally:
            sockfile.close()
            if sock is not None:
                sock.close()
    except BaseException as e:  # noqa: BLE001 - the job is cancelled, then it is raised
        error = e
    if parts is None:  # past the limit, or failed: stop the job's other tasks now
        sc.cancelJobsWithTag(tag)
    try:
        server.getResult()  # joins the serving thread; raises what the job raised
    except Exception as e:  # noqa: BLE001 - an abandoned read's job fails by design
        # a job that failed ends its stream before the first batch: the job's error says why (a
        # value that does not cast: Spark's CAST_INVALID_INPUT), the stream's only that it broke
        if parts is not None or error is not None:
            error = _job_error(e)
    if error is not None:
        if isinstance(error, Exception):
            jobs.reraise_task_error(error)  # ours raised as themselves
        raise error
    if parts is None:
        return None
    return pa.Table.from_batches(parts).cast(schema) if parts else schema.empty_table()


def _job_error(e: Exception) -> Exception:
    """The stream's server's error: the job's own, as pyspark raises a query's (its class, its
    message), not the wrapper that Spark's awaitResult puts around it."""
    java = getattr(e, "java_exception", None)
    cause = java.getCause() if java is not None else None
    return e if cause is None else convert_exception(cause)


def _read_stream(sockfile, limit: int) -> list[pa.RecordBatch] | None:
    """Spark's Arrow collect stream: the batches as tasks end (in any order), then their order (or
    -1 and the job's error message). The batches in order, or None once past `limit` bytes."""
    received, batches = 0, []
    for part in pa.ipc.open_stream(sockfile):
        received += part.nbytes
        if received > limit:
            return None
        batches.append(part)
    count = read_int(sockfile)
    if count == -1:
        raise RuntimeError(UTF8Deserializer().loads(sockfile))
    return [batches[read_int(sockfile)] for _ in range(count)]


class StreamUnavailable(Exception):
    """This Spark's Arrow collect stream is not the one collect_within reads."""


def collect(spark: SparkSession, batch: DataFrame) -> pa.Table:
    """The batch as one Arrow table in the driver, our errors raised as themselves."""
    with jobs.spark_conf(spark, jobs.JOB_SETTINGS):
        try:
            return batch.toArrow()
        except Exception as e:  # noqa: BLE001 - translated when it is one of ours
            jobs.reraise_task_error(e)
            raise


class LocalExecutor:
    """Runs upsert jobs in the driver over an Arrow batch (the table's columns, Spark's Arrow types)."""

    execution = Execution.LOCAL

    def __init__(self, batch: pa.Table, key_index: bool = True):
        self.batch = batch
        self.key_index = key_index  # cross-partition tables: bootstrap from the key index (key_lookup.py)
        self._hashes: np.ndarray | None = None  # the batch's key hashes, sorted, once a commit conflicted

    def holds_any(self, schema: TableSchema, hashes: np.ndarray) -> bool:
        if self._hashes is None:
            self._hashes = np.unique(recommit.key_hash_of(self.batch, schema))
        return bool(np.isin(hashes, self._hashes).any())

    def run_job(self, table: FileStoreTable, plan, stage: StageRows) -> JobOutput:
        schema = stage.schema
        splits, next_sequence, index_files = tasks.bucket_state(table, plan)
        batch = conform(tasks.with_key_hash(self.batch, schema) if stage.hashed else self.batch, stage.batch())
        partitions = tasks.batch_partitions(batch, schema) if splits and tasks.partition_pruning(schema) else None
        splits, boot_index = tasks.prune(splits, index_files, partitions, schema)
        lookup = KeyLookup(table, plan, stage) if self.key_index and key_lookup.usable(stage) else None
        started = time.perf_counter()
        if lookup is not None:
            live, counts = lookup.bootstrap(batch)
            boot = {"source": "key index", "bytes": lookup.index.bytes_read, **lookup.stats()}
        else:
            live, counts = _live_keys(table, stage, batch, plan, splits) if splits else (None, None)
            boot = {"source": "table", "bytes": sum(f.file_size for s in splits for f in s.files)}
        boot["seconds"] = round(time.perf_counter() - started, 4)
        assigning = time.perf_counter()  # the HASH index's read (HASH_DYNAMIC) counts as assigning
        index = None
        if boot_index:
            files = HashIndexFile(table.io, table.path)
            index = pa.concat_tables([tasks.index_entries(files, stage, e) for e in boot_index.values()])
        result = tasks.assign(stage, 1, 0, batch, live, counts, index)
        writing = time.perf_counter()
        commit = lookup.job_commit() if lookup is not None else None
        threads = driver_threads() if result.rows.num_rows >= PARALLEL_WRITE_ROWS else 1
        shares = _writer_shares(result.rows, stage, threads)

        def write(share: np.ndarray | None):
            return tasks.write_rows(table.path, schema, table.io, next_sequence, index_files, result.rows, at=share,
                                    buckets=stage.buckets)
        if threads == 1:
            written = [write(share) for share in shares]
            recorded = _index_runs(commit, result.rows, result.in_place) if commit is not None else None
        else:
            with ThreadPoolExecutor(threads + (commit is not None)) as pool:
                # the key index's runs of this commit are written beside the data files, not after
                # the commit in the driver's one thread (record_commit then only names them)
                runs = pool.submit(_index_runs, commit, result.rows, result.in_place) if commit is not None else None
                written = list(pool.map(write, shares))
                recorded = runs.result() if runs is not None else None
        entries, index_changes = [], {}
        for part_entries, part_index in written:
            entries += part_entries
            index_changes.update(part_index)
        done = time.perf_counter()
        writers = "1 writer" if threads == 1 else f"{len(shares)} writer threads"
        described = f"driver-local ({writers}{', key index' if lookup is not None else ''})"
        record = lookup.job_recorder(commit, [recorded], entries) if recorded is not None else None
        phases = {"bootstrap": boot["seconds"], "assign": writing - assigning, "write": done - writing}
        return JobOutput(entries, result.counts, index_changes, described, record, boot, phases)


def _index_runs(commit: key_lookup.JobCommit, assigned: pa.Table, in_place: np.ndarray):
    """The commit's runs in the key index and its buckets' count changes (JobCommit.write), or None
    when they could not be written: the commit goes on, and the index catches up next time."""
    try:
        return commit.write(assigned, in_place)
    except Exception as e:  # noqa: BLE001 - the index is a cache of the table's keys
        log.warning("the key index of %s was not updated (%s); the next upsert catches it up", commit.path, e)
        return None


def _live_keys(table: FileStoreTable, stage: StageRows, batch: pa.Table, plan, splits):
    """(live keys, bucket counts) as the Spark bootstrap ships them: with the batch's Bloom filter
    (when the key can be hashed) only the keys the batch may touch, plus each bucket's count where
    the assigner counts buckets by their keys (not HASH_DYNAMIC: its index counts); else every
    live key. Splits are read in threads."""
    schema = stage.schema
    bits = None
    if bloom.supports(schema):
        bits = np.zeros(bloom.size_bits(plan.snapshot.total_record_count) // 8, dtype=np.uint8)
        bloom.add(bits, batch, list(schema.primary_keys), schema)
    routes = [0] if not stage.hashed else None  # one assigner: every count row goes to it
    reader = TableRead(table.io, table.path, schema, tasks.live_key_projection(stage))
    with ThreadPoolExecutor(driver_threads()) as pool:
        found = [t for t in pool.map(lambda s: tasks.live_keys(reader, s, stage, bits, routes), splits) if t.num_rows]
    if not found:
        return None, None
    rows = pa.concat_tables(found)
    return of_source(rows, Source.TABLE), of_source(rows, Source.COUNT) if routes else None


def _writer_shares(data: pa.Table, stage: StageRows, n: int) -> list[np.ndarray | None]:
    """The assigned rows' positions cut into at most n shares of whole buckets (as the shuffle by
    (partition, bucket) would), so writer threads never share a bucket; [None]: one writer, every
    row. Each writer takes its rows once, in file order (TableWrite.write's `at`), instead of a copy
    of its share first (W1: 2 x 6 ms, in the driver's thread)."""
    if data.num_rows == 0:
        return []
    if n == 1:
        return [None]
    codes, _ = group_codes(data, list(stage.schema.partition_keys) + [BUCKET])
    part = np.asarray(codes, dtype=np.int64) % n
    return [share for share in (np.flatnonzero(part == i) for i in range(n)) if len(share)]
