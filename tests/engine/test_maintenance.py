"""Deletes and compaction on Spark, read back by the `paimon` source and pypaimon."""

import sys

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.store.compaction.compact_strategy import sorted_run_count
from dbt_paimon.store.common.errors import SchemaError
from dbt_paimon.store.table import FileStoreTable

from .helpers import data_files, frame, live_places, partition_dirs, pypaimon_rows, spark_rows
from .model import UpsertModel, random_batches

ROW = {"id": 0, "dt": "20230501", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 0}


def test_the_seeds_walkthrough_insert_delete_compact_alter_expire(spark, store_warehouse):
    """insert 1 row; insert 9 rows in 9 partitions; DELETE WHERE dt >= '20230503'; full compact;
    ALTER the retention; expire: snapshot kinds APPEND, APPEND, APPEND, COMPACT, the delete writing
    new files (no partition removed) and 2 rows left, in our reader and in pypaimon."""
    path = f"{store_warehouse}/db.db/seeds"
    upsert(frame(spark, [{**ROW, "id": 1}]), path, primary_keys="id", partition_keys="dt")
    nine = [{**ROW, "id": i, "dt": f"2023050{i}", "v": i} for i in range(1, 10)]
    upsert(frame(spark, nine), path, primary_keys="id", partition_keys="dt")
    before = {f.file_name for s in FileStoreTable.open(path).plan().splits for f in s.files}
    dirs = partition_dirs(path)

    result = delete(spark, path, "dt >= '20230503'")
    assert (result.deleted, result.snapshot_id) == (7, 3)
    table = FileStoreTable.open(path)
    after = {f.file_name for s in table.plan().splits for f in s.files}
    assert before < after  # only new files (holding the -D records); nothing removed
    assert partition_dirs(path) == dirs
    expected = [(1, "20230501"), (2, "20230502")]
    assert [(r["id"], r["dt"]) for r in spark_rows(spark, path)] == expected
    assert [(r["id"], r["dt"]) for r in pypaimon_rows(path)] == expected

    sid = compact(spark, path)
    table = FileStoreTable.open(path)
    kinds = [table.snapshots.snapshot(i).commit_kind for i in range(1, sid + 1)]
    assert kinds == ["APPEND", "APPEND", "APPEND", "COMPACT"]
    splits = table.plan().splits
    assert all(s.files[0].level == 5 and not s.files[0].delete_row_count for s in splits)
    assert sum(s.row_count for s in splits) == 2  # the deletes went with the rows they removed

    table.alter_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    assert FileStoreTable.open(path).schema.id == 1
    expired = FileStoreTable.open(path).expire_snapshots()
    assert list(expired.expired) == [1, 2, 3]
    assert [r.snapshot_id for r in spark.read.format("paimon").load(f"{path}$snapshots").collect()] == [4]
    live = {f"{s.bucket_path}/{f.file_name}" for s in FileStoreTable.open(path).plan().splits for f in s.files}
    assert data_files(path) == live
    assert [(r["id"], r["dt"]) for r in spark_rows(spark, path)] == expected
    assert [(r["id"], r["dt"]) for r in pypaimon_rows(path)] == expected


def test_tags_time_travel_and_rollback_through_spark(spark, store_warehouse):
    path = f"{store_warehouse}/db.db/tags"
    upsert(frame(spark, [{**ROW, "id": 1}]), path, primary_keys="id", partition_keys="dt")
    FileStoreTable.open(path).create_tag("v1")
    upsert(frame(spark, [{**ROW, "id": 1, "dt": "b", "v": 9}, {**ROW, "id": 2}]), path, primary_keys="id",
           partition_keys="dt")
    tagged = spark.read.format("paimon").option("tag", "v1").load(path).collect()
    assert [(r.id, r.dt, r.v) for r in tagged] == [(1, "20230501", 0)]
    assert [r.tag_name for r in spark.read.format("paimon").load(f"{path}$tags").collect()] == ["v1"]
    FileStoreTable.open(path).rollback_to("v1")
    assert [(r["id"], r["dt"]) for r in spark_rows(spark, path)] == [(1, "20230501")]
    assert [(r["id"], r["dt"]) for r in pypaimon_rows(path)] == [(1, "20230501")]


