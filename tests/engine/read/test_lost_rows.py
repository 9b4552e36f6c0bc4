"""The bitmap of the rows a native read leaves out (engine/read/lost_rows.py), held against Spark:
real Parquet files read by Spark's reader, each row tested by the expression the read uses, and the
rows kept compared with the positions that were not lost."""

from __future__ import annotations

import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.engine.read import lost_rows
from dbt_paimon.engine.read.lost_rows import LostRows, groups_of


def _write(directory, names: list[str], counts: list[int], same_content: bool) -> dict[str, str]:
    """One file per name; with same_content all of one size (told by name), else each of its own
    size (a file whose size another has already is written again with a longer pad)."""
    os.makedirs(directory, exist_ok=True)
    paths, sizes = {}, set()
    for name, count in zip(names, counts):
        paths[name] = os.path.join(directory, name)
        for pad in range(100):
            pq.write_table(pa.table({"v": np.arange(count, dtype=np.int64),
                                     "pad": ["" if same_content else "x" * pad] * count}), paths[name])
            if same_content or os.path.getsize(paths[name]) not in sizes:
                break
        sizes.add(os.path.getsize(paths[name]))
    return paths


def _kept_by_spark(spark, paths: dict[str, str], lost: LostRows) -> set[tuple[str, int]]:
    df = spark.read.parquet(*paths.values()).where(lost.kept(lost.relation(spark).scalar()))
    return {(r[0], r[1]) for r in df.select("_metadata.file_name", "_metadata.row_index").collect()}


def _case(rnd: random.Random, names: list[str], counts: list[int]):
    rows = dict(zip(names, counts))
    gone = {n: np.array(sorted(rnd.sample(range(c), rnd.randint(0, c))), np.int64) for n, c in rows.items()}
    want = {(n, p) for n, c in rows.items() for p in sorted(set(range(c)) - set(gone[n].tolist()))}
    return rows, gone, want


@pytest.mark.parametrize("same_content, by_modulus", [(False, True), (False, False), (True, False)],
                         ids=["told-by-size-modulo", "told-by-size-hashed", "told-by-name"])
def test_every_row_kept_or_left_out_as_its_file_says(spark, tmp_path, monkeypatch, same_content, by_modulus):
    """Files of distinct sizes are told by their size modulo some m; more files than the modulus is
    tried for (set to none here), by the size's hash; files of one size, by the name's hash."""
    if not by_modulus:
        monkeypatch.setattr(lost_rows, "MAX_MODULUS_FILES", 0)
    rnd = random.Random(11)
    names = [f"data-{i:04d}-{rnd.getrandbits(32):08x}-0.parquet" for i in range(60)]
    counts = [64] * len(names) if same_content else [rnd.randint(1, 300) for _ in names]  # across words
    paths = _write(tmp_path / "f", names, counts, same_content)
    rows, gone, want = _case(rnd, names, counts)
    sizes = {n: os.path.getsize(p) for n, p in paths.items()}
    lost = LostRows(rows, gone, sizes)
    assert lost.by_size == (not same_content)
    assert (lost.modulus is not None) == by_modulus
    if by_modulus:  # the least modulus the sizes differ by
        assert len({size % lost.modulus for size in sizes.values()}) == len(names)
        assert all(len({size % m for size in sizes.values()}) < len(names) for m in range(len(names), lost.modulus))
    assert _kept_by_spark(spark, paths, lost) == want


def test_files_whose_hashes_meet_are_told_apart_by_a_salt(spark, tmp_path):
    """Two names share the one group and the low bits of four slots about one time in four: the
    names are hashed again with a salt, which Spark adds to its hash the same way."""
    rnd = random.Random(5)
    for attempt in range(200):
        names = [f"data-{attempt}-a.parquet", f"data-{attempt}-b.parquet"]
        rows, gone, want = _case(rnd, names, [100, 100])
        lost = LostRows(rows, gone, {n: 1 for n in names})  # equal sizes: told by name
        if lost.salt is not None:
            break
    else:
        pytest.fail("no pair of names met in 200 tries")
    paths = _write(tmp_path / "s", names, [100, 100], same_content=True)
    assert _kept_by_spark(spark, paths, lost) == want


def test_a_file_without_lost_rows_keeps_every_row(spark, tmp_path):
    paths = _write(tmp_path / "z", ["a.parquet", "b.parquet"], [70, 5], same_content=False)
    sizes = {n: os.path.getsize(p) for n, p in paths.items()}
    lost = LostRows({"a.parquet": 70, "b.parquet": 5}, {"b.parquet": np.array([4], np.int64)}, sizes)
    assert _kept_by_spark(spark, paths, lost) == {("a.parquet", p) for p in range(70)} | \
        {("b.parquet", p) for p in range(4)}


def test_bitmaps_over_the_limit_are_cut_in_groups_in_plan_order():
    rows = {"a": 64 * 3, "b": 64 * 2, "c": 1, "d": 64 * 5, "e": 64}
    assert groups_of(rows, limit=5) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert groups_of(rows, limit=100) == [["a", "b", "c", "d", "e"]]
