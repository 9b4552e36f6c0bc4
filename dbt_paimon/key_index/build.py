"""An index of the whole table, every live key read once: in this process (`build`), or by a Spark
job whose tasks read the splits and write one run per shard (`new_build`, `split_entries`,
`shard_runs`, then `adopt_build` in the driver; engine/runtime/index_build.py).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

import pyarrow as pa

from ..store.read.scan import DataSplit, Plan
from .layout import BUCKET, P
from .merge_policy import add_runs, merge_shard
from .run_file import RunFiles
from .versions import BucketState, IndexState, Versions

BUILD_FLUSH_ROWS = 4_000_000  # a build writes its entries as runs every this many keys
BUILD_THREADS = 4


def new_build(plan: Plan, keys_per_shard: int, schema_id: int) -> IndexState:
    """An empty index of the whole table at `plan`: its shards (about keys_per_shard keys each,
    a power of two), each (partition, bucket) at a new generation, no runs, counts zero."""
    rows = sum(s.row_count for s in plan.splits)
    shards = 1
    while shards * keys_per_shard < rows:
        shards *= 2
    state = IndexState(shards, [[] for _ in range(shards)], {}, schema_id=schema_id,
                       snapshot_id=plan.snapshot.id if plan.snapshot else None)
    for split in plan.splits:
        state.buckets[(split.partition, split.bucket)] = BucketState(
            frozenset(f.file_name for f in split.files), state.new_gen(), 0)
    return state


def split_entries(files: RunFiles, split: DataSplit, live: pa.Table, gen: int) -> pa.Table:
    """The entries of one split's live keys (read by the caller with KeyIndex.key_reader())."""
    files.bytes_read += sum(f.file_size for f in split.files)
    return files.layout.entries(live, split.partition, split.bucket, gen)


def build(files: RunFiles, versions: Versions, plan: Plan, read_split: Callable[[DataSplit], pa.Table],
          keys_per_shard: int, max_runs: int) -> IndexState:
    """The index of the whole table at `plan` (every live key read once, by `read_split`), in this
    process; saved."""
    state = new_build(plan, keys_per_shard, files.layout.schema.id)
    parts, held = [], 0
    with ThreadPoolExecutor(max_workers=BUILD_THREADS) as pool:  # Parquet reads release the GIL
        for split, live in zip(plan.splits, pool.map(read_split, plan.splits)):
            bucket = state.buckets[(split.partition, split.bucket)]
            bucket.count = live.num_rows
            if live.num_rows:
                parts.append(split_entries(files, split, live, bucket.gen))
                held += live.num_rows
            if held >= BUILD_FLUSH_ROWS:  # memory stays bounded by this, not by the table
                add_runs(files, state, pa.concat_tables(parts), max_runs)
                parts, held = [], 0
    add_runs(files, state, pa.concat_tables(parts) if parts else None, max_runs)
    # one run per shard, as a Spark build leaves it: a lookup reads a page or two per key in
    # each run bigger than that, so the build's several runs per shard would each cost the
    # next upserts a page per key (W3-100M: 43K pages of hashes with 4 runs per shard)
    for s in range(state.shards):
        if len(state.runs[s]) > 1:
            merge_shard(files, state, s, max_runs, len(state.runs[s]))
    state.stats = {"built": True, "buckets_read": len(plan.splits)}
    versions.save(state)
    return state


def shard_runs(files: RunFiles, entries: pa.Table, shards: int, seq: int) -> tuple[list[tuple[int, str]], dict]:
    """A Spark build task's share: one run per shard among `entries` (each shard's entries all
    reach one task), and the keys it wrote per (partition, bucket)."""
    if entries.num_rows == 0:
        return [], {}
    counted = entries.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
    counts = {(p, b): n for p, b, n in zip(counted.column(P).to_pylist(), counted.column(BUCKET).to_pylist(),
                                           counted.column("count_all").to_pylist())}  # per bucket
    return files.write_runs(entries, shards, seq), counts


def adopt_build(versions: Versions, state: IndexState, runs: Iterable[tuple[int, str]], counts: dict,
                seq: int) -> None:
    """A build whose runs others wrote (a Spark job's tasks: one run per shard, all at `seq`,
    drawn from `state` before the job) and whose keys they counted per (partition, bucket):
    named in the state, which is saved."""
    for s, name in runs:
        state.runs[s].insert(0, (seq, name))
    for key, n in counts.items():
        state.buckets[key].count += n
    state.stats = {"built": True, "buckets_read": len(state.buckets), "by": "spark"}
    versions.save(state)
