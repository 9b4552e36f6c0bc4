"""Paimon's maintenance (the reference release's table API: what `CALL sys.compact`, `sys.create_tag`,
`sys.expire_snapshots` and `sys.rollback_to` do) on tables our engine writes, by turns with our upserts:
after each step Java, our reader, the `paimon` Spark source and pypaimon read the model's rows, and our
next upsert continues from what Java left (a cross-partition table's key index included: keys move
partition after Java's compaction, expiration and rollback)."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read, rows

from .javapaimon import Maintain, Read

SCHEMA = "id bigint, dt string, v string, n bigint"
TABLES = {  # name: (primary key, options)
    "cross": (["id"], {}),  # bucket -1, the key without the partition: cross-partition upsert
    "partial": (["id", "dt"], {"bucket": "2", "merge-engine": "partial-update"}),
}


def _batch(step: int, ids, moved: bool) -> list[tuple]:
    return [(i, f"d{(i + step) % 3}" if moved else f"d{i % 3}", None if i % 4 == step % 4 else f"v{step}-{i}", step)
            for i in ids]


class Model:
    def __init__(self, key, partial):
        self.key, self.partial, self.rows = key, partial, {}

    def upsert(self, batch):
        for i, dt, v, n in batch:
            if "dt" not in self.key:  # cross-partition: the key lives in one partition, the last one
                self.rows.pop(next((k for k in self.rows if k[0] == i), None), None)
            old = self.rows.get((i, dt), {})
            new = {"id": i, "dt": dt, "v": v, "n": n}
            if self.partial:
                new = {c: (new[c] if new[c] is not None else old.get(c)) for c in new}
            self.rows[(i, dt)] = new

    def want(self):
        return sorted(self.rows.values(), key=lambda r: (r["id"], r["dt"]))


@pytest.mark.parametrize("name", list(TABLES))
def test_java_maintains_our_tables_and_we_continue(spark, java, warehouse, name):
    key, options = TABLES[name]
    path = f"{warehouse}/db.db/maintained_{name}"
    model = Model(key, options.get("merge-engine") == "partial-update")
    moved = "dt" not in key

    def ours(step, ids):
        batch = _batch(step, ids, moved)
        upsert(spark.createDataFrame(batch, SCHEMA), path, primary_keys=key, partition_keys="dt", options=options)
        model.upsert(batch)

    def all_read(java_table, snapshot_model=None):
        want = snapshot_model or model.want()
        assert rows(java_table, ["id", "dt"]) == want
        assert rows(FileStoreTable.open(path).to_arrow(), ["id", "dt"]) == want
        assert rows(spark.read.format("paimon").load(path).toArrow(), ["id", "dt"]) == want

    ours(1, range(30))
    ours(2, range(0, 40, 3))
    done = java.run([Maintain(path, "compact"), Read(path)])
    assert done[0] is None, done
    all_read(done[1])
    assert {f.level for s in FileStoreTable.open(path).plan().splits for f in s.files} == {5}

    ours(3, range(10, 35))  # keys move partition on the cross-partition table, over Java's files
    done = java.run([Read(path), Maintain(path, "tag", "t3")])
    assert done[1] is None, done
    all_read(done[0])
    tagged = model.want()
    ours(4, range(0, 45, 2))
    done = java.run([Maintain(path, "expire", 1), Read(path)])
    assert done[0] is None, done
    all_read(done[1])
    assert FileStoreTable.open(path).snapshots.earliest_id() == FileStoreTable.open(path).latest_snapshot().id

    # back to the tag: the rows of step 4 are gone, and our next upsert starts from the tag's rows
    done = java.run([Maintain(path, "rollback", "t3"), Read(path)])
    assert done[0] is None, done
    all_read(done[1], tagged)
    model.rows = {(r["id"], r["dt"]): r for r in tagged}
    ours(5, range(5, 50, 3))
    final, = java.run([Read(path)])
    all_read(final)
    assert rows(pypaimon_read(path), ["id", "dt"]) == model.want()
    if moved:  # every key once, whatever partitions it went through
        ids = [r["id"] for r in model.want()]
        assert len(ids) == len(set(ids))
