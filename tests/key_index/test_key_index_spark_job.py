"""The key index in the upsert's Spark job: its bootstrap from the index, the bulk load that merges
shards whole, the assigners' runs, the build of a missing index in tasks, and the route and lookup
each task runs (engine/runtime/key_lookup.py, index_build.py)."""

from __future__ import annotations

import pickle
import random

import pyarrow as pa
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.engine.runtime import key_lookup
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.store.table import FileStoreTable

from ..engine.helpers import live_places
from .index_helpers import (
    TUNING,
    assert_index_right,
    index_answer,
    random_rows,
    small_index,  # noqa: F401 (the fixture every test here uses)
    truth,
    upsert_rows,
)


def test_a_bulk_load_by_spark_merges_the_shards_it_touches_whole(spark, table_path):
    """A Spark job adding at least a sixteenth of the index's keys merges each shard it touches
    into one run in its tasks (older runs, its own, tombstones of moved keys dropped, entries of
    buckets another writer made stale dropped); a small one
    leaves the older runs as they are. The index answers like the table either way."""
    rng = random.Random(13)
    upsert_rows(spark, table_path, random_rows(rng, range(0, 200, 2)))
    for step in range(3):  # small driver-local commits: several runs per shard
        upsert_rows(spark, table_path, random_rows(rng, rng.sample(range(0, 200, 2), 4), tag=f"s{step}"))
    # another writer moves keys: their old buckets' entries become invalid (generation bump)
    upsert_rows(spark, table_path, random_rows(rng, range(0, 40, 2), parts="c", tag="m"), index=False,
                execution="distributed")
    before = index_answer(table_path, [])[1]
    assert any(len(runs) > 1 for runs in before.runs)
    # the bulk load: new keys and moves of old ones, by the Spark job
    bulk = random_rows(rng, range(1, 200, 2), tag="b") + random_rows(rng, range(40, 80, 2), parts="a", tag="bm")
    result = upsert_rows(spark, table_path, bulk, execution="distributed")
    assert result.execution == "distributed" and result.bootstrap["source"] == "key index"
    state = assert_index_right(table_path, range(200))
    touched = {s for s, runs in enumerate(state.runs) if runs}
    assert [len(state.runs[s]) for s in sorted(touched)] == [1] * len(touched)
    # a small Spark job after it: one more run per shard it touches, nothing merged whole
    upsert_rows(spark, table_path, random_rows(rng, [1, 3], tag="t"), execution="distributed")
    state = assert_index_right(table_path, range(200))
    assert sorted(len(runs) for runs in state.runs if runs)[-1] == 2
    assert max(live_places(table_path).values()) == 1


@pytest.mark.parametrize("assigners", [2, 3])
def test_the_assigners_of_a_spark_job_record_its_keys_one_run_per_shard(spark, table_path, monkeypatch, assigners):
    """A Spark job's assigners write the commit's runs in the index: each holds its keys' old and
    new places. A key's assigner is its hash mod the assigners and its shard the hash's low bits:
    with 2 assigners each shard's keys meet in one assigner, one run each and no merge task; with
    3, shards get runs from several assigners, merged into one by a Spark task per shard. Either
    way the commit adds one run to each shard it touches, and the index answers as the table."""
    rng = random.Random(21)
    upsert_rows(spark, table_path, random_rows(rng, range(0, 200, 2)))
    before = index_answer(table_path, [])[1]
    merges = []
    merge_task = key_lookup.merge_runs_task
    monkeypatch.setattr(key_lookup, "merge_runs_task", lambda *a, **k: (merges.append(a), merge_task(*a, **k))[1])
    # every key updated, two moved, two new: not a bulk load (full_merge_due: new places for a
    # sixteenth of the keys), which merges whole anyway
    where = truth(table_path)
    rows = [(k, where[k][0][0], f"u{k}") for k in range(4, 200, 2)] + [(k, "d", f"m{k}") for k in (0, 2)] \
        + random_rows(rng, [1, 3])
    result = upsert_rows(spark, table_path, rows, execution="distributed", assigners=assigners)
    assert result.execution == "distributed" and result.bootstrap["source"] == "key index"
    assert before.shards >= 4 and bool(merges) == (assigners == 3)
    state = assert_index_right(table_path, range(200))
    added = [len(state.runs[s]) - len(before.runs[s]) for s in range(state.shards)]
    assert set(added) == {1}, added  # 100 keys in 16 shards: each touched, one run more
    assert max(live_places(table_path).values()) == 1


