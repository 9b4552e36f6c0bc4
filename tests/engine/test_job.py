"""The job itself: a commit that raced it makes it re-run instead of duplicating keys (on Spark and
driver-local), on Spark the input and the key index never pass through the driver, and "auto"
picks between the two."""

import importlib
import os
import re
import threading
import time
from collections import Counter

import pytest
from pyspark.sql import functions as F

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from .helpers import data_files, frame, live_places, spark_rows

ROW = {"id": 0, "dt": "a", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 0}


def test_a_commit_racing_the_job_makes_it_rerun_on_the_new_snapshot(spark, store_warehouse, monkeypatch, execution):
    path = f"{store_warehouse}/db.db/race"
    upsert(frame(spark, [{**ROW, "id": i} for i in range(10)]), path, primary_keys="id", partition_keys="dt")
    mod = importlib.import_module("dbt_paimon.engine.writes.commit_loop")

    def racing_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        if attempt == 1:  # another writer moves key 3 to partition c and commits first
            monkeypatch.setattr(mod, "_before_commit", None)
            upsert(frame(spark, [{**ROW, "id": 3, "dt": "c", "v": 300}]), path, primary_keys="id",
                   partition_keys="dt")

    monkeypatch.setattr(mod, "_before_commit", racing_writer)
    result = upsert(frame(spark, [{**ROW, "id": 3, "dt": "b", "v": 30}, {**ROW, "id": 11, "dt": "b"}]), path,
                    primary_keys="id", partition_keys="dt", settings=RunSettings(execution=execution))
    assert result.attempts == 2 and result.snapshot_id == 3
    assert (result.inserted, result.moved) == (1, 1)
    places = live_places(path)
    assert places[(3,)] == 1 and all(n == 1 for n in places.values())
    rows = {r["id"]: r for r in spark_rows(spark, path)}
    assert (rows[3]["dt"], rows[3]["v"]) == ("b", 30)
    # the first attempt's files were deleted: every data file on disk is live
    table = FileStoreTable.open(path)
    live = {f"{s.bucket_path}/{f.file_name}" for s in table.plan().splits for f in s.files}
    assert data_files(path) == live


def test_an_upsert_says_where_its_time_went(spark, warehouse, execution):
    """UpsertResult.phases: each phase the upsert went through, in the pipeline's order, adding up to
    no more than its time; driver-local also the batch's collect and the job's own stages, and the
    key index's record of a cross-partition table's commit."""
    path = f"{warehouse}/db.db/phases"
    upsert(frame(spark, [{**ROW, "id": i} for i in range(10)]), path, primary_keys="id", partition_keys="dt")
    result = upsert(frame(spark, [{**ROW, "id": i, "dt": "b"} for i in range(5, 15)]), path, primary_keys="id",
                    partition_keys="dt", settings=RunSettings(execution=execution))
    phases = result.phases
    mod = importlib.import_module("dbt_paimon.engine.writes.upsert")
    assert list(phases) == [p for p in mod.PHASES if p in phases]
    assert all(v >= 0 for v in phases.values())
    outer = ["prepare", "plan", "job", "commit", "post_commit"]
    assert set(outer) <= set(phases)
    assert sum(phases[p] for p in outer + ["collect", "index_record"] if p in phases) <= result.seconds + 1e-3
    if execution == "local":
        assert {"collect", "bootstrap", "assign", "write", "index_record"} <= set(phases)
        assert phases["bootstrap"] + phases["assign"] + phases["write"] <= phases["job"] + 1e-3
    else:
        assert not {"collect", "bootstrap", "assign", "write"} & set(phases)


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def test_input_and_key_index_never_reach_the_driver(spark, warehouse):
    """~150 MB of rows generated on the executors, upserted twice (the second run builds the key
    index of 300K keys and bootstraps from it). The Python driver's memory must not grow by
    anything near that, and the plan must be the two shuffles of the topology, no broadcast or
    collect of data: a cross-partition table's assigners write their rows themselves, so one
    shuffle to the assigners (and none of the batch rows: they cross it packed)."""
    path = f"{warehouse}/db.db/big"
    n = 300_000

    def batch(shift):
        return (spark.range(0, n, numPartitions=4)
                .select(F.col("id"), ((F.col("id") + shift) % 7).cast("string").alias("dt"),
                        F.col("id").alias("v"), F.repeat(F.lit("x"), 500).alias("s"),
                        F.lit(1).alias("amount"), F.lit(True).alias("flag"), F.col("id").alias("seq")))

    peak, stop = [_rss_mb()], threading.Event()

    def sample():
        while not stop.is_set():
            peak.append(_rss_mb())
            time.sleep(0.01)

    base = _rss_mb()
    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        first = upsert(batch(0), path, primary_keys="id", partition_keys="dt",
                       settings=RunSettings(execution="distributed"))
        second = upsert(batch(1), path, primary_keys="id", partition_keys="dt",
                        settings=RunSettings(execution="distributed"))
    finally:
        stop.set()
        sampler.join()
    assert first.inserted == n and second.moved == n
    growth = max(peak) - base
    assert growth < 60, f"driver memory grew by {growth:.0f} MB"
    plan = second.plan.split("== Initial Plan ==")[0]  # AQE prints the final plan first
    assert plan.count("Exchange hashpartitioning") == 1, plan
    assert "Broadcast" not in plan and "CollectLimit" not in plan, plan
    # the second run built the key index in Spark tasks and bootstrapped from it: no rows from the
    # driver (the assigners take their buckets' counts from the index's state in their tasks)
    assert second.bootstrap["source"] == "key index" and second.bootstrap["built"] and second.bootstrap["by"] == "spark"
    assert "LocalTableScan" not in plan and "Union" not in plan, plan