def test_delete_refuses_a_bad_predicate_and_engines_without_deletes(spark, warehouse):
    path = f"{warehouse}/db.db/nodelete"
    upsert(frame(spark, [ROW]), path, primary_keys="id", partition_keys="dt", options={"merge-engine": "first-row"})
    with pytest.raises(SchemaError, match="first-row table cannot delete"):
        delete(spark, path, "id = 0")
    path2 = f"{warehouse}/db.db/badpred"
    upsert(frame(spark, [ROW]), path2, primary_keys="id", partition_keys="dt")
    with pytest.raises(SchemaError, match="not valid Spark SQL"):
        delete(spark, path2, "no_such_column = 1")
    assert FileStoreTable.open(path2).latest_snapshot().id == 1


def test_fifteen_upserts_with_compaction_keep_buckets_small(spark, warehouse, execution):
    """Compaction after the commits of either execution (driver-local: in driver threads): with a
    trigger of 3 sorted runs, 15 upserts compact every bucket several times."""
    path = f"{warehouse}/db.db/fifteen"
    model = UpsertModel(["id"], ["dt"])
    options = {"dynamic-bucket.target-row-num": "10", "num-sorted-run.compaction-trigger": "3"}
    stop_trigger = 3 + 3  # Paimon's default num-sorted-run.stop-trigger: compaction-trigger + 3
    for batch in random_batches(seed=30, batches=15, size=8, key_space=40, partitions=("a", "b")):
        model.apply(batch)
        upsert(frame(spark, batch), path, primary_keys="id", partition_keys="dt", options=options,
               settings=RunSettings(execution=execution))
    table = FileStoreTable.open(path)
    splits = table.plan().splits
    assert max(len(s.files) for s in splits) < stop_trigger
    compactions = [table.snapshots.snapshot(i).commit_kind for i in range(1, table.latest_snapshot().id + 1)]
    assert compactions.count("COMPACT") >= 3 and compactions.count("APPEND") == 15
    assert all(n == 1 for n in live_places(path).values())
    assert spark_rows(spark, path) == model.sorted_rows()
    assert pypaimon_rows(path) == model.sorted_rows()


def test_rowkind_field_rows_delete_keys_inside_an_upsert(spark, warehouse):
    path = f"{warehouse}/db.db/rowkind"
    schema = "id bigint, dt string, v bigint, op string"
    options = {"rowkind.field": "op"}
    first = [(i, "ab"[i % 2], i, "+I") for i in range(10)]
    upsert(spark.createDataFrame(first, schema), path, primary_keys="id", partition_keys="dt", options=options)
    second = [(3, "zz", None, "-D"), (4, "a", None, "-D"), (42, "a", None, "-D"), (5, "b", 500, "+U"),
              (6, "b", 600, "+I")]
    r = upsert(spark.createDataFrame(second, schema), path, primary_keys="id", partition_keys="dt", options=options)
    assert (r.inserted, r.updated, r.moved, r.deleted, r.skipped) == (0, 1, 1, 2, 1)
    expected = {i: ("ab"[i % 2], i) for i in range(10) if i not in (3, 4)}
    expected.update({5: ("b", 500), 6: ("b", 600)})
    got = {row["id"]: (row["dt"], row["v"]) for row in spark_rows(spark, path)}
    assert got == expected
    assert {row["id"]: (row["dt"], row["v"]) for row in pypaimon_rows(path)} == expected
    assert all(n == 1 for n in live_places(path).values())


def test_system_tables_show_snapshots_files_buckets_partitions(spark, store_warehouse):
    path = f"{store_warehouse}/db.db/sys"
    rows = [{**ROW, "id": i, "dt": f"2023050{i % 3}"} for i in range(12)]
    upsert(frame(spark, rows), path, primary_keys="id", partition_keys="dt",
           options={"dynamic-bucket.target-row-num": "2"})
    delete(spark, path, "id < 3")
    compact(spark, path)

    def read(name):
        return spark.read.format("paimon").load(f"{path}${name}").collect()

    assert [(r.snapshot_id, r.commit_kind) for r in read("snapshots")] == [(1, "APPEND"), (2, "APPEND"),
                                                                           (3, "COMPACT")]
    table = FileStoreTable.open(path)
    splits = table.plan().splits
    files = read("files")
    assert sorted(r.file_path for r in files) == sorted(f"{s.bucket_path}/{f.file_name}" for s in splits
                                                       for f in s.files)
    assert {r.level for r in files} == {5}
    buckets = read("buckets")
    assert sum(r.record_count for r in buckets) == 9 and len(buckets) == len(splits)
    parts = {r.partition: r.record_count for r in read("partitions")}
    assert parts == {"dt=20230500": 3, "dt=20230501": 3, "dt=20230502": 3}  # Paimon 2.0 shows its path
    with pytest.raises(Exception, match="unknown system table"):
        spark.read.format("paimon").load(f"{path}$nope").collect()


