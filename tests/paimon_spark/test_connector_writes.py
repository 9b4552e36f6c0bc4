"""Paimon's own Spark connector writes into a cross-partition table we keep, and we continue it.

One table (primary key `id`, partitioned by `dt`, bucket -1: Paimon's cross-partition mode), created by
our upsert. Then, by turns, a Spark SQL statement through Paimon's connector (tests/paimon_spark) and an
upsert of ours: `INSERT INTO` with keys moving partition, `MERGE INTO`, `UPDATE`, `DELETE FROM`,
`CALL sys.rollback`, `CALL sys.create_tag`, `CALL sys.expire_snapshots`. An independent model
(tests/engine/model.py) follows every step; after each, our reader, pypaimon (where it can: not manifests
the connector's Paimon 0.9 wrote) and Paimon's Spark SQL read the model's rows, every key lives in one
(partition, bucket), and Java Paimon reads the end state.

Each Paimon write is the connector's cross-partition writer (its bootstrap of every key, its global index
assigner); each of ours then finds the keys Paimon moved: a stale answer from our key index shows as a key
live twice or a lost row. The connector's `CALL sys.compact` refuses cross-partition tables (asserted).
Run against each release of the connector (conftest.py).
"""

from __future__ import annotations

import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable
from tests.engine.helpers import COLUMNS, frame, live_places, pypaimon_rows
from tests.engine.model import UpsertModel, random_batches
from tests.oracle import rows

from .side_env import SparkSqlError, spark_sql_rows, sql_values, table_name


class Run:
    def __init__(self, spark, paimon_spark, path: str):
        self.spark, self.paimon_spark, self.path = spark, paimon_spark, path
        self.warehouse, self.name = table_name(path)
        self.model = UpsertModel(["id"], ["dt"])
        self.batches = iter(random_batches(seed=23, batches=12, size=25, key_space=60))
        self.log: list[str] = []
        self.states: dict[int, list[dict]] = {}  # snapshot id -> the model's rows then
        self.pypaimon_reads, self.paimon_wrote = 0, False

    def sql(self, text: str) -> list[dict]:
        self.log.append(text[:80])
        self.paimon_wrote = True
        return self.paimon_spark.sql(self.warehouse, text)

    def ours(self) -> None:
        batch = next(self.batches)
        self.log.append(f"ours: {len(batch)} rows")
        self.model.apply(batch)
        upsert(frame(self.spark, batch), self.path, primary_keys="id", partition_keys="dt")
        self.check()

    def check(self) -> None:
        expected = self.model.sorted_rows()
        where = " after " + " | ".join(self.log[-3:])
        assert rows(FileStoreTable.open(self.path).to_arrow(), "id") == expected, "our read" + where
        try:
            assert pypaimon_rows(self.path) == expected, "pypaimon's read" + where
            self.pypaimon_reads += 1
        except KeyError as e:
            # pypaimon 2.1.0 needs the manifests' _VALUE_STATS_COLS, which the connector (Paimon 0.9) does not
            # write: it cannot read a snapshot whose live manifests the connector wrote
            assert e.args == ("_VALUE_STATS_COLS",) and self.paimon_wrote, e
        assert spark_sql_rows(self.paimon_spark, self.path, ["id"]) == expected, "Paimon's Spark SQL" + where
        twice = {k: n for k, n in live_places(self.path).items() if n > 1}
        assert not twice, "keys live in several (partition, bucket)s" + where
        self.states[FileStoreTable.open(self.path).latest_snapshot().id] = expected


