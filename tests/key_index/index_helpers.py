"""What the key index's tests share: small index tuning (so small tables go through every path),
upserts of (id, dt, v) rows into a cross-partition table, and the checks of the index's answer
against the truth read from the table's files split by split (where each key is live)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.engine.runtime import key_lookup
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.store.table import FileStoreTable

OPTIONS = {"bucket": "-1", "dynamic-bucket.target-row-num": "4"}
# Tiny blocks, several shards and few runs per shard, so that small tables go through every path
TUNING = {"block_rows": 4, "fence_rows": 2, "keys_per_shard": 8, "max_runs": 3}


@pytest.fixture(autouse=True)
def small_index(monkeypatch):
    monkeypatch.setattr(key_lookup, "INDEX_TUNING", TUNING)


def upsert_rows(spark, path, rows, *, index=True, execution="local", assigners=None):
    df = spark.createDataFrame(rows, "id bigint, dt string, v string")
    return upsert(df, path, primary_keys="id", partition_keys="dt", options=dict(OPTIONS),
                  settings=RunSettings(execution=execution, key_index=index, assigner_parallelism=assigners))


def truth(path) -> dict:
    """key -> (partition values, bucket) where it is live, read from the data files."""
    table = FileStoreTable.open(path)
    reader = table.new_read(["id"])
    where = {}
    for split in table.plan().splits:
        for row in reader.read_split(split).to_pylist():
            assert row["id"] not in where, f"key {row['id']} live twice"
            where[row["id"]] = (split.partition_values, split.bucket)
    return where


def index_answer(path, keys) -> dict:
    """What the index (caught up to the latest snapshot) says of `keys`."""
    table = FileStoreTable.open(path)
    index = KeyIndex(table.io, table.path, table.schema, **TUNING)
    state = index.refresh(table.plan())
    found = index.lookup(state, pa.table({"id": pa.array(keys, pa.int64())}))
    return {r["id"]: ((r["dt"],), r["_bucket"]) for r in found.to_pylist()}, state


def assert_index_right(path, keys=range(0, 60)):
    want, asked = truth(path), set(keys)
    got, state = index_answer(path, list(keys))
    assert got == {k: v for k, v in want.items() if k in asked}
    counts = {(p, b): s.count for (p, b), s in state.buckets.items()}
    table = FileStoreTable.open(path)
    reader = table.new_read(["id"])
    live = {(split.partition, split.bucket): reader.read_split(split).num_rows for split in table.plan().splits}
    assert {k: v for k, v in counts.items() if v} == {k: v for k, v in live.items() if v}
    # one run per shard per commit (a Spark job's assigners' runs of a shard are merged)
    assert all(len({seq for seq, _ in runs}) == len(runs) for runs in state.runs), state.runs
    return state


def random_rows(rng, keys, parts="abc", tag="x"):
    return [(k, rng.choice(parts), f"{tag}{k}") for k in keys]


