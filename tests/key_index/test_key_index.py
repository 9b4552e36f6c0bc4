"""The key index of cross-partition tables (dbt_paimon/key_index/, engine/runtime/key_lookup.py), issue 14:
its answers against the table.

Every check compares the index's answer with the truth read from the table's files split by split
(index_helpers.py), after our upserts on both executors, after writers that do not keep the
index (a run with key_index off: "another writer" as far as the index knows), deletes, compactions,
rollbacks and expirations, after damage to the index's own files; and the index's files beside the
table's (Paimon's readers, object stores, orphan files).
"""

from __future__ import annotations

import os
import random
import time

import pyarrow as pa
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.engine import compact, delete, upsert
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.key_index import build as ki_build
from dbt_paimon.store.table import FileStoreTable

from ..engine.helpers import live_places
from .index_helpers import (
    OPTIONS,
    TUNING,
    assert_index_right,
    index_answer,
    random_rows,
    small_index,  # noqa: F401 (the fixture every test here uses)
    upsert_rows,
)


@pytest.mark.parametrize("threaded", [False, True], ids=["small batch: one writer", "writer threads"])
def test_lookups_match_the_table_after_our_upserts_with_moves(spark, table_path, threaded, monkeypatch):
    """A small batch is written in the driver's thread, a big one by writer threads beside the
    thread writing the index's runs (here forced by the threshold)."""
    from dbt_paimon.engine.runtime import local
    if threaded:
        monkeypatch.setattr(local, "PARALLEL_WRITE_ROWS", 0)
    rng = random.Random(1)
    upsert_rows(spark, table_path, random_rows(rng, range(40)))
    for step in range(4):
        result = upsert_rows(spark, table_path, random_rows(rng, rng.sample(range(55), 15), tag=f"s{step}"))
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
        df = spark.createDataFrame(random_rows(rng, keys, tag=f"e{step}"), "id bigint, dt string, v string")
        result = upsert(df, table_path, primary_keys="id", partition_keys="dt", options=dict(options),
                        settings=RunSettings(execution="local" if step == 0 else execution))
        assert step == 0 or result.bootstrap["source"] == "key index"
        state = assert_index_right(table_path, range(40))
        assert step == 0 or (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
    assert max(live_places(table_path).values()) == 1


def test_a_writer_that_does_not_keep_the_index_is_caught_up_from_its_files(spark, table_path):
    rng = random.Random(2)
    upsert_rows(spark, table_path, random_rows(rng, range(30)))
    # new keys only, by a writer that skips the index: their buckets gain files without deletes
    upsert_rows(spark, table_path, random_rows(rng, range(30, 38)), index=False)
    state = assert_index_right(table_path)
    assert state.stats["buckets_read_again"] == 0 and state.stats["buckets_added_to"] > 0
    # moves by a Spark job that skips the index: -D rows in the old buckets, which are read again
    upsert_rows(spark, table_path, random_rows(rng, range(0, 30, 3), parts="c", tag="m"), index=False,
                execution="distributed")
    state = assert_index_right(table_path)
    assert state.stats["buckets_read_again"] > 0
    # and our next upsert through the index agrees with a run without it
    rows = random_rows(rng, rng.sample(range(45), 20), tag="z")
    upsert_rows(spark, table_path, rows)
    assert_index_right(table_path)


def test_deletes_compactions_rollbacks_and_expirations_between_upserts(spark, table_path):
    rng = random.Random(3)
    upsert_rows(spark, table_path, random_rows(rng, range(40)))
    upsert_rows(spark, table_path, random_rows(rng, range(20, 50), tag="b"))
    keep = FileStoreTable.open(table_path).latest_snapshot().id
    delete(spark, table_path, "id % 4 = 0")
    assert_index_right(table_path)
    compact(spark, table_path)
    assert_index_right(table_path)
    upsert_rows(spark, table_path, random_rows(rng, range(0, 50, 2), tag="c"))
    assert_index_right(table_path)
    FileStoreTable.open(table_path).rollback_to(keep)  # the index reflects files that are gone now
    assert_index_right(table_path)
    upsert_rows(spark, table_path, random_rows(rng, range(10, 30), tag="d"))
    assert_index_right(table_path)
    FileStoreTable.open(table_path).expire_snapshots(retain_max=1, retain_min=1)
    upsert_rows(spark, table_path, random_rows(rng, range(25, 55), tag="e"))
    assert_index_right(table_path)


def test_a_build_in_the_driver_leaves_one_run_per_shard(spark, table_path, monkeypatch):
    """A build flushes its entries as runs every BUILD_FLUSH_ROWS keys (its memory bound), then
    merges each shard to one run, as a Spark build leaves it: the next lookups read a page per
    key in one run, not in each flush's."""
    rng = random.Random(12)
    upsert_rows(spark, table_path, random_rows(rng, range(60)), index=False)
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
    upsert_rows(spark, table_path, random_rows(rng, range(30)))
    upsert_rows(spark, table_path, random_rows(rng, range(10, 40), tag="b"))
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
    upsert_rows(spark, table_path, random_rows(rng, range(0, 40, 2), parts="c", tag="c"))
    assert max(live_places(table_path).values()) == 1
    assert_index_right(table_path)


def test_the_index_answers_like_the_full_bootstrap_for_random_batches(spark, warehouse):
    """Two tables fed the same batches, one through the index, one without it: same rows."""
    rng = random.Random(5)
    with_index, without = f"{warehouse}/db.db/a", f"{warehouse}/db.db/b"
    for step in range(6):
        rows = random_rows(rng, rng.sample(range(80), 25), tag=f"s{step}")
        upsert_rows(spark, with_index, rows)
        upsert_rows(spark, without, rows, index=False)
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
    first = random_rows(rng, range(40))
    upsert_rows(spark, with_index, first)  # driver-local: builds the index
    upsert_rows(spark, without, first, index=False)
    for step, execution in enumerate(executions):
        rows = random_rows(rng, rng.sample(range(60), 20), tag=f"d{step}")
        result = upsert_rows(spark, with_index, rows, execution=execution)
        upsert_rows(spark, without, rows, index=False, execution=execution)
        assert result.execution == execution and result.bootstrap["source"] == "key index"
        state = assert_index_right(with_index, range(60))
        assert (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
        a = FileStoreTable.open(with_index).to_arrow().sort_by("id").to_pylist()
        b = FileStoreTable.open(without).to_arrow().sort_by("id").to_pylist()
        assert a == b
    assert max(live_places(with_index).values()) == 1


def test_the_index_stays_out_of_pypaimons_way(spark, table_path):
    """Paimon's readers never see the index: it lives beside the table, not inside it."""
    from tests.oracle import pypaimon_read
    rng = random.Random(6)
    upsert_rows(spark, table_path, random_rows(rng, range(20)))
    upsert_rows(spark, table_path, random_rows(rng, range(10, 30), tag="b"))
    assert not any(".dbt-key-index" in n for n in os.listdir(table_path))
    assert sorted(pypaimon_read(table_path).column("id").to_pylist()) == list(range(30))


def test_the_index_on_an_object_store(spark, s3_warehouse):
    """On S3 (no memory map: runs are fetched whole) the index lives beside the table too, is
    caught up after another writer and answers right."""
    path = f"{s3_warehouse}/db.db/t"
    rng = random.Random(9)
    upsert_rows(spark, path, random_rows(rng, range(30)))
    upsert_rows(spark, path, random_rows(rng, range(20, 45), tag="o"), index=False)  # moves: buckets read again
    result = upsert_rows(spark, path, random_rows(rng, rng.sample(range(50), 15), tag="b"))
    assert result.bootstrap["source"] == "key index" and result.bootstrap["bytes"] > 0
    table = FileStoreTable.open(path)
    assert table.io.exists(f"{ki.index_dir(path)}/{ki.LATEST}")
    assert_index_right(path, range(50))


def test_orphan_file_removal_leaves_the_index_alone(spark, table_path):
    """The index is not the table's: Paimon's orphan-file removal (ours here) never lists it."""
    rng = random.Random(10)
    upsert_rows(spark, table_path, random_rows(rng, range(20)))
    upsert_rows(spark, table_path, random_rows(rng, range(10, 30), tag="b"))
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
    upsert_rows(spark, table_path, random_rows(rng, range(20)))
    ki.join_sweeps(60)  # the first upsert's sweep is done: only the second one can delete the orphan
    d = ki.index_dir(table_path)
    aged, fresh = f"{d}/run-99999998-0123456789ab.arrow", f"{d}/run-99999999-0123456789ab.arrow"
    for path in (aged, fresh):
        with open(path, "wb") as f:
            f.write(b"left by a writer that did not commit")
    hours_ago = time.time() - 2 * ki.ORPHAN_AGE_MS / 1000
    os.utime(aged, (hours_ago, hours_ago))
    upsert_rows(spark, table_path, random_rows(rng, range(10, 30), tag="b"), execution=execution)
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
        upsert_rows(spark, table_path, random_rows(rng, range(i * 10, i * 10 + 20), tag=f"r{i}"))
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
        upsert_rows(spark, table_path, random_rows(rng, rng.sample(range(40), 12), tag=f"w{i}"))
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
    upsert_rows(spark, table_path, random_rows(rng, range(10)))
    upsert_rows(spark, table_path, [(3, None, "n"), (20, None, "m"), (21, "a", "x")])  # 3 moves into dt = NULL
    table = FileStoreTable.open(table_path)
    state = KeyIndex(table.io, table.path, table.schema, **TUNING).refresh(table.plan())
    assert state.stats["buckets_read_again"] == 0 and state.stats["buckets_added_to"] == 0  # recorded, not caught up
    got, _ = index_answer(table_path, [3, 20, 21])
    assert got[3][0] == (None,) and got[20][0] == (None,) and got[21][0] == ("a",)
    assert_index_right(table_path)
