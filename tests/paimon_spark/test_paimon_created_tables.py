"""Tables Paimon creates with its own defaults are ours to continue.

Paimon's Spark connector (`CREATE TABLE ... TBLPROPERTIES ('primary-key' = ...)`, then `INSERT INTO`) and
Java Paimon's catalog (`Catalog.createTable`, the reference release) create tables in each bucket mode with
nothing but the key set; we check which options they store (docs/java-paimon-oracle.md lists them and what
we do with each), upsert into each table and read it back through our reader, Paimon's Spark SQL and Java.
"""

from __future__ import annotations

import json
import os

import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable
from tests.engine.helpers import COLUMNS, frame
from tests.engine.model import UpsertModel, random_batches
from tests.oracle import rows

from .side_env import spark_sql_rows, sql_values

SQL_COLUMNS = ("id BIGINT NOT NULL, dt STRING NOT NULL, v BIGINT, s STRING, amount INT, flag BOOLEAN, seq BIGINT")
JAVA_FIELDS = [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "BIGINT"), ("s", "STRING"),
               ("amount", "INT"), ("flag", "BOOLEAN"), ("seq", "BIGINT")]
# name: (who creates it, primary key, options given); partitioned by dt
TABLES = {
    "spark_cross_partition": ("spark", ["id"], {}),
    "spark_dynamic": ("spark", ["id", "dt"], {}),
    "spark_fixed": ("spark", ["id", "dt"], {"bucket": "4"}),
    "java_cross_partition": ("java", ["id"], {}),
    "java_fixed": ("java", ["id", "dt"], {"bucket": "3"}),
}
# What each creator stores beyond the options given (the schema file's `options`): Paimon 0.9's Spark
# catalog the table's owner and provider, 2.0's the owner only
STORED = {"spark-0.9": {"owner", "provider"}, "spark-2.0": {"owner"}, "java": set()}


@pytest.fixture(scope="module")
def created(spark, paimon_spark, java, tmp_path_factory):
    from tests.java_paimon.javapaimon import Write

    warehouse = str(tmp_path_factory.mktemp("paimon-created") / "wh")
    os.makedirs(f"{warehouse}/db.db")
    batches = random_batches(seed=31, batches=3, size=20, key_space=30)
    out, java_creates = {}, []
    for name, (creator, key, options) in TABLES.items():
        path = f"{warehouse}/db.db/{name}"
        model = UpsertModel(key, ["dt"])
        if creator == "spark":
            props = ", ".join(f"'{k}' = '{v}'" for k, v in {"primary-key": ",".join(key), **options}.items())
            paimon_spark.sql(warehouse, f"CREATE TABLE db.{name} ({SQL_COLUMNS}) PARTITIONED BY (dt) "
                                        f"TBLPROPERTIES ({props})")
            paimon_spark.sql(warehouse, f"INSERT INTO db.{name} VALUES {sql_values(batches[0], COLUMNS)}")
            model.apply(batches[0])
        else:
            java_creates.append(Write(path, [], {"fields": JAVA_FIELDS, "primary_keys": key,
                                                 "partition_keys": ["dt"], "options": options}))
        out[name] = (path, key, model)
    assert java.run(java_creates) == [None] * len(java_creates)
    return out, batches


@pytest.mark.parametrize("name", list(TABLES))
def test_we_upsert_into_a_table_paimon_created(created, spark, paimon_spark, java, name):
    from tests.java_paimon.javapaimon import Read, assert_same

    tables, batches = created
    path, key, model = tables[name]
    creator, _, given = TABLES[name]
    with open(f"{path}/schema/schema-0") as f:
        stored = json.load(f)["options"]
    who = f"spark-{paimon_spark.line.name}" if creator == "spark" else creator
    assert set(stored) == set(given) | STORED[who], stored
    for batch in batches[1:]:
        model.apply(batch)
        upsert(frame(spark, batch), path, primary_keys=key, partition_keys="dt")
    expected = model.sorted_rows()
    ours = FileStoreTable.open(path).to_arrow()
    assert rows(ours, key) == expected
    assert spark_sql_rows(paimon_spark, path, key) == expected
    [java_read] = java.read(Read(path))
    assert_same(java_read, ours, key, expected)
    assert [c for c in ours.schema.names] == COLUMNS
