"""The key index of a cross-partition table: key -> (partition, bucket), kept beside the table.

Paimon's cross-partition upsert (KEY_DYNAMIC) must learn where every incoming key lives; Paimon and
our full bootstrap read the keys of the whole table for every job. This index answers for a batch
at a cost that grows with the batch and with what changed since the index was last brought up to
date, not with the table (docs/architecture.md, "The key index").

Layout, at `<warehouse>/<db>.db/.<table>.dbt-key-index/` (beside the table: Paimon's readers,
writers, expiration and orphan-file removal never list it; our catalog skips hidden names):

    LATEST                    {"manifest": name}: replaced atomically, last
    manifest-<uuid>.json      shards, each shard's runs newest first, per (partition, bucket)
                              the data files the index reflects, its generation and live-key count,
                              and the runs and manifests it retired (no longer names), with when
    run-<seq>-<uuid>.arrow    one sorted run of one shard: Arrow IPC, uncompressed, entries
                              sorted by (hash, key), in its metadata the hash at each page boundary
                              of the file's hashes ("fences"); memory-mapped, and a lookup reads
                              only the pages it needs.
                              Columns: _h, _loc (per entry int32s: the index of its partition
                              among the run's, in the metadata, bucket, generation, live, then a
                              fixed-width key's 32-bit words), and the key columns only for a key
                              with a string column: a key found costs a page of _loc (two with
                              key columns)

An entry is (hash, key, partition, bucket, generation, live). A (partition, bucket)'s generation
changes whenever the index cannot carry a change of its files forward (files removed or rewritten by
someone else, deletes among the files added, a rollback, ...): its keys are then read again
(cost ∝ that bucket) under the new generation, and every older entry naming it becomes invalid. A
lookup takes, per key, the newest valid entry (a live one before a tombstone of the same run).

Staying right whatever else writes: `refresh(plan)` compares each (partition, bucket)'s data files
in the snapshot about to be used with those the index reflects: equal, nothing to do; only files
added and none holds a delete, their keys are live there (read ∝ the added files); anything else,
the bucket is re-read under a new generation; a bucket gone is dropped. A missing, unreadable or
foreign index is rebuilt from the whole table, once. Each manifest is correct for the files it
records, so a crash anywhere (runs written, manifest written, pointer not yet swapped) leaves a
state the next refresh starts from; concurrent writers swap the pointer between correct versions.

Why not otherwise:
- Parquet runs with row-group statistics, or runs cut into blocks found through fences: a batch's keys
  spread over a run hit nearly every block, so a lookup read the whole run. A memory-mapped,
  uncompressed Arrow run searched in place touches a page or two per key; fences on page boundaries
  keep that true at any size.
- Reading the runs' hash columns whole: fast on a warm local disk, but it costs in proportion to the
  table, where the fenced lookup costs in proportion to the batch.
- A dense array or a single sorted file: one write rewrites it all; sharded runs make a write cost in
  proportion to the change and a read to the batch.
- Walking the snapshots since the one the index reflects: breaks on expiration and rollback;
  comparing file sets per bucket does not.
- The index among Paimon's own files (an index type in `index/`): Paimon's expiration and orphan
  removal would delete or misread it, and other Paimon readers would meet an unknown index type.
- A Bloom filter alone (what the full bootstrap uses): it prunes the shuffle, not the read.
"""

from __future__ import annotations

import json
import logging
import mmap
import os
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import binary_row
from .fileio import FileIO, local_path
from .groups import group_codes, group_runs
from .key_hash import key_hashes
from .key_order import stable_argsort
from .manifest import ADD, ManifestEntry
from .options import BucketMode
from .read import TableRead
from .scan import DataSplit, Plan
from .schema import TableSchema

log = logging.getLogger(__name__)

FORMAT = 6  # 2: partition columns dictionary-encoded in runs; 3: runs carry fences; 4: one _loc column;
#             5: fixed-width keys inside _loc; 6: fences on the page boundaries of the hashes
READS_FORMATS = (4, 5, 6)  # each run's file says its layout (key columns, where its fences sit)
BLOCK_ROWS = 1 << 22         # entries per record batch of a run (a lookup searches each in place;
                             # a shard's run is one batch, whose header a cold lookup reads first)
HEAD_BYTES = 16 << 10        # a lookup asks for each run's first and last this many bytes at once
                             # (a 2M-entry run: 8 KB of fences, its partitions, a batch header)
PAGE_BYTES = 4096
FENCE_ROWS = PAGE_BYTES // 4  # a fence on each page of (int32) hashes: a key's window is one page
KEYS_PER_SHARD = 2_000_000   # a shard's runs merged are about this many keys (S = a power of two)
MAX_RUNS = 6                 # more runs in a shard: its newer runs are merged (LSM, size-tiered)
ORPHAN_AGE_MS = 3_600_000    # a run or manifest no version names is deleted this long after it
                             # stopped being named (retired), or after it was written
BUILD_FLUSH_ROWS = 4_000_000  # a build writes its entries as runs every this many keys
BUILD_THREADS = 4

H, P, BUCKET, GEN, LIVE, SEQ = "_h", "_p", "_bucket", "_gen", "_live", "_seq"
LOC = "_loc"  # in a run's file: (partition index, bucket, generation, live) per entry
LATEST = "LATEST"

_sweeps: list[threading.Thread] = []  # KeyIndex.sweep()s started, for join_sweeps
_sweeps_lock = threading.Lock()


def index_dir(table_path: str) -> str:
    parent, name = table_path.rstrip("/").rsplit("/", 1)
    return f"{parent}/.{name}.dbt-key-index"


def join_sweeps(timeout: float | None = None) -> None:
    """Wait for the background cleans (KeyIndex.sweep) started so far: for a caller that lists the
    index's files, or removes the table, right after an upsert."""
    with _sweeps_lock:
        started = list(_sweeps)
    for thread in started:
        thread.join(timeout)


def exists(io: FileIO, table_path: str) -> bool:
    return io.exists(f"{index_dir(table_path)}/{LATEST}")


def supported(schema: TableSchema) -> bool:
    """Cross-partition tables whose key can be hashed and compared exactly (no float key: NaN and
    -0.0 compare unlike Java's; no DECIMAL above 18 digits: not hashed here)."""
    if schema.bucket_mode != BucketMode.KEY_DYNAMIC:
        return False
    for k in schema.primary_keys:
        t = schema.field(k).type
        if t.root in ("FLOAT", "DOUBLE") or (t.root == "DECIMAL" and t.precision > 18):
            return False
    return True


@dataclass
class BucketState:
    files: frozenset
    gen: int
    count: int


