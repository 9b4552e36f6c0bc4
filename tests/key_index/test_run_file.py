"""key_index/run_file.py: a commit's entries become one run per shard, each in the run order (hash, key).

The entries are sorted once (their hashes as integers, then the runs of equal hashes by key) and
cut by shard; each run is read back from its file and compared with Arrow's sort of that shard's
entries. Hashes are drawn from a small range so that most of them are shared by several keys.
"""

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.key_index import lookup as ki_lookup
from dbt_paimon.key_index import run_file as ki_run_file
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.common.fileio import FileIO
from dbt_paimon.store.schema.schema import build_schema


def _index(tmp_path, key_type):
    schema = build_schema(pa.schema([pa.field("id", key_type, nullable=False), pa.field("dt", pa.string()),
                                     pa.field("v", pa.string())]),
                          ["id"], ["dt"], {"bucket": "-1"})
    path = str(tmp_path / "db.db" / "t")
    return KeyIndex(FileIO.get(path), path, schema, block_rows=64, fence_rows=8)


def _entries(index, n, hashes_in, rng):
    """n entries, hashes in [0, hashes_in); each entry's partition one of 8 drawn by its hash, so
    that each of 4 shards holds 2 partitions of them."""
    ids = rng.permutation(n * 3)[:n]
    hashes = rng.integers(0, hashes_in, n)
    keys = pa.array(ids, pa.int64()) if index.keys and index.key_types[0].root == "BIGINT" \
        else pa.array([f"k{i:05d}" for i in ids], pa.string())
    parts = [f"2024-01-{d:02d}" for d in (hashes % 8 + 1).tolist()]
    p = [binary_row.serialize([v], index.part_types) for v in parts]
    placed = pa.table({ki.H: pa.array(hashes, pa.int32()), "id": keys, "dt": parts,
                       ki.P: pa.array(p, pa.binary()), ki.BUCKET: pa.array(rng.integers(0, 4, n), pa.int32()),
                       ki.GEN: pa.array(rng.integers(1, 3, n), pa.int32()), ki.LIVE: pa.array(np.ones(n, np.bool_))})
    # a quarter of the keys moved: a tombstone where each lived, after the live entries (as a
    # commit's entries come), with the same hash and key
    moved = placed.take(pa.array(rng.permutation(n)[:n // 4]))
    moved = moved.set_column(moved.schema.get_field_index(ki.LIVE), ki.LIVE, pa.array(np.zeros(n // 4, np.bool_)))
    return pa.concat_tables([placed, moved.set_column(moved.schema.get_field_index(ki.BUCKET), ki.BUCKET,
                                                      pa.array(np.full(n // 4, 9), pa.int32()))])


def _arrow_sorted(entries):
    return entries.take(pc.sort_indices(entries, sort_keys=[(ki.H, "ascending"), ("id", "ascending")]))


@pytest.mark.parametrize("key_type", [pa.int64(), pa.string()], ids=["fixed-width key", "string key"])
@pytest.mark.parametrize("hashes_in", [40, 1 << 31], ids=["most hashes shared", "few shared"])
def test_the_run_order_is_arrows_sort_by_hash_and_key(tmp_path, key_type, hashes_in):
    index = _index(tmp_path, key_type)
    entries = _entries(index, 3000, hashes_in, np.random.default_rng(hashes_in % 97))
    order = ki_run_file._sorted(index.layout, entries.cast(index.entry_schema).combine_chunks())
    assert entries.take(pa.array(order)).equals(_arrow_sorted(entries))  # Arrow's sort is stable


@pytest.mark.parametrize("key_type", [pa.int64(), pa.string()], ids=["fixed-width key", "string key"])
def test_a_commits_entries_become_one_sorted_run_per_shard_listing_its_own_partitions(tmp_path, key_type):
    index = _index(tmp_path, key_type)
    entries = _entries(index, 3000, 500, np.random.default_rng(7))
    shards = 4
    runs = index.write_runs(entries, shards, seq=3)
    shard = np.bitwise_and(entries.column(ki.H).to_numpy().astype(np.int64), shards - 1)
    assert [s for s, _ in runs] == sorted(set(shard.tolist()))
    for s, name in runs:
        mine = entries.filter(pa.array(shard == s))
        back = index.files.read_run(name)
        assert back.select(mine.column_names).equals(_arrow_sorted(mine).cast(back.select(mine.column_names).schema))
        reader, _ = index.files.open_run(name)
        listed = reader.schema.metadata[b"partitions"]
        assert sorted(index.files._partitions(listed)[ki.P].to_pylist()) == sorted(set(mine.column(ki.P).to_pylist()))
        assert len(set(mine.column(ki.P).to_pylist())) == 2


@pytest.mark.parametrize("entries, span", [(1000, 50), (20000, 1 << 32), (10, 3), (0, 10)],
                         ids=["many equal", "nearly distinct", "tiny", "empty run"])
def test_right_bounds_from_the_left_are_numpys(entries, span):
    rng = np.random.default_rng(entries)
    h = np.sort(rng.integers(-span // 2, span // 2, entries)).astype(np.int32)
    hashes = np.sort(rng.integers(-span // 2 - 2, span // 2 + 2, 500)).astype(np.int32)
    left = np.searchsorted(h, hashes, "left")
    assert ki_lookup._right_bounds(h, hashes, left).tolist() == np.searchsorted(h, hashes, "right").tolist()
