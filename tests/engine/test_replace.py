"""An upsert that replaces rows of a key table (engine/replace.py), dbt's insert_overwrite and microbatch
there: the replaced keys the batch lacks are deleted, the batch upserted, in one snapshot."""

from __future__ import annotations

import datetime as dt

import pytest

from dbt_paimon.engine import RunSettings, upsert
from dbt_paimon.engine.replace import Replace
from dbt_paimon.store import FileStoreTable, SchemaError
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
    where = "ts >= CAST('2024-01-02 00:00:00+00:00' AS TIMESTAMP) AND ts < CAST('2024-01-03 00:00:00+00:00' AS TIMESTAMP)"
    result = upsert(_frame(spark, [(4, "b", 2, "y")]), table_path, **keys, replace=Replace(where=where))
    assert result.deleted == 1  # id 2 (day 2, not in the batch); id 4 is upserted
    assert _rows(table_path) == [(1, "a", "x"), (3, "a", "x"), (4, "b", "y")]


@pytest.mark.parametrize("key, options, words", [
    (["id", "dt"], {"bucket": "2", "merge-engine": "partial-update"}, "merges rows"),
    (["id"], {}, "cross-partition table"),
])
def test_tables_whose_rows_cannot_be_replaced_are_refused(spark, table_path, key, options, words):
    upsert(_frame(spark, [(1, "a", 1, "x")]), table_path, primary_keys=key, partition_keys="dt", options=options)
    with pytest.raises(SchemaError, match=words):
        upsert(_frame(spark, [(2, "a", 1, "y")]), table_path, primary_keys=key, partition_keys="dt",
               replace=Replace(where="true"))
    assert _rows(table_path) == [(1, "a", "x")]
