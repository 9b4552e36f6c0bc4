"""The key index of cross-partition tables (dbt_paimon/key_index/, engine/runtime/key_lookup.py), issue 14.

Every check compares the index's answer with the truth read from the table's files split by split
(where each key is live), after our upserts on both executors, after writers that do not keep the
index (a run with key_index off: "another writer" as far as the index knows), deletes, compactions,
rollbacks and expirations, and after damage to the index's own files.
"""

from __future__ import annotations

import os
import pickle
import random
import time

import pyarrow as pa
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.engine import compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.engine.runtime import key_lookup
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.key_index import build as ki_build
from dbt_paimon.key_index import layout as ki_layout
from dbt_paimon.key_index import lookup as ki_lookup
from dbt_paimon.key_index.merge_policy import merge_shard
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.table import FileStoreTable

from ..engine.helpers import live_places

OPTIONS = {"bucket": "-1", "dynamic-bucket.target-row-num": "4"}
# Tiny blocks, several shards and few runs per shard, so that small tables go through every path
TUNING = {"block_rows": 4, "fence_rows": 2, "keys_per_shard": 8, "max_runs": 3}


@pytest.fixture(autouse=True)
def small_index(monkeypatch):
    monkeypatch.setattr(key_lookup, "INDEX_TUNING", TUNING)


def _upsert(spark, path, rows, *, index=True, execution="local", assigners=None):
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
    want = truth(path)
    got, state = index_answer(path, list(keys))
    assert got == {k: v for k, v in want.items() if k in set(keys)}
    counts = {(p, b): s.count for (p, b), s in state.buckets.items()}
    live = {}
    table = FileStoreTable.open(path)
    for split in table.plan().splits:
        live[(split.partition, split.bucket)] = table.new_read(["id"]).read_split(split).num_rows
    assert {k: v for k, v in counts.items() if v} == {k: v for k, v in live.items() if v}
    # one run per shard per commit (a Spark job's assigners' runs of a shard are merged)
    assert all(len({seq for seq, _ in runs}) == len(runs) for runs in state.runs), state.runs
    return state


def _rows(rng, keys, parts="abc", tag="x"):
    return [(k, rng.choice(parts), f"{tag}{k}") for k in keys]


