"""Postpone bucket mode (`bucket` = -2, issue 40): dbt-paimon writes it as Paimon's batch writers do
(store/write/postpone.py): into real buckets, a bucket count per partition (the partition's own once it has
files, else `postpone.default-bucket-num`), at level 0, no compaction, no snapshot expiration; the
rows Java parks in bucket -2 stay there, unread by batch readers, as Paimon leaves them. Java Paimon
(with its bucket pruning of a key filter), pypaimon and our reader read the same rows."""

from __future__ import annotations

import os

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import CommitConflictError, SchemaError
from dbt_paimon.store.write.postpone import PartitionBuckets
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read, Write

FIELDS = [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")]
SCHEMA = "id bigint, dt string, v string"
KEY = ["dt", "id"]


def _upsert(spark, path: str, batch: list[tuple], execution: str = "local", storage: dict | None = None, **options):
    return upsert(spark.createDataFrame(batch, SCHEMA), path, primary_keys=KEY, partition_keys="dt",
                  options=options or None, settings=RunSettings(execution=execution, storage_options=storage))


def _counts(table: FileStoreTable) -> dict[str, set[int]]:
    """partition -> the bucket counts its live real-bucket files were written for."""
    out: dict[str, set[int]] = {}
    for s in table.plan().splits:
        out.setdefault(s.partition_values[0], set()).add(s.total_buckets)
    return out


def _want(model: dict) -> list[dict]:
    return [{"id": i, "dt": d, "v": v} for (d, i), v in sorted(model.items())]


def test_we_write_a_java_postpone_table_into_real_buckets_and_every_reader_agrees(spark, java, warehouse):
    path = f"{warehouse}/db.db/postponed"
    create = {"fields": FIELDS, "primary_keys": KEY, "partition_keys": ["dt"],
              "options": {"bucket": "-2", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}}
    parked = [{"id": k, "dt": "a", "v": "java"} for k in range(3)]
    done = java.run([Write(path, parked, create=create)])
    assert not isinstance(done[0], Exception), done
    table = FileStoreTable.open(path)
    assert table.schema.bucket_mode == "POSTPONE_MODE" and table.plan().postponed == 1

    model: dict[tuple, str] = {}
    table.alter_options({"postpone.default-bucket-num": "3"})
    batch = [(k, "a", f"a{k}") for k in range(12)]
    _upsert(spark, path, batch)
    model.update({(d, i): v for i, d, v in batch})
    FileStoreTable.open(path).alter_options({"postpone.default-bucket-num": "2"})
    batch = [(k, "b", f"b{k}") for k in range(10)] + [(k, "a", f"a{k}'") for k in range(0, 12, 3)]
    _upsert(spark, path, batch, execution="distributed")  # a keeps its 3 buckets, b gets 2
    model.update({(d, i): v for i, d, v in batch})
    result = delete(spark, path, "id = 4")
    assert result.deleted == 2
    model = {k: v for k, v in model.items() if k[1] != 4}

    table = FileStoreTable.open(path)
    plan = table.plan()
    assert _counts(table) == {"a": {3}, "b": {2}}
    assert ({(s.partition_values[0], s.bucket) for s in plan.splits}
            <= {("a", b) for b in range(3)} | {("b", 0), ("b", 1)})
    assert {f.level for s in plan.splits for f in s.files} == {0}  # write-only: no compaction
    assert plan.postponed == 1  # Java's rows still wait in bucket -2, untouched
    assert table.snapshots.earliest_id() == 1  # no snapshot expiration on a postpone table, as in Paimon
    want = _want(model)
    keys = sorted({i for _, i in model})
    java_reads = java.run([Read(path)] + [Read(path, equal={"id": k}) for k in keys])
    assert rows(java_reads[0], KEY) == want
    for k, got in zip(keys, java_reads[1:]):  # Java prunes buckets by bucket(id, the partition's count)
        assert sorted(r["dt"] for r in got.to_pylist() if r["id"] == k) == sorted(d for d, i in model if i == k), k
    assert rows(table.to_arrow(), KEY) == want
    assert rows(pypaimon_read(path), KEY) == want
    spark_rows = [r.asDict() for r in spark.read.format("paimon").load(path).collect()]
    assert sorted(spark_rows, key=lambda r: (r["dt"], r["id"])) == want

    # Paimon's writer continues: its batch write parks rows in bucket -2 (unread), ours still reads
    done = java.run([Write(path, [{"id": 100, "dt": "b", "v": "late"}]), Read(path)])
    assert not isinstance(done[0], Exception), done
    assert rows(done[1], KEY) == want == rows(FileStoreTable.open(path).to_arrow(), KEY)


def test_a_new_postpone_table_on_the_object_store(spark, java, s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/postponed"
    model = {}
    for execution, batch in (("distributed", [(k, d, f"{d}{k}") for k in range(6) for d in ("a", "b")]),
                             ("local", [(k, "b", f"b{k}+") for k in range(4)] + [(9, "c", "c9")])):
        _upsert(spark, path, batch, execution, s3_server.options, bucket="-2")
        model.update({(d, i): v for i, d, v in batch})
    table = FileStoreTable.open(path)
    assert _counts(table) == {"a": {1}, "b": {1}, "c": {1}}  # postpone.default-bucket-num: 1, as Paimon
    assert table.schema.options["bucket"] == "-2"
    java_read, = java.run([Read(path, catalog=s3_server.options)])
    assert rows(java_read, KEY) == _want(model) == rows(table.to_arrow(), KEY)


def test_a_writer_that_planned_another_count_conflicts(warehouse):
    """Paimon's checkBucketKeepSame: two writers give a new partition different counts; the second
    commit fails as a conflict (the upsert then runs its job again) and the table keeps one count."""
    import pyarrow as pa
    path = f"{warehouse}/db.db/raced"
    arrow = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.string())])
    table = FileStoreTable.create(path, arrow, KEY, ["dt"], {"bucket": "-2"})
    rows_a = pa.table({"id": [1, 2, 3], "dt": ["a"] * 3, "v": ["x"] * 3}, schema=arrow)
    slow = table.new_write()  # planned for 1 bucket
    table.alter_options({"postpone.default-bucket-num": "4"})
    fast = FileStoreTable.open(path).new_write()
    fast.write(rows_a)
    fast.commit()
    slow.write(rows_a)
    with pytest.raises(CommitConflictError, match="Total buckets of partition"):
        slow.commit()
    table = FileStoreTable.open(path)
    assert _counts(table) == {"a": {4}} and table.latest_snapshot().id == 1
    assert PartitionBuckets.of_plan(table.schema, table.plan()).of_partition(table.partition_bytes(["a"])) == 4


