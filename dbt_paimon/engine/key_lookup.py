"""The bootstrap of a cross-partition upsert from the key index (store/key_index.py), driver-local.

    refresh the index to the job's snapshot ─► look up the batch's keys ─► live keys + bucket counts
    (the rows the full bootstrap would send the assigner) ─► job ─► commit ─► the job's placements
    and -D rows, and our compactions' files, recorded in the index (no data file read)

Used by the driver-local executor when the table is cross-partition (KEY_DYNAMIC), the key can be
indexed and the run has no sequence_by (the index does not keep stored sequence values). The Spark
job keeps the full bootstrap; the index then catches up from the files that job added, next time.
A failure to record the commit is logged and costs a catch-up, never a wrong answer.
"""

from __future__ import annotations

import logging
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..assign.groups import group_codes
from ..assign.rows import BUCKET, COUNT, KIND, SOURCE, Source, StageRows, conform
from ..store import binary_row
from ..store import key_index as ki
from ..store.datafile import DELETE, INSERT
from ..store.key_index import IndexState, KeyIndex
from ..store.scan import FileStoreScan, Plan
from ..store.table import FileStoreTable

log = logging.getLogger(__name__)

# KeyIndex's block size, shard size and runs per shard (tests make them tiny to reach every path)
INDEX_TUNING: dict = {}


def usable(stage: StageRows) -> bool:
    return stage.sequence_by is None and ki.supported(stage.schema)


