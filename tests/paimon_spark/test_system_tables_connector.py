"""Paimon 2.0's system tables `$snapshots`, `$files`, `$partitions` and `$buckets` of our tables, as its
Spark connector shows them: the same columns in the same order, and the same values, on a partitioned
key table of many types (a file's keys and value statistics as Java prints them; a column added after
files were written), one with deletion vectors, an unpartitioned one, and an append table a DELETE
rewrote (the removed file's creation time still counts in `last_update_time`, as Paimon sums every
manifest entry)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

from dbt_paimon.engine import compact, delete, upsert, write
from dbt_paimon.engine import schema_change
from dbt_paimon.store import FileStoreTable

from .side_env import CURRENT_RELEASE_ONLY, table_name

TYPES = "id BIGINT, dt STRING, v STRING, d DOUBLE, n DECIMAL(10,2), day DATE, ts TIMESTAMP_NTZ, flag BOOLEAN"
NAMES = ("snapshots", "files", "partitions", "buckets")


def _row(i: int, dt_: str) -> tuple:
    return (i, dt_, f"v{i}", i * 1.5e6, Decimal(f"{i}.25"), dt.date(2024, 1, i % 28 + 1),
            dt.datetime(2024, 1, 1, 10, i % 60, 0, (i * 1000) % 1_000_000), i % 2 == 0)


def _plain(value):
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return list(value) if isinstance(value, tuple) else value


def _order(row: dict) -> tuple:
    return tuple(str(row[k]) for k in sorted(row))


def _compare(paimon_spark, spark, path: str) -> int:
    warehouse, name = table_name(path)
    db, table = name.split(".")
    compared = 0
    for system in NAMES:
        ours = [{k: _plain(v) for k, v in r.asDict().items()}
                for r in spark.read.format("paimon").load(f"{path}${system}").collect()]
        theirs = paimon_spark.sql(warehouse, f"SELECT * FROM {db}.`{table}${system}`")
        theirs = [{k: _plain(v) for k, v in r.items()} for r in theirs]
        assert [list(r) for r in ours[:1]] == [list(r) for r in theirs[:1]], system  # the columns, in order
        assert sorted(ours, key=_order) == sorted(theirs, key=_order), system
        compared += len(ours)
    return compared


@CURRENT_RELEASE_ONLY
def test_system_tables_are_paimon_2s(paimon_spark, spark, warehouse):
    os.makedirs(f"{warehouse}/st.db", exist_ok=True)
    keyed, dv, flat, log = (f"{warehouse}/st.db/{n}" for n in ("keyed", "dv", "flat", "log"))
    rows = spark.createDataFrame([_row(i, "a" if i % 3 else "b") for i in range(1, 7)], TYPES)
    for path, options in ((keyed, {"bucket": "2"}), (dv, {"bucket": "1", "deletion-vectors.enabled": "true"})):
        upsert(rows, path, primary_keys=["id", "dt"], partition_keys="dt", options=options)
        upsert(spark.createDataFrame([_row(i, "a") for i in (1, 2, 20)], TYPES), path, primary_keys=["id", "dt"],
               partition_keys="dt", options=options)
        delete(spark, path, "id = 4")
        compact(spark, path)
    from pyspark.sql import types as T
    schema_change.commit(keyed, schema_change.evolve(FileStoreTable.open(keyed).schema,
                                                     add=[T.StructField("extra", T.IntegerType())]))
    upsert(spark.createDataFrame([_row(30, "c") + (7,)], TYPES + ", extra INT"), keyed, primary_keys=["id", "dt"],
           partition_keys="dt", options={"bucket": "2"})
    upsert(rows, flat, primary_keys="id", options={"bucket": "1"})
    write(rows, log, partition_keys="dt")
    write(spark.createDataFrame([_row(9, "a")], TYPES), log, partition_keys="dt")
    delete(spark, log, "id = 9")  # the file it wrote goes: an OVERWRITE
    assert sum(_compare(paimon_spark, spark, p) for p in (keyed, dv, flat, log)) > 0
