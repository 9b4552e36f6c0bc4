"""Universal compaction's pick (store/compaction/compact_strategy.py): which sorted runs of a bucket a
compaction after a write rewrites, and at which level, as Paimon's UniversalCompaction and
ForceUpLevel0Compaction pick them."""

from __future__ import annotations

import itertools

import pytest

from dbt_paimon.store.compaction.compact_strategy import UniversalCompaction, level_sorted_runs
from dbt_paimon.store.manifest.manifest import DataFileMeta, SimpleStats

_names = itertools.count()


def meta(level: int, size: int, seq: int = 0) -> DataFileMeta:
    return DataFileMeta(f"data-{next(_names)}.parquet", size, 1, b"", b"", SimpleStats.empty(),
                        SimpleStats.empty(), seq, seq, 0, level)


def pick(files, trigger=5, levels=6, max_size_amp=200, size_ratio=1, force=False):
    unit = UniversalCompaction(max_size_amp, size_ratio, trigger, levels, force).pick(files)
    return None if unit is None else (unit.output_level, {f.file_name for f in unit.files}, unit.drop_deletes)


def names(*files):
    return {f.file_name for f in files}


def test_runs_are_level0_files_newest_first_then_each_level():
    a, b, c = meta(0, 1, seq=5), meta(0, 1, seq=9), meta(0, 1, seq=7)
    d, e, f = meta(3, 10), meta(1, 10), meta(3, 10)
    runs = level_sorted_runs([a, d, b, e, c, f])
    assert [(r.level, names(*r.files)) for r in runs] == [
        (0, names(b)), (0, names(c)), (0, names(a)), (1, names(e)), (3, names(d, f))]


def test_nothing_below_the_trigger_however_the_sizes():
    assert pick([meta(0, 100, 3), meta(0, 100, 2), meta(0, 100, 1), meta(5, 1)]) is None


def test_size_amplification_compacts_every_run_to_the_top_level():
    files = [meta(0, 100, 4), meta(0, 100, 3), meta(0, 100, 2), meta(0, 100, 1), meta(5, 150)]
    assert pick(files) == (5, names(*files), True)
    files[-1] = meta(5, 100_000)  # 400 over 100,000: not due; size ratio picks the newer four
    assert pick(files) == (4, names(*files[:4]), False)


def test_small_runs_over_a_big_bucket_are_merged_together_below_it():
    """What an upsert of a few rows into a big bucket does: the small runs, not the bucket."""
    small = [meta(0, 10, s) for s in (4, 3, 2, 1)]
    big = meta(5, 1_000_000)
    assert pick(small + [big]) == (4, names(*small), False)
    # the size ratio stops at a run bigger than (100 + size-ratio) % of what is picked
    mid = meta(4, 41)
    assert pick(small + [mid, big]) == (3, names(*small), False)
    mid = meta(4, 40)
    assert pick(small + [mid, big]) == (4, names(*small, mid), False)


def test_too_many_runs_merge_the_newest_down_to_the_trigger():
    growing = [meta(0, 1, 9), meta(1, 100), meta(2, 10_000), meta(3, 1_000_000), meta(5, 100_000_000)]
    assert pick(growing, trigger=5) is None  # no ratio holds, 5 runs: not more than the trigger
    assert pick(growing, trigger=3) == (2, names(*growing[:3]), False)


def test_a_level0_output_takes_runs_until_a_level_above_zero():
    l0 = [meta(0, 10, 2), meta(0, 10, 1)]
    l1, l2, top = meta(1, 10_000), meta(2, 5), meta(5, 10**9)
    # size ratio picks the two level-0 files; the next run is at level 1, so the output would be
    # level 0: the level-1 run is taken in and the output is level 1
    assert pick(l0 + [l1, top], trigger=3) == (1, names(*l0, l1), False)
    assert pick(l0 + [l1, l2, top], trigger=3) == (1, names(*l0, l1), False)


def test_deletes_are_dropped_only_when_nothing_older_is_left_below():
    files = [meta(0, 10, 2), meta(0, 10, 1), meta(2, 15)]
    assert pick(files, trigger=3) == (5, names(*files), True)  # every run: the top level


def test_force_up_level0_moves_every_level0_file_up_after_each_write():
    big = meta(5, 1_000_000)
    one = meta(0, 10, 1)
    assert pick([one, big]) is None
    assert pick([one, big], force=True) == (4, names(one), False)
    two, level4 = [meta(0, 10, 3), meta(0, 10, 2)], meta(4, 15)
    assert pick(two + [level4, big], force=True) == (4, names(*two, level4), False)
    assert pick([big], force=True) is None  # no level-0 file: nothing to do


@pytest.mark.parametrize("trigger, rewrites", [(2, 260), (3, 90), (5, 12)])
def test_a_bucket_fed_small_runs_stays_within_the_trigger_and_keeps_its_big_file(trigger, rewrites):
    """500 small writes onto a big bucket, each picked unit applied as a compaction would: the
    bucket never holds more runs than the trigger after a compaction, its big file is never
    rewritten (the newer runs stay below twice its size), and each small row is rewritten a bounded
    number of times (fewer runs allowed, more rewrites). The first rule here, a full compaction
    whenever the trigger was reached, rewrote the 1M big file every trigger - 1 writes."""
    big = meta(trigger, 1_000_000)
    files, seq, rewritten = [big], 0, 0
    for _ in range(500):
        seq += 1
        files.append(meta(0, 100, seq))
        unit = UniversalCompaction(200, 1, trigger, trigger + 1).pick(files)
        if unit is not None:
            assert big not in unit.files
            size = sum(f.file_size for f in unit.files)
            rewritten += size
            files = [f for f in files if f not in unit.files] + [meta(unit.output_level, size, seq)]
        assert len(level_sorted_runs(files)) <= trigger
    assert big in files
    assert rewritten <= 500 * 100 * rewrites