@dataclass
class IndexState:
    """One version of the index: what a lookup reads and a refresh or update rewrites."""

    shards: int
    runs: list[list[tuple[int, str]]]          # per shard: (seq, run name), newest first
    buckets: dict[tuple[bytes, int], BucketState]
    next_seq: int = 0
    next_gen: int = 0
    snapshot_id: int | None = None
    schema_id: int = 0
    stats: dict = field(default_factory=dict)   # what the last refresh/lookup did (bench, logs)
    # the manifest this version was loaded from or last saved as, and the runs it named: what a save
    # un-names (retires) when it swaps the pointer away from it
    manifest: str | None = None
    manifest_runs: frozenset = frozenset()
    retired: dict = field(default_factory=dict)  # run or manifest name -> when it was retired (ms)

    def run_names(self) -> frozenset:
        return frozenset(n for shard in self.runs for _, n in shard)

    def new_gen(self) -> int:
        self.next_gen += 1
        return self.next_gen

    def new_seq(self) -> int:
        """The seq of a new run, or of all runs of one Spark job's commit."""
        self.next_seq += 1
        return self.next_seq - 1


class KeyIndex:
    """The key index of one table (schema: the table's latest)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, *, block_rows: int = BLOCK_ROWS,
                 keys_per_shard: int = KEYS_PER_SHARD, max_runs: int = MAX_RUNS, fence_rows: int = FENCE_ROWS):
        self.block_rows, self.keys_per_shard, self.max_runs = block_rows, keys_per_shard, max_runs
        self.fence_rows = fence_rows
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.dir = index_dir(self.table_path)
        self.keys = list(schema.primary_keys)
        self.parts = list(schema.partition_keys)
        self.parts_only = [p for p in self.parts if p not in self.keys]  # partition fields outside the key
        self.key_types = [schema.field(k).type for k in self.keys]
        self.part_types = schema.partition_types
        self.entry_schema = pa.schema(
            [pa.field(H, pa.int32())]
            + [pa.field(k, schema.field(k).type.to_arrow()) for k in self.keys]
            + [pa.field(p, schema.field(p).type.to_arrow()) for p in self.parts_only]
            + [pa.field(P, pa.binary()), pa.field(BUCKET, pa.int32()), pa.field(GEN, pa.int32()),
               pa.field(LIVE, pa.bool_())])
        # In a run's file, where an entry lives is one fixed-width column (_loc): the partition as an
        # index into the run's partitions (kept in its metadata, values derived from the binary
        # row), bucket, generation and live. A lookup reads a page per column of each key it finds:
        # two with the key in a column of its own, six with a column each (W3-100M: 27K of a cold
        # lookup's 45K pages). A key of fixed-width columns only (integers, dates, timestamps,
        # decimals) rides in _loc too, as its values' 32-bit words after the four: one page per key
        # found. A run's file says which layout it has (its key columns are there or not).
        self.key_words = _key_words([schema.field(k).type.to_arrow() for k in self.keys])
        inline = self.key_words is not None
        width = 4 + (sum(self.key_words) if inline else 0)
        self.file_schema = pa.schema([pa.field(H, pa.int32())]
                                     + ([] if inline else [pa.field(k, schema.field(k).type.to_arrow()) for k in self.keys])
                                     + [pa.field(LOC, pa.list_(pa.field("item", pa.int32(), False), width), False)])
        self.bytes_read = 0
        self._partition_columns: dict[bytes, dict[str, pa.Array]] = {}
        self._partition_values: dict[bytes, list] = {}  # a partition's binary row, decoded
        # runs opened for lookups: a route task looks its rows up chunk by chunk, and would map
        # (on an object store: fetch) each touched run again per chunk
        self._opened: dict[str, tuple] = {}

    # ---- the index's own files ---------------------------------------------------------------

    def load(self) -> IndexState | None:
        """The current version; None when there is none or it is unreadable or not this table's."""
        try:
            name = self._pointer()
            if name is None:
                return None
            doc = self._manifest(name)
            if doc.get("format") not in READS_FORMATS or doc["key"] != [f"{k}:{t.sql()}" for k, t in zip(self.keys, self.key_types)] \
                    or doc["partition"] != [f"{p}:{t.sql()}" for p, t in zip(self.parts, self.part_types)]:
                log.info("key index of %s is for another key or partition: rebuilt", self.table_path)
                return None
            buckets = {(bytes.fromhex(b["p"]), b["b"]): BucketState(frozenset(b["files"]), b["gen"], b["count"])
                       for b in doc["buckets"]}
            runs = [[(s, n) for s, n in shard] for shard in doc["runs"]]
            state = IndexState(doc["shards"], runs, buckets, doc["next_seq"], doc["next_gen"], doc.get("snapshot"),
                               doc.get("schema_id", 0), retired=_retired_in(doc))
            state.manifest, state.manifest_runs = name, state.run_names()
            return state
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("key index of %s is unreadable (%s): rebuilt", self.table_path, e)
            return None

    def save(self, state: IndexState) -> None:
        """Write the manifest of `state` (its runs are written), then swap the pointer to it.

        The manifest lists what this swap retires, with when: the version it was loaded from and
        the runs that version named and this one does not (merged away, or a rebuild's). A reader
        that loaded the old version may still be reading them: clean() keeps them for
        ORPHAN_AGE_MS from now, whenever they were written (a table idle for a day then merged:
        its runs' files are a day old, yet were named a moment ago)."""
        now_ms = int(time.time() * 1000)
        if state.manifest is None:  # a new version (a build): it replaces whatever is current
            state.manifest, state.manifest_runs, current_retired = self._current()
            state.retired = {**current_retired, **state.retired}
        named = state.run_names()
        retired = {n: t for n, t in state.retired.items() if now_ms - t < ORPHAN_AGE_MS and n not in named}
        retired.update((n, now_ms) for n in state.manifest_runs - named)
        if state.manifest is not None:
            retired[state.manifest] = now_ms
        doc = {"format": FORMAT,
               "key": [f"{k}:{t.sql()}" for k, t in zip(self.keys, self.key_types)],
               "partition": [f"{p}:{t.sql()}" for p, t in zip(self.parts, self.part_types)],
               "shards": state.shards, "runs": state.runs, "next_seq": state.next_seq, "next_gen": state.next_gen,
               "snapshot": state.snapshot_id, "schema_id": state.schema_id,
               "buckets": [{"p": p.hex(), "b": b, "gen": s.gen, "count": s.count, "files": sorted(s.files)}
                           for (p, b), s in state.buckets.items()],
               "retired": retired}
        name = f"manifest-{uuid.uuid4().hex}.json"
        self.io.mkdirs(self.dir)
        self.io.write_bytes(f"{self.dir}/{name}", json.dumps(doc).encode())
        self.io.overwrite_text(f"{self.dir}/{LATEST}", json.dumps({"manifest": name}))
        state.manifest, state.manifest_runs, state.retired = name, named, retired

    def _pointer(self) -> str | None:
        """The current manifest's name; None when there is no index (one read: no exists() first)."""
        try:
            text = self.io.read_text(f"{self.dir}/{LATEST}")
        except FileNotFoundError:
            return None
        return json.loads(text)["manifest"]

    def _manifest(self, name: str) -> dict:
        return json.loads(self.io.read_text(f"{self.dir}/{name}"))

    def _current(self) -> tuple[str | None, frozenset, dict]:
        """(manifest, the runs it names, what it retired) of the current version, as far as it
        can be read: a build replaces it whole."""
        try:
            name = self._pointer()
        except (OSError, ValueError, KeyError, TypeError):
            return None, frozenset(), {}
        if name is None:
            return None, frozenset(), {}
        try:
            doc = self._manifest(name)
            return name, frozenset(n for shard in doc["runs"] for _, n in shard), _retired_in(doc)
        except (OSError, ValueError, KeyError, TypeError):
            return name, frozenset(), {}

    def clean(self, state: IndexState, now_ms: int | None = None) -> int:
        """Delete runs and manifests the current version does not name, once old enough that no
        reader that loaded an older version can still be reading them: ORPHAN_AGE_MS after they
        were retired (the state's `retired`, no file stat needed), else after they were written
        (what a crashed or a concurrent writer left, which no version we saw named)."""
        return self._clean(state.run_names(), state.retired, now_ms)

    def sweep(self, state: IndexState) -> None:
        """clean(), in a background thread: an upsert's record returns once its version is saved,
        not after a listing, a stat per unnamed file and a delete per aged one (W2's distributed
        run deletes the 24 runs its setup's bulk loads left: 0.18-0.24 s). What the thread does not
        get to (the process ends first) the next clean deletes. What it reads of `state` is copied
        first: the caller goes on with it."""
        named, retired = state.run_names(), dict(state.retired)  # run_names() is a new frozenset

        def run() -> None:
            try:
                self._clean(named, retired)
            except Exception as e:  # noqa: BLE001 - an unswept file is swept by the next clean
                log.debug("key index of %s: clean failed (%s)", self.table_path, e)
        thread = threading.Thread(target=run, name="dbt-paimon-key-index-sweep", daemon=True)
        with _sweeps_lock:
            _sweeps[:] = [t for t in _sweeps if t.is_alive()] + [thread]
        thread.start()

    def _clean(self, named, retired: dict, now_ms: int | None = None) -> int:
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        try:
            current = self._pointer()
        except (OSError, ValueError, KeyError):
            return 0
        if current is None:
            return 0
        deleted = 0
        for name in self.io.list_names(self.dir):
            if name == LATEST or name == current or name in named:
                continue
            if not (name.startswith("run-") or name.startswith("manifest-")):
                continue
            retired_at = retired.get(name)
            if retired_at is not None and now_ms - retired_at < ORPHAN_AGE_MS:
                continue  # a reader may hold the version that named it
            path = f"{self.dir}/{name}"
            try:
                if now_ms - self.io.mtime_ms(path) >= ORPHAN_AGE_MS:
                    deleted += bool(self.io.delete(path))
            except OSError:
                continue
        return deleted

    def _run_order(self) -> list[tuple[str, str]]:
        return [(H, "ascending")] + [(k, "ascending") for k in self.keys]

    def _sorted(self, entries: pa.Table) -> np.ndarray:
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
            keys = entries.select(self.keys)
            one, other = keys.take(pa.array(order[tied])), keys.take(pa.array(order[tied + 1]))
            differ = np.zeros(tied.size, np.bool_)
            for k in self.keys:
                differ |= pc.not_equal(one.column(k), other.column(k)).to_numpy(zero_copy_only=False)
            if differ.any():  # the entries of those hashes (contiguous, in hash order) sorted by key
                at = np.flatnonzero(np.isin(ordered, ordered[tied[differ]]))
                among = order[at]
                order[at] = among[pc.sort_indices(entries.select([H] + self.keys).take(pa.array(among)),
                                                  sort_keys=self._run_order()).to_numpy()]
        return order

    def _shares(self, entries: pa.Table, shards: int) -> tuple[pa.Table, list[tuple[int, np.ndarray]]]:
        """entries in the entry schema, and per shard they fall in (ascending) its entries' indices
        in the run order: sorted once, not filtered and sorted per shard."""
        entries = entries.cast(self.entry_schema).combine_chunks()
        order = self._sorted(entries)
        shard = self.shard_of(entries.column(H).to_numpy()[order], shards)
        by_shard, spans = group_runs(shard)  # stable: each shard's share stays in the run order
        return entries, [(int(shard[by_shard[a]]), order[by_shard[a:b]]) for a, b in spans]

    def _write_run(self, state: IndexState | None, entries: pa.Table, seq: int | None = None,
                   in_order: bool = False, rows: np.ndarray | None = None) -> tuple[int, str]:
        """One sorted run of entries (one shard's), in record batches of block_rows entries; its seq
        the state's next, or `seq` (the runs of one commit written by several Spark tasks).
        in_order: the entries are sorted by (hash, key) already. rows: the run is these entries
        (indices, in the run order, into the entries _shares gave: in the entry schema already)."""
        if rows is None:
            entries = entries.cast(self.entry_schema).combine_chunks()
            if not in_order:
                rows = self._sorted(entries)
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
            entries = entries.select([H] + self.keys + [BUCKET, GEN, LIVE]).take(pa.array(rows))
            present = np.bincount(codes, minlength=len(listed)) > 0  # a shard's run lists its own only
            codes = (np.cumsum(present) - 1)[codes].astype(np.int32)
            listed = listed.filter(pa.array(present))
        loc = np.empty((entries.num_rows, self.file_schema.field(LOC).type.list_size), np.int32)
        loc[:, 0] = codes
        loc[:, 1] = entries.column(BUCKET).to_numpy()
        loc[:, 2] = entries.column(GEN).to_numpy()
        loc[:, 3] = entries.column(LIVE).to_numpy(zero_copy_only=False)
        at = 4
        for k, words in zip(self.keys, self.key_words or ()):
            loc[:, at:at + words] = _as_words(entries.column(k).combine_chunks(), words)
            at += words
        columns = [entries.column(H)] + [entries.column(k) for k in self.keys if k in self.file_schema.names] \
            + [pa.FixedSizeListArray.from_arrays(pa.array(loc.ravel()), type=self.file_schema.field(LOC).type)]
        encoded = pa.Table.from_arrays(columns, schema=self.file_schema).combine_chunks()
        batches = encoded.to_batches(max_chunksize=self.block_rows)
        hashes = [b.column(0).to_numpy() for b in batches]
        listed = json.dumps([v.hex() for v in listed.to_pylist()]).encode()
        step = self.fence_rows

        def file_bytes(firsts: np.ndarray) -> tuple[pa.Buffer, np.ndarray]:
            """The run's file with its fences for these firsts, and where each batch's hashes
            start in it (bytes)."""
            fences = [h[np.minimum(_fence_positions(len(h), step, int(f)), len(h) - 1)] for h, f in zip(hashes, firsts)]
            schema = self.file_schema.with_metadata({
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
        with self.io.output(f"{self.dir}/{name}") as out:
            out.write(data)
        return seq, name

    def _open_run(self, name: str, random_access: bool = False) -> tuple[pa.ipc.RecordBatchFileReader, "mmap.mmap | None"]:
        """A run's reader, and on a local disk the memory map under it. For a lookup
        (`random_access`) the map reads no more than the pages asked for (no read-ahead: a lookup
        touches a page here and there, and read-ahead around each would read most of the file)."""
        if random_access:  # runs never change: a task's later chunks reuse it
            self._open_runs([name])
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

    def _open_runs(self, names: Iterable[str]) -> None:
        """Open a lookup's runs together: each run's head and tail (its schema and fences, its first
        batch's header, the footer) asked for from the kernel at once before any is parsed, so
        that a cold lookup reads them in parallel, not a few faults per run one after the other.
        (On an object store each is fetched whole when first asked for: _open_run.)"""
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

    def _read_run(self, name: str) -> pa.Table:
        """A run whole, in the entry schema (a merge)."""
        reader, _ = self._open_run(name)
        return self._decode(reader.read_all(), reader.schema)

    def _partitions(self, listed: bytes) -> dict[str, pa.Array]:
        """A run's partitions (its metadata's list) as columns: the partition fields outside the
        key and P, one row per partition; decoded once per list (a lookup decodes each record
        batch's matches, and a run's batches share the list)."""
        if listed not in self._partition_columns:
            partitions = [bytes.fromhex(v) for v in json.loads(listed)]
            # each partition decoded once: the runs of the shards list mostly the same partitions
            for p in partitions:
                if p not in self._partition_values:
                    self._partition_values[p] = binary_row.deserialize(p, self.part_types)
            values = [self._partition_values[p] for p in partitions]
            columns = {name: pa.array([v[self.parts.index(name)] for v in values], self.entry_schema.field(name).type)
                       for name in self.parts_only}
            columns[P] = pa.array(partitions, pa.binary())
            self._partition_columns[listed] = columns
        return self._partition_columns[listed]

    def _decode(self, rows: pa.Table, run_schema: pa.Schema) -> pa.Table:
        """Rows of a run's file (any of its rows: a lookup's matches, or all) in the entry schema:
        _loc unpacked, the partition's binary row and values taken from the run's partitions."""
        width = run_schema.field(LOC).type.list_size
        loc = rows.column(LOC).combine_chunks().flatten().to_numpy().reshape(-1, width)
        at = pa.array(loc[:, 0])
        cols = {H: rows.column(H)}
        word = 4
        for k, words in zip(self.keys, self.key_words or [0] * len(self.keys)):
            if k in run_schema.names:  # a run with key columns (any key of format 4, a string key)
                cols[k] = rows.column(k)
            else:  # the key's words in _loc
                cols[k] = _from_words(loc[:, word:word + words], self.entry_schema.field(k).type)
                word += words
        for name, column in self._partitions(run_schema.metadata[b"partitions"]).items():
            cols[name] = column.take(at)
        cols[BUCKET] = pa.array(np.ascontiguousarray(loc[:, 1]))
        cols[GEN] = pa.array(np.ascontiguousarray(loc[:, 2]))
        cols[LIVE] = pa.array(loc[:, 3] != 0)
        return pa.table(cols, schema=self.entry_schema)

    def _prefetch(self, mapped: "mmap.mmap | None", base: int, starts: np.ndarray, ends: np.ndarray) -> None:
        """Ask the kernel for the pages of the byte ranges [starts, ends) of a mapped run, all at
        once: it reads them in parallel, where touching them one by one waits on each in turn (a
        cold 10K-key lookup into 100M keys: 1.6-1.9 s read page by page, ~0.7 s prefetched)."""
        if mapped is None or not hasattr(mapped, "madvise"):
            return
        keep = ends > starts
        if not keep.any():
            return
        first = (int(starts[keep].min()) - base) // mmap.PAGESIZE
        span = (int(ends[keep].max()) - 1 - base) // mmap.PAGESIZE + 1 - first
        if np.count_nonzero(keep) >= span:  # a range per page or more: the pages they span, at once
            mapped.madvise(mmap.MADV_WILLNEED, first * mmap.PAGESIZE, span * mmap.PAGESIZE)
            self.bytes_read += span * mmap.PAGESIZE
            return
        pages = np.unique(_ranges((starts[keep] - base) // mmap.PAGESIZE, (ends[keep] - 1 - base) // mmap.PAGESIZE + 1))
        # one madvise per span of consecutive pages: a system call each, not one per key
        breaks = np.flatnonzero(np.diff(pages) != 1) + 1
        firsts = pages[np.concatenate([[0], breaks])] * mmap.PAGESIZE
        lengths = np.diff(np.concatenate([[0], breaks, [len(pages)]])) * mmap.PAGESIZE
        for first, length in zip(firsts.tolist(), lengths.tolist()):
            mapped.madvise(mmap.MADV_WILLNEED, first, length)
        self.bytes_read += len(pages) * mmap.PAGESIZE

    def _windows(self, reader: pa.ipc.RecordBatchFileReader, hashes: np.ndarray) -> list[tuple[pa.RecordBatch, np.ndarray, np.ndarray]]:
        """Per record batch of a run: the batch, and for each of `hashes` the window [lo, hi) of
        the batch's entries its equal entries lie in, from the fences alone (no hash page read)."""
        meta = reader.schema.metadata or {}
        if b"fences" not in meta or b"fence_rows" not in meta:
            raise ValueError("a key index run without fences")
        step = int(meta[b"fence_rows"])
        fences = np.frombuffer(meta[b"fences"], dtype=np.int32)
        # format 6 says where each batch's fences start; before, every step-th entry from the first
        firsts = np.frombuffer(meta[b"fence_firsts"], np.int32) if b"fence_firsts" in meta else None
        out, at = [], 0
        for i in range(reader.num_record_batches):
            batch = reader.get_batch(i)
            n = batch.num_rows
            if n == 0:
                continue
            positions = _fence_positions(n, step, None if firsts is None else int(firsts[i]))
            fence = fences[at:at + len(positions)]
            at += len(positions)
            # fence[lb] < h <= ... : the first entry >= h is at or after lb's position; fence[rb] >
            # h: the last entry <= h is before rb's (a position past the batch's end counts as n)
            lb = np.maximum(np.searchsorted(fence, hashes, side="left") - 1, 0)
            rb = np.searchsorted(fence, hashes, side="right")
            ends = np.append(np.minimum(positions, n), n)
            out.append((batch, positions[lb], ends[rb]))
        return out

    def _candidates(self, runs: list[tuple[int, str, np.ndarray]]) -> list[pa.Table]:
        """The entries, with their run's SEQ, of each (seq, run, sorted unique hashes) whose hash is
        among the hashes. Three passes over all runs, so that the kernel reads each pass's pages
        in parallel: (1) windows from the fences and the hash pages they cover asked for; (2) a
        binary search of each hash in its window and the pages of the matching rows asked for; (3)
        those rows taken. A lookup reads a page or two per key and run, not the runs."""
        searches = []
        self._open_runs(name for _, name, _ in runs)
        for seq, name, hashes in runs:
            reader, mapped = self._open_run(name, random_access=True)
            base = pa.py_buffer(mapped).address if mapped is not None else 0
            for batch, lo, hi in self._windows(reader, hashes):
                at = batch.column(0).buffers()[1].address
                self._prefetch(mapped, base, at + 4 * lo, at + 4 * hi)
                searches.append((seq, mapped, base, batch, hashes, lo, hi))
        takes = []
        for seq, mapped, base, batch, hashes, lo, hi in searches:
            h = batch.column(0).to_numpy(zero_copy_only=True)
            if len(hashes) * self.fence_rows >= len(h):
                # a key per fence window or more (a big batch into a small shard): every page of
                # hashes is read anyway, and one search of the whole batch beats windowed steps
                # (the lookup of 200K keys into 1M: 0.21 -> 0.12 s); the same positions either way
                left = np.searchsorted(h, hashes, "left")
                right = _right_bounds(h, hashes, left)
            else:
                left = _search(h, lo, hi, hashes, right=False)
                right = _search(h, lo, hi, hashes, right=True)
            hits = right > left
            if not hits.any():
                continue
            # the positions of every entry of every hit
            positions = _ranges(left[hits], right[hits])
            starts, ends = [], []
            for column in batch.columns[1:]:
                at, width = _values_at(column)
                if width:
                    starts.append(at + positions * width // 8)
                    ends.append(at + (positions + 1) * width // 8 + 1)
            if starts:
                self._prefetch(mapped, base, np.concatenate(starts), np.concatenate(ends))
            takes.append((seq, batch, positions))
        found = []
        for seq, batch, positions in takes:
            rows = self._decode(pa.Table.from_batches([batch.take(pa.array(positions, pa.int64()))]), batch.schema)
            found.append(rows.append_column(SEQ, pa.array(np.full(rows.num_rows, seq, np.int64))))
        return found

    # ---- hashing and sharding ------------------------------------------------------------------

    def hashes(self, keys: pa.Table) -> np.ndarray:
        return key_hashes([keys.column(k) for k in self.keys], self.key_types)

    @staticmethod
    def shard_of(hashes: np.ndarray, shards: int) -> np.ndarray:
        return np.bitwise_and(hashes.astype(np.int64), shards - 1)

    # ---- lookup ---------------------------------------------------------------------------------

    def lookup(self, state: IndexState, keys: pa.Table, hashes: np.ndarray | None = None) -> pa.Table:
        """Where each of `keys` (a table with the key columns) lives: one row per live key, the key
        columns, the partition fields, P (partition bytes) and BUCKET. Keys not live are absent.
        hashes: the keys' hashes (self.hashes), when the caller has them."""
        # in the index's key types (a batch may carry finer timestamps than a TIMESTAMP(3) key: the
        # table keeps what its type holds, so that is what to look up, and to hash)
        keys = keys.select(self.keys)
        types = pa.schema([self.entry_schema.field(k) for k in self.keys])
        if keys.schema.types != types.types:
            keys, hashes = keys.cast(types, safe=False), None
        if keys.num_rows == 0 or not any(state.runs):
            return self._located(self.entry_schema.empty_table())
        hashes = self.hashes(keys) if hashes is None else hashes
        order = stable_argsort(hashes)
        sorted_hashes = hashes[order]
        # distinct hashes, hence distinct keys: the common batch (else a key twice, or a collision)
        distinct_hashes = bool((sorted_hashes[1:] != sorted_hashes[:-1]).all())
        wanted_all = sorted_hashes if distinct_hashes else np.unique(sorted_hashes)
        shard = self.shard_of(wanted_all, state.shards)
        # per shard touched: its runs, and its hashes (sorted, unique)
        touched = np.flatnonzero(np.bincount(shard, minlength=state.shards)).tolist()
        runs = [(seq, name, wanted_all if len(touched) == 1 else wanted_all[shard == s])
                for s in touched for seq, name in state.runs[s]]
        found = [t for t in self._candidates(runs) if t.num_rows]
        if not found:
            return self._located(self.entry_schema.empty_table())
        cand = pa.concat_tables(found)
        if not distinct_hashes:
            distinct = keys.group_by(self.keys, use_threads=False).aggregate([])
            cand = cand.join(distinct, self.keys, join_type="inner", use_threads=False)
            return self._located(self._newest_valid(state, cand))
        # A candidate shares its hash with exactly one batch key: compare the keys in place (a hash
        # match is not a key match) instead of joining, and when no key has two candidates (one
        # entry each: every key's newest), skip the newest-per-key sort
        rows = order[np.searchsorted(sorted_hashes, cand.column(H).to_numpy())]
        same = None
        for k in self.keys:
            eq = pc.equal(cand.column(k), keys.column(k).take(pa.array(rows)))
            same = eq if same is None else pc.and_(same, eq)
        mask = pc.fill_null(same, False)
        cand = cand.filter(mask)
        rows = rows[mask.to_numpy(zero_copy_only=False)]
        if len(rows) and np.bincount(rows).max() > 1:  # a key with two candidates
            return self._located(self._newest_valid(state, cand))
        valid = self._valid(state, cand)
        return self._located(valid.filter(valid.column(LIVE)))

    def _valid(self, state: IndexState, entries: pa.Table, new_gen: int | None = None) -> pa.Table:
        """The entries whose (partition, bucket) still has the generation they were written at;
        with `new_gen` (a Spark job's merge before its commit is recorded), also those of buckets
        the state does not know yet that carry it (the buckets the commit creates)."""
        if entries.num_rows == 0:
            return entries
        current = pa.table({P: pa.array([p for p, _ in state.buckets], pa.binary()),
                            BUCKET: pa.array([b for _, b in state.buckets], pa.int32()),
                            "_cur": pa.array([s.gen for s in state.buckets.values()], pa.int32())})
        joined = entries.join(current, [P, BUCKET], join_type="left outer", use_threads=False)
        cur, gen = joined.column("_cur"), joined.column(GEN)
        if new_gen is not None:  # a bucket the state does not know: valid at the commit's generation
            cur = pc.fill_null(cur, pa.scalar(new_gen, pa.int32()))
        return joined.filter(pc.fill_null(pc.equal(gen, cur), False)).drop_columns(["_cur"])

    def _newest_valid(self, state: IndexState, entries: pa.Table) -> pa.Table:
        """Per key, the newest valid entry (a live one before a tombstone of the same run); the
        live ones of those."""
        entries = self._valid(state, entries)
        if entries.num_rows == 0:
            return entries
        entries = entries.sort_by([(SEQ, "descending"), (LIVE, "descending")])
        entries = entries.append_column("_i", pa.array(np.arange(entries.num_rows, dtype=np.int64)))
        first = entries.group_by(self.keys, use_threads=False).aggregate([("_i", "min")])
        picked = entries.take(np.sort(first.column("_i_min").to_numpy()))
        return picked.filter(picked.column(LIVE))

    def _located(self, entries: pa.Table) -> pa.Table:
        cols = self.keys + self.parts_only + [P, BUCKET]
        if entries.num_rows == 0:
            return self.entry_schema.empty_table().select(cols)
        return entries.select(cols)

    # ---- counts -----------------------------------------------------------------------------------

    def bucket_counts(self, state: IndexState) -> pa.Table:
        """Each (partition, bucket)'s live keys: partition fields, BUCKET, "count"."""
        items = [(p, b, s.count) for (p, b), s in state.buckets.items()]
        values = [binary_row.deserialize(p, self.part_types) for p, _, _ in items]
        cols = {name: pa.array([v[i] for v in values], self.schema.field(name).type.to_arrow())
                for i, name in enumerate(self.parts)}
        cols[BUCKET] = pa.array([b for _, b, _ in items], pa.int32())
        cols["count"] = pa.array([c for _, _, c in items], pa.int64())
        return pa.table(cols)

    # ---- building, catching up ----------------------------------------------------------------

    def _entries(self, live: pa.Table, partition: bytes, bucket: int, gen: int, is_live: bool = True) -> pa.Table:
        """Entries for the keys of `live` (key columns [+ partition fields]) in (partition, bucket)."""
        n = live.num_rows
        constant = np.zeros(n, np.int64)  # one partition, bucket and generation for every row
        values = dict(zip(self.parts, binary_row.deserialize(partition, self.part_types)))
        rows = live.select(self.keys)
        for name in self.parts_only:
            rows = rows.append_column(name, pa.array([values[name]], self.schema.field(name).type.to_arrow()).take(constant))
        rows = rows.append_column(P, pa.array([partition], pa.binary()).take(constant))
        rows = rows.append_column(BUCKET, pa.array(np.full(n, bucket, np.int32)))
        rows = rows.append_column(GEN, pa.array(np.full(n, gen, np.int32)))
        return self._entries_of(rows, is_live)

    def _entries_of(self, rows: pa.Table, is_live: bool) -> pa.Table:
        """Entries for rows that carry the key columns, the partition fields outside the key, P,
        BUCKET and GEN already (our own commit's placements and retractions)."""
        n = rows.num_rows
        cols = {H: pa.array(self.hashes(rows), pa.int32())}
        for name in self.keys + self.parts_only + [P, BUCKET, GEN]:
            cols[name] = rows.column(name)
        cols[LIVE] = pa.array(np.full(n, is_live, np.bool_))
        return pa.table(cols).cast(self.entry_schema)

    def key_reader(self) -> TableRead:
        """A reader of the table's live keys (the key columns of each split, merged)."""
        return TableRead(self.io, self.table_path, self.schema, self.keys)

    def new_build(self, plan: Plan) -> IndexState:
        """An empty index of the whole table at `plan`: its shards (about keys_per_shard keys each,
        a power of two), each (partition, bucket) at a new generation, no runs, counts zero."""
        rows = sum(s.row_count for s in plan.splits)
        shards = 1
        while shards * self.keys_per_shard < rows:
            shards *= 2
        state = IndexState(shards, [[] for _ in range(shards)], {}, schema_id=self.schema.id,
                           snapshot_id=plan.snapshot.id if plan.snapshot else None)
        for split in plan.splits:
            state.buckets[(split.partition, split.bucket)] = BucketState(
                frozenset(f.file_name for f in split.files), state.new_gen(), 0)
        return state

    def split_entries(self, split: DataSplit, live: pa.Table, gen: int) -> pa.Table:
        """The entries of one split's live keys (read by the caller with key_reader())."""
        self.bytes_read += sum(f.file_size for f in split.files)
        return self._entries(live, split.partition, split.bucket, gen)

    def build(self, plan: Plan, read_split=None) -> IndexState:
        """The index of the whole table at `plan` (every live key read once), in this process."""
        reader = self.key_reader()
        read_split = read_split or reader.read_split
        state = self.new_build(plan)
        parts, held = [], 0
        with ThreadPoolExecutor(max_workers=BUILD_THREADS) as pool:  # Parquet reads release the GIL
            for split, live in zip(plan.splits, pool.map(read_split, plan.splits)):
                bucket = state.buckets[(split.partition, split.bucket)]
                bucket.count = live.num_rows
                if live.num_rows:
                    parts.append(self.split_entries(split, live, bucket.gen))
                    held += live.num_rows
                if held >= BUILD_FLUSH_ROWS:  # memory stays bounded by this, not by the table
                    self._add_runs(state, pa.concat_tables(parts))
                    parts, held = [], 0
        self._add_runs(state, pa.concat_tables(parts) if parts else None)
        # one run per shard, as a Spark build leaves it: a lookup reads a page or two per key in
        # each run bigger than that, so the build's several runs per shard would each cost the
        # next upserts a page per key (W3-100M: 43K pages of hashes with 4 runs per shard)
        for s in range(state.shards):
            if len(state.runs[s]) > 1:
                self._merge_shard(state, s, len(state.runs[s]))
        state.stats = {"built": True, "buckets_read": len(plan.splits)}
        self.save(state)
        return state

    def adopt_build(self, state: IndexState, runs: Iterable[tuple[int, str]], counts: dict, seq: int) -> None:
        """A build whose runs others wrote (a Spark job's tasks: one run per shard, all at `seq`,
        drawn from `state` before the job) and whose keys they counted per (partition, bucket):
        named in the state, which is saved."""
        for s, name in runs:
            state.runs[s].insert(0, (seq, name))
        for key, n in counts.items():
            state.buckets[key].count += n
        state.stats = {"built": True, "buckets_read": len(state.buckets), "by": "spark"}
        self.save(state)

    def shard_runs(self, entries: pa.Table, shards: int, seq: int) -> tuple[list[tuple[int, str]], dict]:
        """A Spark build task's share: one run per shard among `entries` (each shard's entries all
        reach one task), and the keys it wrote per (partition, bucket)."""
        if entries.num_rows == 0:
            return [], {}
        counted = entries.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
        counts = {(p, b): n for p, b, n in zip(counted.column(P).to_pylist(), counted.column(BUCKET).to_pylist(),
                                               counted.column("count_all").to_pylist())}  # per bucket
        return self.write_runs(entries, shards, seq), counts

    def _add_runs(self, state: IndexState, entries: pa.Table | None) -> None:
        """One new run per shard the entries fall in, then the shard's LSM merge if due."""
        if entries is None or entries.num_rows == 0:
            return
        entries, shares = self._shares(entries, state.shards)
        for s, rows in shares:
            run = self._write_run(state, entries, rows=rows)
            state.runs[s].insert(0, run)
            if len(state.runs[s]) > self.max_runs:
                self._merge_shard(state, s)

    def _merge_shard(self, state: IndexState, s: int, take: int | None = None) -> None:
        """Size-tiered (merge_count): the newest runs (or `take` of them) merged into one, the older
        ones kept. Invalid entries are dropped by any merge; tombstones only by one that includes
        the oldest run."""
        runs = state.runs[s]
        if take is None:
            take = merge_count([self.io.size(f"{self.dir}/{n}") for _, n in runs], self.max_runs)
        name = self._merged_run(runs[:take], state, drop_tombstones=take == len(runs))
        # the merged run takes the newest merged seq: it stands where its newest input stood
        state.runs[s] = ([(runs[0][0], name)] if name else []) + runs[take:]

    def _merged_run(self, runs: Sequence[tuple[int, str]], state: IndexState, drop_tombstones: bool,
                    new_gen: int | None = None) -> str | None:
        """One run of the newest valid entry per key among `runs` (seq, name) (invalid ones go
        first: a newer invalid entry must not hide an older valid one); tombstones dropped when
        nothing older is left to shadow. None when nothing is left. new_gen: as in _valid."""
        merged = []
        for seq, name in runs:
            t = self._read_run(name)
            merged.append(t.append_column(SEQ, pa.array(np.full(t.num_rows, seq, np.int64))))
        table = self._valid(state, pa.concat_tables(merged), new_gen)
        if table.num_rows:
            # one sort in the run's order, each key's entries newest first (a live one before a
            # tombstone of the same seq), and the first of each key kept: no hash aggregation
            # over the keys and no second sort to write the run (a full merge of a 1M-key shard
            # took 1.2 s that way)
            table = table.sort_by(self._run_order() + [(SEQ, "descending"), (LIVE, "descending")])
            table = table.filter(_firsts(table, [H] + self.keys))
            if drop_tombstones:
                table = table.filter(table.column(LIVE))
        if not table.num_rows:
            return None
        return self._write_run(None, table.drop_columns([SEQ]), max(seq for seq, _ in runs), in_order=True)[1]

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
            return self._catch_up(state, plan)
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

    def _catch_up(self, state: IndexState, plan: Plan) -> IndexState:
        current = {(s.partition, s.bucket): s for s in plan.splits}
        reader = self.key_reader()
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
            files = frozenset(f.file_name for f in split.files)
            known = state.buckets.get(key)
            if known is not None and known.files == files:
                continue
            changed = True
            added = [f for f in split.files if known is None or f.file_name not in known.files]
            if known is not None and known.files <= files and not any(f.has_deletes for f in added) \
                    or known is None and not any(f.has_deletes for f in added):
                # only adds: their keys are live here; the bucket's older keys stay as they are
                part = DataSplit(split.snapshot_id, split.partition, split.partition_values, split.bucket,
                                 split.total_buckets, split.bucket_path, added)
                live = reader.read_split(part)
                self.bytes_read += sum(f.file_size for f in added)
                if known is None:
                    gen = state.new_gen()
                    state.buckets[key] = BucketState(files, gen, 0)
                else:
                    state.buckets[key] = BucketState(files, known.gen, known.count)
                pending.append((live.select(self.keys), key))
                added_parts.append(self._entries(live, split.partition, split.bucket, state.buckets[key].gen))
                added_only += 1
            else:  # files removed or rewritten, or deletes added: read the bucket again
                live = reader.read_split(split)
                self.bytes_read += sum(f.file_size for f in split.files)
                gen = state.new_gen()
                state.buckets[key] = BucketState(files, gen, live.num_rows)
                reread_parts.append(self._entries(live, split.partition, split.bucket, gen))
                read_again += 1
        # counts of the buckets that gained keys: the keys new to the bucket (looked up before the
        # new entries are added; a key the index places in this bucket already is an update)
        if pending:
            added = pa.concat_tables([keys.append_column(P, pa.array([k[0]] * keys.num_rows, pa.binary()))
                                      .append_column(BUCKET, pa.array(np.full(keys.num_rows, k[1], np.int32)))
                                      for keys, k in pending])
            before = self.lookup(state, added.select(self.keys)).select(self.keys + [P, BUCKET])
            already = added.join(before, self.keys + [P, BUCKET], join_type="left semi", use_threads=False)
            grown = added.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
            known = already.group_by([P, BUCKET], use_threads=False).aggregate([([], "count_all")])
            known = dict(zip(zip(known.column(P).to_pylist(), known.column(BUCKET).to_pylist()),
                             known.column("count_all").to_pylist()))
            for p, b, n in zip(grown.column(P).to_pylist(), grown.column(BUCKET).to_pylist(),
                               grown.column("count_all").to_pylist()):  # per bucket
                state.buckets[(p, b)].count += n - known.get((p, b), 0)
        parts = added_parts + reread_parts
        self._add_runs(state, pa.concat_tables(parts) if parts else None)
        state.snapshot_id = plan.snapshot.id if plan.snapshot else None
        state.stats = {"built": False, "buckets_read_again": read_again, "buckets_added_to": added_only,
                       "buckets_dropped": dropped}
        if changed:
            self.save(state)
        return state

    # ---- after our own commit -------------------------------------------------------------------

    def record_commit(self, state: IndexState, runs: Iterable[tuple[int, str]], deltas: Iterable[dict],
                      added_files: Iterable[ManifestEntry], compactions: Sequence[Sequence[ManifestEntry]],
                      snapshot_id: int | None, new_gen: int, seq: int, merged: Iterable[int] = ()) -> None:
        """Carry our own commit into the index without reading a data file, once it is done. Its
        writers wrote the entries of its placements and retractions before it (commit_entries,
        write_runs: one run per shard a writer touched, all at the commit's `seq`) and give the
        runs' names and each bucket's count change; the buckets new in the commit take `new_gen`,
        drawn before the job. Then the data files our commit added, and the ADD/DELETE entries of
        each of our compaction commits (a compaction keeps a bucket's keys, so only its files
        change; one that consumed a file the index does not know drops the bucket, to be read
        again). A shard in `merged` had all its runs merged with the commit's by a Spark job
        (full_merge_due): its run replaces them."""
        self._add_files(state, added_files, new_gen)
        for part in deltas:
            self._add_counts(state, part)
        self._apply_compactions(state, compactions)
        for s in merged:
            state.runs[s] = []
        added: dict[int, int] = {}
        for s, name in runs:
            state.runs[s].insert(0, (seq, name))
            added[s] = added.get(s, 0) + 1
        for s, n in sorted(added.items()):
            # the LSM policy counts commits: a commit's runs from several tasks count as one
            if len(state.runs[s]) - (n - 1) > self.max_runs:
                self._merge_shard(state, s)
        self._save_at(state, snapshot_id)

    def commit_entries(self, state: IndexState, placed: pa.Table | None, removed: pa.Table | None,
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
            parts.append(self._entries_of(table.append_column(GEN, pa.array(gens[group])), is_live))
        return (pa.concat_tables(parts) if parts else None), deltas

    def write_runs(self, entries: pa.Table | None, shards: int, seq: int) -> list[tuple[int, str]]:
        """A task's share of a commit: one run per shard its entries fall in, all at
        the commit's `seq` (within a seq a key's live entry outranks its tombstone, whichever task
        wrote them). Unreferenced until the driver's record_commit saves a manifest."""
        if entries is None or entries.num_rows == 0:
            return []
        entries, shares = self._shares(entries, shards)
        return [(s, self._write_run(None, entries, seq, rows=rows)[1]) for s, rows in shares]

    def merge_runs(self, names: Sequence[str], seq: int, older: Sequence[tuple[int, str]] = (),
                   state: IndexState | None = None, new_gen: int | None = None) -> str | None:
        """One run of a shard's runs of one commit at `seq` (a Spark job's assigners' runs of that
        shard): the shard's LSM gets one run per commit, whatever the number of assigners.
        Within a seq a key's live entry outranks its tombstone, in one run as across. With `older`
        (every run the shard had in the job's `state`: full_merge_due) they are merged in too: the
        newest valid entry per key kept (the buckets the commit creates valid at `new_gen`),
        tombstones dropped; None when nothing is left."""
        if not older:
            merged = pa.concat_tables([self._read_run(n) for n in names])
            return self._write_run(None, merged, seq)[1]
        return self._merged_run([(seq, n) for n in names] + list(older), state, True, new_gen)

    @staticmethod
    def _add_files(state: IndexState, added_files: Iterable[ManifestEntry], new_gen: int | None) -> None:
        for e in added_files:
            key = (e.partition, e.bucket)
            known = state.buckets.get(key)
            if known is None:
                gen = state.new_gen() if new_gen is None else new_gen
                state.buckets[key] = BucketState(frozenset([e.file.file_name]), gen, 0)
            else:
                state.buckets[key] = BucketState(known.files | {e.file.file_name}, known.gen, known.count)

    @staticmethod
    def _add_counts(state: IndexState, deltas: dict) -> None:
        for key, delta in deltas.items():
            state.buckets[key].count += delta

    @staticmethod
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

    def _save_at(self, state: IndexState, snapshot_id: int | None) -> None:
        state.snapshot_id = snapshot_id
        self.save(state)
        self.sweep(state)


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


def _search(h: np.ndarray, lo: np.ndarray, hi: np.ndarray, x: np.ndarray, right: bool) -> np.ndarray:
    """Per i, the first position in h[lo[i]:hi[i]] (sorted) whose value is > x[i] (right) or >= x[i]
    (left): a binary search of all windows at once, ~log2(FENCE_ROWS) steps, touching only the
    pages inside the windows (numpy's searchsorted takes one range for all values)."""
    lo, hi = lo.copy(), hi.copy()
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) // 2
        v = h[np.where(active, mid, 0)]
        go = (v <= x) if right else (v < x)
        lo = np.where(active & go, mid + 1, lo)
        hi = np.where(active & ~go, mid, hi)


def _values_at(column: pa.Array) -> tuple[int, int]:
    """(address, bits per value) of a column's fixed-width values (a dictionary's indices; a
    variable-width column's offsets); (0, 0) when there is none to point at."""
    t = column.type
    if pa.types.is_fixed_size_list(t):  # _loc: its values, list_size per entry
        values = column.values
        if column.offset or values.offset or values.buffers()[1] is None:
            return 0, 0
        return values.buffers()[1].address, t.list_size * t.value_type.bit_width
    if pa.types.is_dictionary(t):
        t = t.index_type
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        t = pa.int32()
    elif pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        t = pa.int64()
    buffers = column.buffers()
    if len(buffers) < 2 or buffers[1] is None or column.offset:
        return 0, 0
    try:
        return buffers[1].address, t.bit_width
    except ValueError:  # not fixed-width (nested)
        return 0, 0


def _words_of(t: pa.DataType) -> int | None:
    """How many 32-bit words a value of t takes in _loc; None when t is not fixed-width bytes
    (strings, binary, booleans: bit-packed)."""
    if not (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)
            or pa.types.is_decimal(t) or pa.types.is_duration(t)):
        return None
    try:
        width = t.bit_width
    except ValueError:
        return None
    return -(-width // 32) if width % 8 == 0 else None


def _key_words(types: Sequence[pa.DataType]) -> list[int] | None:
    """Per key column its words in _loc, when every key column is fixed-width; else None."""
    words = [_words_of(t) for t in types]
    return None if any(w is None for w in words) else words


def _as_words(column: pa.Array, words: int) -> np.ndarray:
    """A fixed-width column (no nulls: a primary key) as `words` int32 per value: its bytes,
    zero-padded to whole words."""
    width = column.type.bit_width // 8
    data = np.frombuffer(column.buffers()[1], np.uint8)[column.offset * width:(column.offset + len(column)) * width]
    out = np.zeros((len(column), words * 4), np.uint8)
    out[:, :width] = data.reshape(-1, width)
    return out.view(np.int32)


def _from_words(words: np.ndarray, t: pa.DataType) -> pa.Array:
    """The column `_as_words` packed, back in its type."""
    width = t.bit_width // 8
    data = np.ascontiguousarray(np.ascontiguousarray(words).view(np.uint8)[:, :width])
    return pa.Array.from_buffers(t, len(words), [None, pa.py_buffer(data)])


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


def _fence_positions(n: int, step: int, first: int | None) -> np.ndarray:
    """Where a record batch of n entries has its fences. first None (formats 3-5): every step-th
    entry. Else (format 6) entry 0, then first, first + step, ... : ceil(n / step) + 1 of them
    whatever first is (0 <= first < step), so that the file's layout does not depend on it. A
    position past the last entry holds the last hash."""
    if first is None or n == 0:
        return np.arange(0, n, step, dtype=np.int64)
    return np.concatenate([[0], first + step * np.arange(-(-n // step), dtype=np.int64)])


def _retired_in(doc: dict) -> dict:
    """A manifest's retired runs and manifests (name -> ms); none in one older code wrote."""
    return {n: int(t) for n, t in doc.get("retired", {}).items()}


def _right_bounds(h: np.ndarray, hashes: np.ndarray, left: np.ndarray) -> np.ndarray:
    """np.searchsorted(h, hashes, "right") from the left bounds: a run's hashes are nearly all
    distinct, so each hash found has one entry unless the next one is equal too; only those are
    searched again (W1's 200K hashes in a 1M-entry run: 9 ms for a second search, 2 ms this way)."""
    right = left.copy()
    inside = left < len(h)
    found = np.zeros(len(left), np.bool_)
    found[inside] = h[left[inside]] == hashes[inside]
    right[found] += 1
    more = found & (right < len(h))
    more[more] = h[right[more]] == hashes[more]
    if more.any():
        right[more] = np.searchsorted(h, hashes[more], "right")
    return right


def _ranges(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Every integer of every range [starts[i], ends[i]), in order (vectorised)."""
    counts = ends - starts
    shifted = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
    return shifted + np.arange(int(counts.sum()))
