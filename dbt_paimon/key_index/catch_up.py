"""An index brought up to a snapshot of the table, whatever wrote it: each (partition, bucket)'s
data files in the snapshot compared with those the version reflects.

Equal: nothing to do. Only files added, none holding a delete: their keys are live there (read ∝
the added files). Anything else (files removed or rewritten, deletes added, a rollback): the bucket
is read again under a new generation, which invalidates its older entries. A bucket gone is dropped.
No snapshot history is walked, so expiration and rollback need nothing more.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..store.read.read import TableRead
from ..store.read.scan import DataSplit, Plan
from .layout import BUCKET, P
from .lookup import lookup
from .merge_policy import add_runs
from .run_file import RunFiles
from .versions import BucketState, IndexState, Versions


def catch_up(files: RunFiles, versions: Versions, state: IndexState, plan: Plan, reader: TableRead,
             max_runs: int) -> IndexState:
    """`state` caught up to `plan`'s snapshot, its keys read with `reader`; saved when it changed."""
    layout = files.layout
    current = {(s.partition, s.bucket): s for s in plan.splits}
    added_parts, reread_parts = [], []
    read_again = added_only = dropped = 0
    changed = False
    for key in list(state.buckets):
        if key not in current:  # every file of the bucket is gone: so are its keys
            del state.buckets[key]
            dropped += 1
            changed = True
    pending = []  # (keys added to a bucket, the bucket): counted after the loop
    for key, split in current.items():
        data_files = frozenset(f.file_name for f in split.files)
        known = state.buckets.get(key)
        if known is not None and known.files == data_files:
            continue
        changed = True
        added = [f for f in split.files if known is None or f.file_name not in known.files]
        if known is not None and known.files <= data_files and not any(f.has_deletes for f in added) \
                or known is None and not any(f.has_deletes for f in added):
            # only adds: their keys are live here; the bucket's older keys stay as they are
            part = DataSplit(split.snapshot_id, split.partition, split.partition_values, split.bucket,
                             split.total_buckets, split.bucket_path, added)
            live = reader.read_split(part)
            files.bytes_read += sum(f.file_size for f in added)
            if known is None:
                gen = state.new_gen()
                state.buckets[key] = BucketState(data_files, gen, 0)
            else:
                state.buckets[key] = BucketState(data_files, known.gen, known.count)
            pending.append((live.select(layout.keys), key))
            added_parts.append(layout.entries(live, split.partition, split.bucket, state.buckets[key].gen))
            added_only += 1
        else:  # files removed or rewritten, or deletes added: read the bucket again
            live = reader.read_split(split)
            files.bytes_read += sum(f.file_size for f in split.files)
            gen = state.new_gen()
            state.buckets[key] = BucketState(data_files, gen, live.num_rows)
            reread_parts.append(layout.entries(live, split.partition, split.bucket, gen))
            read_again += 1
    if pending:
        _count_added_keys(files, state, pending)
    parts = added_parts + reread_parts
    add_runs(files, state, pa.concat_tables(parts) if parts else None, max_runs)
    state.snapshot_id = plan.snapshot.id if plan.snapshot else None
    state.stats = {"built": False, "buckets_read_again": read_again, "buckets_added_to": added_only,
                   "buckets_dropped": dropped}
    if changed:
        versions.save(state)
    return state


def _count_added_keys(files: RunFiles, state: IndexState, pending: list[tuple[pa.Table, tuple[bytes, int]]]) -> None:
    """Counts of the buckets that gained keys: the keys new to the bucket (looked up before the
    new entries are added; a key the index places in this bucket already is an update)."""
    keys_of = files.layout.keys
    added = pa.concat_tables([keys.append_column(P, pa.array([k[0]] * keys.num_rows, pa.binary()))
                              .append_column(BUCKET, pa.array(np.full(keys.num_rows, k[1], np.int32)))
                              for keys, k in pending])
    before = lookup(files, state, added.select(keys_of)).select(keys_of + [P, BUCKET])
    already = added.join(before, keys_of + [P, BUCKET], join_type="left semi", use_threads=False)
    grown = added.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
    known = already.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
    known = dict(zip(zip(known.column(P).to_pylist(), known.column(BUCKET).to_pylist()),
                     known.column("count_all").to_pylist()))
    for p, b, n in zip(grown.column(P).to_pylist(), grown.column(BUCKET).to_pylist(),
                       grown.column("count_all").to_pylist()):  # per bucket
        state.buckets[(p, b)].count += n - known.get((p, b), 0)
