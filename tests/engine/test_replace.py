"""An upsert that replaces rows of a key table (engine/writes/replace.py), dbt's insert_overwrite and microbatch
there: the replaced keys the batch lacks are deleted, the batch upserted, in one snapshot."""

from __future__ import annotations

import datetime as dt

import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import upsert
from dbt_paimon.engine.writes.replace import Replace
from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.index.index import IndexManifestFile
from tests.oracle import pypaimon_read

SCHEMA = "id bigint, dt string, ts timestamp, v string"


def _frame(spark, rows):
    return spark.createDataFrame([(i, d, dt.datetime(2024, 1, day, 12), v) for i, d, day, v in rows], SCHEMA)


def _rows(path) -> list[tuple]:
    got = FileStoreTable.open(path).to_arrow().to_pylist()
    assert sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(path).to_pylist()) == sorted(
        (r["id"], r["dt"], r["v"]) for r in got)
    return sorted((r["id"], r["dt"], r["v"]) for r in got)


@pytest.mark.parametrize("execution, options", [("local", {"bucket": "2"}), ("distributed", {}),
                                                ("local", {})])
def test_the_batchs_partitions_are_replaced(spark, table_path, execution, options):
    keys = dict(primary_keys=["id", "dt"], partition_keys="dt", options=options,
                settings=RunSettings(execution=execution))
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "a", 1, "x"), (3, "b", 1, "x")]), table_path, **keys)
    result = upsert(_frame(spark, [(2, "a", 2, "y"), (4, "a", 2, "y")]), table_path, **keys,
                    replace=Replace(batch_partitions=True))
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    assert FileStoreTable.open(table_path).latest_snapshot().id == result.snapshot_id == 2
    assert _rows(table_path) == [(2, "a", "y"), (3, "b", "x"), (4, "a", "y")]


def test_a_range_is_replaced_whatever_partition_holds_it(spark, table_path):
    keys = dict(primary_keys=["id", "dt"], partition_keys="dt", options={"bucket": "2"})
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "b", 2, "x"), (3, "a", 3, "x"), (4, "b", 2, "x")]), table_path, **keys)
    where = ("ts >= CAST('2024-01-02 00:00:00+00:00' AS TIMESTAMP) "
             "AND ts < CAST('2024-01-03 00:00:00+00:00' AS TIMESTAMP)")
    result = upsert(_frame(spark, [(4, "b", 2, "y")]), table_path, **keys, replace=Replace(where=where))
    assert result.deleted == 1  # id 2 (day 2, not in the batch); id 4 is upserted
    assert _rows(table_path) == [(1, "a", "x"), (3, "a", "x"), (4, "b", "y")]


@pytest.mark.parametrize("execution, key_index", [("local", True), ("distributed", True), ("local", False)])
def test_a_cross_partition_tables_partitions_are_replaced(spark, table_path, execution, key_index):
    """The key is id alone: a batch key stored in another partition moves (-D where it was), a
    replaced key the batch lacks is deleted, and the key index learns both: the next upserts find
    every key where it now lives."""
    keys = dict(primary_keys="id", partition_keys="dt",
                settings=RunSettings(execution=execution, key_index=key_index))
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "a", 1, "x"), (3, "b", 1, "x"), (5, "b", 1, "x")]), table_path, **keys)
    result = upsert(_frame(spark, [(2, "a", 2, "y"), (3, "a", 2, "y"), (4, "a", 2, "y")]), table_path, **keys,
                    replace=Replace(batch_partitions=True))
    assert (result.inserted, result.updated, result.moved, result.deleted) == (1, 1, 1, 1)
    assert _rows(table_path) == [(2, "a", "y"), (3, "a", "y"), (4, "a", "y"), (5, "b", "x")]
    after = upsert(_frame(spark, [(1, "b", 3, "z"), (3, "b", 3, "z")]), table_path, **keys)
    assert (after.inserted, after.moved) == (1, 1)  # 1 was deleted; 3 lives in "a"
    assert _rows(table_path) == [(1, "b", "z"), (2, "a", "y"), (3, "b", "z"), (4, "a", "y"), (5, "b", "x")]


