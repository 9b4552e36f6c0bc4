"""Forms of Spark SQL's writing statements beyond the plain ones (sql/): a WITH clause before INSERT and
MERGE, INSERT INTO ... REPLACE, the DEFAULT keyword; and what Spark's own statements refuse (a
condition that is not deterministic, a column named twice) refused the same way, before anything
is written."""

from __future__ import annotations

import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import SchemaError
from tests.engine.helpers import sql_tables
from tests.oracle import pypaimon_read

BASE = [(1, "a", 10), (2, "a", 20), (3, "b", 30)]


@pytest.fixture
def tables(spark, warehouse):
    return sql_tables(spark, warehouse)


def _rows(spark, tables: str, name: str) -> list[tuple]:
    """The table's rows as Spark SQL reads them, checked against pypaimon's read of its files."""
    ours = sorted(tuple(r) for r in spark.sql(f"SELECT id, dt, v FROM db.{name}").collect())
    assert sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(f"{tables}/{name}").to_pylist()) == ours
    return ours


def _snapshot(tables: str, name: str) -> int:
    return FileStoreTable.open(f"{tables}/{name}").latest_snapshot().id


@pytest.mark.parametrize("name", ["keyed", "cross", "logs"])
def test_a_with_clause_is_in_scope_of_inserts_rows_and_merges_source(spark, tables, name):
    spark.sql(f"""-- a comment first, as dbt's statements have
        WITH x AS (SELECT 9 AS id, 'a' AS dt, 90 AS v), y AS (SELECT * FROM x UNION ALL SELECT 8, 'b', 80)
        INSERT INTO db.{name} SELECT * FROM y""")
    spark.sql(f"""WITH s AS (SELECT 1 AS id, 'a' AS dt, 11 AS v UNION ALL SELECT 7, 'b', 70)
        MERGE INTO db.{name} t USING s ON t.id = s.id
        WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT *""")
    assert _rows(spark, tables, name) == [(1, "a", 11), (2, "a", 20), (3, "b", 30), (7, "b", 70), (8, "b", 80),
                                          (9, "a", 90)]


def test_a_with_clause_before_delete_or_update_is_refused(spark, tables):
    for statement in ["WITH x AS (SELECT 1 AS id) DELETE FROM db.keyed WHERE id IN (SELECT id FROM x)",
                      "WITH x AS (SELECT 1 AS id) UPDATE db.logs SET v = 0 WHERE id IN (SELECT id FROM x)"]:
        with pytest.raises(SchemaError, match="a WITH clause before (DELETE|UPDATE) is not supported"):
            spark.sql(statement)
    assert _rows(spark, tables, "keyed") == BASE and _rows(spark, tables, "logs") == BASE


@pytest.mark.parametrize("name", ["keyed", "cross", "logs"])
def test_insert_replace_where_replaces_the_rows_its_condition_holds_for(spark, tables, name):
    """INSERT INTO t REPLACE WHERE c (Spark 4.3's InsertIntoStatement; OverwriteByExpression before):
    the rows c holds for are replaced by the query's, every other row kept, in one snapshot."""
    before = _snapshot(tables, name)
    spark.sql(f"INSERT INTO db.{name} REPLACE WHERE v >= 20 SELECT 9, 'a', 90")
    assert _rows(spark, tables, name) == [(1, "a", 10), (9, "a", 90)]
    assert _snapshot(tables, name) == before + 1
    spark.sql(f"INSERT INTO db.{name} BY NAME REPLACE WHERE dt = 'a' SELECT 'a' AS dt, 5 AS id, 50 AS v")
    assert _rows(spark, tables, name) == [(5, "a", 50)]


@pytest.mark.parametrize("name", ["keyed", "logs"])
def test_insert_replace_using_the_partition_columns_replaces_the_rows_partitions(spark, tables, name):
    spark.sql(f"INSERT INTO db.{name} REPLACE USING (dt) SELECT 9, 'a', 90")
    assert _rows(spark, tables, name) == [(3, "b", 30), (9, "a", 90)]


