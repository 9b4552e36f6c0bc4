"""Start Spark's Python worker daemons, and the JVM's Arrow path, ahead of a dbt command's first use.

A Paimon table is read through Spark's Python data source API. The first such read in a process
starts a Python daemon for each of its steps (create the source, plan the read, read the rows):
~0.7 s each on a loaded 2-core machine, before a row moves (the git history of BENCHMARKS.md). The daemons
outlive the read and serve every later one. `start(spark)`, as soon as the SparkSession is up, runs
in background threads:
- the create and the plan step of a read of a one-row source of ours, each called on its own
  (`_planner`): a full read would run them in turn, after the source lookup Spark does first, with
  JVM planning between; on their own they start the create and plan daemons at once (the JVM still
  starts one daemon at a time, but back to back);
- a one-task mapInArrow job (the task daemon, which also reads a Paimon table's rows; its worker
  stays alive for reuse with the `paimon` source's modules imported; for commands that upsert,
  also the upsert's stage modules and pandas, which pyarrow imports on its first array of Python
  values: ~0.3 s inside the first Spark stage otherwise);
- for commands that upsert, a conversion of 100K rows of the common column types to Arrow, once as
  computed rows and once from Spark's cache (then dropped), so that the first upsert's hand-over of
  its batch (toArrow) runs neither the JVM's Arrow writers nor its cache readers cold; and the
  import of the Arrow modules the driver-local upsert joins with.
All of it overlaps the adapter's source registration and catalog sync and dbt's compilation,
instead of falling inside the first query or upsert a user waits for.
"""

from __future__ import annotations

import atexit
import logging
import threading
from typing import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

log = logging.getLogger(__name__)

NAME = "dbt_paimon_warm_up"
# Rows converted to Arrow (twice), so that the JIT compiles the column writers and cache readers. The
# first toArrow of W1's cached 200K-row batch: 0.62-0.85 s after 20K warm rows, 0.43-0.50 s after
# 100K (0.45-0.51 s after 200K); the step takes ~0.6 s longer than with 20K, in the background
WARM_ROWS = 100_000
JOIN_AT_EXIT_SECONDS = 15.0


class _WarmUpReader(DataSourceReader):
    def partitions(self):
        return [InputPartition(0)]

    def read(self, partition) -> Iterator[tuple]:
        yield (1,)


class WarmUpSource(DataSource):
    """One row, one column: the three steps of a Python data source read, and nothing else."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return "one INT"

    def reader(self, schema) -> DataSourceReader:
        return _WarmUpReader()


def _import_reader(batches):
    """In the task's worker: what a read of a Paimon table imports, ahead of it."""
    from .read import source  # noqa: F401
    yield from batches


def _import_upserts(batches):
    """In the task's worker: what a read and an upsert's Spark stages import, ahead of them."""
    import pyarrow as pa

    from .runtime import key_lookup, tasks  # noqa: F401
    from .read import source  # noqa: F401
    pa.array([0])  # pyarrow's first array of Python values imports pandas when installed: ~0.3 s
    yield from batches


def _planner(spark, step: str) -> None:
    """One planning step of a Python data source read, on the driver, called the way Spark's
    analyzer calls it (UserDefinedPythonDataSource; the same worker module and environment, so the
    same daemon serves the real read), but on its own: the create and plan daemons start at once
    instead of one after the other, each ~0.7 s on a loaded 2-core machine. These are Spark's
    internal classes: if a Spark version changes them, this step fails (logged) and the first read
    starts its daemons itself, as it would without a warm-up."""
    from pyspark.serializers import CloudPickleSerializer
    from pyspark.sql.types import IntegerType, StructField, StructType
    from pyspark.sql.udf import _wrap_function

    jvm = spark.sparkContext._jvm
    python = jvm.org.apache.spark.sql.execution.datasources.v2.python
    source = python.UserDefinedPythonDataSource(_wrap_function(spark.sparkContext, WarmUpSource))
    schema = jvm.org.apache.spark.sql.types.DataType.fromJson(StructType([StructField("one", IntegerType())]).json())
    if step == "create":
        options = jvm.org.apache.spark.sql.util.CaseInsensitiveStringMap(jvm.java.util.HashMap())
        source.createDataSourceInPython(NAME, options, jvm.scala.Option.apply(schema))
    else:
        created = python.PythonDataSourceCreationResult(CloudPickleSerializer().dumps(WarmUpSource({})), schema)
        source.createReadInfoInPython(created, schema, False)


