"""Spark SQL reads of a Paimon table's changes and system tables, by the names Paimon's Spark connector
gives them: `t$audit_log`, `t$ro`, `t$snapshots` (any system table), a table with options
(`t WITH ('incremental-between' = '1,3')`) and `paimon_incremental_query('t', 1, 3)`; each the same
rows as the `paimon` source gives with those options."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import compact
from tests.engine.helpers import sql_tables


@pytest.fixture
def tables(spark, warehouse):
    return sql_tables(spark, warehouse)


def _rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.collect())


def test_changes_and_system_tables_by_their_names(spark, tables):
    spark.sql("INSERT INTO db.keyed VALUES (2, 'a', 21), (4, 'b', 40)")  # snapshot 2
    spark.sql("DELETE FROM db.keyed WHERE id = 3")  # snapshot 3
    path = f"{tables}/keyed"

    def source():  # a reader of its own each time: a DataFrameReader keeps the options given to it
        return spark.read.format("paimon")

    audit = spark.sql("SELECT rowkind, id, v FROM db.`keyed$audit_log`")
    assert _rows(audit) == _rows(source().load(f"{path}$audit_log").select("rowkind", "id", "v"))
    assert ("-D", 3, 30) in _rows(audit)
    between = _rows(source().option("incremental-between", "1,3").load(f"{path}$audit_log")
                    .select("rowkind", "id", "v"))
    assert between and _rows(spark.sql(
        "SELECT k.rowkind, k.id, k.v FROM db.`keyed$audit_log` WITH ('incremental-between' = '1,3') k")) == between
    inserted = _rows(source().option("incremental-between", "1,3").load(path).select("id", "v"))
    assert inserted == [(2, 21), (4, 40)]
    assert _rows(spark.sql("SELECT id, v FROM db.keyed WITH ('incremental-between' = '1,3')")) == inserted
    assert _rows(spark.sql("SELECT id, v FROM paimon_incremental_query('db.keyed', 1, 3)")) == inserted
    assert _rows(spark.sql("SELECT id, v FROM paimon_incremental_query('db.keyed', 1, 3, 'delta')")) == inserted
    # the table itself is read as before, at its latest snapshot
    assert _rows(spark.sql("SELECT id, v FROM db.keyed")) == [(1, 10), (2, 21), (4, 40)]
    assert [r.snapshot_id for r in spark.sql("SELECT snapshot_id FROM db.`keyed$snapshots` ORDER BY 1").collect()] \
        == [1, 2, 3]
    compact(spark, path)  # the top level: every row; a later insert is not there yet
    spark.sql("INSERT INTO db.keyed VALUES (5, 'b', 50)")
    assert _rows(spark.sql("SELECT id FROM db.`keyed$ro`")) == _rows(source().load(f"{path}$ro").select("id")) \
        == [(1,), (2,), (4,)]


def test_what_is_not_a_change_query_is_refused_by_name(spark, tables):
    with pytest.raises(Exception, match="'nothing' is not a Paimon table of this session"):
        spark.sql("SELECT * FROM paimon_incremental_query('nothing', 1, 2)").collect()
    with pytest.raises(Exception, match="unknown system table \\$nonsense"):
        spark.sql("SELECT * FROM db.`keyed$nonsense`").collect()