def test_paimon_spark_writes_and_we_continue(spark, paimon_spark, java, warehouse):
    from tests.java_paimon.javapaimon import Read, assert_same

    run = Run(spark, paimon_spark, f"{warehouse}/db.db/t")
    run.ours()
    assert run.pypaimon_reads == 1
    table = FileStoreTable.open(run.path)
    assert table.schema.core.bucket == -1 and tuple(table.schema.primary_keys) == ("id",)  # cross-partition

    # INSERT INTO: an upsert in Paimon; keys found in another partition move there (deduplicate)
    batch = next(run.batches)
    moved = run.model.apply(batch)["moved"]
    assert moved > 0
    run.sql(f"INSERT INTO {run.name} VALUES {sql_values(batch, COLUMNS)}")
    run.check()
    run.ours()

    # MERGE INTO: matched rows updated in place, unmatched inserted
    source = [{**r, "v": 7000 + r["id"]} for r in run.model.sorted_rows()[::4]] + \
             [{"id": 1000 + i, "dt": "b", "v": i, "s": "new", "amount": i, "flag": True, "seq": i} for i in range(3)]
    run.sql(f"MERGE INTO {run.name} AS t "
            f"USING (SELECT * FROM VALUES {sql_values(source, COLUMNS)} AS s({', '.join(COLUMNS)})) AS s "
            f"ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.v = s.v WHEN NOT MATCHED THEN INSERT *")
    for r in source:
        old = run.model.rows.get((r["id"],))
        run.model.rows[(r["id"],)] = {**old, "v": r["v"]} if old else r
    run.check()
    run.ours()

    # UPDATE ... SET ... WHERE
    run.sql(f"UPDATE {run.name} SET v = v + 1, s = 'updated' WHERE id % 3 = 0")
    for k, r in run.model.rows.items():
        if r["id"] % 3 == 0:
            run.model.rows[k] = {**r, "v": None if r["v"] is None else r["v"] + 1, "s": "updated"}
    run.check()
    run.ours()

    # DELETE FROM ... WHERE
    run.sql(f"DELETE FROM {run.name} WHERE id % 5 = 1")
    run.model.rows = {k: r for k, r in run.model.rows.items() if r["id"] % 5 != 1}
    run.check()
    back_to = FileStoreTable.open(run.path).latest_snapshot().id
    kept = dict(run.model.rows)
    run.ours()

    # CALL sys.compact: the connector refuses cross-partition tables, committing nothing (2.0 names
    # the bucket mode KEY_DYNAMIC, 0.9 CROSS_PARTITION)
    before = FileStoreTable.open(run.path).latest_snapshot().id
    mode = {"0.9": "CROSS_PARTITION", "2.0": "KEY_DYNAMIC"}[paimon_spark.line.name]
    with pytest.raises(SparkSqlError, match=f"Spark compact with {mode} is not support yet"):
        run.sql(f"CALL sys.compact(table => '{run.name}')")
    assert FileStoreTable.open(run.path).latest_snapshot().id == before
    run.check()

    # CALL sys.rollback: back to the snapshot after the DELETE; our key index must follow
    run.sql(f"CALL sys.rollback(table => '{run.name}', version => '{back_to}')")
    assert FileStoreTable.open(run.path).latest_snapshot().id == back_to
    run.model.rows = kept
    run.check()
    run.ours()

    # CALL sys.create_tag, then CALL sys.expire_snapshots: the tag keeps its files
    tagged = FileStoreTable.open(run.path).latest_snapshot().id
    tagged_rows = run.model.sorted_rows()
    run.sql(f"CALL sys.create_tag(table => '{run.name}', tag => 'paimon_tag', snapshot => {tagged})")
    run.ours()
    expired = run.sql(f"CALL sys.expire_snapshots(table => '{run.name}', retain_max => 1, retain_min => 1)")
    assert expired[0]["deleted_snapshots_count"] > 0
    run.check()
    run.ours()
    table = FileStoreTable.open(run.path)
    assert table.tags.get_or_throw("paimon_tag").snapshot.id == tagged
    assert rows(table.to_arrow(tag="paimon_tag"), "id") == tagged_rows
    assert spark_sql_rows(paimon_spark, run.path, ["id"], "'paimon_tag'") == tagged_rows

    # Java Paimon (the reference release) reads the end state and the tag
    latest, tag = java.read(Read(run.path), Read(run.path, {"scan.tag-name": "paimon_tag"}))
    assert_same(latest, table.to_arrow(), ["id"], run.model.sorted_rows())
    assert_same(tag, table.to_arrow(tag="paimon_tag"), ["id"], tagged_rows)
