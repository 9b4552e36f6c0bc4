"""We read the tables Java Paimon (the reference release) writes (fixed and dynamic bucket), we upsert into
them and Java reads the result; then Java writes again on top of our commits and all read the same.

Two JVM launches in all: Java creates and writes the tables (and reads them back); then Java reads our
upserts, writes a third batch and reads again. pypaimon 2.1.0 reads every snapshot too.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable

from tests.oracle import pypaimon_read, rows

from .data import JAVA_FIELDS, KEY, PARTITION, SCHEMA, SPARK_SCHEMA, Model, random_rows
from .javapaimon import JavaError, Read, Write, assert_same

TABLES = {
    "fixed": {"bucket": "3"},
    # A small target row count: Java's HashBucketAssigner opens several buckets per partition.
    "dynamic": {"bucket": "-1", "dynamic-bucket.target-row-num": "10"},
}


def _create(options: dict, key=KEY) -> dict:
    return {"fields": JAVA_FIELDS, "primary_keys": key, "partition_keys": PARTITION, "options": options}


def _ours_upsert(spark, name: str, path: str, batch: list[dict], deletes: list[dict]) -> None:
    """fixed: the store's write without buckets (our bucket hash must agree with Java's, or a key lives
    twice); dynamic: the Spark engine, whose bootstrap and bucket assigner load Java's HASH index."""
    if name == "fixed":
        table = FileStoreTable.open(path)
        w = table.new_write()
        w.write(pa.Table.from_pylist(batch + deletes, table.schema.arrow_schema()),
                row_kinds=[0] * len(batch) + [3] * len(deletes))
        w.commit()
    else:
        from dbt_paimon.engine import delete, upsert

        df = spark.createDataFrame([tuple(r[c] for c in SCHEMA.names) for r in batch], SPARK_SCHEMA)
        upsert(df, path, primary_keys=KEY, partition_keys=PARTITION)
        delete(spark, path, f"id in ({', '.join(str(r['id']) for r in deletes)})")


@pytest.fixture(scope="module")
def scenario(spark, java, tmp_path_factory):
    db = tmp_path_factory.mktemp("java-written") / "wh" / "db.db"
    db.mkdir(parents=True)
    rng = random.Random(9)
    out = SimpleNamespace(paths={n: str(db / n) for n in TABLES}, models={n: Model() for n in TABLES}, expected={},
                          ours_snapshot={})

    # Java: two commits per table (inserts; then updates and deletes), each snapshot read back.
    first, second = random_rows(rng, range(90), 1), random_rows(rng, range(0, 90, 4), 2)
    requests = []
    for name, options in TABLES.items():
        model = out.models[name]
        model.upsert(first)
        out.expected[(name, 1)] = model.sorted_rows()
        model.upsert(second)
        gone = [model.rows[k] for k in sorted(model.rows) if k[0] % 8 == 2]
        model.delete(gone)
        out.expected[(name, 2)] = model.sorted_rows()
        requests += [Write(out.paths[name], first, _create(options)),
                     Write(out.paths[name], second + [{**r, "_kind": "-D"} for r in gone])]
    # Known limits of Java's batch write: it picks no bucket for a dynamic-bucket or cross-partition table.
    out.refused_paths = {"HASH_DYNAMIC": str(db / "unassigned"), "KEY_DYNAMIC": str(db / "cross")}
    requests += [Write(out.refused_paths["HASH_DYNAMIC"], first, _create(TABLES["dynamic"]), assign_buckets=False),
                 Write(out.refused_paths["KEY_DYNAMIC"], first, _create({"bucket": "-1"}, key=["id", "code"]))]
    requests += [Read(p, {"scan.snapshot-id": str(sid)}) for p in out.paths.values() for sid in (2, 1)]
    results = java.run(requests)
    out.refused = results[-6:-4]
    out.java_wrote = dict(zip([(n, s) for n in TABLES for s in (2, 1)], results[-4:]))
    assert results[:4] == [None] * 4, results[:4]

    # We upsert (updates, new keys, deletes); Java reads that, writes a third batch on top, reads again.
    ours = random_rows(rng, list(range(1, 90, 5)) + list(range(90, 120)), 3)
    java_again = random_rows(rng, list(range(2, 120, 7)) + list(range(120, 140)), 4)
    requests = []
    for name, path in out.paths.items():
        model = out.models[name]
        gone = [model.rows[k] for k in sorted(model.rows) if k[0] % 10 == 3]
        _ours_upsert(spark, name, path, ours, gone)
        out.ours_snapshot[name] = FileStoreTable.open(path).latest_snapshot().id
        model.upsert(ours)
        model.delete(gone)
        out.expected[(name, "ours")] = model.sorted_rows()
        model.upsert(java_again)
        out.expected[(name, "java again")] = model.sorted_rows()
        requests += [Read(path)]
    requests += [Write(p, java_again) for p in out.paths.values()] + [Read(p) for p in out.paths.values()]
    results = java.run(requests)
    out.java_read_ours = dict(zip(TABLES, results[:2]))
    assert results[2:4] == [None, None], results[2:4]
    out.java_final = dict(zip(TABLES, results[4:]))
    return out


@pytest.mark.parametrize("name", list(TABLES))
def test_we_read_what_java_wrote(scenario, name):
    table = FileStoreTable.open(scenario.paths[name])
    for sid in (2, 1):
        ours = table.to_arrow(snapshot_id=sid)
        assert_same(scenario.java_wrote[(name, sid)], ours, KEY, scenario.expected[(name, sid)])
        assert rows(pypaimon_read(scenario.paths[name], snapshot_id=sid), KEY) == rows(ours, KEY)
    if name == "dynamic":  # Java's own assigner spread the keys over several buckets, with HASH index files
        plan = table.plan(snapshot_id=2)
        assert max(s.bucket for s in plan.splits) > 0 and table.snapshots.snapshot(2).index_manifest


@pytest.mark.parametrize("name", list(TABLES))
def test_java_reads_our_upsert_into_its_table(scenario, name):
    table = FileStoreTable.open(scenario.paths[name])
    assert_same(scenario.java_read_ours[name], table.to_arrow(snapshot_id=scenario.ours_snapshot[name]), KEY,
                scenario.expected[(name, "ours")])


@pytest.mark.parametrize("name", list(TABLES))
def test_java_writes_on_top_of_our_commits(scenario, name):
    """On the dynamic table Java's HashBucketAssigner loads the HASH index we left: had we lost a key's
    hash, Java would put that key in a second bucket and it would read twice."""
    table = FileStoreTable.open(scenario.paths[name])
    assert_same(scenario.java_final[name], table.to_arrow(), KEY, scenario.expected[(name, "java again")])
    assert rows(pypaimon_read(scenario.paths[name]), KEY) == scenario.expected[(name, "java again")]


def test_java_batch_write_picks_no_dynamic_bucket(scenario):
    """Known limitation: Java's BatchTableWrite.write(row) cannot assign a bucket in dynamic-bucket or
    cross-partition mode (its Flink and Spark sinks assign them); our oracle uses HashBucketAssigner as the
    Flink sink does for dynamic-bucket tables, and writes no cross-partition table through the core API."""
    for (mode, path), error in zip(scenario.refused_paths.items(), scenario.refused):
        assert FileStoreTable.open(path).schema.bucket_mode == mode
        assert isinstance(error, JavaError)
        assert "Can't extract bucket from row in dynamic bucket mode" in str(error), str(error)
        assert "DynamicBucketRowKeyExtractor.bucket" in str(error)
        assert FileStoreTable.open(path).latest_snapshot() is None  # nothing was committed