@pytest.mark.parametrize("racer_partition", ["n", "m"])
def test_an_upsert_that_raced_a_writer_of_another_count_runs_again(spark, warehouse, monkeypatch, racer_partition):
    """Between our job and its commit another writer (planning 4 buckets for a new partition, as
    Paimon 2.0's Spark writer may) commits: into the partition our job gave 1 bucket, our commit
    conflicts and the job runs again with the partition's 4; into another, ours is committed as it is."""
    import dataclasses
    import importlib
    import pyarrow as pa
    path = f"{warehouse}/db.db/raced_upsert_{racer_partition}"
    _upsert(spark, path, [(1, "a", "a1")], bucket="-2")
    mod = importlib.import_module("dbt_paimon.engine.writes.commit_loop")
    arrow = FileStoreTable.open(path).schema.arrow_schema()

    def racing_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        if attempt == 1:
            table = FileStoreTable.open(path)
            buckets = dataclasses.replace(PartitionBuckets.of_plan(table.schema, table.plan()), default=4)
            write = table.new_write(buckets=buckets)
            write.write(pa.table({"id": [50, 51, 52], "dt": [racer_partition] * 3, "v": ["r"] * 3}).cast(arrow))
            write.commit()
    monkeypatch.setattr(mod, "_before_commit", racing_writer)
    result = _upsert(spark, path, [(k, "n", f"n{k}") for k in range(8)])
    monkeypatch.setattr(mod, "_before_commit", None)
    table = FileStoreTable.open(path)
    if racer_partition == "n":
        assert (result.attempts, result.recommits) == (2, 0) and _counts(table) == {"a": {1}, "n": {4}}
    else:
        assert (result.attempts, result.recommits) == (2, 1) and _counts(table) == {"a": {1}, "n": {1}, "m": {4}}
    model = {("a", 1): "a1", **{("n", k): f"n{k}" for k in range(8)},
             **{(racer_partition, k): "r" for k in (50, 51, 52)}}
    assert rows(table.to_arrow(), KEY) == _want(model) == rows(pypaimon_read(path), KEY)


