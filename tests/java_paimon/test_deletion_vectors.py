"""Deletion vectors (`deletion-vectors.enabled`, issue 40) between Java Paimon, pypaimon and us.

Our writes leave a DV table as Paimon's writers do: every level-0 file compacted up at once, each
key's older row deleted by a vector in its bucket's DV index file, so Java's batch read (which skips
level 0 and reads each file through its vector, merging nothing) gives the model's rows; so do
pypaimon's and ours. A table whose vectors Java wrote is read, upserted into, deleted from and
compacted by us, and Java reads the outcome. Fixed bucket, dynamic bucket and cross-partition
tables; both executors; deduplicate, partial-update and aggregation; local disk and S3.
"""

from __future__ import annotations

import os
import pathlib

import pyarrow as pa
import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.engine.writes.compaction import auto_compact
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.index.deletion_vectors import bucket_indexes, read_vectors
from dbt_paimon.store.common.errors import SchemaError
from dbt_paimon.store.read.read import TableRead
from tests.engine.helpers import spark_rows
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read, Write

SPARK = "id bigint, dt string, v string, n bigint"
DV = {"deletion-vectors.enabled": "true"}
KINDS = {  # name -> (primary keys, table options)
    "fixed": (["dt", "id"], {"bucket": "2"}),
    "dynamic": (["dt", "id"], {"bucket": "-1"}),
    "cross": (["id"], {"bucket": "-1"}),
    "partial-update": (["dt", "id"], {"bucket": "2", "merge-engine": "partial-update",
                                      "partial-update.remove-record-on-delete": "true"}),
    "aggregation": (["dt", "id"], {"bucket": "2", "merge-engine": "aggregation", "fields.n.aggregate-function": "sum",
                                   "fields.v.aggregate-function": "last_non_null_value"}),
}
B1 = [(1, "a", "x", 1), (2, "a", "x", 1), (3, "b", "x", 1), (4, "b", "x", 1)]
B2 = [(1, "a", None, 2), (2, "b", "y", 2), (5, "b", "y", 2)]  # 1 updated (v null); 2 moves to b (cross)
B3 = [(4, "a", "z", 3), (1, "a", "w", 3)]  # after `delete id = 3`: 4 moves to a (cross)
STEPS = (B1, B2, "delete 3", B3)


def _steps(kind: str) -> tuple:
    """An aggregation table takes no delete (Paimon refuses -D records there)."""
    return tuple(s for s in STEPS if s != "delete 3") if kind == "aggregation" else STEPS


def _model(kind: str) -> list[dict]:
    keys, options = KINDS[kind]
    engine = options.get("merge-engine", "deduplicate")
    live: dict = {}
    for step in _steps(kind):
        if step == "delete 3":
            live = {k: r for k, r in live.items() if r[0] != 3}
            continue
        for row in step:
            key = row[0] if kind == "cross" else (row[1], row[0])
            if kind == "cross":  # a key moving partition leaves the old one
                live = {k: r for k, r in live.items() if r[0] != row[0] or k == key}
            old = live.get(key)
            if old is not None and engine == "partial-update":
                row = (*row[:2], row[2] if row[2] is not None else old[2], row[3] if row[3] is not None else old[3])
            elif old is not None and engine == "aggregation":
                row = (*row[:2], row[2] if row[2] is not None else old[2], old[3] + row[3])
            live[key] = row
    return [{"id": i, "dt": d, "v": v, "n": n} for i, d, v, n in sorted(live.values())]


def _write(spark, path: str, kind: str, execution: str, storage: dict | None = None) -> None:
    keys, options = KINDS[kind]
    settings = RunSettings(execution=execution, storage_options=storage)
    for step in _steps(kind):
        if step == "delete 3":
            delete(spark, path, "id = 3", settings=RunSettings(storage_options=storage))
        else:
            upsert(spark.createDataFrame(step, SPARK), path, primary_keys=keys, partition_keys="dt",
                   options={**options, **DV}, settings=settings)


