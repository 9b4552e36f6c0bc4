"""The Arrow batches Spark hands a job's Python tasks: bounded in rows from the batch's row width
(jobs.rows_settings) instead of by Spark's per-row byte check, and wide rows still upsert."""

import pickle

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine.runtime import jobs
from dbt_paimon.engine import upsert
from dbt_paimon.engine.spark_types import VARIABLE_VALUE_BYTES, arrow_row_bytes

from ..helpers import pypaimon_rows, spark_rows

MAX_BYTES = "spark.sql.execution.arrow.maxBytesPerBatch"
NARROW = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.DoubleType())])
WIDE = T.StructType([T.StructField("id", T.LongType())] + [T.StructField(f"s{i}", T.StringType()) for i in range(40)])


@pytest.fixture
def session_bytes(spark):
    """Sets the session's byte bound per Arrow batch for one test, then puts the old one back."""
    old = spark.conf.get(MAX_BYTES, None)
    yield lambda value: spark.conf.set(MAX_BYTES, value)
    if old is None:
        spark.conf.unset(MAX_BYTES)
    else:
        spark.conf.set(MAX_BYTES, old)


def test_rows_per_batch_come_from_the_row_width_and_the_sessions_byte_bound(spark, session_bytes):
    assert arrow_row_bytes(NARROW) == 8 + 8 + 1
    assert arrow_row_bytes(WIDE) == 8 + 40 * VARIABLE_VALUE_BYTES + 6
    narrow, wide = jobs.rows_settings(spark, NARROW), jobs.rows_settings(spark, WIDE)
    rows = "spark.sql.execution.arrow.maxRecordsPerBatch"
    assert narrow[rows] == str(jobs.MAX_BATCH_ROWS)  # 64 MB of 17-byte rows is more than the cap
    assert wide[rows] == str((64 << 20) // arrow_row_bytes(WIDE))
    assert narrow[MAX_BYTES] == wide[MAX_BYTES] == str(2**31 - 1)  # Spark's per-row check is off
    session_bytes("1m")
    assert jobs.rows_settings(spark, WIDE)[rows] == str((1 << 20) // arrow_row_bytes(WIDE))
    session_bytes("100b")  # fewer bytes than a row: one row a batch
    assert jobs.rows_settings(spark, WIDE)[rows] == "1"


def test_byte_sizes_read_as_spark_writes_them():
    sizes = {"67108864b": 64 << 20, "64m": 64 << 20, "64MB": 64 << 20, "1g": 1 << 30, "4096": 4096, "2k": 2048}
    assert {text: jobs.byte_size(text) for text in sizes} == sizes
    with pytest.raises(ValueError, match="maxBytesPerBatch is 'lots'"):  # Spark refuses it first
        jobs.byte_size("lots")


def _batch_sizes(batches):
    yield pa.RecordBatch.from_pylist([{"payload": pickle.dumps([b.num_rows for b in batches])}])


def test_a_jobs_tasks_get_batches_of_at_most_those_rows(spark, session_bytes):
    """Spark honours the settings: a task's Arrow batches hold the rows they allow, whatever their
    bytes (here ~2 KB a row, 8x the session's 256 KB a batch), and all of its rows arrive."""
    session_bytes("256k")
    df = spark.range(0, 3000, numPartitions=1).select(F.col("id"), F.repeat(F.lit("x"), 2000).alias("s"))
    settings = jobs.rows_settings(spark, df.schema)
    limit = int(settings["spark.sql.execution.arrow.maxRecordsPerBatch"])
    assert limit == (256 << 10) // (8 + VARIABLE_VALUE_BYTES + 1)
    [sizes] = jobs.collect_payloads(spark, df.mapInArrow(_batch_sizes, "payload binary"), settings=settings)
    assert sum(sizes) == 3000 and set(sizes[:-1]) == {limit}, sizes


def test_wide_rows_upsert_through_batches_of_few_rows(spark, warehouse, session_bytes, execution):
    """Values far wider than the width assumed per string value, several batches per task, on
    both executors: the table holds every row, as pypaimon reads it too."""
    session_bytes("256k")
    path = f"{warehouse}/db.db/wide_rows_{execution}"

    def batch(lo, hi, dt, fill):
        return spark.range(lo, hi, numPartitions=2).select(
            F.col("id"), F.lit(dt).alias("dt"), F.repeat(F.lit(fill), 3000).alias("s"))

    upsert(batch(0, 1500, "a", "x"), path, primary_keys="id", partition_keys="dt",
           settings=RunSettings(execution=execution))
    result = upsert(batch(1000, 2500, "b", "y"), path, primary_keys="id", partition_keys="dt",
                    settings=RunSettings(execution=execution))
    assert (result.inserted, result.moved) == (1000, 500)
    rows = spark_rows(spark, path)
    assert [r["id"] for r in rows] == list(range(2500))
    assert all((r["dt"], r["s"]) == (("a", "x" * 3000) if r["id"] < 1000 else ("b", "y" * 3000)) for r in rows)
    assert pypaimon_rows(path) == rows


def test_jobs_that_overlap_put_the_sessions_own_setting_back(spark, session_bytes):
    """Two jobs of two threads overlap (A starts, B starts, A ends, B ends): each setting the byte
    bound off and putting back what it found would leave B's 'found' (A's setting) in the session."""
    session_bytes("32m")
    a, b = jobs.spark_conf(spark, {MAX_BYTES: "1"}), jobs.spark_conf(spark, {MAX_BYTES: "2"})
    a.__enter__()
    b.__enter__()
    assert spark.conf.get(MAX_BYTES) == "2"
    a.__exit__(None, None, None)
    assert spark.conf.get(MAX_BYTES) == "2"  # B still runs
    b.__exit__(None, None, None)
    assert spark.conf.get(MAX_BYTES) == "32m"
