"""Upserts into `sequence.field` tables (Paimon's option), on both executors, on a local disk and on
the S3 server: the versions of a key are ordered by the field, then by write order, whatever order
the batches arrive in; Spark SQL (our source), pypaimon 2.1 and our reader agree, before and after a
compaction. Java Paimon's reads of these tables: tests/java_paimon/test_sequence_field.py."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import upsert
from dbt_paimon.engine.writes.replace import Replace
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import SchemaError

from .helpers import pypaimon_rows, spark_rows

SCHEMA = "id bigint, dt string, v string, s bigint"
OPTIONS = {"bucket": "2", "sequence.field": "s"}
# (batch, expected counts: inserted, updated, skipped): key 1 goes back in time (skipped), key 2
# forward; key 3 comes twice in one batch (the higher s wins) and once with a null s (older than any)
BATCHES = [
    ([(1, "a", "v1", 10), (2, "a", "v1", 10), (3, "b", "v1", 5)], (3, 0, 0)),
    ([(1, "a", "v2", 5), (2, "a", "v2", 20), (3, "b", "v2", 7), (3, "b", "v3", 6), (4, "b", "v1", None)], (1, 2, 2)),
    ([(3, "b", "v4", None), (4, "b", "v2", None), (1, "a", "v3", 10)], (0, 2, 1)),
]
EXPECTED = [{"id": 1, "dt": "a", "v": "v3", "s": 10}, {"id": 2, "dt": "a", "v": "v2", "s": 20},
            {"id": 3, "dt": "b", "v": "v2", "s": 7}, {"id": 4, "dt": "b", "v": "v2", "s": None}]


def _by_id(rows):
    return sorted(rows, key=lambda r: r["id"])


@pytest.mark.parametrize("bucket", ["2", "-1"], ids=["fixed bucket", "dynamic bucket"])
def test_the_sequence_field_orders_versions_across_batches(spark, store_warehouse, execution, bucket):
    path = f"{store_warehouse}/db.db/seq"
    for rows, counts in BATCHES:
        result = upsert(spark.createDataFrame(rows, SCHEMA), path, primary_keys=["id", "dt"], partition_keys="dt",
                        options={**OPTIONS, "bucket": bucket}, settings=RunSettings(execution=execution))
        assert (result.inserted, result.updated, result.skipped) == counts
    # equal s (key 1: 10 and 10): the later write wins, as in Paimon
    assert _by_id(spark_rows(spark, path)) == EXPECTED
    assert _by_id(pypaimon_rows(path)) == EXPECTED
    compact(spark, path, settings=RunSettings(execution=execution))
    assert _by_id(FileStoreTable.open(path).to_arrow().to_pylist()) == EXPECTED
    assert _by_id(pypaimon_rows(path)) == EXPECTED


def test_a_descending_sequence_field_writes_rows_as_given_and_readers_order_them(spark, warehouse):
    path = f"{warehouse}/db.db/desc"
    options = {**OPTIONS, "sequence.field.sort-order": "descending"}
    for rows in ([(1, "a", "v1", 5), (2, "a", "v1", None)], [(1, "a", "v2", 9), (2, "a", "v2", 3)]):
        result = upsert(spark.createDataFrame(rows, SCHEMA), path, primary_keys=["id", "dt"], partition_keys="dt",
                        options=options, settings=RunSettings(execution="local"))
    assert result.skipped == 0  # written as given: the readers decide
    expected = [{"id": 1, "dt": "a", "v": "v1", "s": 5}, {"id": 2, "dt": "a", "v": "v2", "s": 3}]
    assert _by_id(spark_rows(spark, path)) == expected
    assert _by_id(pypaimon_rows(path)) == expected
    with pytest.raises(SchemaError, match="disagrees with the table's sequence.field 's' \\(descending\\)"):
        upsert(spark.createDataFrame([(1, "a", "v3", 1)], SCHEMA), path, primary_keys=["id", "dt"],
               partition_keys="dt", sequence_by="s")
    assert FileStoreTable.open(path).latest_snapshot().id == 2


def test_insert_overwrite_replaces_partitions_whatever_the_sequence_and_a_range_is_refused(spark, warehouse, execution):
    """Paimon's INSERT OVERWRITE on a sequence.field table: the run's rows become the partitions'
    rows though older by sequence (an OVERWRITE snapshot); a time range (microbatch) cannot be
    replaced so, and is refused with nothing written."""
    path = f"{warehouse}/db.db/overwrite"
    first = [(1, "a", "v1", 10), (2, "a", "v1", 10), (3, "b", "v1", 10)]
    upsert(spark.createDataFrame(first, SCHEMA), path, primary_keys=["id", "dt"], partition_keys="dt", options=OPTIONS,
           settings=RunSettings(execution=execution))
    # partition a gets key 1 back in time and a new key 4 (key 2 goes); partition b is kept
    again = [(1, "a", "v2", 1), (4, "a", "v2", 1), (4, "a", "v3", 2)]
    upsert(spark.createDataFrame(again, SCHEMA), path, primary_keys=["id", "dt"], partition_keys="dt",
           settings=RunSettings(execution=execution), replace=Replace(batch_partitions=True))
    table = FileStoreTable.open(path)
    assert table.latest_snapshot().commit_kind == "OVERWRITE"
    expected = [{"id": 1, "dt": "a", "v": "v2", "s": 1}, {"id": 3, "dt": "b", "v": "v1", "s": 10},
                {"id": 4, "dt": "a", "v": "v3", "s": 2}]
    assert _by_id(spark_rows(spark, path)) == expected
    assert _by_id(pypaimon_rows(path)) == expected
    with pytest.raises(SchemaError, match="orders a key's versions by sequence.field 's': a day can only be replaced"):
        upsert(spark.createDataFrame(again, SCHEMA), path, primary_keys=["id", "dt"], partition_keys="dt",
               replace=Replace(where="s < 5", what="a day"))
    assert FileStoreTable.open(path).latest_snapshot().id == table.latest_snapshot().id