def _check_merge_free(path: str, storage: dict | None = None) -> None:
    """No level-0 file is left, some snapshot had vectors (a full compaction, which universal
    compaction picks often at this size, leaves none), and each key has one live row in the files
    read through their vectors (what a reader that merges nothing sees)."""
    table = FileStoreTable.open(path, _io(path, storage))
    plan = table.plan()
    assert all(f.level > 0 for s in plan.splits for f in s.files)
    had = [sid for sid in range(1, plan.snapshot.id + 1)
           if any(read_vectors(table.io, table.path, m)
                  for m in bucket_indexes(table.io, table.path, table.snapshots.snapshot(sid)).values())]
    assert had
    reader = TableRead(table.io, table.path, table.schema)
    for split in plan.splits:
        live = pa.concat_tables([reader.read_file_kv(split, f) for f in split.files])
        keys = live.select([c for c in live.column_names if c.startswith("_KEY_")])
        assert keys.group_by(keys.column_names).aggregate([]).num_rows == keys.num_rows


def _io(path: str, storage: dict | None):
    from dbt_paimon.store.common.fileio import FileIO
    return FileIO.get(path, storage)


CASES = [(kind, execution) for kind in ("fixed", "dynamic", "cross") for execution in ("local", "distributed")] + [
    ("partial-update", "local"), ("aggregation", "distributed")]


@pytest.fixture(scope="module")
def written(spark, java, tmp_path_factory):
    db = tmp_path_factory.mktemp("dv") / "wh" / "db.db"
    db.mkdir(parents=True)
    paths = {case: str(db / "_".join(case).replace("-", "_")) for case in CASES}
    for case, path in paths.items():
        _write(spark, path, *case)
    results = java.run([Read(path) for path in paths.values()])
    return {case: (paths[case], results[i]) for i, case in enumerate(paths)}


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_java_pypaimon_and_we_read_our_dv_tables_as_the_model(written, case):
    path, java_read = written[case]
    assert not isinstance(java_read, Exception), java_read
    want = _model(case[0])
    readers = [("java", java_read), ("ours", FileStoreTable.open(path).to_arrow())]
    if case[0] != "partial-update":  # pypaimon 2.1 refuses partial-update.remove-record-on-delete
        readers.append(("pypaimon", pypaimon_read(path)))
    for reader, got in readers:
        assert rows(got, ["id", "dt"]) == want, reader
    _check_merge_free(path)


