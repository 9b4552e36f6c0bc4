"""Nested columns between us and Paimon's own Spark connector: it reads the arrays, maps and structs we
upsert, and we read and continue a table it created and wrote with them."""

from __future__ import annotations

import json
import os

from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable

from .side_env import table_name

SPARK_SCHEMA = "id bigint, tags array<string>, attrs map<string,bigint>, addr struct<city:string,zip:int>"
# the connector's rows as JSON text: its nested values with every null field kept
AS_JSON = ("SELECT id, to_json(named_struct('tags', tags, 'attrs', attrs, 'addr', addr), "
           "map('ignoreNullFields', 'false')) AS j FROM {name} ORDER BY id")


def _connector_rows(paimon_spark, path) -> list[dict]:
    warehouse, name = table_name(path)
    return [{"id": r["id"], **json.loads(r["j"])} for r in paimon_spark.sql(warehouse, AS_JSON.format(name=name))]


def _ours(path) -> list[dict]:
    out = sorted(FileStoreTable.open(path).to_arrow().to_pylist(), key=lambda r: r["id"])
    for r in out:  # a map as the connector's JSON object
        r["attrs"] = None if r["attrs"] is None else dict(r["attrs"])
    return out


def _frame(spark, rows):
    return spark.createDataFrame([(r["id"], r["tags"], r["attrs"], None if r["addr"] is None else
                                   (r["addr"]["city"], r["addr"]["zip"])) for r in rows], SPARK_SCHEMA)


ROWS = [{"id": 1, "tags": ["a", None], "attrs": {"k": 1, "n": None}, "addr": {"city": "x", "zip": None}},
        {"id": 2, "tags": [], "attrs": None, "addr": None},
        {"id": 3, "tags": None, "attrs": {}, "addr": {"city": None, "zip": 3}}]


def test_the_connector_reads_the_nested_columns_we_upsert(spark, paimon_spark, tmp_path):
    path = f"{tmp_path}/wh/db.db/ours_nested"
    upsert(_frame(spark, ROWS[:2]), path, primary_keys="id")
    upsert(_frame(spark, [{**ROWS[0], "tags": ["b"]}, ROWS[2]]), path, primary_keys="id")
    expected = [{**ROWS[0], "tags": ["b"]}, ROWS[1], ROWS[2]]
    assert _ours(path) == expected
    assert _connector_rows(paimon_spark, path) == expected


def test_we_continue_a_nested_table_the_connector_made(spark, paimon_spark, java, tmp_path):
    from tests.java_paimon.javapaimon import Read

    path = f"{tmp_path}/wh/db.db/theirs_nested"
    warehouse, name = table_name(path)
    os.makedirs(f"{warehouse}/db.db")
    paimon_spark.sql(warehouse, f"CREATE TABLE {name} (id BIGINT NOT NULL, tags ARRAY<STRING>, "
                                "attrs MAP<STRING, BIGINT>, addr STRUCT<city: STRING, zip: INT>) "
                                "TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '2')")
    paimon_spark.sql(warehouse, f"INSERT INTO {name} VALUES (1, array('a', NULL), map('k', 1L, 'n', NULL), "
                                "named_struct('city', 'x', 'zip', CAST(NULL AS INT))), "
                                "(2, array(), NULL, NULL)")
    # Paimon 0.9's Parquet writer stores a null struct as a struct of null fields, and its reader takes any
    # such struct for null; Paimon 2.0 (Java, and its connector's writer) reads and writes the file as it
    # is, and so do we
    assert _connector_rows(paimon_spark, path) == ROWS[:2]
    stored = [ROWS[0], {**ROWS[1], "addr": {"city": None, "zip": None}}] if paimon_spark.line.name == "0.9" \
        else ROWS[:2]
    assert _ours(path) == stored
    java_read, = java.run([Read(path)])
    assert [r["addr"] for r in sorted(java_read.to_pylist(), key=lambda r: r["id"])] == [r["addr"] for r in stored]
    upsert(_frame(spark, [{**ROWS[1], "tags": ["z"]}, ROWS[2]]), path, primary_keys="id")
    expected = [ROWS[0], {**ROWS[1], "tags": ["z"]}, ROWS[2]]
    assert _ours(path) == expected
    assert _connector_rows(paimon_spark, path) == expected
