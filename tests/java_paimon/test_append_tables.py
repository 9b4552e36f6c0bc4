"""Append tables (no primary key) both ways with Java Paimon (the reference release, reference.py), Paimon's
Spark SQL and pypaimon: they read what we write (bucket-unaware and fixed-bucket, after appends, an
overwrite and a compaction, by time travel), and we read and continue what Java writes."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.snapshot.snapshot import COMPACT, OVERWRITE
from tests.oracle import pypaimon_read, rows
from tests.paimon_spark.side_env import spark_sql_rows

from .data import JAVA_FIELDS, PARTITION, SCHEMA, SPARK_SCHEMA, random_rows
from .javapaimon import Read, Write, assert_same

ORDER = [n for n in SCHEMA.names]  # every column: rows of an append table have no key to sort by
KINDS = {"unaware": {}, "fixed": {"bucket": "3", "bucket-key": "id"}}


def _append(spark, path: str, batch: list[dict], mode: str = "append", execution: str = "local", options=None):
    from dbt_paimon.engine import RunSettings, write

    df = spark.createDataFrame([tuple(r[c] for c in SCHEMA.names) for r in batch], SPARK_SCHEMA)
    return write(df, path, mode=mode, partition_keys=PARTITION, options=options,
                 settings=RunSettings(execution=execution))


@pytest.fixture(scope="module")
def scenario(spark, java, paimon_spark, tmp_path_factory):
    db = tmp_path_factory.mktemp("append") / "wh" / "db.db"
    db.mkdir(parents=True)
    rng = random.Random(3)
    out = SimpleNamespace(cases={}, reads={})
    for kind, options in KINDS.items():
        path = str(db / f"ours_{kind}")
        model: list[dict] = []
        expected = {}
        # appends, in the driver and as a Spark job (the same ids again: every row kept)
        for i, execution in enumerate(("local", "distributed", "local")):
            batch = random_rows(rng, range(12 * i, 12 * i + 30), i + 1)
            result = _append(spark, path, batch, execution=execution,
                             options={**options, "compaction.min.file-num": "3"})
            model += batch
            expected[result.snapshot_id] = list(model)
        # an overwrite of the partitions the batch holds
        batch = random_rows(rng, range(5), 9)
        result = _append(spark, path, batch, mode="overwrite-partitions", options=options)
        replaced = {r["dt"] for r in batch}
        model = [r for r in model if r["dt"] not in replaced] + batch
        expected[result.snapshot_id] = list(model)
        out.cases[kind] = SimpleNamespace(path=path, expected=expected, result=result)
        for sid in expected:
            out.reads[f"{kind}@{sid}"] = Read(path, {"scan.snapshot-id": str(sid)})

    # Java writes an append table (bucket-unaware), we append to it, Java appends again
    out.java_path = str(db / "java_written")
    out.java_rows = [random_rows(rng, range(20), 1), random_rows(rng, range(10, 25), 2)]
    create = {"fields": JAVA_FIELDS, "primary_keys": [], "partition_keys": PARTITION, "options": {}}
    java.run([Write(out.java_path, out.java_rows[0], create)])
    out.ours_on_java = random_rows(rng, range(5, 15), 3)
    _append(spark, out.java_path, out.ours_on_java)
    java.run([Write(out.java_path, out.java_rows[1])])

    out.java = dict(zip(out.reads, java.run(list(out.reads.values()))))
    [out.java_final] = java.run([Read(out.java_path)])
    out.spark_sql = {kind: spark_sql_rows(paimon_spark, c.path, ORDER) for kind, c in out.cases.items()}
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_java_spark_sql_and_pypaimon_read_our_append_tables(scenario, kind):
    case = scenario.cases[kind]
    table = FileStoreTable.open(case.path)
    kinds = [table.snapshots.snapshot(sid).commit_kind for sid in case.expected]
    assert kinds[-1] == OVERWRITE and case.result.partitions_replaced >= 1
    for sid, expected in case.expected.items():
        want = rows(pa.Table.from_pylist(expected, SCHEMA), ORDER)
        assert_same(scenario.java[f"{kind}@{sid}"], table.to_arrow(snapshot_id=sid), ORDER, want)
    latest = rows(pa.Table.from_pylist(list(case.expected.values())[-1], SCHEMA), ORDER)
    assert rows(pypaimon_read(case.path), ORDER) == latest
    # Spark SQL's rows come as JSON values: compared on the columns JSON keeps as they are
    simple = ["id", "code", "dt", "name", "score", "flag", "n", "small", "tiny"]
    assert [{c: r[c] for c in simple} for r in scenario.spark_sql[kind]] == [{c: r[c] for c in simple} for r in latest]
    # compaction merged small files along the way (compaction.min.file-num 3), as a COMPACT snapshot
    assert COMPACT in [table.snapshots.snapshot(i).commit_kind for i in table.snapshots.ids()]


def test_we_read_and_continue_a_java_append_table(scenario):
    everything = scenario.java_rows[0] + scenario.ours_on_java + scenario.java_rows[1]
    want = rows(pa.Table.from_pylist(everything, SCHEMA), ORDER)
    ours = FileStoreTable.open(scenario.java_path).to_arrow()
    assert_same(scenario.java_final, ours, ORDER, want)
    assert rows(pypaimon_read(scenario.java_path), ORDER) == want