def test_on_the_object_store_too(spark, java, s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/dv_cross"
    _write(spark, path, "cross", "distributed", s3_server.options)
    java_read, = java.run([Read(path, catalog=s3_server.options)])
    assert rows(java_read, ["id", "dt"]) == _model("cross")
    _check_merge_free(path, s3_server.options)


JAVA_FIELDS = [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING"), ("n", "BIGINT")]


def test_a_table_whose_vectors_java_wrote_is_read_upserted_and_compacted_by_us(spark, java, warehouse):
    path = f"{warehouse}/db.db/java_dv"
    create = {"fields": JAVA_FIELDS, "primary_keys": ["dt", "id"], "partition_keys": ["dt"],
              "options": {"bucket": "2", **DV}}
    batches = [[{"id": i, "dt": "a", "v": f"j{r}", "n": r} for i in range(r, 6)] for r in range(2)]
    done = java.run([Write(path, batches[0], create=create), *[Write(path, b) for b in batches[1:]]])
    assert not [d for d in done if isinstance(d, Exception)], done
    table = FileStoreTable.open(path)
    assert any(read_vectors(table.io, table.path, m)
               for m in bucket_indexes(table.io, table.path, table.latest_snapshot()).values()), "Java wrote no vector"
    java_read, = java.run([Read(path)])
    assert rows(table.to_arrow(), ["id"]) == rows(java_read, ["id"])
    assert rows(pypaimon_read(path), ["id"]) == rows(java_read, ["id"])
    assert spark_rows(spark, path) == rows(java_read, ["id"])  # Spark's view: our data source

    model = {r["id"]: r for r in rows(java_read, ["id"])}
    upsert(spark.createDataFrame([(2, "a", "ours", 9), (9, "a", "ours", 9)], SPARK), path,
           primary_keys=["dt", "id"], partition_keys="dt", settings=RunSettings(execution="local"))
    model.update({2: {"id": 2, "dt": "a", "v": "ours", "n": 9}, 9: {"id": 9, "dt": "a", "v": "ours", "n": 9}})
    delete(spark, path, "id = 4")
    del model[4]
    _check_merge_free(path)
    compact(spark, path, settings=RunSettings(execution="local"))  # a full compaction leaves no vector behind
    table = FileStoreTable.open(path)
    # (Java leaves an empty index file where a compaction of its deleted every vector of a bucket)
    assert not any(read_vectors(table.io, table.path, m)
                   for m in bucket_indexes(table.io, table.path, table.latest_snapshot()).values())
    want = [model[k] for k in sorted(model)]
    java_read, = java.run([Read(path)])
    for reader, got in (("java", java_read), ("ours", table.to_arrow()), ("pypaimon", pypaimon_read(path))):
        assert rows(got, ["id"]) == want, reader
    assert spark_rows(spark, path) == want


def test_a_table_keeping_its_vectors_in_bucket_directories_is_refused_clearly(spark, java, warehouse):
    """`index-file-in-data-file-dir`: Java writes the vectors beside the data files, where we do not
    look; every read, write and orphan clean names the option, and nothing is written or deleted."""
    path = f"{warehouse}/db.db/java_dv_in_dirs"
    create = {"fields": JAVA_FIELDS, "primary_keys": ["dt", "id"], "partition_keys": ["dt"],
              "options": {"bucket": "1", "index-file-in-data-file-dir": "true", **DV}}
    done = java.run([Write(path, [{"id": i, "dt": "a", "v": "j", "n": 0} for i in range(4)], create=create),
                     Write(path, [{"id": 1, "dt": "a", "v": "k", "n": 1}])])
    assert not [d for d in done if isinstance(d, Exception)], done
    assert any(n.startswith("index-") for n in os.listdir(f"{path}/dt=a/bucket-0")), "Java kept them elsewhere"
    files = sorted(str(p) for p in pathlib.Path(path).rglob("*"))
    table = FileStoreTable.open(path)
    for action in (table.to_arrow, lambda: table.remove_orphan_files(older_than="0 ms"),
                   lambda: upsert(spark.createDataFrame([(2, "a", "ours", 9)], SPARK), path, primary_keys=["dt", "id"],
                                  partition_keys="dt", settings=RunSettings(execution="local"))):
        with pytest.raises(SchemaError, match="index-file-in-data-file-dir"):
            action()
    assert sorted(str(p) for p in pathlib.Path(path).rglob("*")) == files


def test_an_overwrite_drops_the_vectors_of_what_it_replaces(spark, java, warehouse):
    path = f"{warehouse}/db.db/dv_overwrite"
    for batch in (B1, B2):
        upsert(spark.createDataFrame(batch, SPARK), path, primary_keys=["dt", "id"], partition_keys="dt",
               options={"bucket": "1", **DV}, settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    before = bucket_indexes(table.io, table.path, table.latest_snapshot())
    assert {table.partition_bytes(["a"])} <= {p for p, _ in before}
    w = table.new_write()
    w.write(pa.table({"id": [7], "dt": ["a"], "v": ["o"], "n": [7]}))
    table.new_commit().overwrite(w.prepare_commit(), {table.partition_bytes(["a"])})
    assert auto_compact(spark, path, execution="local") is not None
    table = FileStoreTable.open(path)
    after = bucket_indexes(table.io, table.path, table.latest_snapshot())
    assert {p for p, _ in after} == {p for p, _ in before} - {table.partition_bytes(["a"])}
    java_read, = java.run([Read(path)])
    want = [{"id": i, "dt": d, "v": v, "n": n} for i, d, v, n in
            [(2, "b", "y", 2), (3, "b", "x", 1), (4, "b", "x", 1), (5, "b", "y", 2), (7, "a", "o", 7)]]
    for reader, got in (("java", java_read), ("ours", table.to_arrow())):
        assert rows(got, ["id", "dt"]) == want, reader


@pytest.mark.parametrize("options, message", [
    ({"bucket": "1", "merge-engine": "first-row", **DV}, "first-row"),
    ({"bucket": "1", **DV, "changelog-producer": "full-compaction"}, "full-compaction"),
])
def test_what_paimon_refuses_with_deletion_vectors_is_refused(spark, warehouse, options, message):
    path = f"{warehouse}/db.db/dv_refused"
    with pytest.raises(SchemaError, match=message):
        upsert(spark.createDataFrame(B1, SPARK), path, primary_keys=["id"], options=options)
    assert not FileStoreTable.exists(path)


def test_switching_them_on_needs_deletion_vectors_modifiable(spark, warehouse):
    path = f"{warehouse}/db.db/dv_switch"
    upsert(spark.createDataFrame(B1, SPARK), path, primary_keys=["id"], options={"bucket": "1"},
           settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    with pytest.raises(SchemaError, match="deletion-vectors.modifiable"):
        table.alter_options(DV)
    table.alter_options({**DV, "deletion-vectors.modifiable": "true"})
    assert table.schema.core.deletion_vectors
