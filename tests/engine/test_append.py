"""engine.write on append tables: in the driver and as a Spark job alike; a range of rows replaced by a
batch in one OVERWRITE snapshot (a dbt microbatch); rows deleted by rewriting the files that hold them."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import RunSettings, write
from dbt_paimon.engine import delete
from dbt_paimon.store import FileStoreTable, SchemaError
from tests.oracle import pypaimon_read

SCHEMA = "id bigint, dt string, ts timestamp, v double"


def _frame(spark, rows):
    import datetime as dt
    return spark.createDataFrame([(i, d, dt.datetime(2024, 1, day, 12), float(v)) for i, d, day, v in rows], SCHEMA)


def _ids(path) -> list[int]:
    return sorted(FileStoreTable.open(path).to_arrow().column("id").to_pylist())


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_append_and_overwrite_where_the_job_runs(spark, table_path, execution):
    settings = RunSettings(execution=execution)
    first = write(_frame(spark, [(1, "a", 1, 1), (2, "b", 1, 2), (3, "a", 2, 3)]), table_path, partition_keys="dt",
                  settings=settings)
    assert (first.execution, first.rows_written, first.snapshot_id) == (execution, 3, 1)
    write(_frame(spark, [(1, "a", 1, 9)]), table_path, partition_keys="dt", settings=settings)
    assert _ids(table_path) == [1, 1, 2, 3]
    result = write(_frame(spark, [(7, "a", 3, 7)]), table_path, mode="overwrite-partitions", partition_keys="dt",
                   settings=settings)
    assert (result.partitions_replaced, result.rows_replaced) == (1, 3)
    assert _ids(table_path) == [2, 7] == sorted(pypaimon_read(table_path).column("id").to_pylist())


def test_a_range_is_replaced_in_one_snapshot_whatever_partition_holds_it(spark, table_path):
    write(_frame(spark, [(1, "a", 1, 1), (2, "b", 2, 2), (3, "a", 3, 3), (4, "b", 4, 4)]), table_path,
          partition_keys="dt")
    where = ("ts >= CAST('2024-01-02 00:00:00+00:00' AS TIMESTAMP) "
             "AND ts < CAST('2024-01-04 00:00:00+00:00' AS TIMESTAMP)")
    result = write(_frame(spark, [(5, "a", 2, 5), (6, "c", 3, 6)]), table_path, mode="replace-where", where=where,
                   partition_keys="dt")
    table = FileStoreTable.open(table_path)
    assert result.rows_replaced == 2 and result.snapshot_id == 2
    assert table.latest_snapshot().commit_kind == "OVERWRITE"
    assert _ids(table_path) == [1, 4, 5, 6] == sorted(pypaimon_read(table_path).column("id").to_pylist())
    # the same range again with the same rows: the same table (a microbatch re-run is idempotent)
    write(_frame(spark, [(5, "a", 2, 5), (6, "c", 3, 6)]), table_path, mode="replace-where", where=where,
          partition_keys="dt")
    assert _ids(table_path) == [1, 4, 5, 6]
    with pytest.raises(SchemaError, match="the replaced range 'nope >= 1' is not valid Spark SQL"):
        write(_frame(spark, [(8, "a", 2, 8)]), table_path, mode="replace-where", where="nope >= 1", partition_keys="dt")
    assert _ids(table_path) == [1, 4, 5, 6]  # nothing written


def test_delete_rewrites_only_the_files_holding_matching_rows(spark, table_path):
    write(_frame(spark, [(1, "a", 1, 1), (2, "a", 1, 2)]), table_path, partition_keys="dt")
    write(_frame(spark, [(3, "b", 1, 3)]), table_path, partition_keys="dt")
    before = {f.file_name for s in FileStoreTable.open(table_path).plan().splits for f in s.files
              if s.partition_values == ("b",)}
    result = delete(spark, table_path, "id = 2 OR v IS NULL")
    assert result.deleted == 1
    table = FileStoreTable.open(table_path)
    after = {f.file_name for s in table.plan().splits for f in s.files if s.partition_values == ("b",)}
    assert after == before  # partition b's file held no matching row: untouched
    assert _ids(table_path) == [1, 3] == sorted(pypaimon_read(table_path).column("id").to_pylist())
    assert delete(spark, table_path, "id = 42").deleted == 0
