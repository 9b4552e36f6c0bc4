"""The bootstrap of a cross-partition upsert from the key index (dbt_paimon/key_index/), and the
commit's record in it.

    refresh the index to the job's snapshot ─► look up the batch's keys ─► live keys + bucket counts
    (the rows the full bootstrap would send the assigners) ─► assign ─► write; beside the writers,
    the job's placements and -D rows as runs (JobCommit.write) ─► commit ─► the runs and our
    compactions' files named in a new version of the index (no data file read)

Used when the table is cross-partition (KEY_DYNAMIC), the key can be indexed and the run has no
sequence_by (the index does not keep stored sequence values). Driver-local, the driver looks the
batch up (KeyLookup.bootstrap) and one thread writes the runs while others write the data files;
on Spark, the driver catches the index up, the batch's tasks send its rows to their assigners
(route_task), and each assigner looks its keys up (JobLookup) and writes their share of the runs
(JobCommit). The runs of a commit that did not happen are orphans clean() sweeps; a failure to
record a commit is logged and costs a catch-up, never a wrong answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ... import key_index as ki
from ...assign.rows import BUCKET, COUNT, KIND, SOURCE, Source, StageRows, conform
from ...key_index import IndexState, KeyIndex
from ...store.common import binary_row
from ...store.format.datafile import DELETE, INSERT
from ...store.common.groups import group_codes
from ...store.manifest.manifest import data_entries
from ...store.read.scan import FileStoreScan, Plan
from ...store.table import FileStoreTable
from . import tasks

log = logging.getLogger(__name__)

# KeyIndex's block size, shard size and runs per shard (tests make them tiny to reach every path)
INDEX_TUNING: dict = {}


def usable(stage: StageRows) -> bool:
    # on a branch too: the index of the branch the schema was read from (key_index/branches.py)
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
            return None, None  # a new table: no key lives anywhere yet
        self.state, self.located = self.index.locate(self.plan, batch.select(self.index.keys))
        return live_rows(self.located, self.stage), self.counts()

    def counts(self) -> pa.Table:
        """Each bucket's live keys, as the bootstrap's count rows (stage.live_key(True))."""
        return count_rows(self.index, self.state, self.stage)

    def refresh(self, build=None) -> None:
        """For the Spark job, whose assigners look their keys up (JobLookup): the index caught up
        to the job's snapshot, in the driver; built (when missing, outgrown or unreadable) by
        `build` (index_build's Spark job: the driver never reads the table's keys)."""
        self.state = self.index.refresh(self.plan, build)

    def stats(self) -> dict:
        """What the refresh did (built, buckets read again or added to) and the keys found."""
        found = self.located.num_rows if self.located is not None else 0
        return {**(self.state.stats if self.state else {}), "keys_found": found}

    def job_lookup(self) -> "JobLookup":
        """What looks the batch's keys up in a Spark job's assigners, in the state refreshed here."""
        return JobLookup(self.table.path, self.table.io, self.stage, self.state, dict(INDEX_TUNING))

    def job_commit(self) -> "JobCommit":
        """What writes the job's share of the commit's record in the index before the
        commit (the state the lookup used, this commit's run seq and new buckets' generation, both
        drawn from the state here, in the driver): Spark's assigner tasks, or a driver-local job's
        thread beside its writers."""
        return JobCommit(self.table.path, self.table.io, self.stage, self.state, dict(INDEX_TUNING),
                         self.state.new_seq(), self.state.new_gen())

    def job_recorder(self, commit: "JobCommit", written: list, entries: list,
                     merged: frozenset = frozenset()) -> Callable[[int | None, list[int]], None]:
        """What records the commit in the index once it is done, called with (our snapshot, our
        compactions'): the (runs, count changes) of JobCommit.write named in a new
        version; `merged`: the shards whose older runs a Spark job merged in."""
        def record(snapshot_id: int | None, compactions: list[int]) -> None:
            runs = [r for part_runs, _ in written for r in part_runs]
            self.index.record_commit(self.state, runs, [d for _, d in written], data_entries(entries),
                                     self._compacted(compactions),
                                     compactions[-1] if compactions else snapshot_id, commit.gen, commit.seq, merged)
        return record

    def _compacted(self, compactions: list[int]) -> list[list]:
        """Our compactions' ADD/DELETE entries, read back from their delta manifests."""
        scan = FileStoreScan(self.table.io, self.table.path, self.stage.schema)
        compacted = []
        for sid in compactions:
            snapshot = scan.snapshots.snapshot(sid)
            metas = scan.manifest_lists.read(snapshot.delta_manifest_list)
            compacted.append([e for m in metas for e in scan.manifests.read(m.file_name, m.file_size)])
        return compacted


# Keys an assigner looks up at a time: a lookup's own arrays (hashes, their order, the candidates
# found) stay a fraction of the share the assigner holds anyway
LOOKUP_ROWS = 1 << 19


@dataclass(frozen=True)
class JobIndex:
    """The key index as a job's tasks use it (pickled into each Spark assigner task, or used by the
    driver-local job's threads): where it is, and the state the job's lookups saw."""

    path: str
    io: object
    stage: StageRows
    state: IndexState  # caught up to the job's snapshot by the driver (before the commit)
    tuning: dict

    def index(self) -> KeyIndex:
        return KeyIndex(self.io, self.path, self.stage.schema, **self.tuning)


@dataclass(frozen=True)
class JobLookup(JobIndex):
    """What a Spark job's assigner asks the key index (beside JobCommit, with the same state): an
    assigner gets every batch row of its keys, so it finds their live places itself, in parallel
    with the others, instead of the task that reads the batch, which holds all of a one-partition
    batch (a single file's rows) on one core; and the counts of the buckets it owns, which the
    state holds."""

    def live_keys(self, batch: pa.Table) -> pa.Table:
        """The live-key rows (stage.live_key(True): where the table has each key of `batch`)."""
        index = self.index()
        keys = batch.select(index.keys)
        found = [index.lookup(self.state, keys.slice(at, LOOKUP_ROWS))
                 for at in range(0, max(keys.num_rows, 1), LOOKUP_ROWS)]
        return live_rows(pa.concat_tables(found), self.stage)

    def counts(self, assigner: int, assigners: int) -> pa.Table:
        """The live keys of each bucket the assigner owns (b % assigners == its id), as count rows
        (stage.live_key(True)): from the state the task has, not sent through the shuffle."""
        counts = count_rows(self.index(), self.state, self.stage)
        buckets = counts.column(BUCKET).to_numpy(zero_copy_only=False).astype(np.int64)
        return counts.filter(pa.array(buckets % assigners == assigner))


@dataclass(frozen=True)
class JobCommit(JobIndex):
    """What writes a job's share of its commit's record in the key index (in a Spark assigner
    task, or in the driver-local job's thread beside its writers)."""

    seq: int  # the runs of this commit, whichever task writes them
    gen: int  # the generation of the buckets this commit creates

    def write(self, assigned: pa.Table, in_place: np.ndarray) -> tuple[list[tuple[int, str]], dict]:
        """In an assigner: its rows' entries as runs (one per shard), and each of their buckets'
        count change. `in_place`: per assigned row, a +I written where its key lived
        (AssignResult.in_place); an assigner holds every row of its keys, so it knows."""
        index = self.index()
        placed, removed = placements(index, self.stage, assigned, in_place)
        entries, deltas = index.commit_entries(self.state, placed, removed, self.gen)
        return index.write_runs(entries, self.state.shards, self.seq), deltas


def merge_runs_task(path: str, io, stage: StageRows, tuning: dict, seq: int, state=None, new_gen: int | None = None):
    """Spark task: pickled (shard, the commit's run names, the shard's older runs to merge in) items
    -> one run per shard (KeyIndex.merge_runs; older runs only with the job's `state`), as pickled
    (shard, name or None) payloads."""
    def run(batches):
        index = KeyIndex(io, path, stage.schema, **tuning)
        yield tasks.payload([(s, index.merge_runs(names, seq, older, state, new_gen))
                             for s, names, older in tasks.blobs(batches)])
    return run


def placements(index: KeyIndex, stage: StageRows, assigned: pa.Table,
               in_place: np.ndarray) -> tuple[pa.Table, pa.Table]:
    """(keys written live: key, partition, P, BUCKET, "_new"; keys retracted: key, P, BUCKET), from
    assigned rows (+I and -D, their BUCKET). A +I is new to its bucket unless it is an update in
    place (`in_place`, from the assigner, which compared each key's old and new place already)."""
    keys, parts = index.keys, index.parts_only
    kinds = assigned.column(KIND)
    inserts = pc.equal(kinds, INSERT).to_numpy(zero_copy_only=False)
    placed = assigned.filter(pa.array(inserts)).select(keys + parts + [BUCKET])
    removed = assigned.filter(pc.equal(kinds, DELETE)).select(keys + parts + [BUCKET])
    placed, removed = _with_partition_bytes(index, stage, placed), _with_partition_bytes(index, stage, removed)
    placed = placed.rename_columns([ki.BUCKET if c == BUCKET else c for c in placed.column_names])
    removed = removed.rename_columns([ki.BUCKET if c == BUCKET else c for c in removed.column_names])
    return placed.append_column("_new", pa.array(~in_place[inserts])), removed


def _with_partition_bytes(index: KeyIndex, stage: StageRows, rows: pa.Table) -> pa.Table:
    """rows + P, the partition as Paimon's binary row (serialized once per distinct partition)."""
    parts, types = index.parts, index.part_types
    cast = rows.cast(pa.schema([pa.field(f.name, stage.schema.field(f.name).type.to_arrow())
                                if f.name in stage.schema.field_names else f for f in rows.schema]),
                     safe=False)  # exchange types (microseconds) to the table's, as the writer does
    # grouped, not joined: a null partition value is a partition too, and joins never match nulls
    codes, groups = group_codes(cast, parts)
    serialized = [binary_row.serialize(list(values), types) for values in groups]  # per partition, not per row
    return cast.append_column(ki.P, pa.array(serialized, pa.binary()).take(pa.array(codes)))


def count_rows(index: KeyIndex, state: IndexState, stage: StageRows) -> pa.Table:
    """Each bucket's live keys in `state`, as the bootstrap's count rows (stage.live_key(True))."""
    counts = index.bucket_counts(state).rename_columns(list(stage.schema.partition_keys) + [BUCKET, COUNT])
    counts = counts.append_column(SOURCE, pa.array(np.full(counts.num_rows, Source.COUNT, np.int8)))
    return conform(counts, stage.live_key(True))


def live_rows(located: pa.Table, stage: StageRows) -> pa.Table:
    """KeyIndex.lookup's answer as the bootstrap's live-key rows (stage.live_key(True))."""
    live = located.drop_columns([ki.P])
    live = live.rename_columns([BUCKET if c == ki.BUCKET else c for c in live.column_names])
    live = live.append_column(SOURCE, pa.array(np.full(live.num_rows, Source.TABLE, np.int8)))
    return conform(live, stage.live_key(True))


ROUTE_ROWS = 1 << 17  # batch rows hashed and packed at a time by a route task


def route_task(path: str, io, stage: StageRows, tuning: dict, assigner_routes: list[int],
               chunk_rows: int = ROUTE_ROWS):
    """Spark task over the batch (a cross-partition table's job with the key index): its rows
    packed per assigner (tasks.pack_to), a key's assigner being its Paimon key hash mod the
    assigners (tasks.assigner_of), so that the batch is read once and crosses the shuffle in a few
    large values. Hashes and packs chunk_rows rows at a time: a task holds that many rows,
    whatever its share. The assigners look their keys up (JobLookup); a new table's first load is
    routed the same way, so that the buckets its assigners open are owned by the assigners of
    their keys in the next runs."""
    batch_layout = pa.schema(list(stage.batch()) + [stage.routed(True).field(SOURCE)])

    def route(index: KeyIndex, rows: pa.Table):
        hashes = index.hashes(rows)
        rows = rows.append_column(SOURCE, pa.array(np.full(rows.num_rows, Source.BATCH, np.int8)))
        yield from tasks.pack_to(conform(rows, batch_layout), tasks.assigner_of(hashes, len(assigner_routes)),
                                 assigner_routes)

    def run(batches):
        index = KeyIndex(io, path, stage.schema, **tuning)
        pending, held = [], 0
        for batch in batches:
            if batch.num_rows:
                pending.append(batch)
                held += batch.num_rows
            if held >= chunk_rows:
                yield from route(index, pa.Table.from_batches(pending))
                pending, held = [], 0
        if pending:
            yield from route(index, pa.Table.from_batches(pending))
    return run
