"""The table's other modes, chosen as Paimon chooses them: fixed bucket (bucket = N) and dynamic
bucket with the partition inside the key (HASH index). pypaimon must be able to keep writing to
what we wrote and land every key where we put it."""

import pyarrow as pa
import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine.runtime import local
from dbt_paimon.engine import upsert
from dbt_paimon.store.index.index import HashIndexFile, read_hash_index
from dbt_paimon.store.common.key_hash import java_bucket, key_hashes
from dbt_paimon.store.table import FileStoreTable
from dbt_paimon.store.common.types import parse_type
from tests.oracle import pypaimon_table

from .helpers import frame, live_places, pypaimon_rows, spark_rows
from .model import UpsertModel, random_batches

KEY = ["id", "dt"]


@pytest.fixture(params=["distributed", "local", "local, writer threads"])
def execution(request, monkeypatch):
    """Both executors; the driver-local one also with its writer threads, each writing its share of
    whole buckets out of the assigned rows (forced here: a small batch is written in one thread)."""
    if request.param == "local, writer threads":
        monkeypatch.setattr(local, "PARALLEL_WRITE_ROWS", 0)
        return "local"
    return request.param


def _pypaimon_write(path, rows):
    table = pypaimon_table(path)
    arrow = FileStoreTable.open(path).schema.arrow_schema()
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    try:
        write.write_arrow(pa.Table.from_pylist(rows, arrow))
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _by_key(rows):
    return sorted(rows, key=lambda r: (r["id"], r["dt"]))


def _check_all(spark, path, model):
    places = live_places(path)
    assert all(n == 1 for n in places.values()), [k for k, n in places.items() if n > 1][:5]
    expected = _by_key(model.rows.values())
    assert _by_key(spark_rows(spark, path)) == expected
    assert _by_key(pypaimon_rows(path)) == expected


def test_fixed_bucket_rows_land_where_paimon_hashes_them(spark, warehouse, execution):
    path = f"{warehouse}/db.db/fixed"
    model = UpsertModel(KEY, ["dt"])
    batches = random_batches(seed=11, batches=3, size=30, key_space=40)
    for batch in batches[:2]:
        expected = model.apply(batch)
        r = upsert(frame(spark, batch), path, primary_keys=KEY, partition_keys=["dt"], options={"bucket": "3"},
                   settings=RunSettings(execution=execution))
        assert (r.inserted, r.updated, r.moved) == (expected["inserted"], expected["updated"], 0)
    table = FileStoreTable.open(path)
    reader = table.new_read(["id"])
    for split in table.plan().splits:
        ids = reader.read_split(split).column("id")
        want = java_bucket(key_hashes([ids], [parse_type("BIGINT NOT NULL")]), 3)
        assert set(want.tolist()) == {split.bucket}
    _check_all(spark, path, model)
    # pypaimon's writer hashes the same way: its updates replace ours in place
    model.apply(batches[2])
    _pypaimon_write(path, batches[2])
    _check_all(spark, path, model)


def test_dynamic_bucket_keeps_a_hash_index_pypaimon_accepts(spark, store_warehouse, execution):
    path = f"{store_warehouse}/db.db/dyn"
    options = {"dynamic-bucket.target-row-num": "3", "dynamic-bucket.assigner-parallelism": "2"}
    model = UpsertModel(KEY, ["dt"])
    batches = random_batches(seed=12, batches=4, size=30, key_space=40)
    for batch in batches[:3]:
        expected = model.apply(batch)
        r = upsert(frame(spark, batch), path, primary_keys=KEY, partition_keys=["dt"], options=options,
                   settings=RunSettings(execution=execution))
        assert (r.inserted, r.updated) == (expected["inserted"], expected["updated"])
    table = FileStoreTable.open(path)
    assert table.schema.bucket_mode == "HASH_DYNAMIC"
    index = read_hash_index(table.io, path, table.latest_snapshot())
    files = HashIndexFile(table.io, path)
    reader = table.new_read(["id"])
    splits = table.plan().splits
    assert {(s.partition, s.bucket) for s in splits} == set(index)
    assert len({s.bucket for s in splits}) > 2
    for split in splits:
        ids = reader.read_split(split).column("id")
        want = key_hashes([ids], [parse_type("BIGINT NOT NULL")])
        assert sorted(files.read(index[(split.partition, split.bucket)]).tolist()) == sorted(set(want.tolist()))
    _check_all(spark, path, model)
    # pypaimon refuses a dynamic-bucket partition without a complete HASH index; with ours it
    # routes updates of known keys to the buckets we chose
    model.apply(batches[3])
    _pypaimon_write(path, batches[3])
    _check_all(spark, path, model)
