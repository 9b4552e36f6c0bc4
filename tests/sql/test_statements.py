"""Spark SQL that writes a Paimon table of Spark's catalog (sql/): each statement changes the table
itself, with Paimon's semantics, in one snapshot, or is refused naming the table before anything changes;
Spark's entry follows the table, and pypaimon reads every result."""

from __future__ import annotations

import os

import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import read, upsert
from dbt_paimon.sql import catalog
from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.common.errors import SchemaError
from tests.engine.helpers import SQL_SCHEMA as SCHEMA
from tests.engine.helpers import live_places, sql_tables
from tests.oracle import pypaimon_read


@pytest.fixture
def tables(spark, warehouse):
    return sql_tables(spark, warehouse)


def _sql_rows(spark, name: str, columns: str = "id, dt, v") -> list[tuple]:
    return sorted(tuple(r) for r in spark.sql(f"SELECT {columns} FROM db.{name}").collect())


def _paimon_rows(path: str, columns=("id", "dt", "v")) -> list[tuple]:
    ours = sorted(tuple(r[c] for c in columns) for r in FileStoreTable.open(path).to_arrow().to_pylist())
    assert sorted(tuple(r[c] for c in columns) for r in pypaimon_read(path).to_pylist()) == ours
    return ours


def _snapshot(path: str) -> int:
    return FileStoreTable.open(path).latest_snapshot().id


# ---- INSERT ---------------------------------------------------------------------------------------

def test_insert_into_a_key_table_upserts(spark, tables):
    spark.sql("INSERT INTO db.keyed VALUES (2, 'a', 21), (4, 'b', 40)")
    assert _sql_rows(spark, "keyed") == [(1, "a", 10), (2, "a", 21), (3, "b", 30), (4, "b", 40)]
    assert _paimon_rows(f"{tables}/keyed") == _sql_rows(spark, "keyed")
    assert _snapshot(f"{tables}/keyed") == 2