def test_full_compaction_every_delta_commits(spark, warehouse, execution):
    path = f"{warehouse}/db.db/delta_commits"
    options = {"full-compaction.delta-commits": "2"}
    for i in range(4):
        upsert(frame(spark, [{**ROW, "id": i, "dt": "ab"[i % 2]}]), path, primary_keys="id", partition_keys="dt",
               options=options, settings=RunSettings(execution=execution))
    table = FileStoreTable.open(path)
    kinds = [table.snapshots.snapshot(i).commit_kind for i in range(1, table.latest_snapshot().id + 1)]
    assert kinds == ["APPEND", "APPEND", "COMPACT", "APPEND", "APPEND", "COMPACT"]
    assert all(f.level == 5 for s in table.plan().splits for f in s.files)


def test_driver_local_compaction_failing_in_one_bucket_leaves_no_files(spark, warehouse, monkeypatch):
    """compact(..., settings=RunSettings(execution="local")) rewrites buckets in driver threads: when one bucket fails,
    the error propagates, nothing is committed and the buckets already rewritten leave no file."""
    path = f"{warehouse}/db.db/local_compact_fails"
    options = {"write-only": "true", "bucket": "4"}
    for i in range(2):
        upsert(frame(spark, [{**ROW, "id": k, "v": i} for k in range(40)]), path, primary_keys="id",
               options=options, settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    assert len(table.plan().splits) == 4
    before, latest = data_files(path), table.latest_snapshot().id
    compaction = sys.modules["dbt_paimon.engine.writes.compaction"]
    real = compaction.compact_bucket

    def flaky(table, split, *args):
        if split.bucket == 2:
            raise OSError("disk full")
        return real(table, split, *args)

    monkeypatch.setattr(compaction, "compact_bucket", flaky)
    with pytest.raises(OSError, match="disk full"):
        compact(spark, path, settings=RunSettings(execution="local"))
    assert data_files(path) == before
    assert FileStoreTable.open(path).latest_snapshot().id == latest
    monkeypatch.setattr(compaction, "compact_bucket", real)
    assert compact(spark, path, settings=RunSettings(execution="local")) == latest + 1
    assert len(data_files(path)) == len(before) + 4
    assert pypaimon_rows(path) == spark_rows(spark, path)
    assert [r["v"] for r in pypaimon_rows(path)] == [1] * 40


@pytest.mark.parametrize("engine", ["deduplicate", "first-row"])
def test_small_upserts_compact_their_small_runs_not_the_bucket(spark, warehouse, execution, engine):
    """After each small upsert into a big, fully compacted bucket, the compaction Paimon's writers
    would do (universal compaction; first-row: every level-0 file up) rewrites the small runs
    below the big file and leaves that file alone; first-row tables keep no level-0 file; every
    reader sees the rows."""
    path = f"{warehouse}/db.db/small_runs_{engine.replace('-', '_')}"
    options = {"bucket": "1", "num-sorted-run.compaction-trigger": "3", "merge-engine": engine}
    # big enough that a few small files (mostly Parquet footers) stay far below twice its size
    base = 20_000
    upsert(frame(spark, [{**ROW, "id": k, "v": 0, "s": f"row {k}"} for k in range(base)]), path,
           primary_keys="id", options=options, settings=RunSettings(execution=execution))
    compact(spark, path)
    big = {f.file_name for s in FileStoreTable.open(path).plan().splits for f in s.files}
    expected = {k: 0 for k in range(base)}
    for i in range(8):
        rows = [{**ROW, "id": k, "v": i + 1} for k in (2 * i, 2 * i + 1, base + i)]
        upsert(frame(spark, rows), path, primary_keys="id", options=options, settings=RunSettings(execution=execution))
        for r in rows:
            if engine == "deduplicate" or r["id"] not in expected:
                expected[r["id"]] = r["v"]
        table = FileStoreTable.open(path)
        (split,) = table.plan().splits
        assert big <= {f.file_name for f in split.files}, f"upsert {i}: the big file was rewritten"
        assert sorted_run_count(split.files) <= 3
        if engine == "first-row":
            assert not [f for f in split.files if f.level == 0]
    kinds = [table.snapshots.snapshot(i).commit_kind for i in range(3, table.latest_snapshot().id + 1)]
    assert kinds.count("COMPACT") >= (8 if engine == "first-row" else 3)
    want = sorted(expected.items())
    assert [(r["id"], r["v"]) for r in spark_rows(spark, path)] == want
    assert [(r["id"], r["v"]) for r in pypaimon_rows(path)] == want
