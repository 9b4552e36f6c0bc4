"""Paimon's Spark connector reads the table kinds we write that the other files here do not cover:
postpone bucket mode (`bucket` -2, written into real buckets as Paimon's batch writers do) and
partial-update sequence groups with retractions. Each release's SQL read equals ours (and the model, or,
for sequence groups, ours as tests/java_paimon/test_sequence_groups.py holds it against Java). Paimon 0.9
predates postpone bucket mode: it refuses the table; its partial-update merge fails (a
NullPointerException) on retractions with null sequence-group fields (both asserted)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import ROW_KINDS
from tests.oracle import rows

from .side_env import SparkSqlError, spark_sql_rows


def test_a_postpone_bucket_table_we_wrote(spark, paimon_spark, warehouse):
    path = f"{warehouse}/db.db/postponed"
    model: dict = {}
    for step in range(3):
        batch = [(k, "ab"[k % 2], f"s{step}-{k}") for k in random.Random(step).sample(range(30), 12)]
        model.update({k: (d, v) for k, d, v in batch})
        upsert(spark.createDataFrame(batch, "id bigint, dt string, v string"), path, primary_keys=["dt", "id"],
               partition_keys="dt", options={"bucket": "-2", "postpone.default-bucket-num": "2"})
    ours = rows(FileStoreTable.open(path).to_arrow(), ["dt", "id"])
    assert ours == rows(pa.Table.from_pylist([{"id": k, "dt": d, "v": v} for k, (d, v) in model.items()]),
                        ["dt", "id"])
    if paimon_spark.line.name == "0.9":
        try:
            spark_sql_rows(paimon_spark, path, ["dt", "id"])
        except SparkSqlError as e:
            assert "bucket" in str(e).lower(), e
            return
        raise AssertionError("Paimon 0.9 read a postpone-bucket table")
    assert spark_sql_rows(paimon_spark, path, ["dt", "id"]) == ours


GROUPS = {"merge-engine": "partial-update", "fields.g1.sequence-group": "a,b", "fields.g2.sequence-group": "c",
          "bucket": "1"}
ARROW = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.string()), ("b", pa.int32()), ("g1", pa.int32()),
                   ("c", pa.string()), ("g2", pa.int32())])


def test_sequence_groups_with_retractions_we_wrote(spark, paimon_spark, warehouse):
    path = f"{warehouse}/db.db/groups"
    seed = spark.createDataFrame([(k, f"a{k}", k, 0, f"c{k}", 0) for k in range(10)],
                                 "k int, a string, b int, g1 int, c string, g2 int")
    upsert(seed, path, primary_keys="k", options=GROUPS)
    upsert(seed.selectExpr("k", "'b' AS a", "b", "g1 + 1 AS g1", "c", "g2"), path, primary_keys="k")
    assert spark_sql_rows(paimon_spark, path, ["k"]) == rows(FileStoreTable.open(path).to_arrow(), "k")
    table = FileStoreTable.open(path)
    rng = random.Random(5)
    for version in range(1, 4):  # updates and retractions of either group, sequence values equal, or null
        batch = [{"k": k, "a": f"a{version}-{k}", "b": rng.randrange(50), "g1": rng.randrange(3),
                  "c": f"c{version}-{k}", "g2": rng.choice([None, rng.randrange(3)]),
                  "_kind": rng.choice(["+I", "+U", "-U", "-D"])} for k in rng.sample(range(12), 6)]
        write = table.new_write()
        write.write(pa.Table.from_pylist([{c: r[c] for c in ARROW.names} for r in batch], ARROW),
                    row_kinds=[ROW_KINDS[r["_kind"]] for r in batch])
        write.commit()
    ours = rows(FileStoreTable.open(path).to_arrow(), "k")
    if paimon_spark.line.name == "0.9":  # its merge fails on these histories; 2.0 (and Java 2.0) reads them
        with pytest.raises(SparkSqlError, match="NullPointerException"):
            spark_sql_rows(paimon_spark, path, ["k"])
    else:
        assert spark_sql_rows(paimon_spark, path, ["k"]) == ours
