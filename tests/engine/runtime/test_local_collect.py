"""The hand-over of a batch Spark has no size estimate of (Python rows, a Paimon table's rows) to
the driver-local job: read once, as it streams in, up to the local limit (local.collect_within),
instead of persisted and counted first."""

import time

import pytest

from dbt_paimon.engine.runtime import local
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from ..helpers import frame, spark_rows

SCHEMA = "id long, part int, v string"


def _first_ends_last(spark, n=400, parts=4, pause=0.6):
    """Rows 0..n-1 in `parts` partitions, the first of which ends `pause` seconds after the others:
    its Arrow batch reaches the driver last. No size estimate (an RDD of Python rows). Each
    partition's batch is larger than the JVM's 64 KB buffer of the stream (~100 KB), so that the
    driver sees it when it is sent."""
    def slow_first(index, rows):
        if index == 0:
            time.sleep(pause)
        return rows

    rdd = spark.sparkContext.parallelize([(k, k * parts // n, f"{k:04d}" * 250) for k in range(n)], parts)
    return spark.createDataFrame(rdd.mapPartitionsWithIndex(slow_first), SCHEMA)


def _no_job_running(spark, within: float) -> bool:
    deadline = time.monotonic() + within
    while spark.sparkContext.statusTracker().getActiveJobsIds():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_a_streamed_batch_keeps_its_order_when_its_tasks_end_out_of_order(spark):
    df = _first_ends_last(spark)
    assert local.unknown(local.estimated_bytes(df))
    # Spark scales its "no idea" (Long.MaxValue) down by row width through a projection or filter
    assert local.unknown(local.estimated_bytes(df.select("id").where("id > 1")))
    got = local.collect_within(spark, df, 1 << 30)
    assert got.column("id").to_pylist() == list(range(400))
    assert got.equals(df.toArrow())  # rows, order and Arrow types as toArrow gives them
    empty = local.collect_within(spark, df.where("id < 0"), 1 << 30)
    assert empty.num_rows == 0 and empty.schema.equals(got.schema)


def test_a_batch_past_the_limit_is_abandoned_and_its_job_cancelled(spark):
    df = _first_ends_last(spark, pause=60)
    started = time.monotonic()
    assert local.collect_within(spark, df, 1) is None  # the first batch to arrive passes 1 byte
    assert time.monotonic() - started < 30, "waited for the slow task"
    assert _no_job_running(spark, within=20), "the abandoned read's job still runs"


def test_a_failing_batch_raises_and_leaves_no_job(spark):
    df = spark.createDataFrame(spark.sparkContext.parallelize([(k,) for k in range(10)], 2), "id long")
    with pytest.raises(Exception, match="id < 5"):
        local.collect_within(spark, df.selectExpr("assert_true(id < 5, 'id < 5 broken') AS x", "id"), 1 << 30)
    assert _no_job_running(spark, within=20)


def test_auto_reads_a_batch_without_size_estimate_once_and_persists_only_past_the_limit(spark, warehouse,
                                                                                         monkeypatch):
    path = f"{warehouse}/db.db/streamed"
    row = {"id": 0, "dt": "a", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 0}
    persisted = spark.sparkContext._jsc.getPersistentRDDs().size()
    # the jobs after the newest one so far (Spark keeps the last spark.ui.retainedJobs, 1,000, so a
    # count of them stops growing in a long test session)
    last = max(spark.sparkContext.statusTracker().getJobIdsForGroup(), default=-1)
    small = upsert(frame(spark, [{**row, "id": i} for i in range(5)]), path, primary_keys="id", partition_keys="dt")
    assert small.execution == "local" and "collect" in small.phases
    new_jobs = [j for j in spark.sparkContext.statusTracker().getJobIdsForGroup() if j > last]
    assert len(new_jobs) == 1  # one read, no count
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == persisted  # read once, never cached
    monkeypatch.setattr(local, "LOCAL_MAX_BATCH_BYTES", 0)  # every batch's stream passes it
    big = upsert(frame(spark, [{**row, "id": 3, "dt": "b", "v": 30}, {**row, "id": 9, "dt": "b"}]), path,
                 primary_keys="id", partition_keys="dt")
    assert big.execution == "distributed" and (big.moved, big.inserted) == (1, 1)
    assert "collect" not in big.phases
    assert spark.sparkContext._jsc.getPersistentRDDs().size() == persisted
    assert _no_job_running(spark, within=20)
    rows = {r["id"]: (r["dt"], r["v"]) for r in spark_rows(spark, path)}
    assert rows == {**{i: ("a", 0) for i in range(5)}, 3: ("b", 30), 9: ("b", 0)}
    assert FileStoreTable.open(path).latest_snapshot().id == 2
