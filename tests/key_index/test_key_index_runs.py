"""The key index's run files (dbt_paimon/key_index/layout.py, lookup.py, merge_policy.py): keys
sharing a hash, lookups from the fences, one page per key's window, the merge policy of a shard's
runs, and keys of fixed width riding in the location column."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.engine import upsert
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.key_index import layout as ki_layout
from dbt_paimon.key_index import lookup as ki_lookup
from dbt_paimon.key_index.merge_policy import merge_shard
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.table import FileStoreTable

from ..engine.helpers import live_places
from .index_helpers import (
    OPTIONS,
    TUNING,
    index_answer,
    small_index,  # noqa: F401 (the fixture every test here uses)
    truth,
    upsert_rows,
)


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
    upsert_rows(spark, table_path, [(0, "2024-01-01", "seed")])
    table = FileStoreTable.open(table_path)
    live, other = _keys_sharing_a_hash(KeyIndex(table.io, table.path, table.schema))
    upsert_rows(spark, table_path, [(live, "2024-01-02", "live")])
    for keys, expected in (([other], set()), ([live], {live}), ([other, live], {live}), ([live, live], {live})):
        found, _ = index_answer(table_path, keys)
        assert set(found) == expected, keys
        assert all(where == (("2024-01-02",), found[live][1]) for where in found.values())
    assert upsert_rows(spark, table_path, [(other, "2024-01-03", "other")]).bootstrap["source"] == "key index"
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

    upsert_rows(spark, table_path, [(0, "2024-01-01", "seed")])
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

    upsert_rows(spark, table_path, [(0, "2024-01-01", "seed")])
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
    upsert_rows(spark, table_path, [(0, "a", "seed")])
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