def test_a_cross_partition_tables_range_is_replaced(spark, table_path):
    keys = dict(primary_keys="id", partition_keys="dt")
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "b", 2, "x"), (3, "a", 2, "x")]), table_path, **keys)
    where = ("ts >= CAST('2024-01-02 00:00:00+00:00' AS TIMESTAMP) "
             "AND ts < CAST('2024-01-03 00:00:00+00:00' AS TIMESTAMP)")
    result = upsert(_frame(spark, [(3, "b", 2, "y")]), table_path, **keys, replace=Replace(where=where))
    assert (result.moved, result.deleted) == (1, 1)  # 3 moves to "b"; 2 (day 2, not in the batch) goes
    assert _rows(table_path) == [(1, "a", "x"), (3, "b", "y")]
    assert upsert(_frame(spark, [(2, "a", 1, "w")]), table_path, **keys).inserted == 1
    assert _rows(table_path) == [(1, "a", "x"), (2, "a", "w"), (3, "b", "y")]


@pytest.mark.parametrize("options", [{"bucket": "2", "merge-engine": "partial-update"},
                                     {"merge-engine": "aggregation", "fields.v.aggregate-function": "max",
                                      "dynamic-bucket.target-row-num": "1"}])
def test_a_merging_tables_partitions_are_overwritten(spark, table_path, options):
    """partial-update (fixed buckets) and aggregation (dynamic buckets: the HASH index replaced too):
    the batch's partitions hold the batch alone; the others are kept."""
    keys = dict(primary_keys=["id", "dt"], partition_keys="dt", options=options)
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "a", 1, "x"), (6, "a", 1, "x"), (3, "b", 1, "x")]), table_path,
           **keys)
    upsert(_frame(spark, [(2, "a", 1, "z")]), table_path, **keys)
    result = upsert(_frame(spark, [(2, "a", 2, None), (4, "a", 2, "y")]), table_path, **keys,
                    replace=Replace(batch_partitions=True))
    table = FileStoreTable.open(table_path)
    assert table.latest_snapshot().commit_kind == "OVERWRITE" and result.snapshot_id == 3
    if table.schema.bucket_mode.name == "HASH_DYNAMIC":  # a key per bucket: a's 3 buckets became 2
        index = IndexManifestFile(table.io, table_path).read(table.latest_snapshot().index_manifest)
        assert sorted(e.row_count for e in index) == [1, 1, 1]
    # ids 1 and 6 gone with partition a; id 2's null did not merge with the stored "z"
    assert _rows(table_path) == [(2, "a", None), (3, "b", "x"), (4, "a", "y")]
    upsert(_frame(spark, [(2, "a", 3, "v"), (5, "a", 3, "v")]), table_path, **keys)  # merges with what is there now
    assert _rows(table_path) == [(2, "a", "v"), (3, "b", "x"), (4, "a", "y"), (5, "a", "v")]


def test_a_merging_table_is_overwritten_whole(spark, table_path):
    keys = dict(primary_keys="id", options={"bucket": "1", "merge-engine": "first-row"})
    upsert(_frame(spark, [(1, "a", 1, "x"), (2, "a", 1, "x")]), table_path, **keys)
    upsert(_frame(spark, [(2, "b", 1, "y"), (3, "b", 1, "y")]), table_path, **keys, replace=Replace(where="true"))
    assert _rows(table_path) == [(2, "b", "y"), (3, "b", "y")]


@pytest.mark.parametrize("key, options, replace, words", [
    (["id", "dt"], {"bucket": "2", "merge-engine": "partial-update"}, Replace(where="ts > '2024-01-01'"),
     "a whole partition at a time"),
    (["id"], {"merge-engine": "first-row"}, Replace(batch_partitions=True), "key lacks a partition column"),
])
def test_replaces_a_table_cannot_take_are_refused(spark, table_path, key, options, replace, words):
    upsert(_frame(spark, [(1, "a", 1, "x")]), table_path, primary_keys=key, partition_keys="dt", options=options)
    before = FileStoreTable.open(table_path).latest_snapshot().id
    with pytest.raises(SchemaError, match=words):
        upsert(_frame(spark, [(2, "a", 1, "y")]), table_path, primary_keys=key, partition_keys="dt", replace=replace)
    assert _rows(table_path) == [(1, "a", "x")]
    assert FileStoreTable.open(table_path).latest_snapshot().id == before