def test_the_spark_job_builds_a_missing_or_outgrown_index_in_its_tasks(spark, warehouse, monkeypatch):
    """A table without an index (written by runs without it, or by another tool): the Spark job
    builds it in Spark tasks, one run per shard, the driver never reading a key (its own build is
    barred here), then bootstraps from it. The index answers as the table says, and the table
    equals one fed without an index."""
    from dbt_paimon.engine.runtime import index_build

    rng = random.Random(12)
    with_index, without = f"{warehouse}/db.db/a", f"{warehouse}/db.db/b"
    first = random_rows(rng, range(50))
    upsert_rows(spark, with_index, first, index=False)
    upsert_rows(spark, without, first, index=False)
    assert not ki.exists(FileStoreTable.open(with_index).io, with_index)
    built = []  # (shards, runs per shard, keys counted) as each Spark build left the index
    real_build = index_build.build

    def spy(*a):
        state = real_build(*a)
        built.append((state.shards, [len(r) for r in state.runs], sum(b.count for b in state.buckets.values())))
        return state
    monkeypatch.setattr(index_build, "build", spy)

    def driver_build(*a, **k):
        raise AssertionError("the driver read the table's keys")
    monkeypatch.setattr(KeyIndex, "build", driver_build)
    rows = random_rows(rng, rng.sample(range(70), 25), tag="s")
    result = upsert_rows(spark, with_index, rows, execution="distributed")
    upsert_rows(spark, without, rows, index=False, execution="distributed")
    assert result.bootstrap["source"] == "key index" and result.bootstrap["built"] and result.bootstrap["by"] == "spark"
    assert built == [(8, [1] * 8, 50)]  # 50 keys, 8 per shard: one run per shard
    # an index outgrown (over 4x its shards' size) is built again, on Spark too
    for tag, keys in (("g", range(50, 350)), ("h", range(0, 400, 7))):
        rows = random_rows(rng, keys, tag=tag)
        upsert_rows(spark, with_index, rows, execution="distributed")
        upsert_rows(spark, without, rows, index=False, execution="distributed")
    assert built[1:] == [(64, [1] * 64, 350)]
    assert_index_right(with_index, range(400))
    a = FileStoreTable.open(with_index).to_arrow().sort_by("id").to_pylist()
    assert a == FileStoreTable.open(without).to_arrow().sort_by("id").to_pylist()
    assert max(live_places(with_index).values()) == 1


def test_a_route_task_sends_each_batch_row_once_to_the_assigner_of_its_key(spark, table_path):
    """The Spark job's first stage over the batch (key_lookup.route_task), run on Arrow batches in
    chunks of a few rows: every batch row leaves once, packed for the assigner its Paimon key hash
    names (hash mod the assigners, as tasks.assigner_of), with its values as they came."""
    from dbt_paimon.assign.rows import SOURCE, TO, Source, StageRows
    from dbt_paimon.engine.runtime import tasks

    upsert_rows(spark, table_path, random_rows(random.Random(11), range(30)))
    table = FileStoreTable.open(table_path)
    stage = StageRows(table.schema)
    index = KeyIndex(table.io, table.path, table.schema, **TUNING)
    batch = pa.table({"id": pa.array(range(20, 60), pa.int64()), "dt": ["z"] * 40, "v": [f"n{i}" for i in range(40)]})
    routes = [11, 22, 33]
    task = key_lookup.route_task(table.path, table.io, stage, TUNING, routes, chunk_rows=7)
    packed = list(task(iter(batch.to_batches(max_chunksize=3))))
    assert len(packed) > len(routes)  # chunks of 7 rows: several packed values per assigner
    got = {}
    for b in packed:
        route = b.column(TO)[0].as_py()
        for r in tasks.unpack([b]).to_pylist():
            assert r[SOURCE] == Source.BATCH
            got.setdefault(r["id"], []).append((route, r["dt"], r["v"]))
    assigner = tasks.assigner_of(index.hashes(batch), len(routes))
    assert got == {k: [(routes[a], "z", f"n{i}")] for i, (k, a) in enumerate(zip(range(20, 60), assigner))}


@pytest.mark.parametrize("lookup_rows", [1 << 19, 4])
def test_an_assigner_finds_where_each_of_its_keys_lives(spark, table_path, monkeypatch, lookup_rows):
    """What a Spark job's assigner looks up (key_lookup.JobLookup, pickled into the task): for its
    batch rows, a live-key row per key the table has, saying where it lives, and none for a key
    the table does not have; the same looked up a few keys at a time. And the live keys of each
    bucket it owns (b % assigners == its id), counted from the same state."""
    from collections import Counter

    from dbt_paimon.assign.rows import BUCKET, COUNT, SOURCE, Source, StageRows

    monkeypatch.setattr(key_lookup, "LOOKUP_ROWS", lookup_rows)
    rng = random.Random(12)
    upsert_rows(spark, table_path, random_rows(rng, range(30)))
    upsert_rows(spark, table_path, random_rows(rng, range(10, 40), tag="b"))
    table = FileStoreTable.open(table_path)
    stage = StageRows(table.schema)
    state = KeyIndex(table.io, table.path, table.schema, **TUNING).refresh(table.plan())
    job = key_lookup.JobLookup(table.path, table.io, stage, state, TUNING)
    batch = pa.table({"id": pa.array(range(20, 60), pa.int64()), "dt": ["z"] * 40, "v": [f"n{i}" for i in range(40)]})
    live = pickle.loads(pickle.dumps(job)).live_keys(batch)
    assert live.schema == stage.live_key(True)
    assert set(live.column(SOURCE).to_pylist()) == {Source.TABLE}
    want = {k: v for k, v in truth(table_path).items() if k >= 20}
    assert {r["id"]: ((r["dt"],), r[BUCKET]) for r in live.to_pylist()} == want and live.num_rows == len(want)
    per_bucket = Counter(truth(table_path).values())
    counted = {}
    for assigner in range(3):
        counts = job.counts(assigner, 3)
        assert counts.schema == stage.live_key(True) and set(counts.column(SOURCE).to_pylist()) <= {Source.COUNT}
        assert all(r[BUCKET] % 3 == assigner for r in counts.to_pylist())
        counted.update({((r["dt"],), r[BUCKET]): r[COUNT] for r in counts.to_pylist()})
    assert counted == dict(per_bucket) and len(per_bucket) > 3