def test_auto_runs_jobs_that_fit_in_the_driver_there_and_others_on_spark(spark, warehouse, monkeypatch):
    from dbt_paimon.engine.runtime import local

    path = f"{warehouse}/db.db/auto"
    small = upsert(frame(spark, [{**ROW, "id": i} for i in range(5)]), path, primary_keys="id", partition_keys="dt")
    assert small.execution == "local" and small.plan.startswith("driver-local")
    monkeypatch.setattr(local, "LOCAL_MAX_BATCH_BYTES", 0)  # Spark's estimate of any batch exceeds it
    big = upsert(frame(spark, [{**ROW, "id": 3, "dt": "b"}]), path, primary_keys="id", partition_keys="dt")
    assert big.execution == "distributed" and "Exchange hashpartitioning" in big.plan
    assert big.moved == 1
    with pytest.raises(ValueError, match="execution must be one of auto, local, distributed"):
        upsert(frame(spark, [ROW]), path, primary_keys="id", partition_keys="dt",
               settings=RunSettings(execution="fast"))
    assert FileStoreTable.open(path).latest_snapshot().id == 2


def test_the_job_cuts_a_large_batch_into_tasks_by_its_size(spark, warehouse, monkeypatch):
    """An assign or write task holds its share of the batch in memory: past TASK_BYTES per task of
    Spark's size estimate the job runs more tasks than the cores give, and the table is the same."""
    from dbt_paimon.engine.runtime import distributed, local

    path = f"{warehouse}/db.db/sized"

    def batch(lo, hi, dt):  # Spark estimates a range's size (rows from Python data it cannot)
        return spark.range(lo, hi).select(F.col("id"), F.lit(dt).alias("dt"), F.col("id").alias("v"),
                                          F.lit("x").alias("s"), F.lit(1).alias("amount"),
                                          F.lit(True).alias("flag"), F.lit(0).cast("long").alias("seq"))

    upsert(batch(0, 40, "a"), path, primary_keys="id", partition_keys="dt",
           settings=RunSettings(execution="distributed"))
    size = local.estimated_bytes(batch(20, 60, "b"))
    assert not local.unknown(size)
    monkeypatch.setattr(distributed, "TASK_BYTES", max(1, size // 9))
    result = upsert(batch(20, 60, "b"), path, primary_keys="id", partition_keys="dt",
                    settings=RunSettings(execution="distributed"))
    wanted = -(-size // max(1, size // 9))
    assert wanted > 2 * spark.sparkContext.defaultParallelism
    plan = result.plan.split("== Initial Plan ==")[-1]
    counts = [int(n) for n in re.findall(r"hashpartitioning\(.*?, (\d+)\)", plan)]
    assert counts == [wanted], plan  # the shuffle to the assigners, who write (assign_write_task)
    assert (result.inserted, result.moved) == (20, 20)
    rows = {r["id"]: (r["dt"], r["v"]) for r in spark_rows(spark, path)}
    assert len(rows) == 60 and all(rows[i] == ("b", i) for i in range(20, 60))
    assert all(n == 1 for n in live_places(path).values())


@pytest.mark.parametrize("sink", [None, 3])
def test_cross_partition_assigners_write_their_rows_unless_sink_parallelism_asks_for_writers(spark, warehouse, sink):
    """A cross-partition table on Spark: the assigners write the rows they assigned (one shuffle,
    no write stage); with sink.parallelism, the assigners send them to that many writers (a second
    shuffle). The table is the same either way. Two assigners over a table a driver-local run laid
    out (its one assigner opened every bucket): buckets get a file from each assigner in one
    commit, disjoint keys, which every reader merges as one bucket."""
    path = f"{warehouse}/db.db/writers_{sink}"
    opts = {"bucket": "-1", "dynamic-bucket.target-row-num": "5"}
    rows = [{**ROW, "id": i, "dt": "ab"[i % 2], "v": i} for i in range(60)]
    upsert(frame(spark, rows), path, primary_keys="id", partition_keys="dt", options=opts,
           settings=RunSettings(execution="local"))
    moved = [{**r, "dt": "ab"[(r["id"] + 1) % 2], "v": -r["id"]} for r in rows[:20]]
    changed = ([{**r, "v": 1000 + r["id"]} for r in rows[20:]]
               + [{**ROW, "id": 100 + i, "dt": "c", "v": i} for i in range(10)])
    settings = {"dynamic-bucket.assigner-parallelism": "2", **({"sink.parallelism": str(sink)} if sink else {})}
    result = upsert(frame(spark, moved + changed), path, primary_keys="id", partition_keys="dt",
                    options={**opts, **settings}, settings=RunSettings(execution="distributed"))
    plan = result.plan.split("== Initial Plan ==")[-1]
    shuffles = [int(n) for n in re.findall(r"hashpartitioning\(.*?, (\d+)\)", plan)]  # the last one first
    assert shuffles == ([2] if sink is None else [sink, 2]), plan
    assert (result.inserted, result.moved, result.updated) == (10, 20, 40)
    want = {r["id"]: (r["dt"], r["v"]) for r in rows[20:]}
    want.update({r["id"]: (r["dt"], r["v"]) for r in moved + changed})
    assert {r["id"]: (r["dt"], r["v"]) for r in spark_rows(spark, path)} == want
    assert all(n == 1 for n in live_places(path).values())
    table = FileStoreTable.open(path)
    before = {f.file_name for s in table.plan(snapshot_id=result.snapshot_id - 1).splits for f in s.files}
    added = Counter((s.partition, s.bucket) for s in table.plan(snapshot_id=result.snapshot_id).splits
                    for f in s.files if f.file_name not in before)
    # an assigner each wrote into one bucket in this commit; sink.parallelism's writers own whole buckets
    assert max(added.values()) == (2 if sink is None else 1), added


def test_assigned_rows_cross_to_the_writers_packed_whole_buckets_each(monkeypatch):
    """The assigners pack their rows per writer (tasks.pack): a (partition, bucket) goes to the
    same writer from every assigner, the summary rows too, and the writers unpack exactly the rows
    that were packed, in chunks of PACKED_ROWS."""
    import numpy as np
    import pyarrow as pa

    from dbt_paimon.assign.rows import BUCKET, KIND, TO, StageRows
    from dbt_paimon.engine.runtime import tasks
    from dbt_paimon.store.schema.schema import build_schema

    monkeypatch.setattr(tasks, "PACKED_ROWS", 7)
    schema = build_schema(pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())]), ["id"], ["dt"],
                          {"bucket": "-1"})
    layout = StageRows(schema).assigned()
    rng = np.random.default_rng(3)

    def assigned(n):  # an assigner's rows: random (dt, bucket) among 4 x 3, and its summary rows
        rows = pa.table({"id": np.arange(n), "dt": rng.choice(["a", "b", "c", None], n),
                         "v": [f"v{i}" for i in range(n)], BUCKET: rng.integers(0, 3, n).astype(np.int32),
                         KIND: np.zeros(n, np.int8)})
        summary = tasks.summary_rows(tasks.AssignCounts(inserted=n))
        return pa.concat_tables([tasks.conform(rows, layout), tasks.conform(summary, layout)])

    routes = [101, 202, 303]
    by_writer: dict[int, list] = {}
    for n in (40, 25, 60):  # three assigners
        rows = assigned(n)
        packed = list(tasks.pack(rows, schema, routes))
        assert all(b.schema == tasks.PACKED for b in packed)
        for b in packed:
            by_writer.setdefault(b.column(TO)[0].as_py(), []).append(b)
        back = tasks.unpack(packed)
        assert back.num_rows == rows.num_rows and max(tasks.unpack([b]).num_rows for b in packed) <= 7
        assert sorted(back.to_pylist(), key=repr) == sorted(rows.to_pylist(), key=repr)
    assert set(by_writer) <= set(routes) and len(by_writer) > 1
    seen = {}
    for route, batches in by_writer.items():
        for row in tasks.unpack(batches).select(["dt", BUCKET]).to_pylist():
            assert seen.setdefault((row["dt"], row[BUCKET]), route) == route  # whole buckets per writer
    assert tasks.unpack([]) is None and list(tasks.pack(assigned(0).slice(0, 0), schema, routes)) == []
    assert list(tasks.pack_to(assigned(0).slice(0, 0), np.zeros(0, np.int64), routes)) == []


def test_route_ints_land_where_sparks_hash_partitioning_sends_them(spark):
    """The shuffles address a task by an int that Spark's repartition(n, col) sends there; the ints
    are found with store/key_hash's Murmur3 instead of a Spark job per shuffle, so they must agree
    with Spark's own partitioning: each of the n ints lands in its task, for every n."""
    from dbt_paimon.engine.runtime import distributed

    for n in (1, 2, 3, 7, 16, 61, 200):
        routes = distributed._routes(n)  # per task id, its int
        assert len(routes) == n
        df = spark.createDataFrame(list(enumerate(routes)), "task int, r int")
        landed = df.repartition(n, F.col("r")).withColumn("at", F.spark_partition_id()).collect()
        assert {row.task: row.at for row in landed} == {t: t for t in range(n)}
