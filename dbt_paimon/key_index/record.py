"""Our own commit carried into the index without reading a data file.

Before the commit, its writers turn its placements and retractions into entries (`commit_entries`)
and write them as runs (RunFiles.write_runs: one per shard a writer touched, all at the commit's
seq); once it is done, `record_commit` names those runs in a new version with the data files the
commit added and its compactions' file changes. A commit that did not happen leaves unnamed runs
that a clean deletes; a record that fails costs the next upsert a catch-up, never a wrong answer.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..store.common.groups import group_codes
from ..store.manifest.manifest import ADD, ManifestEntry
from .layout import BUCKET, GEN, P, Layout
from .merge_policy import merge_shard
from .run_file import RunFiles
from .versions import BucketState, IndexState, Versions


def record_commit(files: RunFiles, versions: Versions, state: IndexState, runs: Iterable[tuple[int, str]],
                  deltas: Iterable[dict], added_files: Iterable[ManifestEntry],
                  compactions: Sequence[Sequence[ManifestEntry]], snapshot_id: int | None, new_gen: int, seq: int,
                  merged: Iterable[int], max_runs: int) -> None:
    """Carry our own commit into the index without reading a data file, once it is done. Its
    writers wrote the entries of its placements and retractions before it (commit_entries,
    write_runs: one run per shard a writer touched, all at the commit's `seq`) and give the
    runs' names and each bucket's count change; the buckets new in the commit take `new_gen`,
    drawn before the job. Then the data files our commit added, and the ADD/DELETE entries of
    each of our compaction commits (a compaction keeps a bucket's keys, so only its files
    change; one that consumed a file the index does not know drops the bucket, to be read
    again). A shard in `merged` had all its runs merged with the commit's by a Spark job
    (full_merge_due): its run replaces them. Saved, then the files no version names swept."""
    _add_files(state, added_files, new_gen)
    for part in deltas:
        _add_counts(state, part)
    _apply_compactions(state, compactions)
    for s in merged:
        state.runs[s] = []
    added: dict[int, int] = {}
    for s, name in runs:
        state.runs[s].insert(0, (seq, name))
        added[s] = added.get(s, 0) + 1
    for s, n in sorted(added.items()):
        # the LSM policy counts commits: a commit's runs from several tasks count as one
        if len(state.runs[s]) - (n - 1) > max_runs:
            merge_shard(files, state, s, max_runs)
    state.snapshot_id = snapshot_id
    versions.save(state)
    versions.sweep(state)


def commit_entries(layout: Layout, state: IndexState, placed: pa.Table | None, removed: pa.Table | None,
                   new_gen: int) -> tuple[pa.Table | None, dict]:
    """(entries, count change per (partition, bucket)) of a commit's placements and
    retractions, each entry at its bucket's generation; a bucket the state does not know is new
    in the commit: `new_gen`."""
    parts, deltas = [], {}
    for table, is_live in ((placed, True), (removed, False)):
        if table is None or table.num_rows == 0:
            continue
        # per (partition, bucket): its count moves by the keys new to it (or retracted from
        # it), and its entries take its generation. Grouped by a code per row, not joined.
        group, buckets = group_codes(table, [P, BUCKET])
        changed = np.bincount(group, table.column("_new").to_numpy(zero_copy_only=False) if is_live else None,
                              minlength=len(buckets))
        gens = np.empty(len(buckets), np.int32)
        for g, (key, n) in enumerate(zip(buckets, changed.tolist())):  # per bucket
            known = state.buckets.get(key)
            gens[g] = known.gen if known is not None else new_gen
            deltas[key] = deltas.get(key, 0) + (int(n) if is_live else -int(n))
        parts.append(layout.entries_of(table.append_column(GEN, pa.array(gens[group])), is_live))
    return (pa.concat_tables(parts) if parts else None), deltas


def _add_files(state: IndexState, added_files: Iterable[ManifestEntry], new_gen: int | None) -> None:
    for e in added_files:
        key = (e.partition, e.bucket)
        known = state.buckets.get(key)
        if known is None:
            gen = state.new_gen() if new_gen is None else new_gen
            state.buckets[key] = BucketState(frozenset([e.file.file_name]), gen, 0)
        else:
            state.buckets[key] = BucketState(known.files | {e.file.file_name}, known.gen, known.count)


def _add_counts(state: IndexState, deltas: dict) -> None:
    for key, delta in deltas.items():
        state.buckets[key].count += delta


def _apply_compactions(state: IndexState, compactions: Sequence[Sequence[ManifestEntry]]) -> None:
    for entries in compactions:
        for e in entries:
            key = (e.partition, e.bucket)
            known = state.buckets.get(key)
            if known is None:
                continue
            if e.kind == ADD:
                state.buckets[key] = BucketState(known.files | {e.file.file_name}, known.gen, known.count)
            elif e.file.file_name in known.files:
                state.buckets[key] = BucketState(known.files - {e.file.file_name}, known.gen, known.count)
            else:
                del state.buckets[key]