def _create(spark) -> None:
    _planner(spark, "create")


def _plan(spark) -> None:
    _planner(spark, "plan")


def _task(spark) -> None:
    spark.range(1, numPartitions=1).mapInArrow(_import_reader, "id long").collect()


def _upsert_task(spark) -> None:
    # One task, as for reads: a task per core would leave a warm worker for each core, but it holds
    # every core while the workers import (~1 s), and a dbt run's first model waits for them
    # (paimon-1 in bench/startup_bench.py: 12.2 s -> 13.0 s)
    spark.range(1, numPartitions=1).mapInArrow(_import_upserts, "id long").collect()


def _arrow(spark) -> None:
    # The driver-local upsert's joins and group-bys load pyarrow.acero (and pyarrow.dataset) on first
    # use: 0.14 s, here instead of inside the first upsert (and not at import: Spark's Python workers
    # import the engine and never join)
    import pyarrow.acero  # noqa: F401
    # The driver-local upsert hands its batch over with toArrow. The JVM's first Arrow conversions
    # are slow until its JIT has compiled the writers of each column type: a 200K-row batch took
    # 1.5 s cold, 0.36 s after converting 20K rows of the common types once (BENCHMARKS.md)
    _warm_rows(spark).toArrow()
    # A batch with no size estimate is persisted before it is converted (upsert.py; the bench's
    # batches are cached too): its conversion reads the cache's column batches, whose readers the
    # JIT compiles on first use. The first toArrow of a cached 10K-row batch: 0.20-0.32 s with
    # the conversion above only, 0.10-0.21 s after this one too (the git history of BENCHMARKS.md).
    # A new DataFrame: one converted already keeps the plan it ran, and would not read the cache.
    cached = _warm_rows(spark).persist()
    try:
        cached.count()
        cached.toArrow()
    finally:
        cached.unpersist()


def _warm_rows(spark):
    """WARM_ROWS rows of the common column types, in one partition."""
    return spark.range(WARM_ROWS, numPartitions=1).selectExpr(
        "id", "cast(id % 1000 as int) i", "cast(id as string) s", "cast(id as double) d", "id % 2 = 0 b",
        "date'2024-01-01' + cast(id % 30 as int) dt",
        "timestamp'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 60) ts",
        # a Paimon TIMESTAMP (no time zone) reaches Spark as TIMESTAMP_NTZ: its own Arrow writer
        "cast(timestamp'2024-01-01 00:00:00' + make_interval(0, 0, 0, 0, 0, 0, id % 60) as timestamp_ntz) tsn",
        "cast(id as decimal(18, 2)) m")


_converting: list[threading.Thread] = []


def _join_at_exit() -> None:
    """The Arrow warm-up reads the JVM's Arrow stream with pyarrow, which calls back into Python from
    its own threads: still at it when the interpreter finalizes, it aborts the process (Python's
    "PyGILState_Release" fatal error). A command that ends first waits for it (atexit runs before
    the interpreter finalizes and before pyspark's own exit handler, registered earlier)."""
    for thread in _converting:
        thread.join(JOIN_AT_EXIT_SECONDS)


def start(spark, upserts: bool = True) -> list[threading.Thread]:
    """Run the warm-up in daemon threads; failures are only logged (the real read reports its own).
    upserts: the command may upsert (run, build, ...): the Arrow hand-over is warmed too."""

    def run(step) -> None:
        try:
            step(spark)
        except Exception as e:  # noqa: BLE001 - a warm-up: the first real read starts what it needs
            log.debug("Python worker warm-up (%s) failed: %s", step.__name__, e)

    steps = [_create, _plan] + ([_upsert_task, _arrow] if upserts else [_task])
    threads = [threading.Thread(target=run, args=(step,), name=f"dbt-paimon-warm-up{step.__name__}", daemon=True)
               for step in steps]
    if upserts:
        if not _converting:
            atexit.register(_join_at_exit)
        _converting.append(threads[-1])
    for thread in threads:
        thread.start()
    return threads