@pytest.mark.parametrize("threaded", [False, True], ids=["small batch: one writer", "writer threads"])
def test_lookups_match_the_table_after_our_upserts_with_moves(spark, table_path, threaded, monkeypatch):
    """A small batch is written in the driver's thread, a big one by writer threads beside the
    thread writing the index's runs (here forced by the threshold)."""
    from dbt_paimon.engine.runtime import local
    if threaded:
        monkeypatch.setattr(local, "PARALLEL_WRITE_ROWS", 0)
    rng = random.Random(1)
    _upsert(spark, table_path, _rows(rng, range(40)))
    for step in range(4):
        result = _upsert(spark, table_path, _rows(rng, rng.sample(range(55), 15), tag=f"s{step}"))
        assert "key index" in result.plan and ("writer threads" in result.plan) == threaded
        assert_index_right(table_path)
    assert os.path.isdir(ki.index_dir(table_path))
    assert max(live_places(table_path).values()) == 1


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "first-row"])
@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_each_merge_engines_moves_are_counted_where_they_land(spark, table_path, engine, execution):
    """A key written where it lived is not new to its bucket; a moved key is new where it lands
    (deduplicate: its new partition), stays (partial-update: its old partition takes the row) or
    is skipped (first-row): every bucket's count in the index is its live keys after each step."""
    rng = random.Random(11)
    options = {**OPTIONS, "merge-engine": engine}
    for step in range(4):
        keys = range(30) if step == 0 else rng.sample(range(40), 15)
        df = spark.createDataFrame(_rows(rng, keys, tag=f"e{step}"), "id bigint, dt string, v string")
        result = upsert(df, table_path, primary_keys="id", partition_keys="dt", options=dict(options),
                        settings=RunSettings(execution="local" if step == 0 else execution))
        assert step == 0 or result.bootstrap["source"] == "key index"
        state = assert_index_right(table_path, range(40))
        assert step == 0 or (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
    assert max(live_places(table_path).values()) == 1


def test_a_writer_that_does_not_keep_the_index_is_caught_up_from_its_files(spark, table_path):
    rng = random.Random(2)
    _upsert(spark, table_path, _rows(rng, range(30)))
    # new keys only, by a writer that skips the index: their buckets gain files without deletes
    _upsert(spark, table_path, _rows(rng, range(30, 38)), index=False)
    state = assert_index_right(table_path)
    assert state.stats["buckets_read_again"] == 0 and state.stats["buckets_added_to"] > 0
    # moves by a Spark job that skips the index: -D rows in the old buckets, which are read again
    _upsert(spark, table_path, _rows(rng, range(0, 30, 3), parts="c", tag="m"), index=False, execution="distributed")
    state = assert_index_right(table_path)
    assert state.stats["buckets_read_again"] > 0
    # and our next upsert through the index agrees with a run without it
    rows = _rows(rng, rng.sample(range(45), 20), tag="z")
    _upsert(spark, table_path, rows)
    assert_index_right(table_path)


def test_deletes_compactions_rollbacks_and_expirations_between_upserts(spark, table_path):
    rng = random.Random(3)
    _upsert(spark, table_path, _rows(rng, range(40)))
    _upsert(spark, table_path, _rows(rng, range(20, 50), tag="b"))
    keep = FileStoreTable.open(table_path).latest_snapshot().id
    delete(spark, table_path, "id % 4 = 0")
    assert_index_right(table_path)
    compact(spark, table_path)
    assert_index_right(table_path)
    _upsert(spark, table_path, _rows(rng, range(0, 50, 2), tag="c"))
    assert_index_right(table_path)
    FileStoreTable.open(table_path).rollback_to(keep)  # the index reflects files that are gone now
    assert_index_right(table_path)
    _upsert(spark, table_path, _rows(rng, range(10, 30), tag="d"))
    assert_index_right(table_path)
    FileStoreTable.open(table_path).expire_snapshots(retain_max=1, retain_min=1)
    _upsert(spark, table_path, _rows(rng, range(25, 55), tag="e"))
    assert_index_right(table_path)


def test_a_build_in_the_driver_leaves_one_run_per_shard(spark, table_path, monkeypatch):
    """A build flushes its entries as runs every BUILD_FLUSH_ROWS keys (its memory bound), then
    merges each shard to one run, as a Spark build leaves it: the next lookups read a page per
    key in one run, not in each flush's."""
    rng = random.Random(12)
    _upsert(spark, table_path, _rows(rng, range(60)), index=False)
    monkeypatch.setattr(ki_build, "BUILD_FLUSH_ROWS", 7)
    table = FileStoreTable.open(table_path)
    flushes = []
    add_runs = ki_build.add_runs
    monkeypatch.setattr(ki_build, "add_runs", lambda files, state, entries, max_runs: (
        flushes.append(entries.num_rows if entries is not None else 0), add_runs(files, state, entries, max_runs))[1])
    state = KeyIndex(table.io, table.path, table.schema, **TUNING).build(table.plan())
    assert len([n for n in flushes if n]) >= 5 and state.shards == 8
    assert [len(runs) for runs in state.runs] == [1] * 8
    assert_index_right(table_path)


@pytest.mark.parametrize("damage", ["no pointer", "garbage manifest", "missing run", "truncated run"])
def test_a_damaged_index_is_rebuilt_and_the_upsert_is_right(spark, table_path, damage):
    rng = random.Random(4)
    _upsert(spark, table_path, _rows(rng, range(30)))
    _upsert(spark, table_path, _rows(rng, range(10, 40), tag="b"))
    d = ki.index_dir(table_path)
    runs = sorted(n for n in os.listdir(d) if n.startswith("run-"))
    if damage == "no pointer":
        os.remove(os.path.join(d, ki.LATEST))
    elif damage == "garbage manifest":
        name = next(n for n in os.listdir(d)
                    if n.startswith("manifest-") and n in open(os.path.join(d, ki.LATEST)).read())
        with open(os.path.join(d, name), "w") as f:
            f.write("{not json")
    elif damage == "missing run":
        os.remove(os.path.join(d, runs[-1]))
    else:
        with open(os.path.join(d, runs[-1]), "r+b") as f:
            f.truncate(20)
    _upsert(spark, table_path, _rows(rng, range(0, 40, 2), parts="c", tag="c"))
    assert max(live_places(table_path).values()) == 1
    assert_index_right(table_path)


def test_the_index_answers_like_the_full_bootstrap_for_random_batches(spark, warehouse):
    """Two tables fed the same batches, one through the index, one without it: same rows."""
    rng = random.Random(5)
    with_index, without = f"{warehouse}/db.db/a", f"{warehouse}/db.db/b"
    for step in range(6):
        rows = _rows(rng, rng.sample(range(80), 25), tag=f"s{step}")
        _upsert(spark, with_index, rows)
        _upsert(spark, without, rows, index=False)
        a = FileStoreTable.open(with_index).to_arrow().sort_by("id").to_pylist()
        b = FileStoreTable.open(without).to_arrow().sort_by("id").to_pylist()
        assert a == b
    assert_index_right(with_index, range(80))


@pytest.mark.parametrize("executions", [["distributed"] * 4, ["distributed", "local", "distributed", "local"]])
def test_the_spark_job_bootstraps_from_the_index_and_records_its_commit(spark, warehouse, executions):
    """The Spark job looks its keys up in the index (no bootstrap read of the table) and records
    its commit: the next refresh has nothing to catch up. Same rows as a table fed without it."""
    rng = random.Random(9)
    with_index, without = f"{warehouse}/db.db/a", f"{warehouse}/db.db/b"
    first = _rows(rng, range(40))
    _upsert(spark, with_index, first)  # driver-local: builds the index
    _upsert(spark, without, first, index=False)
    for step, execution in enumerate(executions):
        rows = _rows(rng, rng.sample(range(60), 20), tag=f"d{step}")
        result = _upsert(spark, with_index, rows, execution=execution)
        _upsert(spark, without, rows, index=False, execution=execution)
        assert result.execution == execution and result.bootstrap["source"] == "key index"
        state = assert_index_right(with_index, range(60))
        assert (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
        a = FileStoreTable.open(with_index).to_arrow().sort_by("id").to_pylist()
        b = FileStoreTable.open(without).to_arrow().sort_by("id").to_pylist()
        assert a == b
    assert max(live_places(with_index).values()) == 1


def test_a_bulk_load_by_spark_merges_the_shards_it_touches_whole(spark, table_path):
    """A Spark job adding at least a sixteenth of the index's keys merges each shard it touches
    into one run in its tasks (older runs, its own, tombstones of moved keys dropped, entries of
    buckets another writer made stale dropped); a small one
    leaves the older runs as they are. The index answers like the table either way."""
    rng = random.Random(13)
    _upsert(spark, table_path, _rows(rng, range(0, 200, 2)))
    for step in range(3):  # small driver-local commits: several runs per shard
        _upsert(spark, table_path, _rows(rng, rng.sample(range(0, 200, 2), 4), tag=f"s{step}"))
    # another writer moves keys: their old buckets' entries become invalid (generation bump)
    _upsert(spark, table_path, _rows(rng, range(0, 40, 2), parts="c", tag="m"), index=False, execution="distributed")
    before = index_answer(table_path, [])[1]
    assert any(len(runs) > 1 for runs in before.runs)
    # the bulk load: new keys and moves of old ones, by the Spark job
    bulk = _rows(rng, range(1, 200, 2), tag="b") + _rows(rng, range(40, 80, 2), parts="a", tag="bm")
    result = _upsert(spark, table_path, bulk, execution="distributed")
    assert result.execution == "distributed" and result.bootstrap["source"] == "key index"
    state = assert_index_right(table_path, range(200))
    touched = {s for s, runs in enumerate(state.runs) if runs}
    assert [len(state.runs[s]) for s in sorted(touched)] == [1] * len(touched)
    # a small Spark job after it: one more run per shard it touches, nothing merged whole
    _upsert(spark, table_path, _rows(rng, [1, 3], tag="t"), execution="distributed")
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
    _upsert(spark, table_path, _rows(rng, range(0, 200, 2)))
    before = index_answer(table_path, [])[1]
    merges = []
    merge_task = key_lookup.merge_runs_task
    monkeypatch.setattr(key_lookup, "merge_runs_task", lambda *a, **k: (merges.append(a), merge_task(*a, **k))[1])
    # every key updated, two moved, two new: not a bulk load (full_merge_due: new places for a
    # sixteenth of the keys), which merges whole anyway
    where = truth(table_path)
    rows = [(k, where[k][0][0], f"u{k}") for k in range(4, 200, 2)] + [(k, "d", f"m{k}") for k in (0, 2)] \
        + _rows(rng, [1, 3])
    result = _upsert(spark, table_path, rows, execution="distributed", assigners=assigners)
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
    first = _rows(rng, range(50))
    _upsert(spark, with_index, first, index=False)
    _upsert(spark, without, first, index=False)
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
    rows = _rows(rng, rng.sample(range(70), 25), tag="s")
    result = _upsert(spark, with_index, rows, execution="distributed")
    _upsert(spark, without, rows, index=False, execution="distributed")
    assert result.bootstrap["source"] == "key index" and result.bootstrap["built"] and result.bootstrap["by"] == "spark"
    assert built == [(8, [1] * 8, 50)]  # 50 keys, 8 per shard: one run per shard
    # an index outgrown (over 4x its shards' size) is built again, on Spark too
    for tag, keys in (("g", range(50, 350)), ("h", range(0, 400, 7))):
        rows = _rows(rng, keys, tag=tag)
        _upsert(spark, with_index, rows, execution="distributed")
        _upsert(spark, without, rows, index=False, execution="distributed")
    assert built[1:] == [(64, [1] * 64, 350)]
    assert_index_right(with_index, range(400))
    a = FileStoreTable.open(with_index).to_arrow().sort_by("id").to_pylist()
    assert a == FileStoreTable.open(without).to_arrow().sort_by("id").to_pylist()
    assert max(live_places(with_index).values()) == 1


def test_the_index_stays_out_of_pypaimons_way(spark, table_path):
    """Paimon's readers never see the index: it lives beside the table, not inside it."""
    from tests.oracle import pypaimon_read
    rng = random.Random(6)
    _upsert(spark, table_path, _rows(rng, range(20)))
    _upsert(spark, table_path, _rows(rng, range(10, 30), tag="b"))
    assert not any(".dbt-key-index" in n for n in os.listdir(table_path))
    assert sorted(pypaimon_read(table_path).column("id").to_pylist()) == list(range(30))


def test_the_index_on_an_object_store(spark, s3_warehouse):
    """On S3 (no memory map: runs are fetched whole) the index lives beside the table too, is
    caught up after another writer and answers right."""
    path = f"{s3_warehouse}/db.db/t"
    rng = random.Random(9)
    _upsert(spark, path, _rows(rng, range(30)))
    _upsert(spark, path, _rows(rng, range(20, 45), tag="o"), index=False)  # moves: buckets read again
    result = _upsert(spark, path, _rows(rng, rng.sample(range(50), 15), tag="b"))
    assert result.bootstrap["source"] == "key index" and result.bootstrap["bytes"] > 0
    table = FileStoreTable.open(path)
    assert table.io.exists(f"{ki.index_dir(path)}/{ki.LATEST}")
    assert_index_right(path, range(50))


def test_orphan_file_removal_leaves_the_index_alone(spark, table_path):
    """The index is not the table's: Paimon's orphan-file removal (ours here) never lists it."""
    rng = random.Random(10)
    _upsert(spark, table_path, _rows(rng, range(20)))
    _upsert(spark, table_path, _rows(rng, range(10, 30), tag="b"))
    d = ki.index_dir(table_path)
    before = sorted(os.listdir(d))
    FileStoreTable.open(table_path).remove_orphan_files(older_than="0 s")
    assert sorted(os.listdir(d)) == before
    assert_index_right(table_path)


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_an_upserts_record_sweeps_aged_orphans_after_it_returns(spark, table_path, execution):
    """The record's clean runs in the background (KeyIndex.sweep): after the upsert and the sweep,
    a run no version names that is older than ORPHAN_AGE_MS is gone (a crashed writer's), a fresh
    one stays (a concurrent writer's, not yet committed), and every file the current version
    names is there."""
    rng = random.Random(13)
    _upsert(spark, table_path, _rows(rng, range(20)))
    ki.join_sweeps(60)  # the first upsert's sweep is done: only the second one can delete the orphan
    d = ki.index_dir(table_path)
    aged, fresh = f"{d}/run-99999998-0123456789ab.arrow", f"{d}/run-99999999-0123456789ab.arrow"
    for path in (aged, fresh):
        with open(path, "wb") as f:
            f.write(b"left by a writer that did not commit")
    hours_ago = time.time() - 2 * ki.ORPHAN_AGE_MS / 1000
    os.utime(aged, (hours_ago, hours_ago))
    _upsert(spark, table_path, _rows(rng, range(10, 30), tag="b"), execution=execution)
    ki.join_sweeps(60)
    names = set(os.listdir(d))
    assert os.path.basename(aged) not in names and os.path.basename(fresh) in names
    table = FileStoreTable.open(table_path)
    current = KeyIndex(table.io, table.path, table.schema, **TUNING).load()
    assert {current.manifest} | current.run_names() <= names
    assert_index_right(table_path, range(30))


def test_a_version_a_reader_loaded_keeps_its_files_for_the_orphan_age_after_it_is_replaced(spark, table_path):
    """A table idle for hours, then upserts whose records merge runs away and replace the manifest:
    a reader that loaded the version before them still finds its manifest and runs (their files
    were written hours ago, but retired only now), and gets the same answer; they go once retired
    for ORPHAN_AGE_MS, at the first clean after that, and not before."""
    rng = random.Random(12)
    for i in range(3):
        _upsert(spark, table_path, _rows(rng, range(i * 10, i * 10 + 20), tag=f"r{i}"))
    d = ki.index_dir(table_path)
    hours_ago = os.path.getmtime(d) - 3 * 3600
    for name in os.listdir(d):
        os.utime(f"{d}/{name}", (hours_ago, hours_ago))
    table = FileStoreTable.open(table_path)
    reader = KeyIndex(table.io, table.path, table.schema, **TUNING)
    held = reader.load()
    keys = pa.table({"id": pa.array(range(40), pa.int64())})
    before = reader.lookup(held, keys).sort_by("id")
    held_files = {held.manifest} | held.run_names()
    for i in range(4):  # enough commits (max_runs 3) that every shard's older runs are merged away
        _upsert(spark, table_path, _rows(rng, rng.sample(range(40), 12), tag=f"w{i}"))
    table = FileStoreTable.open(table_path)
    writer = KeyIndex(table.io, table.path, table.schema, **TUNING)
    current = writer.load()
    gone_from_current = held_files - current.run_names() - {current.manifest}
    assert held.manifest in gone_from_current and gone_from_current & held.run_names()
    assert gone_from_current <= set(os.listdir(d))  # retired moments ago: kept
    assert reader.lookup(held, keys).sort_by("id").equals(before)
    now_ms = int(time.time() * 1000)
    assert writer.clean(current, now_ms + ki.ORPHAN_AGE_MS - 60_000) == 0
    assert gone_from_current <= set(os.listdir(d))
    assert writer.clean(current, now_ms + ki.ORPHAN_AGE_MS + 1000) >= len(gone_from_current)
    assert not gone_from_current & set(os.listdir(d))
    assert {current.manifest} | current.run_names() <= set(os.listdir(d))
    assert_index_right(table_path, range(40))


def test_a_commit_into_the_null_partition_is_recorded_without_a_catch_up(spark, table_path):
    rng = random.Random(11)
    _upsert(spark, table_path, _rows(rng, range(10)))
    _upsert(spark, table_path, [(3, None, "n"), (20, None, "m"), (21, "a", "x")])  # 3 moves into dt = NULL
    table = FileStoreTable.open(table_path)
    state = KeyIndex(table.io, table.path, table.schema, **TUNING).refresh(table.plan())
    assert state.stats["buckets_read_again"] == 0 and state.stats["buckets_added_to"] == 0  # recorded, not caught up
    got, _ = index_answer(table_path, [3, 20, 21])
    assert got[3][0] == (None,) and got[20][0] == (None,) and got[21][0] == ("a",)
    assert_index_right(table_path)


def _keys_sharing_a_hash(index: KeyIndex) -> tuple[int, int]:
    """Two keys with the same 32-bit index hash (about 10 such pairs among 300K random keys; small
    consecutive integers happen to hash apart)."""
    import numpy as np

    ids = np.unique(np.random.default_rng(7).integers(0, 1 << 62, 300_000, dtype=np.int64))
    hashes = index.hashes(pa.table({"id": pa.array(ids)}))
    order = np.argsort(hashes, kind="stable")
    same = np.flatnonzero(hashes[order][1:] == hashes[order][:-1])
    assert len(same), "no two keys share a hash among 300K: draw more"
    return int(ids[order[same[0]]]), int(ids[order[same[0] + 1]])


def test_a_key_sharing_a_hash_with_a_live_key_is_not_taken_for_it(spark, table_path):
    """A lookup matches hashes first: a batch key whose hash is a live key's must still not be
    located there, whether it comes alone (keys compared in place) or with that key (joined)."""
    _upsert(spark, table_path, [(0, "2024-01-01", "seed")])
    table = FileStoreTable.open(table_path)
    live, other = _keys_sharing_a_hash(KeyIndex(table.io, table.path, table.schema))
    _upsert(spark, table_path, [(live, "2024-01-02", "live")])
    for keys, expected in (([other], set()), ([live], {live}), ([other, live], {live}), ([live, live], {live})):
        found, _ = index_answer(table_path, keys)
        assert set(found) == expected, keys
        assert all(where == (("2024-01-02",), found[live][1]) for where in found.values())
    assert _upsert(spark, table_path, [(other, "2024-01-03", "other")]).bootstrap["source"] == "key index"
    assert set(truth(table_path)) == {0, live, other}


def _as_fixed_step_run(index, name):
    """Rewrite a run as formats 3-5 laid it out: a fence on every fence_rows-th entry of each
    record batch from its first, no `fence_firsts`."""
    import numpy as np

    reader = pa.ipc.open_file(pa.py_buffer(index.io.read_bytes(f"{index.dir}/{name}")))  # not mapped: rewritten
    batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
    meta = dict(reader.schema.metadata)
    step = int(meta.pop(b"fence_rows"))
    del meta[b"fence_firsts"]
    meta[b"fence_rows"] = str(step).encode()
    meta[b"fences"] = np.concatenate([b.column(0).to_numpy()[::step] for b in batches]).astype(np.int32).tobytes()
    with index.io.output(f"{index.dir}/{name}") as out, pa.ipc.new_file(out, reader.schema.with_metadata(meta)) as w:
        for b in batches:
            w.write_batch(b)


@pytest.mark.parametrize("layout", ["page-aligned", "fixed-step"])
@pytest.mark.parametrize("block_rows, fence_rows", [(1 << 20, 1024), (64, 1), (64, 3), (50, 7), (7, 64)])
def test_a_lookup_finds_every_entry_of_its_hashes_from_the_fences(spark, table_path, block_rows, fence_rows, layout):
    """A run's lookup reads the pages its fences point at, not the run: for hashes drawn to sit on
    fences, between them, before and after every entry and shared by many entries across fences
    and record batches, it returns exactly the entries a scan of the run would; in the layout
    runs have now (fences where the hashes cross a page) and in the one of formats 3-5."""
    import numpy as np

    _upsert(spark, table_path, [(0, "2024-01-01", "seed")])
    table = FileStoreTable.open(table_path)
    index = KeyIndex(table.io, table.path, table.schema, block_rows=block_rows, fence_rows=fence_rows)
    rng = np.random.default_rng(fence_rows)
    n = 3000
    # few distinct hashes, some repeated hundreds of times (more than a fence, more than a batch)
    hashes = np.sort(np.concatenate([rng.integers(-50, 50, n - 400), np.full(400, 7)]).astype(np.int32))
    entries = pa.table({ki.H: hashes, "id": np.arange(n, dtype=np.int64), "dt": ["2024-01-01"] * n,
                        ki.P: [binary_row.serialize(["2024-01-01"], table.schema.partition_types)] * n,
                        ki.BUCKET: np.zeros(n, np.int32), ki.GEN: np.ones(n, np.int32),
                        ki.LIVE: np.ones(n, bool)})
    _, name = index.files.write_run(None, entries, seq=5)
    if layout == "fixed-step":
        _as_fixed_step_run(index, name)
    for wanted in (np.array([7], np.int32), np.arange(-60, 60, dtype=np.int32),
                   np.unique(rng.integers(-55, 55, 20)).astype(np.int32), np.array([-1000, 1000], np.int32)):
        found = ki_lookup._candidates(index.files, [(5, name, wanted)])
        got = sorted(i for t in found for i in t.column("id").to_pylist())
        assert got == sorted(np.flatnonzero(np.isin(hashes, wanted)).tolist()), wanted
        assert all(set(t.column(ki.SEQ).to_pylist()) == {5} for t in found)


def test_a_keys_window_of_hashes_is_one_page(spark, table_path):
    """In a run's file the fences sit where its hashes cross a page boundary (format 6), so that
    a lookup reads one page of hashes per key and run, not two a quarter of the time: every window
    the fences give lies on one page, in each of the run's record batches."""
    import mmap

    import numpy as np

    _upsert(spark, table_path, [(0, "2024-01-01", "seed")])
    table = FileStoreTable.open(table_path)
    index = KeyIndex(table.io, table.path, table.schema, block_rows=40_000)
    n = 100_000
    hashes = np.sort(np.random.default_rng(3).choice(np.arange(-2**31, 2**31 - 1, 9973), n,
                                                     replace=False)).astype(np.int32)
    entries = pa.table({ki.H: hashes, "id": np.arange(n, dtype=np.int64), "dt": ["2024-01-01"] * n,
                        ki.P: [binary_row.serialize(["2024-01-01"], table.schema.partition_types)] * n,
                        ki.BUCKET: np.zeros(n, np.int32), ki.GEN: np.ones(n, np.int32), ki.LIVE: np.ones(n, bool)})
    _, name = index.files.write_run(None, entries, seq=1)
    reader, mapped = index.files.open_run(name, random_access=True)
    base = pa.py_buffer(mapped).address
    wanted = hashes + 1  # none on a fence: each is strictly inside a window
    windows = ki_lookup._windows(reader, wanted)
    assert len(windows) == 3
    for batch, lo, hi in windows:
        h = batch.column(0).to_numpy()
        own = (wanted > h[0]) & (wanted < h[-1])  # those of this batch's entries
        assert own.sum() == batch.num_rows - 1 and (hi > lo)[own].all()
        at = batch.column(0).buffers()[1].address - base
        some = hi > lo
        assert (hi - lo <= ki.FENCE_ROWS).all()
        assert ((at + 4 * lo[some]) // mmap.PAGESIZE == (at + 4 * hi[some] - 1) // mmap.PAGESIZE).all()


@pytest.mark.parametrize("max_runs, rewrites", [(3, 300), (6, 12)])
def test_a_shard_merges_small_runs_with_their_peers_not_with_its_big_run(max_runs, rewrites):
    """A shard built with a big run, then one small run per commit: after every merge it holds at
    most max_runs runs; the big run is rewritten only once the newer runs reach half its size;
    each entry is rewritten a bounded number of times (the old rule, "all but the oldest run",
    rewrote each ~750 (3 runs) and ~300 (6 runs) times over these 3,000 commits)."""
    big, runs, rewritten, big_merges = 100_000, [100_000], 0, []
    for commit in range(100_000):
        runs.insert(0, 1)
        if len(runs) > max_runs:
            take = ki.merge_count(runs, max_runs)
            assert take >= 2
            if take == len(runs):
                big_merges.append((commit, sum(runs[:-1]), runs[-1]))
            if commit < 3_000:
                rewritten += sum(runs[:take])
            runs = [sum(runs[:take])] + runs[take:]
        assert len(runs) <= max_runs
    assert rewritten <= 3_000 * rewrites
    assert big_merges and all(newer * 2 >= oldest for _, newer, oldest in big_merges)
    assert big_merges[0][0] >= big // 2 - 1


@pytest.mark.parametrize("whole", [False, True])
def test_a_merge_keeps_each_keys_newest_entry_only(spark, table_path, whole):
    """Runs merged into one keep, per key, only its newest entry (a live one before a tombstone of
    the same seq): a key that moved keeps its new place, a deleted one stays deleted, and no
    older live entry survives beside them to be taken for the key later."""
    _upsert(spark, table_path, [(0, "a", "seed")])
    table = FileStoreTable.open(table_path)
    index = KeyIndex(table.io, table.path, table.schema, **TUNING)
    part = {p: binary_row.serialize([p], table.schema.partition_types) for p in "abc"}
    state = ki.IndexState(1, [[]], {(part[p], 0): ki.BucketState(frozenset(), 1, 0) for p in "abc"}, next_seq=10)

    def run(seq, rows):  # rows: (key, partition, live) -> the run (seq, name)
        ids = pa.array([k for k, _, _ in rows], pa.int64())
        entries = pa.table({ki.H: pa.array(index.hashes(pa.table({"id": ids})), pa.int32()), "id": ids,
                            "dt": [p for _, p, _ in rows], ki.P: [part[p] for _, p, _ in rows],
                            ki.BUCKET: pa.array([0] * len(rows), pa.int32()),
                            ki.GEN: pa.array([1] * len(rows), pa.int32()), ki.LIVE: [live for _, _, live in rows]})
        return index.files.write_run(None, entries.cast(index.entry_schema), seq)

    oldest = run(1, [(7, "a", True), (8, "a", True), (9, "a", True)])
    middle = run(2, [(7, "a", False), (7, "b", True), (8, "a", False)])   # 7 moved to b, 8 deleted
    newest = run(3, [(7, "b", False), (7, "c", True), (10, "c", True)])   # 7 moved again, 10 new
    state.runs = [[newest, middle, oldest] if whole else [newest, middle, oldest, run(0, [(11, "a", True)])]]
    merge_shard(index.files, state, 0, index.max_runs, 3)
    assert len(state.runs[0]) == (1 if whole else 2)
    merged = index.files.read_run(state.runs[0][0][1])
    assert sorted(merged.column("id").to_pylist()) == ([7, 9, 10] if whole else [7, 8, 9, 10])
    found = index.lookup(state, pa.table({"id": pa.array([7, 8, 9, 10], pa.int64())}))
    assert {r["id"]: r["dt"] for r in found.to_pylist()} == {7: "c", 9: "a", 10: "c"}


KEY_KINDS = {
    # key columns (Spark SQL) -> whether they ride in _loc
    "int, date, timestamp, decimal": ("k1 int, k2 date, k3 timestamp, k4 decimal(10,2)", True),
    "tinyint": ("k1 tinyint", True),
    "bigint, string": ("k1 bigint, k2 string", False),
}


def _key_rows(rng, kind, keys, tag):
    """Rows (key columns..., dt, v) whose key is derived from the int k: distinct k, distinct key."""
    import datetime as dt
    from decimal import Decimal

    def key(k):
        if kind == "tinyint":
            return (k - 60,)
        if kind == "bigint, string":
            return (k * 1_000_003, f"s{k % 7}-{k}")
        return (k - 30, dt.date(2024, 1, 1) + dt.timedelta(days=k), dt.datetime(2024, 1, 1, 0, 0, k % 60, k),
                Decimal(k) / 4)
    return [key(k) + (rng.choice("abc"), f"{tag}{k}") for k in keys]


@pytest.mark.parametrize("kind", list(KEY_KINDS))
@pytest.mark.parametrize("old_layout_first", [False, True])
def test_fixed_width_keys_ride_in_the_location_column(spark, table_path, kind, old_layout_first, monkeypatch):
    """A key of fixed-width columns is stored inside _loc (one page per key a lookup finds); other
    keys keep their columns. An index whose first runs have the key columns (format 4, or
    `old_layout_first`) is read and merged with the new runs and answers like the table."""
    columns, inline = KEY_KINDS[kind]
    names = [c.split()[0] for c in columns.split(", ")]
    rng = random.Random(len(kind))

    def up(keys, tag):
        df = spark.createDataFrame(_key_rows(rng, kind, keys, tag), f"{columns}, dt string, v string")
        return upsert(df, table_path, primary_keys=names, partition_keys="dt", options=dict(OPTIONS),
                      settings=RunSettings(execution="local", key_index=True))

    if old_layout_first:
        with monkeypatch.context() as m:
            m.setattr(ki_layout, "_key_words", lambda types: None)
            up(range(40), "a")
            up(range(20, 45), "b")
    def layouts():  # per run of the index: whether its key rides in _loc
        table = FileStoreTable.open(table_path)
        index = KeyIndex(table.io, table.path, table.schema, **TUNING)
        state = index.refresh(table.plan())
        return index, state, {all(k not in index.files.open_run(n)[0].schema.names for k in names)
                              for shard in state.runs for _, n in shard}

    for step in range(4):
        result = up(rng.sample(range(60), 20), f"s{step}")
        assert result.bootstrap["source"] == "key index"
        if step == 0:  # old runs beside the first new ones
            assert layouts()[2] == ({False, True} if old_layout_first and inline else {inline})
    index, state, _ = layouts()
    table = FileStoreTable.open(table_path)
    # the index's answer for every key, live or not, is where the table has it
    want = {}
    reader = table.new_read(names)
    for split in table.plan().splits:
        for row in reader.read_split(split).to_pylist():
            want[tuple(row[k] for k in names)] = (split.partition_values, split.bucket)
    probe = spark.createDataFrame(_key_rows(rng, kind, range(70), "p"), f"{columns}, dt string, v string")
    raw = pa.Table.from_pandas(probe.select(*names).toPandas(), preserve_index=False)
    keys = raw.cast(pa.schema([index.entry_schema.field(k) for k in names]))
    found = index.lookup(state, keys)
    got = {tuple(r[k] for k in names): ((r["dt"],), r["_bucket"]) for r in found.to_pylist()}
    assert got == want
    # given the keys' hashes (a caller that has them), the same answer
    assert index.lookup(state, keys, index.hashes(keys)).equals(found)
    if raw.schema.types != keys.schema.types:  # keys cast to the index's types are hashed again
        assert index.lookup(state, raw, index.hashes(raw) * 0).equals(found)
    assert max(live_places(table_path).values()) == 1


def test_a_route_task_sends_each_batch_row_once_to_the_assigner_of_its_key(spark, table_path):
    """The Spark job's first stage over the batch (key_lookup.route_task), run on Arrow batches in
    chunks of a few rows: every batch row leaves once, packed for the assigner its Paimon key hash
    names (hash mod the assigners, as tasks.assigner_of), with its values as they came."""
    from dbt_paimon.assign.rows import SOURCE, TO, Source, StageRows
    from dbt_paimon.engine.runtime import tasks

    _upsert(spark, table_path, _rows(random.Random(11), range(30)))
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
    _upsert(spark, table_path, _rows(rng, range(30)))
    _upsert(spark, table_path, _rows(rng, range(10, 40), tag="b"))
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