@pytest.mark.parametrize("statement, words", [
    ("INSERT INTO db.keyed REPLACE USING (id) SELECT 9, 'a', 90", r"REPLACE USING \(id\): only the table's partition"),
    ("INSERT INTO db.logs REPLACE ON db.logs.dt = s.dt (SELECT 9 AS id, 'a' AS dt, 90 AS v) s",
     "REPLACE ON is not supported"),
    ("INSERT INTO db.logs REPLACE WHERE rand() < 2 SELECT 9, 'a', 90", "'rand\\(\\) < 2' is not deterministic"),
    ("INSERT INTO db.keyed REPLACE WHERE rand() < 2 SELECT 9, 'a', 90", "'rand\\(\\) < 2' is not deterministic"),
    ("DELETE FROM db.keyed WHERE rand() < 2", "is not deterministic"),
    ("DELETE FROM db.logs WHERE rand() < 2", "is not deterministic"),
    ("UPDATE db.keyed SET v = 1 WHERE rand() < 2", "is not deterministic"),
    ("UPDATE db.logs SET v = CAST(rand() * 0 AS INT) WHERE id = 1", "is not deterministic"),
    ("INSERT INTO db.logs (id, ID, dt) VALUES (9, 9, 'a')", r"the column list names \['ID', 'id'\] more than once"),
    ("INSERT WITH SCHEMA EVOLUTION INTO db.keyed SELECT 9, 'a', 90, 1", "WITH SCHEMA EVOLUTION .* is not supported"),
])
def test_what_sparks_own_statements_refuse_is_refused_before_anything_is_written(spark, tables, statement, words):
    name = statement.split("db.")[1].split()[0]
    before = _snapshot(tables, name)
    with pytest.raises(SchemaError, match=words) as raised:
        spark.sql(statement)
    assert f"db.{name}" in str(raised.value)
    assert _snapshot(tables, name) == before and _rows(spark, tables, name) == BASE


@pytest.mark.parametrize("name", ["keyed", "logs"])
def test_default_is_the_columns_default_null(spark, tables, name):
    """A Paimon column declares no default: DEFAULT in VALUES, UPDATE SET and MERGE's actions is
    NULL, as in Spark's own tables."""
    spark.sql(f"INSERT INTO db.{name} VALUES (9, 'a', DEFAULT), (8, 'b', 80)")
    assert spark.sql(f"UPDATE db.{name} SET v = default WHERE id = 1").collect()[0][0] == 1
    spark.sql(f"""MERGE INTO db.{name} t USING (SELECT 2 AS id, 'a' AS dt UNION ALL SELECT 6, 'b') s
        ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = DEFAULT WHEN NOT MATCHED THEN INSERT (id, dt, v)
        VALUES (s.id, s.dt, DEFAULT)""")
    assert _rows(spark, tables, name) == [(1, "a", None), (2, "a", None), (3, "b", 30), (6, "b", None),
                                          (8, "b", 80), (9, "a", None)]


def test_an_inserts_query_reads_paimon_tables_however_it_names_their_columns(spark, tables):
    """The query of an INSERT (and an aliased MERGE source) reads the Paimon tables it names as a
    query does (natively, under a view); a column qualified by the table's full name, which the
    view's name would not resolve, is read through Spark's catalog instead, with the same rows."""
    spark.sql("INSERT INTO db.logs SELECT c.id + 100, c.dt, c.v FROM db.cross c WHERE c.id = 1")
    spark.sql("INSERT INTO db.logs SELECT db.cross.id + 200, db.cross.dt, db.cross.v FROM db.cross "
              "WHERE db.cross.id = 2")
    spark.sql("INSERT INTO db.logs SELECT id + 300, dt, v FROM db.logs WHERE id = 3")  # itself, at its snapshot
    assert _rows(spark, tables, "logs") == BASE + [(101, "a", 10), (202, "a", 20), (303, "b", 30)]