def test_rows_a_streaming_writer_parks_meanwhile_do_not_rerun_our_job(spark, java, warehouse, monkeypatch):
    """A Paimon writer that parks rows in bucket -2 (a Flink streaming job's checkpoints) commits
    between our job and its commit: those rows are read by no batch reader, nor by our job, so our
    files are committed on its snapshot as they are (no second run of the job)."""
    import importlib
    path = f"{warehouse}/db.db/streamed"
    create = {"fields": FIELDS, "primary_keys": KEY, "partition_keys": ["dt"], "options": {"bucket": "-2"}}
    done = java.run([Write(path, [{"id": 1, "dt": "a", "v": "j"}], create=create)])
    assert not isinstance(done[0], Exception), done
    mod = importlib.import_module("dbt_paimon.engine.writes.commit_loop")

    def parking_writer(attempt, what):
        if what == "compaction":  # the post-commit compaction is not raced
            return
        if attempt == 1:
            parked = java.run([Write(path, [{"id": k, "dt": "a", "v": "parked"} for k in range(3)])])
            assert not isinstance(parked[0], Exception), parked
    monkeypatch.setattr(mod, "_before_commit", parking_writer)
    result = _upsert(spark, path, [(k, "a", f"a{k}") for k in range(5)])
    monkeypatch.setattr(mod, "_before_commit", None)
    assert (result.attempts, result.recommits) == (2, 1)
    table = FileStoreTable.open(path)
    assert table.plan().postponed == 2
    want = _want({("a", k): f"a{k}" for k in range(5)})
    assert rows(table.to_arrow(), KEY) == want == rows(java.run([Read(path)])[0], KEY)

    # the parked files live in bucket-postpone/: a clone copies them, an overwrite and the
    # expiration after it delete them
    from dbt_paimon.store.clone import clone_table
    clone_table(table.io, path, f"{warehouse}/db.db/streamed_clone")
    parked_dir = f"{path}/dt=a/bucket-postpone"
    assert sorted(os.listdir(parked_dir)) == sorted(
        os.listdir(f"{warehouse}/db.db/streamed_clone/dt=a/bucket-postpone"))
    table.new_commit().overwrite([], {table.partition_bytes(["a"])})
    table.expire_snapshots(retain_max=1, retain_min=1)
    assert not os.listdir(parked_dir) and table.to_arrow().num_rows == 0


