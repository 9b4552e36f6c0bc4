"""Which sorted runs of a bucket a compaction after a write rewrites: Paimon's universal compaction.

A bucket is an LSM tree: each level-0 file is a sorted run of its own (newest first), then each
non-empty level 1 .. num-levels - 1 is one run. After every commit Paimon's writers pick, per bucket
(UniversalCompaction.pick):
  1. size amplification: when the runs above the oldest add up to more than
     compaction.max-size-amplification-percent (200) of it, every run (a full compaction);
  2. size ratio: the newest run, then each next one while it is no bigger than
     (100 + compaction.size-ratio) % of what is picked so far; two runs or more are compacted;
  3. run count: with more runs than num-sorted-run.compaction-trigger, the newest runs that bring
     the count back to the trigger, extended by size ratio.
Steps 1 and 2 only look once the bucket holds num-sorted-run.compaction-trigger runs. The output
level is just below the oldest run left out (a level-0 output is never made), or the top level when
every run is in; deletes are dropped only when no older data can sit below the output.

So an upsert of a few rows into a big bucket rewrites its few small runs, not the bucket. First-row
tables use ForceUpLevel0Compaction: Paimon's batch readers skip their level-0 files, so every level-0
file is compacted up after each write (with whatever runs size ratio adds to it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..manifest.manifest import DataFileMeta
from ..common.options import CoreOptions


@dataclass(frozen=True)
class SortedRun:
    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True)
class CompactUnit:
    output_level: int
    files: tuple[DataFileMeta, ...]
    drop_deletes: bool


def level_sorted_runs(files: Sequence[DataFileMeta]) -> list[SortedRun]:
    """A bucket's runs, newest first: each level-0 file (by max sequence number, as Paimon's Levels
    orders them), then each non-empty level upwards."""
    level0 = sorted((f for f in files if f.level == 0),
                    key=lambda f: (-f.max_sequence_number, f.min_sequence_number, f.file_name))
    runs = [SortedRun(0, (f,)) for f in level0]
    for level in sorted({f.level for f in files if f.level > 0}):
        runs.append(SortedRun(level, tuple(f for f in files if f.level == level)))
    return runs


def sorted_run_count(files: Sequence[DataFileMeta]) -> int:
    """A bucket's sorted runs as Paimon counts them: each level-0 file, plus each non-empty level."""
    return sum(1 for f in files if f.level == 0) + len({f.level for f in files if f.level > 0})


class UniversalCompaction:
    def __init__(self, max_size_amp: int, size_ratio: int, trigger: int, num_levels: int,
                 force_up_level0: bool = False):
        self.max_size_amp, self.size_ratio, self.trigger = max_size_amp, size_ratio, trigger
        self.max_level = num_levels - 1
        self.force_up_level0 = force_up_level0

    @classmethod
    def of(cls, core: CoreOptions, force_up_level0: bool = False) -> "UniversalCompaction":
        return cls(core.max_size_amplification_percent, core.size_ratio,
                   core.num_sorted_run_compaction_trigger, core.num_levels, force_up_level0)

    def pick(self, files: Sequence[DataFileMeta]) -> CompactUnit | None:
        """The runs of one bucket's files to compact now, or None."""
        runs = level_sorted_runs(files)
        count = self._pick(runs)
        if count is None and self.force_up_level0:
            level0 = sum(1 for r in runs if r.level == 0)
            count = self._by_size_ratio(runs, level0, force=True) if level0 else None
        if count is None:
            return None
        return self._unit(runs, count)

    def _pick(self, runs: list[SortedRun]) -> int | None:
        if len(runs) < self.trigger or len(runs) < 2:
            return None
        newer = sum(r.size for r in runs[:-1])
        if newer * 100 > self.max_size_amp * runs[-1].size:
            return len(runs)
        count = self._by_size_ratio(runs, 1)
        if count is not None:
            return count
        if len(runs) > self.trigger:
            return self._by_size_ratio(runs, len(runs) - self.trigger + 1)
        return None

    def _by_size_ratio(self, runs: list[SortedRun], count: int, force: bool = False) -> int | None:
        picked = sum(r.size for r in runs[:count])
        while count < len(runs) and picked * (100 + self.size_ratio) / 100 >= runs[count].size:
            picked += runs[count].size
            count += 1
        return count if force or count > 1 else None

    def _unit(self, runs: list[SortedRun], count: int) -> CompactUnit:
        # just below the oldest run left out, never level 0 (take runs until a non-zero level)
        level = self.max_level if count == len(runs) else max(0, runs[count].level - 1)
        if level == 0:
            while count < len(runs):
                count += 1
                if runs[count - 1].level != 0:
                    level = runs[count - 1].level
                    break
        if count == len(runs):
            level = self.max_level
        highest = max(r.level for r in runs)
        files = tuple(f for r in runs[:count] for f in r.files)
        return CompactUnit(level, files, drop_deletes=level >= highest)
