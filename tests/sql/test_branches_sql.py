"""Branches through Spark: the engine writes a branch (`options={"branch": b}`), the `paimon` source and
Spark SQL read it (`.option("branch", b)`, `t$branch_b`, `t$branch_b$snapshots`, `t$branches`), and
Spark SQL statements write it (`INSERT INTO t$branch_b`, DELETE, UPDATE, MERGE, TRUNCATE, ALTER) on
key, cross-partition and append tables, main untouched; then main is fast-forwarded to it."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import upsert, write
from dbt_paimon.store import FileStoreTable
from tests.engine.helpers import sql_tables


@pytest.fixture
def tables(spark, warehouse):
    return sql_tables(spark, warehouse)


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.select("id", "dt", "v").collect())


MAIN = [(1, "a", 10), (2, "a", 20), (3, "b", 30)]


@pytest.mark.parametrize("name", ["keyed", "cross", "logs"])
def test_statements_and_the_engine_write_a_branch_and_main_stays(spark, tables, name):
    path = f"{tables}/{name}"
    table = FileStoreTable.open(path)
    table.create_branch("wap", snapshot_id=table.snapshots.latest_id())
    keyed = name != "logs"
    rows = spark.createDataFrame([(4, "b", 40)], "id int, dt string, v int")
    if keyed:
        upsert(rows, path, partition_keys="dt", options={"branch": "wap"})
    else:
        write(rows, path, partition_keys="dt", options={"branch": "wap"})
    spark.sql(f"INSERT INTO db.`{name}$branch_wap` VALUES (5, 'a', 50)")
    spark.sql(f"UPDATE db.`{name}$branch_wap` SET v = v + 1 WHERE id = 1")
    spark.sql(f"DELETE FROM db.`{name}$branch_wap` WHERE id = 2")
    spark.sql(f"MERGE INTO db.`{name}$branch_wap` t USING (SELECT 3 AS id, 'b' AS dt, 33 AS v) s "
              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")
    expected = [(1, "a", 11), (3, "b", 33), (4, "b", 40), (5, "a", 50)]
    assert _rows(spark.sql(f"SELECT * FROM db.`{name}$branch_wap`")) == expected
    assert _rows(spark.read.format("paimon").option("branch", "wap").load(path)) == expected
    assert _rows(spark.read.format("paimon").load(f"{path}$branch_wap")) == expected
    assert _rows(spark.sql(f"SELECT * FROM db.{name}")) == MAIN  # main untouched
    assert FileStoreTable.open(path).snapshots.latest_id() == table.snapshots.latest_id()
    snapshots = spark.sql(f"SELECT snapshot_id FROM db.`{name}$branch_wap$snapshots`").collect()
    assert len(snapshots) > 1
    assert [r.branch_name for r in spark.sql(f"SELECT branch_name FROM db.`{name}$branches`").collect()] == ["wap"]
    FileStoreTable.open(path).fast_forward("wap")
    assert _rows(spark.sql(f"SELECT * FROM db.{name}")) == expected


def test_alter_and_truncate_on_a_branch_and_what_is_refused(spark, tables):
    path = f"{tables}/keyed"
    FileStoreTable.open(path).create_branch("b", snapshot_id=1)
    spark.sql("ALTER TABLE db.`keyed$branch_b` ADD COLUMNS (note string)")
    assert FileStoreTable.open(path, branch="b").schema.field_names[-1] == "note"
    assert "note" not in FileStoreTable.open(path).schema.field_names
    spark.sql("INSERT INTO db.`keyed$branch_b` VALUES (9, 'c', 90, 'x')")
    spark.sql("TRUNCATE TABLE db.`keyed$branch_b`")
    assert spark.sql("SELECT * FROM db.`keyed$branch_b`").count() == 0
    assert _rows(spark.sql("SELECT * FROM db.keyed")) == MAIN
    with pytest.raises(Exception, match="is a system table: it is read, never written"):
        spark.sql("INSERT INTO db.`keyed$branch_b$snapshots` VALUES (1)")
    with pytest.raises(Exception, match="branch 'nope' of .* does not exist"):
        spark.sql("SELECT * FROM db.`keyed$branch_nope`").collect()
    rows = spark.createDataFrame([(4, "b", 40)], "id int, dt string, v int")
    with pytest.raises(Exception, match="branch 'nope' of .* does not exist"):
        upsert(rows, path, partition_keys="dt", options={"branch": "nope"})
    # a table that does not exist yet: made on main without rows, its rows on the branch
    upsert(rows, f"{tables}/new_one", primary_keys="id", options={"branch": "b"})
    new = FileStoreTable.open(f"{tables}/new_one")
    assert new.snapshots.latest_id() is None and new.list_branches() == ["b"]
    assert FileStoreTable.open(f"{tables}/new_one", branch="b").to_arrow().num_rows == 1
    new.fast_forward("b")
    assert FileStoreTable.open(f"{tables}/new_one").to_arrow().num_rows == 1


def test_a_session_writing_on_a_branch_writes_and_reads_it_in_its_statements(spark, tables):
    """A dbt build on a branch (write-audit-publish: set_session_branch) runs hooks and run_query
    statements in its session: each writes the branch of a table that has it, and its query reads
    the branch of the tables it names, as the session's queries do; main is not written."""
    from dbt_paimon.sql import set_session_branch

    for name in ("keyed", "cross", "logs"):
        table = FileStoreTable.open(f"{tables}/{name}")
        table.create_branch("wap", snapshot_id=table.snapshots.latest_id())
    upsert(spark.createDataFrame([(1, "a", 111)], "id bigint, dt string, v int"), f"{tables}/cross",
           primary_keys="id", partition_keys="dt", options={"branch": "wap"})
    set_session_branch(spark, "wap")
    try:
        spark.sql("DELETE FROM db.logs WHERE id = 3")
        spark.sql("INSERT INTO db.logs SELECT id + 100, dt, v FROM db.cross WHERE id = 1")
        spark.sql("MERGE INTO db.keyed t USING db.cross s ON t.id = s.id AND t.dt = s.dt "
                  "WHEN MATCHED THEN UPDATE SET v = s.v")
        spark.sql("UPDATE db.keyed SET v = 0 WHERE id = 3")
        assert _rows(spark.sql("SELECT * FROM db.keyed")) == [(1, "a", 111), (2, "a", 20), (3, "b", 0)]
        assert _rows(spark.sql("SELECT * FROM db.logs")) == [(1, "a", 10), (2, "a", 20), (101, "a", 111)]
    finally:
        set_session_branch(spark, None)
    for name in ("keyed", "cross", "logs"):
        assert _rows(spark.sql(f"SELECT * FROM db.{name}")) == MAIN, name
    assert _rows(spark.sql("SELECT * FROM db.`logs$branch_wap`")) == [(1, "a", 10), (2, "a", 20), (101, "a", 111)]