def test_insert_into_a_cross_partition_table_moves_the_key_once(spark, tables):
    spark.sql("INSERT INTO db.cross SELECT 1 AS id, 'b' AS dt, 11 AS v")
    assert _sql_rows(spark, "cross") == [(1, "b", 11), (2, "a", 20), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/cross") == _sql_rows(spark, "cross")


def test_insert_into_an_append_table_appends_with_a_column_list_and_static_partition(spark, tables):
    spark.sql("INSERT INTO db.logs (v, id, dt) VALUES (11, 1, 'a')")
    spark.sql("INSERT INTO db.logs PARTITION (dt = 'c') SELECT 5, 50")
    assert _sql_rows(spark, "logs") == [(1, "a", 10), (1, "a", 11), (2, "a", 20), (3, "b", 30), (5, "c", 50)]
    assert _paimon_rows(f"{tables}/logs") == _sql_rows(spark, "logs")


def test_insert_overwrite_replaces_what_sparks_partition_overwrite_mode_says(spark, tables):
    """spark.sql.sources.partitionOverwriteMode, as Spark's own tables and Paimon's Spark connector
    take it: STATIC (Spark's default) replaces the whole table, or the partitions a PARTITION clause
    names, rows or not; DYNAMIC the partitions the rows fall in."""
    mode = "spark.sql.sources.partitionOverwriteMode"
    held = spark.conf.get(mode)  # dbt-spark's insert_overwrite leaves DYNAMIC in a session
    try:
        spark.conf.set(mode, "DYNAMIC")
        spark.sql("INSERT OVERWRITE db.cross VALUES (5, 'a', 50)")  # partition a only
        spark.sql("INSERT OVERWRITE db.logs VALUES (4, 'a', 40)")
        assert _sql_rows(spark, "cross") == [(3, "b", 30), (5, "a", 50)]
        assert _sql_rows(spark, "logs") == [(3, "b", 30), (4, "a", 40)]
        spark.conf.set(mode, "STATIC")
        spark.sql("INSERT OVERWRITE db.keyed VALUES (5, 'a', 50)")  # the whole table
        assert _sql_rows(spark, "keyed") == [(5, "a", 50)]
        spark.sql("INSERT OVERWRITE db.logs PARTITION (dt = 'b') SELECT 6, 60")  # partition b
        assert _sql_rows(spark, "logs") == [(4, "a", 40), (6, "b", 60)]
        spark.sql("INSERT OVERWRITE db.logs PARTITION (dt = 'a') SELECT 7, 70 WHERE false")  # no rows: emptied
        assert _sql_rows(spark, "logs") == [(6, "b", 60)]
        spark.sql("INSERT OVERWRITE db.cross SELECT 1, 'x', 1 WHERE false")  # no rows, no clause: emptied
        assert _sql_rows(spark, "cross") == []
    finally:
        spark.conf.set(mode, held)
    assert _paimon_rows(f"{tables}/logs") == [(6, "b", 60)]
    assert _paimon_rows(f"{tables}/keyed") == [(5, "a", 50)]
    assert _paimon_rows(f"{tables}/cross") == []


def test_insert_overwrite_on_a_table_that_merges_rows(spark, tables):
    rows = spark.createDataFrame([(1, "a", 10), (2, "b", 20)], SCHEMA)
    upsert(rows, f"{tables}/partial", primary_keys=["id", "dt"], partition_keys="dt",
           options={"merge-engine": "partial-update", "bucket": "1"}, settings=RunSettings(execution="local"))
    catalog.sync(spark, os.path.dirname(tables))
    spark.sql("INSERT INTO db.partial VALUES (1, 'a', NULL)")  # partial-update: the null does not overwrite
    assert _sql_rows(spark, "partial") == [(1, "a", 10), (2, "b", 20)]
    spark.sql("INSERT OVERWRITE db.partial PARTITION (dt = 'a') SELECT 3, NULL")
    assert _paimon_rows(f"{tables}/partial") == [(2, "b", 20), (3, "a", None)]
    assert FileStoreTable.open(f"{tables}/partial").latest_snapshot().commit_kind == "OVERWRITE"


def test_every_statement_on_a_dynamic_bucket_key_table_keeps_its_hash_index(spark, tables):
    """bucket -1 with the partition in the key: each key in a bucket of its own (target row number 1),
    so a statement that forgot the HASH index would put a key in a second bucket."""
    path = f"{tables}/dyn"
    upsert(spark.createDataFrame([(1, "a", 10), (2, "a", 20), (3, "b", 30)], SCHEMA), path,
           primary_keys=["id", "dt"], partition_keys="dt",
           options={"bucket": "-1", "dynamic-bucket.target-row-num": "1"}, settings=RunSettings(execution="local"))
    catalog.sync(spark, os.path.dirname(tables))
    for statement, rows in (
        ("INSERT INTO db.dyn VALUES (2, 'a', 21), (4, 'a', 40)",
         [(1, "a", 10), (2, "a", 21), (3, "b", 30), (4, "a", 40)]),
        ("UPDATE db.dyn SET v = v + 1 WHERE id >= 3", [(1, "a", 10), (2, "a", 21), (3, "b", 31), (4, "a", 41)]),
        ("MERGE INTO db.dyn t USING (SELECT * FROM VALUES (1, 'a', 0), (5, 'b', 50) AS s(id, dt, v)) s "
         "ON t.id = s.id AND t.dt = s.dt WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT *",
         [(2, "a", 21), (3, "b", 31), (4, "a", 41), (5, "b", 50)]),
        ("DELETE FROM db.dyn WHERE id = 4", [(2, "a", 21), (3, "b", 31), (5, "b", 50)]),
        ("INSERT OVERWRITE db.dyn PARTITION (dt = 'b') SELECT 6, 60", [(2, "a", 21), (6, "b", 60)]),
    ):
        before = _snapshot(path)
        spark.sql(statement)
        assert (_sql_rows(spark, "dyn"), _snapshot(path)) == (rows, before + 1), statement
        assert _paimon_rows(path) == rows
        assert set(live_places(path).values()) == {1}, statement
    # the next upsert finds every key where the statements left it
    again = upsert(spark.createDataFrame([(2, "a", 22), (6, "b", 61)], SCHEMA), path, primary_keys=["id", "dt"],
                   partition_keys="dt", settings=RunSettings(execution="local"))
    assert (again.inserted, again.updated) == (0, 2)
    assert set(live_places(path).values()) == {1}


def test_a_bad_insert_commits_nothing(spark, tables):
    before = _snapshot(f"{tables}/keyed")
    with pytest.raises(PaimonError, match=r"^INSERT INTO db\.keyed: .*duplicate"):
        spark.sql("INSERT INTO db.keyed VALUES (7, 'a', 1), (7, 'a', 2)")
    with pytest.raises(PaimonError, match=r"^INSERT INTO db\.keyed: .*null"):
        spark.sql("INSERT INTO db.keyed VALUES (NULL, 'a', 1)")
    with pytest.raises(PaimonError, match=r"db\.keyed.*2 column"):
        spark.sql("INSERT INTO db.keyed VALUES (8, 'a')")
    assert _snapshot(f"{tables}/keyed") == before


# ---- DELETE, TRUNCATE, and what is refused --------------------------------------------------------

def _answer(df) -> list[tuple]:
    """What a statement answered: (column, value) pairs of its one row, or [] (no row)."""
    rows = df.collect()
    assert len(rows) <= 1
    return list(rows[0].asDict().items()) if rows else []


def test_delete_from_key_and_append_tables(spark, tables):
    """Each answers the rows it deleted, as Delta's DELETE does (num_affected_rows)."""
    assert _answer(spark.sql("DELETE FROM db.keyed AS k WHERE k.v >= 20 AND dt = 'a'")) == [("num_affected_rows", 1)]
    assert _answer(spark.sql("DELETE FROM db.cross WHERE cross.id = 3")) == [("num_affected_rows", 1)]
    assert _answer(spark.sql("DELETE FROM db.logs WHERE v = 10")) == [("num_affected_rows", 1)]
    assert _answer(spark.sql("DELETE FROM db.logs WHERE v = 99")) == [("num_affected_rows", 0)]
    assert _sql_rows(spark, "keyed") == [(1, "a", 10), (3, "b", 30)]
    assert _sql_rows(spark, "cross") == [(1, "a", 10), (2, "a", 20)]
    assert _paimon_rows(f"{tables}/logs") == [(2, "a", 20), (3, "b", 30)]


def test_truncate_table_and_partition(spark, tables):
    assert _answer(spark.sql("TRUNCATE TABLE db.keyed PARTITION (dt = 'a')")) == []
    spark.sql("TRUNCATE TABLE db.logs")
    assert _sql_rows(spark, "keyed") == [(3, "b", 30)]
    assert _sql_rows(spark, "logs") == []
    assert FileStoreTable.open(f"{tables}/logs").latest_snapshot().commit_kind == "OVERWRITE"


def test_update_key_and_append_tables(spark, tables):
    snapshots = {name: _snapshot(f"{tables}/{name}") for name in ("keyed", "cross", "logs")}
    assert _answer(spark.sql("UPDATE db.keyed AS k SET v = k.v + 1 WHERE dt = 'a'")) == [("num_affected_rows", 2)]
    # a cross-partition table's row moves
    assert _answer(spark.sql("UPDATE db.cross SET dt = 'c', v = 22 WHERE id = 2")) == [("num_affected_rows", 1)]
    assert _answer(spark.sql("UPDATE db.logs SET v = v * 10 WHERE id = 3")) == [("num_affected_rows", 1)]
    assert _paimon_rows(f"{tables}/keyed") == [(1, "a", 11), (2, "a", 21), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/cross") == [(1, "a", 10), (2, "c", 22), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/logs") == [(1, "a", 10), (2, "a", 20), (3, "b", 300)]
    assert _sql_rows(spark, "logs") == [(1, "a", 10), (2, "a", 20), (3, "b", 300)]
    assert {name: _snapshot(f"{tables}/{name}") for name in snapshots} == {n: i + 1 for n, i in snapshots.items()}


def test_conditions_and_values_are_read_as_written_whatever_their_predicate(spark, tables):
    """Spark records a predicate's place in the text from its keyword on (`IN (1, 2)` of `id IN (1,
    2)`) and drops parentheses from the tree: each condition and value is the statement's own text
    only where that parses back to the same expression (a predicate once read as `IN (1, 2)` matched
    no row: the statement did nothing and said nothing)."""
    spark.sql("UPDATE db.keyed SET v = v + 1 WHERE id IN (1, 2)")
    spark.sql("UPDATE db.cross SET v = (v + 1) * 2 WHERE (v + 1) IN (11, 31) AND dt NOT LIKE 'x(%'")
    spark.sql("UPDATE db.logs SET v = v * 10 WHERE id BETWEEN 2 AND 3 AND dt IS NOT NULL")
    assert _paimon_rows(f"{tables}/keyed") == [(1, "a", 11), (2, "a", 21), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/cross") == [(1, "a", 22), (2, "a", 20), (3, "b", 62)]
    assert _paimon_rows(f"{tables}/logs") == [(1, "a", 10), (2, "a", 200), (3, "b", 300)]
    spark.sql("DELETE FROM db.keyed WHERE id NOT IN (2)")
    spark.sql("DELETE FROM db.logs WHERE dt LIKE 'b%' OR v IS NULL")
    spark.sql("MERGE INTO db.cross t USING (SELECT 2 AS id, 'a' AS dt, 5 AS v) s ON t.id = s.id AND s.id IN (2) "
              "WHEN MATCHED AND t.v BETWEEN 0 AND 100 THEN UPDATE SET v = s.v + t.v")
    assert _paimon_rows(f"{tables}/keyed") == [(2, "a", 21)]
    assert _paimon_rows(f"{tables}/logs") == [(1, "a", 10), (2, "a", 200)]
    assert _paimon_rows(f"{tables}/cross") == [(1, "a", 22), (2, "a", 25), (3, "b", 62)]


def test_conditions_and_values_with_subqueries(spark, tables):
    """A subquery gets a new id each time Spark parses it: a condition or value holding one is still
    read as written (scalar and IN subqueries); EXISTS, whose place Spark does not record, is refused
    by name and nothing is committed."""
    spark.createDataFrame([(2,), (3,)], "k bigint").createOrReplaceTempView("ks")
    assert _answer(spark.sql("UPDATE db.keyed SET v = v + 1 WHERE v > (SELECT min(v) FROM db.keyed)")) == \
        [("num_affected_rows", 2)]
    assert _answer(spark.sql("UPDATE db.logs SET v = (SELECT max(k) FROM ks) WHERE id = 1")) == \
        [("num_affected_rows", 1)]
    assert _answer(spark.sql("DELETE FROM db.cross WHERE id IN (SELECT k FROM ks)")) == [("num_affected_rows", 2)]
    assert _paimon_rows(f"{tables}/keyed") == [(1, "a", 10), (2, "a", 21), (3, "b", 31)]
    assert _paimon_rows(f"{tables}/logs") == [(1, "a", 3), (2, "a", 20), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/cross") == [(1, "a", 10)]
    before = _snapshot(f"{tables}/logs")
    with pytest.raises(SchemaError, match="could not read an expression of the statement back as written"):
        spark.sql("DELETE FROM db.logs WHERE EXISTS (SELECT 1 FROM ks WHERE ks.k = logs.id)")
    assert _snapshot(f"{tables}/logs") == before


def test_merge_into_key_tables(spark, tables):
    spark.createDataFrame([(1, "a", 0, "del"), (2, "a", 22, "upd"), (5, "b", 50, "new"), (6, "b", 60, "skip")],
                          SCHEMA + ", op string").createOrReplaceTempView("changes")
    before = _snapshot(f"{tables}/keyed")
    answer = spark.sql("""MERGE INTO db.keyed AS t USING changes AS s ON t.id = s.id AND t.dt = s.dt
                 WHEN MATCHED AND s.op = 'del' THEN DELETE
                 WHEN MATCHED THEN UPDATE SET v = s.v + t.v
                 WHEN NOT MATCHED AND s.op = 'new' THEN INSERT *
                 WHEN NOT MATCHED BY SOURCE AND t.v >= 30 THEN UPDATE SET v = -1""")
    # the rows by action, as Delta's MERGE answers them
    assert _answer(answer) == [("num_affected_rows", 4), ("num_updated_rows", 2), ("num_deleted_rows", 1),
                               ("num_inserted_rows", 1)]
    assert _paimon_rows(f"{tables}/keyed") == [(2, "a", 42), (3, "b", -1), (5, "b", 50)]
    assert _snapshot(f"{tables}/keyed") == before + 1
    # a cross-partition table: a matched row moves partition; UPDATE SET * of another key moves the key
    spark.sql("""MERGE INTO db.cross USING (SELECT 1 AS id, 'z' AS dt, 11 AS v) AS s ON cross.id = s.id
                 WHEN MATCHED THEN UPDATE SET *""")
    spark.sql("""MERGE INTO db.cross t USING (SELECT 2 AS old, 7 AS id, 'a' AS dt, 70 AS v) s ON t.id = s.old
                 WHEN MATCHED THEN UPDATE SET *""")
    assert _paimon_rows(f"{tables}/cross") == [(1, "z", 11), (3, "b", 30), (7, "a", 70)]
    assert _sql_rows(spark, "cross") == [(1, "z", 11), (3, "b", 30), (7, "a", 70)]


def test_merge_into_an_append_table_rewrites_the_files_it_touches(spark, tables):
    before = _snapshot(f"{tables}/logs")
    answer = spark.sql("""MERGE INTO db.logs t USING (SELECT 2 AS id, 25 AS v UNION ALL SELECT 9, 90) s
                 ON t.id = s.id
                 WHEN MATCHED THEN UPDATE SET v = s.v
                 WHEN NOT MATCHED THEN INSERT (id, dt, v) VALUES (s.id, 'c', s.v)
                 WHEN NOT MATCHED BY SOURCE AND t.v = 30 THEN DELETE""")
    assert _answer(answer) == [("num_affected_rows", 3), ("num_updated_rows", 1), ("num_deleted_rows", 1),
                               ("num_inserted_rows", 1)]
    assert _paimon_rows(f"{tables}/logs") == [(1, "a", 10), (2, "a", 25), (9, "c", 90)]
    assert _sql_rows(spark, "logs") == [(1, "a", 10), (2, "a", 25), (9, "c", 90)]
    assert _snapshot(f"{tables}/logs") == before + 1


@pytest.mark.parametrize("form", ["db.{t}", "spark_catalog.db.{t}", "{t}"])
def test_statements_qualify_their_table_by_any_name_spark_resolves(spark, tables, form):
    """MERGE, UPDATE and DELETE whose conditions and values name the table as Spark resolves a catalog
    table's columns: its qualified name, the catalog's too, or its own name."""
    for name, rows in (("keyed", [(2, "a", 119), (3, "b", 31)]), ("logs", [(2, "a", 45), (3, "b", 300)])):
        q = form.format(t=name)
        spark.sql(f"""MERGE INTO db.{name} USING (SELECT 2 AS id, 'a' AS dt, {99 if name == 'keyed' else 25} AS v) s
                      ON {q}.id = s.id AND {q}.dt = s.dt WHEN MATCHED THEN UPDATE SET v = s.v + {q}.v""")
        spark.sql(f"UPDATE db.{name} SET v = {q}.v {'+ 1' if name == 'keyed' else '* 10'} WHERE {q}.id = 3")
        spark.sql(f"DELETE FROM db.{name} WHERE {q}.id = 1")
        assert _paimon_rows(f"{tables}/{name}") == rows, name


def test_an_aliased_table_is_named_by_its_alias_alone(spark, tables):
    """As in Spark: `MERGE INTO db.keyed AS t` hides the name db.keyed; nothing is written."""
    before = _snapshot(f"{tables}/keyed")
    with pytest.raises(Exception, match=r"db`?\.`?keyed`?\.`?id"):
        spark.sql("""MERGE INTO db.keyed AS t USING (SELECT 2 AS id, 7 AS v) s ON db.keyed.id = s.id
                     WHEN MATCHED THEN UPDATE SET v = s.v""")
    assert _snapshot(f"{tables}/keyed") == before


def test_what_update_and_merge_cannot_do_is_refused_naming_the_table(spark, tables):
    spark.createDataFrame([(1, "a", 1), (1, "a", 2)], SCHEMA).createOrReplaceTempView("twice")
    before = _snapshot(f"{tables}/keyed")
    with pytest.raises(PaimonError, match=r"UPDATE db\.keyed: \['id'\] belong to the primary key"):
        spark.sql("UPDATE db.keyed SET id = 9 WHERE id = 1")
    with pytest.raises(PaimonError, match=r"MERGE INTO db\.keyed: .*matches more than one source row"):
        spark.sql("MERGE INTO db.keyed t USING twice s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v")
    logs = _snapshot(f"{tables}/logs")
    with pytest.raises(PaimonError, match=r"MERGE INTO db\.logs: .*matches more than one source row"):
        spark.sql("MERGE INTO db.logs t USING twice s ON t.id = s.id WHEN MATCHED AND s.v > 0 THEN DELETE")
    assert _snapshot(f"{tables}/keyed") == before and _snapshot(f"{tables}/logs") == logs


@pytest.mark.parametrize("name", ["keyed", "logs"])
def test_a_merge_whose_one_matched_action_is_an_unconditional_delete_takes_a_row_matched_twice(spark, tables, name):
    """Spark's MERGE checks that a table row matches one source row only where it matters: not when
    the one WHEN MATCHED action is an unconditional DELETE. The row is deleted, and counted, once."""
    answer = spark.sql(f"MERGE INTO db.{name} t USING (SELECT * FROM VALUES (1), (1), (7) AS s(id)) s ON t.id = s.id "
                       "WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, dt, v) VALUES (s.id, 'c', 70)")
    assert _answer(answer) == [("num_affected_rows", 2), ("num_updated_rows", 0), ("num_deleted_rows", 1),
                               ("num_inserted_rows", 1)]
    assert _sql_rows(spark, name) == [(2, "a", 20), (3, "b", 30), (7, "c", 70)]
    assert _paimon_rows(f"{tables}/{name}") == _sql_rows(spark, name)


@pytest.mark.parametrize("name", ["keyed", "cross", "logs"])
def test_an_insert_assigns_values_as_sparks_own_insert_does_and_a_failure_writes_nothing(spark, tables, name):
    """Spark's store assignment (spark.sql.storeAssignmentPolicy ANSI, its default): a string for a
    number is refused as the statement is resolved, and a value that does not fit (a BIGINT beyond
    INT) fails the job that hands the rows over, whatever spark.sql.ansi.enabled says (dbt-spark's
    sessions turn it off: off here). The error is Spark's, not the Arrow stream's that the failed job
    ended; nothing is written."""
    before = _snapshot(f"{tables}/{name}")
    # the session's settings whatever ran before in this worker (the integration profile sets LEGACY)
    held = {k: spark.conf.get(k) for k in ("spark.sql.ansi.enabled", "spark.sql.storeAssignmentPolicy")}
    spark.conf.set("spark.sql.ansi.enabled", "false")
    spark.conf.set("spark.sql.storeAssignmentPolicy", "ANSI")
    try:
        with pytest.raises(SchemaError, match=r"column 'v' is int but the statement gives string, which Spark's "
                                              r"store assignment \(spark.sql.storeAssignmentPolicy ANSI\)"):
            spark.sql(f"INSERT INTO db.{name} VALUES (4, 'c', 'abc')")
        with pytest.raises(Exception, match="CAST_OVERFLOW.*3000000000") as raised:
            spark.sql(f"INSERT INTO db.{name} VALUES (4, 'c', 3000000000)")
        assert "Arrow" not in type(raised.value).__name__ and "stream" not in str(raised.value)
    finally:
        for k, v in held.items():
            spark.conf.set(k, v)
    with pytest.raises(SchemaError, match=r"column 'nope' is not a column") as raised:
        spark.sql(f"UPDATE db.{name} SET nope = 1")
    assert "column column" not in str(raised.value)
    assert _snapshot(f"{tables}/{name}") == before
    spark.sql(f"INSERT INTO db.{name} VALUES (4, 'c', 40)")  # a value of the column's type: written
    assert (4, "c", 40) in _sql_rows(spark, name)


@pytest.mark.parametrize("name", ["keyed", "cross", "logs"])
def test_update_and_merge_assign_values_as_sparks_own_do_and_a_failure_writes_nothing(spark, tables, name):
    """UPDATE's and MERGE's values (SET, INSERT VALUES, a source's column) go into the table's
    columns by Spark's store assignment as INSERT's do: a string for a number is refused, a value
    that does not fit fails the statement, with spark.sql.ansi.enabled off as dbt-spark leaves it.
    The statement's own expressions keep the session's mode: there a CAST that fails is a null."""
    before = _snapshot(f"{tables}/{name}")
    statements = [f"UPDATE db.{name} SET v = {{}} WHERE id = 1",
                  f"MERGE INTO db.{name} t USING (SELECT 1 AS id) s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET v = {}",
                  f"MERGE INTO db.{name} t USING (SELECT 9 AS id) s ON t.id = s.id "
                  "WHEN NOT MATCHED THEN INSERT (id, dt, v) VALUES (s.id, 'c', {})",
                  f"MERGE INTO db.{name} t USING (SELECT 1 AS id, 'a' AS dt, {{}} AS v) s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET *"]
    held = {k: spark.conf.get(k) for k in ("spark.sql.ansi.enabled", "spark.sql.storeAssignmentPolicy")}
    spark.conf.set("spark.sql.ansi.enabled", "false")
    spark.conf.set("spark.sql.storeAssignmentPolicy", "ANSI")
    try:
        for statement in statements:
            with pytest.raises(SchemaError, match=r"column 'v' is int but the statement gives string, which Spark's "
                                                  r"store assignment \(spark.sql.storeAssignmentPolicy ANSI\)"):
                spark.sql(statement.format("'abc'"))
            with pytest.raises(Exception, match="CAST_OVERFLOW.*3000000000"):
                spark.sql(statement.format("3000000000"))
        assert _snapshot(f"{tables}/{name}") == before
        spark.sql(f"UPDATE db.{name} SET v = CAST('x' AS INT) WHERE id = 1")
        spark.sql(f"MERGE INTO db.{name} t USING (SELECT 2 AS id) s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET v = CAST(2147483647 AS INT) + 1")  # an int's overflow, as Spark's
    finally:
        for k, v in held.items():
            spark.conf.set(k, v)
    assert _sql_rows(spark, name) == [(1, "a", None), (2, "a", -2147483648), (3, "b", 30)]
    assert _paimon_rows(f"{tables}/{name}") == _sql_rows(spark, name)
    with pytest.raises(SchemaError, match=r"UPDATE db\.\w+: SET gives column 'v' two values"):
        spark.sql(f"UPDATE db.{name} SET v = 1, v = 2")
    with pytest.raises(SchemaError, match=r"MERGE INTO db\.\w+: an action gives column 'v' two values"):
        spark.sql(f"MERGE INTO db.{name} t USING (SELECT 3 AS id) s ON t.id = s.id "
                  "WHEN MATCHED THEN UPDATE SET v = 1, v = 2")


@pytest.mark.parametrize("name", ["keyed", "logs"])
def test_under_the_legacy_store_assignment_values_are_cast_as_sparks_legacy_cast_does(spark, tables, name):
    """spark.sql.storeAssignmentPolicy LEGACY with ANSI mode on (Spark 4's default): Spark's own
    INSERT casts by the legacy cast, a null for what does not parse, an overflow wrapped."""
    held = {k: spark.conf.get(k) for k in ("spark.sql.ansi.enabled", "spark.sql.storeAssignmentPolicy")}
    spark.conf.set("spark.sql.ansi.enabled", "true")
    spark.conf.set("spark.sql.storeAssignmentPolicy", "LEGACY")
    try:
        spark.sql(f"INSERT INTO db.{name} VALUES (4, 'c', 'x')")
        spark.sql(f"INSERT INTO db.{name} VALUES (5, 'c', 3000000000)")
        spark.sql(f"UPDATE db.{name} SET v = '12' WHERE id = 1")
    finally:
        for k, v in held.items():
            spark.conf.set(k, v)
    assert _sql_rows(spark, name) == [(1, "a", 12), (2, "a", 20), (3, "b", 30), (4, "c", None), (5, "c", -1294967296)]


# ---- ALTER TABLE ----------------------------------------------------------------------------------

def test_alter_table_changes_the_paimon_schema_and_spark_follows(spark, tables):
    path = f"{tables}/keyed"
    spark.sql("ALTER TABLE db.keyed ADD COLUMNS (note string COMMENT 'free text')")
    spark.sql("INSERT INTO db.keyed VALUES (9, 'c', 90, 'hello')")
    assert _sql_rows(spark, "keyed", "id, note") == [(1, None), (2, None), (3, None), (9, "hello")]
    spark.sql("ALTER TABLE db.keyed RENAME COLUMN note TO remark")
    spark.sql("ALTER TABLE db.keyed ALTER COLUMN v TYPE bigint")
    spark.sql("ALTER TABLE db.keyed SET TBLPROPERTIES ('snapshot.num-retained.min' = '5', 'comment' = 'keyed')")
    schema = FileStoreTable.open(path).schema
    assert [(f.name, f.type.sql()) for f in schema.fields][2:] == [("v", "BIGINT"), ("remark", "STRING")]
    assert schema.field("remark").description == "free text"
    assert schema.options["snapshot.num-retained.min"] == "5" and schema.comment == "keyed"
    assert [f.name for f in spark.table("db.keyed").schema.fields] == ["id", "dt", "v", "remark"]
    assert _paimon_rows(path, ("id", "remark")) == [(1, None), (2, None), (3, None), (9, "hello")]
    spark.sql("ALTER TABLE db.keyed DROP COLUMN remark")
    assert [f.name for f in spark.table("db.keyed").schema.fields] == ["id", "dt", "v"]
    assert [f.name for f in pypaimon_read(path).schema] == ["id", "dt", "v"]


@pytest.mark.parametrize("name", ["keyed", "logs"])
def test_a_column_dropped_and_added_again_under_its_name_reads_as_the_new_column_every_way(spark, tables, name):
    """Paimon tells fields by id: a column dropped and added again under the same name is a new field,
    null in the rows written before. Files written before a widening are read by the `paimon` source
    (their column changed type), later ones by Spark's Parquet reader: both parts of one read take
    the table's schema, not that of the snapshot read (the latest, written before the last ALTERs: a
    time travel's schema would bring the dropped column's values back)."""
    path = f"{tables}/{name}"
    spark.sql(f"ALTER TABLE db.{name} ADD COLUMNS (w string)")
    spark.sql(f"INSERT INTO db.{name} VALUES (4, 'c', 40, 'old')")  # v int: read by the source
    spark.sql(f"ALTER TABLE db.{name} ALTER COLUMN v TYPE bigint")
    spark.sql(f"INSERT INTO db.{name} VALUES (5, 'd', 50, 'old')")  # v bigint: read by Spark
    spark.sql(f"ALTER TABLE db.{name} DROP COLUMN w")
    spark.sql(f"ALTER TABLE db.{name} ADD COLUMNS (w int)")
    want = [(1, "a", 10, None), (2, "a", 20, None), (3, "b", 30, None), (4, "c", 40, None), (5, "d", 50, None)]

    def ways():
        return {"read()": read(spark, path), "spark.table": spark.table(f"db.{name}"),
                "spark.sql": spark.sql(f"select * from db.{name}"),
                "format(paimon)": spark.read.format("paimon").load(path)}
    for rows in (want, want + [(6, "e", 60, 7)]):
        if len(rows) > len(want):
            spark.sql(f"INSERT INTO db.{name} VALUES (6, 'e', 60, 7)")
        assert _paimon_rows(path, ("id", "dt", "v", "w")) == rows
        for way, df in ways().items():
            assert df.schema["w"].dataType.simpleString() == "int", way
            assert sorted(tuple(r) for r in df.select("id", "dt", "v", "w").collect()) == rows, way
            assert df.where("w IS NOT NULL").count() == len(rows) - len(want), way


@pytest.mark.parametrize("statement, words", [
    ("ALTER TABLE db.keyed ALTER COLUMN v TYPE string", "cannot become string"),
    ("ALTER TABLE db.keyed RENAME COLUMN dt TO day", "primary or partition key"),
    ("ALTER TABLE db.keyed DROP COLUMN id", "primary or partition key"),
    ("ALTER TABLE db.keyed SET TBLPROPERTIES ('merge-engine' = 'first-row')", "'merge-engine' cannot change"),
    ("ALTER TABLE db.keyed SET TBLPROPERTIES ('s3.secret-key' = 'hunter2')", "never stored with a table"),
    ("ALTER TABLE db.keyed SET TBLPROPERTIES ('snapshot.num-retaind.min' = '1')", "did you mean"),
    ("ALTER TABLE db.keyed ADD COLUMN w int FIRST", "FIRST/AFTER"),
    ("ALTER TABLE db.keyed REPLACE COLUMNS (a int)", "REPLACE COLUMNS"),
])
def test_what_a_paimon_table_cannot_take_is_refused_before_anything_changes(spark, tables, statement, words):
    path = f"{tables}/keyed"
    schema_id = FileStoreTable.open(path).schema.id
    with pytest.raises(PaimonError, match=words) as raised:
        spark.sql(statement)
    assert "db.keyed" in str(raised.value) and "hunter2" not in str(raised.value)
    assert FileStoreTable.open(path).schema.id == schema_id
    assert [f.name for f in spark.table("db.keyed").schema.fields] == ["id", "dt", "v"]


def test_rename_to_moves_the_table_within_the_warehouse(spark, tables, warehouse):
    spark.sql("ALTER TABLE db.logs RENAME TO db.events")
    assert not os.path.exists(f"{tables}/logs") and FileStoreTable.exists(f"{tables}/events")
    assert _sql_rows(spark, "events") == [(1, "a", 10), (2, "a", 20), (3, "b", 30)]
    assert not spark.catalog.tableExists("db.logs")
    catalog.sync(spark, warehouse)  # what the next dbt command does: the new name stays
    assert spark.catalog.tableExists("db.events") and not spark.catalog.tableExists("db.logs")
    with pytest.raises(PaimonError, match="already exists"):
        spark.sql("ALTER TABLE db.events RENAME TO db.keyed")


def test_a_long_statement_is_read_in_one_pass(spark):
    """dbt indents generated SQL deeply: reading past its leading whitespace and comments must not
    backtrack (a repeated pattern took exponential time there and hung `dbt test`)."""
    from dbt_paimon.sql.session import run

    lead = "\n        " * 40 + "/* a comment */ -- another\n" + "\n    " * 40
    assert run(spark, lead + "select 1 as x\n" + "    " * 400) is None
    assert run(spark, lead + "insert into default.nowhere_paimon values (1)") is None  # not a Paimon table


def test_statements_on_other_tables_are_sparks(spark, tables):
    spark.sql("CREATE TABLE db.plain (id bigint) USING parquet")
    try:
        spark.sql("INSERT INTO db.plain VALUES (1)")
        spark.sql("ALTER TABLE db.plain ADD COLUMNS (w int)")
        assert [tuple(r) for r in spark.sql("SELECT * FROM db.plain").collect()] == [(1, None)]
    finally:
        spark.sql("DROP TABLE db.plain")


def test_the_dataframe_writer_is_refused_saying_what_to_do(spark, tables):
    before = _snapshot(f"{tables}/keyed")
    with pytest.raises(Exception, match="not written through the DataFrame writer API"):
        spark.createDataFrame([(9, "a", 9)], SCHEMA).write.insertInto("db.keyed")
    assert _snapshot(f"{tables}/keyed") == before


def test_statements_on_a_table_with_nested_columns(spark, warehouse):
    """INSERT, UPDATE of a struct, MERGE moving a key with an array, ADD COLUMNS of an array of structs and
    DELETE by a struct field, on a cross-partition table with array, map and struct columns."""
    from dbt_paimon.sql import register

    base = f"{warehouse}/db.db"
    os.makedirs(base, exist_ok=True)
    first = spark.sql("SELECT 1L AS id, 'a' AS dt, array('x') AS tags, map('k', 1) AS m, "
                      "named_struct('c', 'p', 'z', 1) AS s")
    upsert(first, f"{base}/nested", primary_keys="id", partition_keys="dt", settings=RunSettings(execution="local"))
    register(spark, warehouse=warehouse)
    spark.sql("INSERT INTO db.nested VALUES (2, 'b', array('y', null), map('q', 2), named_struct('c', 'r', 'z', 2)), "
              "(3, 'b', array(), map(), named_struct('c', 'r', 'z', 3))")
    spark.sql("UPDATE db.nested SET tags = array('u'), s = named_struct('c', 'upd', 'z', 9) WHERE id = 1")
    spark.sql("MERGE INTO db.nested t USING (SELECT 2L AS id, 'a' AS dt, array('m') AS tags) src ON t.id = src.id "
              "WHEN MATCHED THEN UPDATE SET tags = src.tags, dt = src.dt")
    spark.sql("ALTER TABLE db.nested ADD COLUMNS (extra array<struct<a: int>>)")
    spark.sql("INSERT INTO db.nested VALUES (4, 'b', null, null, null, array(named_struct('a', 5), null))")
    spark.sql("DELETE FROM db.nested WHERE s.c = 'r' AND id = 3")
    got = [r.asDict(recursive=True) for r in spark.sql("SELECT * FROM db.nested ORDER BY id").collect()]
    assert got == [
        {"id": 1, "dt": "a", "tags": ["u"], "m": {"k": 1}, "s": {"c": "upd", "z": 9}, "extra": None},
        {"id": 2, "dt": "a", "tags": ["m"], "m": {"q": 2}, "s": {"c": "r", "z": 2}, "extra": None},
        {"id": 4, "dt": "b", "tags": None, "m": None, "s": None, "extra": [{"a": 5}, None]}]
    stored = sorted(pypaimon_read(f"{base}/nested").to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["dt"], r["tags"], r["m"], r["extra"]) for r in stored] == [
        (1, "a", ["u"], [("k", 1)], None), (2, "a", ["m"], [("q", 2)], None), (4, "b", None, None, [{"a": 5}, None])]
    assert all(n == 1 for n in live_places(f"{base}/nested").values())
