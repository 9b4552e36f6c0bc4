"""`KeyIndex`: the key index of one table, as the engine uses it.

It holds the table's `Layout`, its `RunFiles` and its `Versions`, and hands each call to the module
that does the work with the parts it needs: lookup.py, build.py, catch_up.py, record.py,
merge_policy.py. Whether to rebuild (a missing, unreadable, outgrown or foreign index) is decided
here, in `refresh` and `locate`.
"""

from __future__ import annotations

import logging
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..store.common import binary_row
from ..store.common.fileio import FileIO
from ..store.manifest.manifest import ManifestEntry
from ..store.common.branch import MAIN
from ..store.read.read import TableRead
from ..store.read.scan import DataSplit, Plan
from ..store.schema.schema import TableSchema
from . import build as builds  # `build`: KeyIndex.refresh's argument
from . import lookup, merge_policy, record
from .catch_up import catch_up
from .layout import BLOCK_ROWS, BUCKET, FENCE_ROWS, KEYS_PER_SHARD, Layout, index_dir, versions_dir
from .merge_policy import MAX_RUNS
from .run_file import RunFiles
from .versions import IndexState, Versions

log = logging.getLogger(__name__)


class KeyIndex:
    """The key index of one table's branch (schema: the branch's latest; it names the branch)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, *, block_rows: int = BLOCK_ROWS,
                 keys_per_shard: int = KEYS_PER_SHARD, max_runs: int = MAX_RUNS, fence_rows: int = FENCE_ROWS):
        self.keys_per_shard, self.max_runs = keys_per_shard, max_runs
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.dir = index_dir(self.table_path)
        self.layout = Layout(schema)
        self.files = RunFiles(io, self.dir, self.layout, block_rows, fence_rows)
        branch = schema.branch
        main = Versions(io, self.dir, self.layout, self.table_path) if branch != MAIN else None
        self.versions = Versions(io, versions_dir(self.table_path, branch), self.layout, self.table_path,
                                 runs_dir=self.dir, main=main)
        # what callers read of the layout
        self.keys, self.parts, self.parts_only = self.layout.keys, self.layout.parts, self.layout.parts_only
        self.key_types, self.part_types = self.layout.key_types, self.layout.part_types
        self.entry_schema = self.layout.entry_schema

    @property
    def bytes_read(self) -> int:
        """What the last refresh and the lookups since read: pages of runs, and data files."""
        return self.files.bytes_read

    @bytes_read.setter
    def bytes_read(self, value: int) -> None:
        self.files.bytes_read = value

    # ---- versions --------------------------------------------------------------------------------

    def load(self) -> IndexState | None:
        return self.versions.load()

    def save(self, state: IndexState) -> None:
        self.versions.save(state)

    def clean(self, state: IndexState, now_ms: int | None = None) -> int:
        return self.versions.clean(state, now_ms)

    def sweep(self, state: IndexState) -> None:
        self.versions.sweep(state)

    # ---- keys and lookups ------------------------------------------------------------------------

    def hashes(self, keys: pa.Table) -> np.ndarray:
        return self.layout.hashes(keys)

    shard_of = staticmethod(Layout.shard_of)

    def lookup(self, state: IndexState, keys: pa.Table, hashes: np.ndarray | None = None) -> pa.Table:
        """Where each of `keys` lives (lookup.lookup): the key columns, the partition fields, P and
        BUCKET of each live key; hashes: the keys' hashes, when the caller has them."""
        return lookup.lookup(self.files, state, keys, hashes)

    def bucket_counts(self, state: IndexState) -> pa.Table:
        """Each (partition, bucket)'s live keys: partition fields, BUCKET, "count"."""
        items = [(p, b, s.count) for (p, b), s in state.buckets.items()]
        values = [binary_row.deserialize(p, self.part_types) for p, _, _ in items]
        cols = {name: pa.array([v[i] for v in values], self.schema.field(name).type.to_arrow())
                for i, name in enumerate(self.parts)}
        cols[BUCKET] = pa.array([b for _, b, _ in items], pa.int32())
        cols["count"] = pa.array([c for _, _, c in items], pa.int64())
        return pa.table(cols)

    def key_reader(self) -> TableRead:
        """A reader of the table's live keys (the key columns of each split, merged)."""
        return TableRead(self.io, self.table_path, self.schema, self.keys)

    # ---- building (build.py) ---------------------------------------------------------------------

    def new_build(self, plan: Plan) -> IndexState:
        return builds.new_build(plan, self.keys_per_shard, self.schema.id)

    def split_entries(self, split: DataSplit, live: pa.Table, gen: int) -> pa.Table:
        return builds.split_entries(self.files, split, live, gen)

    def build(self, plan: Plan, read_split=None) -> IndexState:
        """The index of the whole table at `plan` (every live key read once), in this process."""
        read_split = read_split or self.key_reader().read_split
        return builds.build(self.files, self.versions, plan, read_split, self.keys_per_shard, self.max_runs)

    def adopt_build(self, state: IndexState, runs: Iterable[tuple[int, str]], counts: dict, seq: int) -> None:
        builds.adopt_build(self.versions, state, runs, counts, seq)

    def shard_runs(self, entries: pa.Table, shards: int, seq: int) -> tuple[list[tuple[int, str]], dict]:
        return builds.shard_runs(self.files, entries, shards, seq)

    # ---- catching up (catch_up.py) ---------------------------------------------------------------

    def refresh(self, plan: Plan, build=None) -> IndexState:
        """The index caught up to `plan`'s snapshot (built when missing or unusable, by `build`:
        a callable of the plan returning the saved state; default: this process's build)."""
        self.bytes_read = 0
        build = build or self.build
        state = self.load()
        if state is None:
            return build(plan)
        if sum(b.count for b in state.buckets.values()) > 4 * state.shards * self.keys_per_shard:
            log.info("key index of %s outgrew its %d shards: rebuilt", self.table_path, state.shards)
            return build(plan)
        try:
            return catch_up(self.files, self.versions, state, plan, self.key_reader(), self.max_runs)
        except (OSError, ValueError, pa.ArrowException) as e:
            log.warning("key index of %s could not be caught up (%s): rebuilt", self.table_path, e)
            return build(plan)

    def locate(self, plan: Plan, keys: pa.Table) -> tuple[IndexState, pa.Table]:
        """The index caught up to `plan`, and where `keys` live (lookup); a run that cannot be read
        (deleted, truncated) makes the index be rebuilt, then looked up again."""
        state = self.refresh(plan)
        try:
            return state, self.lookup(state, keys)
        except (OSError, ValueError, pa.ArrowException) as e:
            log.warning("key index of %s could not be read (%s): rebuilt", self.table_path, e)
            state = self.build(plan)
            return state, self.lookup(state, keys)

    # ---- after our own commit (record.py) --------------------------------------------------------

    def record_commit(self, state: IndexState, runs: Iterable[tuple[int, str]], deltas: Iterable[dict],
                      added_files: Iterable[ManifestEntry], compactions: Sequence[Sequence[ManifestEntry]],
                      snapshot_id: int | None, new_gen: int, seq: int, merged: Iterable[int] = ()) -> None:
        record.record_commit(self.files, self.versions, state, runs, deltas, added_files, compactions,
                             snapshot_id, new_gen, seq, merged, self.max_runs)

    def commit_entries(self, state: IndexState, placed: pa.Table | None, removed: pa.Table | None,
                       new_gen: int) -> tuple[pa.Table | None, dict]:
        return record.commit_entries(self.layout, state, placed, removed, new_gen)

    def write_runs(self, entries: pa.Table | None, shards: int, seq: int) -> list[tuple[int, str]]:
        """A task's share of a commit: one run per shard its entries fall in, all at
        the commit's `seq` (within a seq a key's live entry outranks its tombstone, whichever task
        wrote them). Unreferenced until the driver's record_commit saves a manifest."""
        return self.files.write_runs(entries, shards, seq)

    def merge_runs(self, names: Sequence[str], seq: int, older: Sequence[tuple[int, str]] = (),
                   state: IndexState | None = None, new_gen: int | None = None) -> str | None:
        return merge_policy.merge_runs(self.files, names, seq, older, state, new_gen)
