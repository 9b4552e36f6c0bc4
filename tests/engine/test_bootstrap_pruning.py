"""The bootstrap reads only what the batch may touch (issue 15): a table whose primary key holds the
partition (fixed bucket, or dynamic bucket with the HASH index) skips the partitions the batch has no
row in, and ships only the stored keys its Bloom filter may match; a cross-partition table, where a
key may live in any partition, reads every partition. Pruning must never hide a stored key: each key
stays live in one place, on both executors, also for DATE partitions (a null partition cannot
occur here: its field is part of the key, and keys are never null)."""

import datetime

import numpy as np
import pyarrow as pa

from dbt_paimon.assign.rows import StageRows
from dbt_paimon.engine import RunSettings
from dbt_paimon.engine.runtime import bloom, tasks
from dbt_paimon.engine import upsert
from dbt_paimon.store.read.read import TableRead
from dbt_paimon.store.table import FileStoreTable

from .helpers import frame, live_places, pypaimon_rows, spark_rows

SCHEMA = "id bigint, dt string, v bigint, s string, amount int, flag boolean, seq bigint"


def _row(i, dt, v=0):
    return {"id": i, "dt": dt, "v": v, "s": f"s{i}", "amount": i, "flag": True, "seq": v}


def _table(spark, path, bucket="-1", key=("id", "dt")):
    # ids unique across partitions (so a cross-partition table takes the same rows)
    rows = [_row(i + 1000 * n, dt) if key == ("id",) else _row(i, dt) for n, dt in enumerate("abc") for i in range(100)]
    upsert(frame(spark, rows), path, primary_keys=list(key), partition_keys="dt", options={"bucket": bucket})
    return FileStoreTable.open(path)


def test_a_dynamic_bucket_bootstrap_reads_the_batchs_partitions_and_keys_only(spark, warehouse):
    table = _table(spark, f"{warehouse}/db.db/hashed")
    schema = table.schema
    stage = StageRows(schema)
    batch = pa.Table.from_pylist([_row(i, "b", 1) for i in (3, 5, 7, 500, 501)])
    plan = table.plan()
    splits, _, index_files = tasks.bucket_state(table, plan)
    assert tasks.partition_pruning(schema)
    partitions = tasks.batch_partitions(batch, schema)
    assert partitions == {("b",)}
    kept, kept_index = tasks.prune(splits, index_files, partitions, schema)
    assert {s.partition_values for s in kept} == {("b",)} and len(kept) < len(splits)
    assert kept_index and {tasks.split_partition(k[0], schema) for k in kept_index} == {("b",)}
    bits = np.zeros(bloom.size_bits(plan.snapshot.total_record_count) // 8, dtype=np.uint8)
    bloom.add(bits, batch, list(schema.primary_keys), schema)
    reader = TableRead(table.io, table.path, schema, tasks.live_key_projection(stage))
    shipped = pa.concat_tables([tasks.live_keys(reader, s, stage, bits) for s in kept])
    ids = set(shipped.column("id").to_pylist())
    assert {3, 5, 7} <= ids and len(ids) < 10, ids  # 100 stored keys in "b"; false positives are rare


def test_a_cross_partition_bootstrap_reads_every_partition(spark, warehouse):
    table = _table(spark, f"{warehouse}/db.db/cross", key=("id",))
    assert not tasks.partition_pruning(table.schema)
    splits, _, index_files = tasks.bucket_state(table, table.plan())
    assert tasks.prune(splits, index_files, None, table.schema) == (splits, index_files)


def test_pruned_bootstraps_keep_each_key_in_one_place(spark, warehouse, execution, monkeypatch):
    read = []
    live_keys = tasks.live_keys
    monkeypatch.setattr(tasks, "live_keys", lambda reader, split, *a, **k: (read.append(split.partition_values),
                                                                            live_keys(reader, split, *a, **k))[1])
    for bucket in ("-1", "2"):
        path = f"{warehouse}/db.db/pruned_{bucket.strip('-')}_{execution}"
        _table(spark, path, bucket)
        read.clear()
        batch = [_row(i, "b", 2) for i in range(90, 110)] + [_row(i, "c", 2) for i in (0, 1)]
        result = upsert(frame(spark, batch), path, primary_keys=["id", "dt"], partition_keys="dt",
                        settings=RunSettings(execution=execution))
        assert (result.inserted, result.updated) == (10, 12)
        if execution == "local":  # the driver-local executor reads splits in this process
            assert set(read) == {("b",), ("c",)}
        expected = {(r["id"], r["dt"]): r for r in [_row(i, dt) for dt in ("a", "b", "c") for i in range(100)]}
        expected.update({(r["id"], r["dt"]): r for r in batch})
        assert all(n == 1 for n in live_places(path).values())
        want = sorted(expected.values(), key=lambda r: (r["id"], r["dt"]))
        assert sorted(spark_rows(spark, path), key=lambda r: (r["id"], r["dt"])) == want
        assert sorted(pypaimon_rows(path), key=lambda r: (r["id"], r["dt"])) == want


def test_date_partitions_are_pruned_alike_on_both_sides(spark, warehouse, execution):
    """The batch's partitions and the splits' are compared as values read back from the binary row,
    so a DATE partition is found, not pruned away."""
    path = f"{warehouse}/db.db/dates_{execution}"
    schema = "id bigint, d date, v bigint"
    days = [datetime.date(2024, 1, 1), datetime.date(2024, 2, 29), datetime.date(1969, 12, 31)]
    first = [{"id": i, "d": d, "v": 0} for d in days for i in range(20)]
    upsert(frame(spark, first, schema), path, primary_keys=["id", "d"], partition_keys="d", options={"bucket": "-1"},
           settings=RunSettings(execution=execution))
    again = [{"id": i, "d": d, "v": 1} for d in days[1:] for i in range(15, 25)]
    result = upsert(frame(spark, again, schema), path, primary_keys=["id", "d"], partition_keys="d",
                    settings=RunSettings(execution=execution))
    assert (result.inserted, result.updated) == (10, 10)
    assert all(n == 1 for n in live_places(path).values())
    rows = {(r["id"], r["d"]): r["v"] for r in spark_rows(spark, path)}
    assert len(rows) == 70 and sum(rows.values()) == 20
