"""One sorted run's file: written once in the run order with its fences, then only read.

A run is Arrow IPC, uncompressed, its entries sorted by (hash, key), in record batches of
`block_rows`; its metadata holds its partitions (an entry names one by its index among them) and the
hash at each page boundary of the file's hashes (the fences). Runs are memory-mapped where the disk is
local, so that a lookup reads only the pages it touches (lookup.py), and fetched whole from an object
store.
"""

from __future__ import annotations

import json
import mmap
import os
import uuid
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.common import binary_row
from ..store.common.fileio import FileIO, local_path
from ..store.common.groups import group_runs
from ..store.common.key_order import stable_argsort
from .layout import BUCKET, GEN, H, LIVE, LOC, P, Layout, as_words, from_words
from .versions import IndexState

HEAD_BYTES = 16 << 10        # a lookup asks for each run's first and last this many bytes at once
                             # (a 2M-entry run: 8 KB of fences, its partitions, a batch header)


def fence_positions(n: int, step: int, first: int | None) -> np.ndarray:
    """Where a record batch of n entries has its fences. first None (formats 3-5): every step-th
    entry. Else (format 6) entry 0, then first, first + step, ... : ceil(n / step) + 1 of them
    whatever first is (0 <= first < step), so that the file's layout does not depend on it. A
    position past the last entry holds the last hash."""
    if first is None or n == 0:
        return np.arange(0, n, step, dtype=np.int64)
    return np.concatenate([[0], first + step * np.arange(-(-n // step), dtype=np.int64)])


def _sorted(layout: Layout, entries: pa.Table) -> np.ndarray:
    """Indices of entries (entry schema, one chunk) in the run order, (hash, key), entries of
    one hash and key kept in their order. The hashes are sorted as integers, then only the
    hashes shared by different keys (a few in a commit's 250K entries; a moved key's entry and
    its tombstone share theirs) by key: 6 ms for W1's commit, against 25 ms for Arrow's sort
    over (hash, key) and the take of every column after it."""
    hashes = entries.column(H).to_numpy()
    order = stable_argsort(hashes)
    ordered = hashes[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])  # i and i + 1 share a hash
    if tied.size:
        keys = entries.select(layout.keys)
        one, other = keys.take(pa.array(order[tied])), keys.take(pa.array(order[tied + 1]))
        differ = np.zeros(tied.size, np.bool_)
        for k in layout.keys:
            differ |= pc.not_equal(one.column(k), other.column(k)).to_numpy(zero_copy_only=False)
        if differ.any():  # the entries of those hashes (contiguous, in hash order) sorted by key
            at = np.flatnonzero(np.isin(ordered, ordered[tied[differ]]))
            among = order[at]
            order[at] = among[pc.sort_indices(entries.select([H] + layout.keys).take(pa.array(among)),
                                              sort_keys=layout.run_order()).to_numpy()]
    return order


def _encode(layout: Layout, entries: pa.Table, codes: np.ndarray, listed: pa.Array, block_rows: int,
            step: int) -> pa.Buffer:
    """A run's file: `entries` (in the run order: H, the key columns, BUCKET, GEN, LIVE), each
    entry's partition its index (`codes`) among the run's partitions (`listed`, binary rows), the
    four and a fixed-width key's words packed into _loc; in record batches of `block_rows`, with a
    fence every `step` hashes, on the page boundaries of the file's hashes."""
    loc_type = layout.file_schema.field(LOC).type
    loc = np.empty((entries.num_rows, loc_type.list_size), np.int32)
    loc[:, 0] = codes
    loc[:, 1] = entries.column(BUCKET).to_numpy()
    loc[:, 2] = entries.column(GEN).to_numpy()
    loc[:, 3] = entries.column(LIVE).to_numpy(zero_copy_only=False)
    at = 4
    for k, words in zip(layout.keys, layout.key_words or ()):
        loc[:, at:at + words] = as_words(entries.column(k).combine_chunks(), words)
        at += words
    columns = [entries.column(H)] + [entries.column(k) for k in layout.keys if k in layout.file_schema.names] \
        + [pa.FixedSizeListArray.from_arrays(pa.array(loc.ravel()), type=loc_type)]
    encoded = pa.Table.from_arrays(columns, schema=layout.file_schema).combine_chunks()
    batches = encoded.to_batches(max_chunksize=block_rows)
    hashes = [b.column(0).to_numpy() for b in batches]
    listed = json.dumps([v.hex() for v in listed.to_pylist()]).encode()

    def file_bytes(firsts: np.ndarray) -> tuple[pa.Buffer, np.ndarray]:
        """The run's file with its fences for these firsts, and where each batch's hashes
        start in it (bytes)."""
        fences = [h[np.minimum(fence_positions(len(h), step, int(f)), len(h) - 1)] for h, f in zip(hashes, firsts)]
        schema = layout.file_schema.with_metadata({
            b"fence_rows": str(step).encode(), b"fence_firsts": firsts.astype(np.int32).tobytes(),
            b"fences": np.concatenate(fences).astype(np.int32).tobytes(), b"partitions": listed})
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
        data = sink.getvalue()
        reader = pa.ipc.open_file(data)  # zero-copy: its buffers' addresses are inside data
        return data, np.array([reader.get_batch(i).column(0).buffers()[1].address - data.address
                               for i in range(reader.num_record_batches)], np.int64)

    # The fences sit where the hashes cross a page boundary of the file, so that the window
    # between two is one page of hashes (at a fixed step, 1 KB windows straddled two pages a
    # quarter of the time). Where the hashes start is known once the file is laid out; the
    # fences' count is the same whatever their firsts, so the second layout is the first's.
    data, starts = file_bytes(np.zeros(len(batches), np.int64))
    # (a batch of a page of hashes or less is left as it is: a commit's small runs, one per
    # touched shard, are written once)
    firsts = np.where(np.array([len(h) for h in hashes]) > step, (-(starts // 4)) % step, 0)
    if firsts.any():
        del data  # one layout in memory at a time (a bulk load's shard run is ~50 MB)
        data, again = file_bytes(firsts)
        if not np.array_equal(again, starts):
            raise AssertionError("a key index run's layout moved with its fences")
    return data


class RunFiles:
    """The run files of one table's index, in `dir`: written, opened (each once per process for
    lookups) and decoded back to the entry schema."""

    def __init__(self, io: FileIO, dir: str, layout: Layout, block_rows: int, fence_rows: int):
        self.io, self.dir, self.layout = io, dir, layout
        self.block_rows, self.fence_rows = block_rows, fence_rows
        # what the index read: its runs' pages asked for, and the data files a build or a catch-up
        # read keys from (bench, logs)
        self.bytes_read = 0
        self._partition_columns: dict[bytes, dict[str, pa.Array]] = {}
        self._partition_values: dict[bytes, list] = {}  # a partition's binary row, decoded
        # runs opened for lookups: a route task looks its rows up chunk by chunk, and would map
        # (on an object store: fetch) each touched run again per chunk
        self._opened: dict[str, tuple] = {}

    # ---- writing ---------------------------------------------------------------------------------

    def shares(self, entries: pa.Table, shards: int) -> tuple[pa.Table, list[tuple[int, np.ndarray]]]:
        """entries in the entry schema, and per shard they fall in (ascending) its entries' indices
        in the run order: sorted once, not filtered and sorted per shard."""
        entries = entries.cast(self.layout.entry_schema).combine_chunks()
        order = _sorted(self.layout, entries)
        shard = self.layout.shard_of(entries.column(H).to_numpy()[order], shards)
        by_shard, spans = group_runs(shard)  # stable: each shard's share stays in the run order
        return entries, [(int(shard[by_shard[a]]), order[by_shard[a:b]]) for a, b in spans]

    def write_runs(self, entries: pa.Table | None, shards: int, seq: int) -> list[tuple[int, str]]:
        """One run per shard the entries fall in, all at `seq`: (shard, run name) each."""
        if entries is None or entries.num_rows == 0:
            return []
        entries, shares = self.shares(entries, shards)
        return [(s, self.write_run(None, entries, seq, rows=rows)[1]) for s, rows in shares]

    def write_run(self, state: IndexState | None, entries: pa.Table, seq: int | None = None,
                  in_order: bool = False, rows: np.ndarray | None = None) -> tuple[int, str]:
        """One sorted run of entries (one shard's), in record batches of block_rows entries; its seq
        the state's next, or `seq` (the runs of one commit written by several Spark tasks).
        in_order: the entries are sorted by (hash, key) already. rows: the run is these entries
        (indices, in the run order, into the entries `shares` gave: in the entry schema already)."""
        layout = self.layout
        if rows is None:
            entries = entries.cast(layout.entry_schema).combine_chunks()
            if not in_order:
                rows = _sorted(layout, entries)
        if seq is None:
            seq = state.new_seq()
        name = f"run-{seq:08d}-{uuid.uuid4().hex[:12]}.arrow"
        self.io.mkdirs(self.dir)
        # the partitions by their codes: only integers are taken into the run's order (taking the
        # binary rows and partition values took longer than the sort)
        partitions = pc.dictionary_encode(entries.column(P)).combine_chunks()
        codes, listed = partitions.indices.to_numpy(), partitions.dictionary
        if rows is not None:
            codes = codes[rows]
            entries = entries.select([H] + layout.keys + [BUCKET, GEN, LIVE]).take(pa.array(rows))
            present = np.bincount(codes, minlength=len(listed)) > 0  # a shard's run lists its own only
            codes = (np.cumsum(present) - 1)[codes].astype(np.int32)
            listed = listed.filter(pa.array(present))
        data = _encode(layout, entries, codes, listed, self.block_rows, self.fence_rows)
        with self.io.output(f"{self.dir}/{name}") as out:
            out.write(data)
        return seq, name

    # ---- reading ---------------------------------------------------------------------------------

    def size(self, name: str) -> int:
        return self.io.size(f"{self.dir}/{name}")

    def open_run(self, name: str,
                 random_access: bool = False) -> tuple[pa.ipc.RecordBatchFileReader, "mmap.mmap | None"]:
        """A run's reader, and on a local disk the memory map under it. For a lookup
        (`random_access`) the map reads no more than the pages asked for (no read-ahead: a lookup
        touches a page here and there, and read-ahead around each would read most of the file)."""
        if random_access:  # runs never change: a task's later chunks reuse it
            self.open_runs([name])
            if name in self._opened:
                return self._opened[name]
        path = f"{self.dir}/{name}"
        if self.io.is_object_store:  # no memory map: the run is fetched whole (bounded by a shard)
            data = self.io.read_bytes(path)
            self.bytes_read += len(data)
            opened = pa.ipc.open_file(pa.BufferReader(data)), None
            if random_access:
                self._opened[name] = opened
            return opened
        mapped = self._map(name, random_access=False)
        # zero-copy: Arrow's buffers point into the map, which lives as long as they do
        return pa.ipc.open_file(pa.py_buffer(mapped)), mapped

    def _map(self, name: str, random_access: bool) -> mmap.mmap:
        fd = os.open(local_path(f"{self.dir}/{name}"), os.O_RDONLY)
        try:
            mapped = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        finally:
            os.close(fd)
        if random_access and hasattr(mapped, "madvise"):
            mapped.madvise(mmap.MADV_RANDOM)
        return mapped

    def open_runs(self, names: Iterable[str]) -> None:
        """Open a lookup's runs together: each run's head and tail (its schema and fences, its first
        batch's header, the footer) asked for from the kernel at once before any is parsed, so
        that a cold lookup reads them in parallel, not a few faults per run one after the other.
        (On an object store each is fetched whole when first asked for: open_run.)"""
        todo = [n for n in dict.fromkeys(names) if n not in self._opened]
        if self.io.is_object_store or not todo:
            return
        maps = {}
        for name in todo:
            mapped = maps[name] = self._map(name, random_access=True)
            if hasattr(mapped, "madvise"):
                size = len(mapped)
                tail = max(0, size - HEAD_BYTES) // mmap.PAGESIZE * mmap.PAGESIZE
                mapped.madvise(mmap.MADV_WILLNEED, 0, min(size, HEAD_BYTES))
                mapped.madvise(mmap.MADV_WILLNEED, tail, size - tail)
                self.bytes_read += min(size, HEAD_BYTES) + (size - tail)
        for name, mapped in maps.items():  # zero-copy: Arrow's buffers point into the maps
            self._opened[name] = pa.ipc.open_file(pa.py_buffer(mapped)), mapped

    def read_run(self, name: str) -> pa.Table:
        """A run whole, in the entry schema (a merge)."""
        reader, _ = self.open_run(name)
        return self.decode(reader.read_all(), reader.schema)

    def _partitions(self, listed: bytes) -> dict[str, pa.Array]:
        """A run's partitions (its metadata's list) as columns: the partition fields outside the
        key and P, one row per partition; decoded once per list (a lookup decodes each record
        batch's matches, and a run's batches share the list)."""
        if listed not in self._partition_columns:
            layout = self.layout
            partitions = [bytes.fromhex(v) for v in json.loads(listed)]
            # each partition decoded once: the runs of the shards list mostly the same partitions
            for p in partitions:
                if p not in self._partition_values:
                    self._partition_values[p] = binary_row.deserialize(p, layout.part_types)
            values = [self._partition_values[p] for p in partitions]
            columns = {name: pa.array([v[layout.parts.index(name)] for v in values],
                                      layout.entry_schema.field(name).type)
                       for name in layout.parts_only}
            columns[P] = pa.array(partitions, pa.binary())
            self._partition_columns[listed] = columns
        return self._partition_columns[listed]

    def decode(self, rows: pa.Table, run_schema: pa.Schema) -> pa.Table:
        """Rows of a run's file (any of its rows: a lookup's matches, or all) in the entry schema:
        _loc unpacked, the partition's binary row and values taken from the run's partitions."""
        layout = self.layout
        width = run_schema.field(LOC).type.list_size
        loc = rows.column(LOC).combine_chunks().flatten().to_numpy().reshape(-1, width)
        at = pa.array(loc[:, 0])
        cols = {H: rows.column(H)}
        word = 4
        for k, words in zip(layout.keys, layout.key_words or [0] * len(layout.keys)):
            if k in run_schema.names:  # a run with key columns (any key of format 4, a string key)
                cols[k] = rows.column(k)
            else:  # the key's words in _loc
                cols[k] = from_words(loc[:, word:word + words], layout.entry_schema.field(k).type)
                word += words
        for name, column in self._partitions(run_schema.metadata[b"partitions"]).items():
            cols[name] = column.take(at)
        cols[BUCKET] = pa.array(np.ascontiguousarray(loc[:, 1]))
        cols[GEN] = pa.array(np.ascontiguousarray(loc[:, 2]))
        cols[LIVE] = pa.array(loc[:, 3] != 0)
        return pa.table(cols, schema=layout.entry_schema)
