"""Time travel as Paimon's Spark connector (2.0, the current release) reads it: Spark SQL's `VERSION AS
OF` (a snapshot id, a tag) and `TIMESTAMP AS OF` (between two commits, at one, before the first: an
error on both sides), and the `paimon` source's `scan.timestamp-millis`, `scan.version` and `scan.mode`
from-timestamp, give the connector's rows, on a key table and an append table our Spark SQL wrote
(an INSERT, then a DELETE: the append table's an OVERWRITE)."""

from __future__ import annotations

import pytest

from dbt_paimon.store import FileStoreTable
from tests.engine.helpers import sql_tables

from .side_env import CURRENT_RELEASE_ONLY, SparkSqlError


def _rows(found: list) -> list[tuple]:
    return sorted(tuple(r) for r in found)


@pytest.mark.parametrize("name", ["keyed", "logs"])
@CURRENT_RELEASE_ONLY
def test_time_travel_reads_the_connectors_rows(paimon_spark, spark, warehouse, name):
    tables = sql_tables(spark, warehouse)  # snapshot 1
    spark.sql(f"INSERT INTO db.{name} VALUES (4, 'b', 40)")  # 2
    spark.sql(f"DELETE FROM db.{name} WHERE id = 1")  # 3
    table = FileStoreTable.open(f"{tables}/{name}")
    table.create_tag("v2", snapshot_id=2)
    first, second, third = (table.snapshots.snapshot(i).time_millis for i in (1, 2, 3))
    assert first < second < third
    clauses = ["VERSION AS OF 1", "VERSION AS OF 2", "VERSION AS OF 'v2'", "FOR SYSTEM_VERSION AS OF 3",
               f"TIMESTAMP AS OF timestamp_millis({second})", f"TIMESTAMP AS OF timestamp_millis({third - 1})",
               f"FOR SYSTEM_TIME AS OF timestamp_millis({third + 5000})",
               f"TIMESTAMP AS OF timestamp_millis({first - 1})"]
    compared = 0
    for clause in clauses:
        query = f"SELECT id, dt, v FROM db.{name} {clause}"
        try:
            theirs = _rows(tuple(r.values()) for r in paimon_spark.sql(warehouse, query))
        except SparkSqlError:
            theirs = None
        try:
            ours = _rows(spark.sql(query).collect())
        except Exception:  # noqa: BLE001 - refused on both sides, or the assert below says not
            ours = None
        assert ours == theirs, query
        compared += ours is not None
    assert compared == len(clauses) - 1  # before the first commit: refused by both

    by_options = [({"scan.timestamp-millis": str(second)}, 2), ({"scan.version": "v2"}, 2), ({"scan.version": "1"}, 1),
                  ({"scan.mode": "from-timestamp", "scan.timestamp-millis": str(third - 1)}, 2)]
    for options, snapshot in by_options:
        expected = _rows(spark.sql(f"SELECT id, dt, v FROM db.{name} VERSION AS OF {snapshot}").collect())
        read = spark.read.format("paimon").options(**options).load(table.path)
        assert _rows(read.select("id", "dt", "v").collect()) == expected, options
    with pytest.raises(Exception, match="one way to travel in time, not 'snapshot-id' and 'scan.timestamp-millis'"):
        options = {"snapshot-id": "1", "scan.timestamp-millis": str(second)}
        spark.read.format("paimon").options(**options).load(table.path).collect()
