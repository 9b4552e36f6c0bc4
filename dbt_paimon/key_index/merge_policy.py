"""Each shard is an LSM of immutable sorted runs: new runs go in front, and a shard holding more
than `max_runs` has runs merged (size-tiered), or a bulk load's commit merges whole the shards it
touches. A merge keeps the newest valid entry per key; tombstones go once nothing older is left for
them to shadow.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .layout import H, LIVE, SEQ
from .run_file import RunFiles
from .versions import IndexState, valid

MAX_RUNS = 6                 # more runs in a shard: its newer runs are merged (LSM, size-tiered)


def full_merge_due(state: IndexState, new_keys: int) -> bool:
    """Whether a Spark job's commit merges every shard it touches whole, in its tasks: when it adds
    at least a sixteenth of the keys the index holds (a bulk load). Tiered merging alone leaves a
    bulk-loaded shard several big runs, and a lookup reads about a page per key in each (W3-100M's
    base in 10 jobs: 4 runs per shard, 43K pages for 10K keys); merged whole by the job, one run,
    at a cost per job ≤ 17x its own entries, spread over the cluster rather than in the driver."""
    live = sum(b.count for b in state.buckets.values())
    return new_keys > 0 and new_keys * 16 >= live


def merge_count(sizes: Sequence[int], max_runs: int) -> int:
    """How many of a shard's runs (sizes newest first) to merge when it holds more than max_runs:
    as many newest runs as bring it back to max_runs, then each next older run while it is at most
    twice what is merged so far (size-tiered, as Paimon's universal compaction picks sorted runs).
    A commit's small run is merged with runs of about its size, and the shard's big run only once
    the newer runs reach half its size. Simulated with one 156-entry run per commit onto a 1.5M
    shard (10K keys into 100M) and 6 runs: each entry is rewritten ~12 times over 10K commits. The
    old rule (every newer run, and the oldest too once they were a quarter of it) rewrote each
    ~300 times, re-merging a growing middle run of every shard in the same commit (39 s at 100M
    keys)."""
    take = max(2, len(sizes) - max_runs + 1)
    merged = sum(sizes[:take])
    while take < len(sizes) and sizes[take] <= 2 * merged:
        merged += sizes[take]
        take += 1
    return take


def add_runs(files: RunFiles, state: IndexState, entries: pa.Table | None, max_runs: int) -> None:
    """One new run per shard the entries fall in, then the shard's LSM merge if due."""
    if entries is None or entries.num_rows == 0:
        return
    entries, shares = files.shares(entries, state.shards)
    for s, rows in shares:
        run = files.write_run(state, entries, rows=rows)
        state.runs[s].insert(0, run)
        if len(state.runs[s]) > max_runs:
            merge_shard(files, state, s, max_runs)


def merge_shard(files: RunFiles, state: IndexState, s: int, max_runs: int, take: int | None = None) -> None:
    """Size-tiered (merge_count): the newest runs (or `take` of them) merged into one, the older
    ones kept. Invalid entries are dropped by any merge; tombstones only by one that includes
    the oldest run."""
    runs = state.runs[s]
    if take is None:
        take = merge_count([files.size(n) for _, n in runs], max_runs)
    name = _merged_run(files, runs[:take], state, drop_tombstones=take == len(runs))
    # the merged run takes the newest merged seq: it stands where its newest input stood
    state.runs[s] = ([(runs[0][0], name)] if name else []) + runs[take:]


def merge_runs(files: RunFiles, names: Sequence[str], seq: int, older: Sequence[tuple[int, str]] = (),
               state: IndexState | None = None, new_gen: int | None = None) -> str | None:
    """One run of a shard's runs of one commit at `seq` (a Spark job's assigners' runs of that
    shard): the shard's LSM gets one run per commit, whatever the number of assigners.
    Within a seq a key's live entry outranks its tombstone, in one run as across. With `older`
    (every run the shard had in the job's `state`: full_merge_due) they are merged in too: the
    newest valid entry per key kept (the buckets the commit creates valid at `new_gen`),
    tombstones dropped; None when nothing is left."""
    if not older:
        merged = pa.concat_tables([files.read_run(n) for n in names])
        return files.write_run(None, merged, seq)[1]
    return _merged_run(files, [(seq, n) for n in names] + list(older), state, True, new_gen)


def _merged_run(files: RunFiles, runs: Sequence[tuple[int, str]], state: IndexState, drop_tombstones: bool,
                new_gen: int | None = None) -> str | None:
    """One run of the newest valid entry per key among `runs` (seq, name) (invalid ones go
    first: a newer invalid entry must not hide an older valid one); tombstones dropped when
    nothing older is left to shadow. None when nothing is left. new_gen: as in versions.valid."""
    merged = []
    for seq, name in runs:
        t = files.read_run(name)
        merged.append(t.append_column(SEQ, pa.array(np.full(t.num_rows, seq, np.int64))))
    table = valid(state, pa.concat_tables(merged), new_gen)
    if table.num_rows:
        # one sort in the run's order, each key's entries newest first (a live one before a
        # tombstone of the same seq), and the first of each key kept: no hash aggregation
        # over the keys and no second sort to write the run (a full merge of a 1M-key shard
        # took 1.2 s that way)
        table = table.sort_by(files.layout.run_order() + [(SEQ, "descending"), (LIVE, "descending")])
        table = table.filter(_firsts(table, [H] + files.layout.keys))
        if drop_tombstones:
            table = table.filter(table.column(LIVE))
    if not table.num_rows:
        return None
    return files.write_run(None, table.drop_columns([SEQ]), max(seq for seq, _ in runs), in_order=True)[1]


def _firsts(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Per row of a table sorted by `columns`: whether it is the first of its value of them."""
    n = table.num_rows
    first = np.ones(n, np.bool_)
    if n > 1:
        differs = np.zeros(n - 1, np.bool_)
        for name in columns:
            column = table.column(name).combine_chunks()
            differs |= pc.not_equal(column.slice(1), column.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        first[1:] = differs
    return pa.array(first)