class KeyLookup:
    """One job's use of the key index: the bootstrap rows, then the commit recorded."""

    def __init__(self, table: FileStoreTable, plan: Plan | None, stage: StageRows):
        self.table, self.plan, self.stage = table, plan, stage
        self.index = KeyIndex(table.io, table.path, stage.schema, **INDEX_TUNING)
        self.state: IndexState | None = None
        self.located: pa.Table | None = None

    def bootstrap(self, batch: pa.Table) -> tuple[pa.Table | None, pa.Table | None]:
        """(live keys, bucket counts) for the batch, in the layouts the assigner takes."""
        if self.plan is None or self.plan.snapshot is None:
            rows = batch.num_rows
            shards = 1
            while shards * self.index.keys_per_shard < rows:
                shards *= 2
            self.state = IndexState(shards, [[] for _ in range(shards)], {}, schema_id=self.stage.schema.id)
            self.located = self.index.lookup(self.state, batch.select(self.index.keys))
            return None, None
        self.state, self.located = self.index.locate(self.plan, batch.select(self.index.keys))
        return live_rows(self.located, self.stage), self.counts()

    def counts(self) -> pa.Table:
        """Each bucket's live keys, as the bootstrap's count rows (stage.live_key(True))."""
        counts = self.index.bucket_counts(self.state).rename_columns(
            list(self.stage.schema.partition_keys) + [BUCKET, COUNT])
        counts = counts.append_column(SOURCE, pa.array(np.full(counts.num_rows, Source.COUNT, np.int8)))
        return conform(counts, self.stage.live_key(True))

    def refresh(self) -> None:
        """For the Spark job, which looks keys up in its tasks (lookup_task): the index caught up to
        the job's snapshot, in the driver."""
        self.state = self.index.refresh(self.plan)

    def written(self, placements: pa.Table, entries: list) -> Callable[[int | None, list[int]], None]:
        """For the Spark job: the recorder of its commit, from where its writers put the rows
        (key, partition, BUCKET, KIND). Where those keys lived before is looked up again here, in
        the driver, against the state the job's tasks looked up in."""
        self.located = self.index.lookup(self.state, placements.select(self.index.keys))
        return self.recorder(placements, entries)

    def stats(self) -> dict:
        """What the refresh did (built, buckets read again or added to) and the keys found."""
        found = self.located.num_rows if self.located is not None else 0
        return {**(self.state.stats if self.state else {}), "keys_found": found}

    def recorder(self, assigned: pa.Table, entries: list) -> Callable[[int | None, list[int]], None]:
        """What records the commit in the index, once it is done: (our snapshot, our compactions')."""
        def record(snapshot_id: int | None, compactions: list[int]) -> None:
            placed, removed = self._placements(assigned)
            scan = FileStoreScan(self.table.io, self.table.path, self.stage.schema)
            compacted = []
            for sid in compactions:
                snapshot = scan.snapshots.snapshot(sid)
                metas = scan.manifest_lists.read(snapshot.delta_manifest_list)
                compacted.append([e for m in metas for e in scan.manifests.read(m.file_name)])
            self.index.record_commit(self.state, placed, removed, entries, compacted,
                                     compactions[-1] if compactions else snapshot_id)
        return record

    def _placements(self, assigned: pa.Table) -> tuple[pa.Table, pa.Table]:
        """(keys written live: key, partition, P, BUCKET, "_new"; keys retracted: key, P, BUCKET)."""
        keys, parts = self.index.keys, self.index.parts_only
        kinds = assigned.column(KIND)
        placed = assigned.filter(pc.equal(kinds, INSERT)).select(keys + parts + [BUCKET])
        removed = assigned.filter(pc.equal(kinds, DELETE)).select(keys + parts + [BUCKET])
        placed, removed = self._with_partition_bytes(placed), self._with_partition_bytes(removed)
        placed = placed.rename_columns([ki.BUCKET if c == BUCKET else c for c in placed.column_names])
        removed = removed.rename_columns([ki.BUCKET if c == BUCKET else c for c in removed.column_names])
        before = self.located.select(keys + [ki.P, ki.BUCKET]).rename_columns(keys + ["_old_p", "_old_b"])
        joined = placed.join(before, keys, join_type="left outer", use_threads=False)
        same = pc.and_(pc.equal(joined.column(ki.P), joined.column("_old_p")),
                       pc.equal(joined.column(ki.BUCKET), joined.column("_old_b")))
        new = pc.invert(pc.fill_null(same, False))
        placed = joined.drop_columns(["_old_p", "_old_b"]).append_column("_new", new)
        return placed, removed

    def _with_partition_bytes(self, rows: pa.Table) -> pa.Table:
        """rows + P, the partition as Paimon's binary row (serialized once per distinct partition)."""
        parts, types = self.index.parts, self.index.part_types
        cast = rows.cast(pa.schema([pa.field(f.name, self.stage.schema.field(f.name).type.to_arrow())
                                    if f.name in self.stage.schema.field_names else f for f in rows.schema]),
                         safe=False)  # exchange types (microseconds) to the table's, as the writer does
        # grouped, not joined: a null partition value is a partition too, and joins never match nulls
        codes, groups = group_codes(cast, parts)
        serialized = [binary_row.serialize(list(values), types) for values in groups]  # per partition, not per row
        return cast.append_column(ki.P, pa.array(serialized, pa.binary()).take(pa.array(codes)))


def live_rows(located: pa.Table, stage: StageRows) -> pa.Table:
    """KeyIndex.lookup's answer as the bootstrap's live-key rows (stage.live_key(True))."""
    live = located.drop_columns([ki.P])
    live = live.rename_columns([BUCKET if c == ki.BUCKET else c for c in live.column_names])
    live = live.append_column(SOURCE, pa.array(np.full(live.num_rows, Source.TABLE, np.int8)))
    return conform(live, stage.live_key(True))


def lookup_task(path: str, io, stage: StageRows, state: IndexState, tuning: dict):
    """Spark task: batch keys -> their live-key rows, from the index at `state` (the driver caught
    it up to the job's snapshot). A task looks up all its keys at once: on a local or shared disk
    the runs are memory-mapped and binary-searched in place, on an object store a touched run is
    fetched whole (bounded by a shard)."""
    def run(batches):
        batches = [b for b in batches if b.num_rows]
        if not batches:
            return
        index = KeyIndex(io, path, stage.schema, **tuning)
        located = index.lookup(state, pa.Table.from_batches(batches))
        yield from live_rows(located, stage).to_batches(max_chunksize=1 << 17)
    return run