def test_what_cannot_be_done_right_is_refused(spark, java, warehouse):
    cross = f"{warehouse}/db.db/cross"
    with pytest.raises(SchemaError, match="lacks partition field"):
        upsert(spark.createDataFrame([(1, "a", "x")], SCHEMA), cross, primary_keys="id", partition_keys="dt",
               options={"bucket": "-2"})
    assert not FileStoreTable.exists(cross)
    with pytest.raises(SchemaError, match="postpone.batch-write-fixed-bucket"):
        _upsert(spark, f"{warehouse}/db.db/parked", [(1, "a", "x")], bucket="-2",
                **{"postpone.batch-write-fixed-bucket": "false"})
    assert not FileStoreTable.exists(f"{warehouse}/db.db/parked")
    import pyarrow as pa
    with pytest.raises(SchemaError, match="needs a primary key"):
        FileStoreTable.create(f"{warehouse}/db.db/append", pa.schema([("id", pa.int64())]), [], (), {"bucket": "-2"})

    # tables Java made: cross-partition (upsert refused), and one with rows waiting in bucket -2 (compaction refused)
    java_cross, waiting = f"{warehouse}/db.db/java_cross", f"{warehouse}/db.db/waiting"
    done = java.run([
        Write(java_cross, [{"id": 1, "dt": "a", "v": "x"}],
              create={"fields": FIELDS, "primary_keys": ["id"], "partition_keys": ["dt"], "options": {"bucket": "-2"}}),
        Write(waiting, [{"id": 1, "dt": "a", "v": "x"}],
              create={"fields": FIELDS, "primary_keys": KEY, "partition_keys": ["dt"], "options": {"bucket": "-2"}})])
    assert not any(isinstance(d, Exception) for d in done), done
    with pytest.raises(SchemaError, match="lacks partition fields"):
        upsert(spark.createDataFrame([(2, "b", "y")], SCHEMA), java_cross, primary_keys="id", partition_keys="dt")
    # parked rows are moved by compaction, except where their changelog would have to be derived
    FileStoreTable.open(waiting).alter_options({"changelog-producer": "lookup"})
    with pytest.raises(SchemaError, match="waiting in bucket -2 and changelog-producer 'lookup'"):
        compact(spark, waiting)
    # Paimon's other bucket functions put rows where ours would not: Java's readers would miss them
    modded = f"{warehouse}/db.db/modded"
    done = java.run([Write(modded, [{"id": 1, "dt": "a", "v": "x"}],
                           create={"fields": FIELDS, "primary_keys": KEY, "partition_keys": ["dt"],
                                   "options": {"bucket": "-2", "bucket-function.type": "mod"}})])
    assert not isinstance(done[0], Exception), done
    with pytest.raises(SchemaError, match="bucket-function.type"):
        _upsert(spark, modded, [(2, "a", "y")])
    assert FileStoreTable.open(java_cross).latest_snapshot().id == 1
    assert FileStoreTable.open(waiting).latest_snapshot().id == 1 and FileStoreTable.open(waiting).plan().postponed == 1


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_compaction_moves_the_rows_java_parked_into_their_buckets(spark, java, warehouse, execution):
    """Paimon's postpone compaction (postpone_compact.py): each parked row goes to the bucket of its
    key under its partition's count (a: the 3 of the files we wrote; c, which has none: the default),
    given sequence numbers after the bucket's in the order it was parked, so later versions win, over
    what the bucket held too; -D rows delete. The parked files go in the same COMPACT snapshot."""
    path = f"{warehouse}/db.db/moved_{execution}"
    create = {"fields": FIELDS, "primary_keys": KEY, "partition_keys": ["dt"],
              "options": {"bucket": "-2", "postpone.default-bucket-num": "3"}}
    done = java.run([Write(path, [{"id": k, "dt": "a", "v": "j0"} for k in range(4)], create=create)])
    assert not isinstance(done[0], Exception), done
    _upsert(spark, path, [(k, "a", f"ours{k}") for k in range(2, 10)])  # a's files: 3 buckets
    FileStoreTable.open(path).alter_options({"postpone.default-bucket-num": "2"})
    parked = [[{"id": k, "dt": d, "v": "j1"} for k in range(0, 12, 2) for d in ("a", "c")],
              [{"id": 4, "dt": "a", "v": "j2"}, {"id": 2, "dt": "c", "v": "j2"},
               {"id": 6, "dt": "a", "v": "j1", "_kind": "-D"}, {"id": 0, "dt": "c", "v": "j1", "_kind": "-D"}]]
    done = java.run([Write(path, batch) for batch in parked])
    assert not any(isinstance(d, Exception) for d in done), done
    assert FileStoreTable.open(path).plan().postponed == 5  # a file per partition and batch

    # the model: our rows, then the parked batches in the order Java parked them, the first one too
    # (parked before our upsert, moved after it: moved rows are sequenced after the bucket's)
    model = {("a", k): f"ours{k}" for k in range(2, 10)}
    for batch in [[{"id": k, "dt": "a", "v": "j0"} for k in range(4)]] + parked:
        for r in batch:
            if r.get("_kind") == "-D":
                model.pop((r["dt"], r["id"]), None)
            else:
                model[(r["dt"], r["id"])] = r["v"]
    sid = compact(spark, path, settings=RunSettings(execution=execution))
    table = FileStoreTable.open(path)
    plan = table.plan()
    assert (plan.postponed == 0 and table.latest_snapshot().id == sid
            and table.latest_snapshot().commit_kind == "COMPACT")
    assert _counts(table) == {"a": {3}, "c": {2}}
    assert {f.level for s in plan.splits for f in s.files} == {5}
    want = _want(model)
    java_read, = java.run([Read(path)])
    assert rows(java_read, KEY) == want == rows(table.to_arrow(), KEY) == rows(pypaimon_read(path), KEY)
    spark_rows = [r.asDict() for r in spark.read.format("paimon").load(path).collect()]
    assert sorted(spark_rows, key=lambda r: (r["dt"], r["id"])) == want
    # each key lives in the bucket Java's key filter looks in (its hash under the partition's count)
    keys = sorted({i for _, i in model})
    for k, got in zip(keys, java.run([Read(path, equal={"id": k}) for k in keys])):
        assert sorted(r["dt"] for r in got.to_pylist() if r["id"] == k) == sorted(d for d, i in model if i == k), k
