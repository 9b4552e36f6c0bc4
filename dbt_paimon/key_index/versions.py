"""The index's versions: what one names, how it is saved and loaded, which entries it holds valid,
and when the files no version names any more are deleted.

A version (`IndexState`) is a manifest: its shards' runs, and per (partition, bucket) the data files
it reflects, its generation and its live keys. The pointer `LATEST` names the current manifest and is
replaced last, so a reader always loads a whole version; a version lists what it retired, so that a
reader still holding an older one keeps finding its files for ORPHAN_AGE_MS.

Branches: each branch of the table has its own pointer and manifests (layout.versions_dir); all runs
live in one directory. A branch without a version starts from main's current one (naming main's runs:
its catch-up to the branch's snapshot costs what differs, as any catch-up), so a clean keeps every run
that any current version, main's or a branch's, names or retired lately.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from ..store.common.fileio import FileIO
from .layout import BRANCH_PREFIX, BUCKET, FORMAT, GEN, LATEST, P, READS_FORMATS, Layout

log = logging.getLogger(__name__)

ORPHAN_AGE_MS = 3_600_000    # a run or manifest no version names is deleted this long after it
                             # stopped being named (retired), or after it was written

_sweeps: list[threading.Thread] = []  # Versions.sweep()s started, for join_sweeps
_sweeps_lock = threading.Lock()


def join_sweeps(timeout: float | None = None) -> None:
    """Wait for the background cleans (KeyIndex.sweep) started so far: for a caller that lists the
    index's files, or removes the table, right after an upsert."""
    with _sweeps_lock:
        started = list(_sweeps)
    for thread in started:
        thread.join(timeout)


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


def valid(state: IndexState, entries: pa.Table, new_gen: int | None = None) -> pa.Table:
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


class Versions:
    """The manifests and the pointer of one branch's index, in `dir`; its runs in `runs_dir` (main's
    `dir`); `main`: main's versions, where a branch without a version of its own starts."""

    def __init__(self, io: FileIO, dir: str, layout: Layout, table_path: str, runs_dir: str | None = None,
                 main: "Versions | None" = None):
        self.io, self.dir, self.layout = io, dir, layout
        self.runs_dir, self.main = runs_dir or dir, main
        self.table_path = table_path  # for the logs

    def load(self) -> IndexState | None:
        """The current version; None when there is none or it is unreadable or not this table's."""
        try:
            name = self._pointer()
            if name is None:
                return self._from_main()
            doc = self._manifest(name)
            described = self.layout.described()
            if doc.get("format") not in READS_FORMATS or doc["key"] != described["key"] \
                    or doc["partition"] != described["partition"]:
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
        doc = {"format": FORMAT, **self.layout.described(),
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

    def _from_main(self) -> IndexState | None:
        """A branch's first version: main's current one, as a new version of the branch (saving it
        retires nothing of main's)."""
        state = self.main.load() if self.main is not None else None
        if state is not None:
            state.manifest, state.manifest_runs, state.retired = None, frozenset(), {}
            log.info("key index of %s: branch starts from main's version (snapshot %s)", self.table_path,
                     state.snapshot_id)
        return state

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

    # ---- deleting what no version names ----------------------------------------------------------

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
        run_names = self.io.list_names(self.runs_dir)
        others = self._other_versions(run_names)
        if others is None:  # another branch's version unreadable: which runs it names is unknown
            run_names = []
        else:
            named = set(named) | others[0]
            retired = _newest(others[1], retired)
        candidates = [(self.runs_dir, n) for n in run_names if n.startswith("run-")]
        manifests = run_names if self.dir == self.runs_dir else self.io.list_names(self.dir)
        candidates += [(self.dir, n) for n in manifests if n.startswith("manifest-") and n != current]
        deleted = 0
        for dir, name in candidates:
            if name in named:
                continue
            retired_at = retired.get(name)
            if retired_at is not None and now_ms - retired_at < ORPHAN_AGE_MS:
                continue  # a reader may hold the version that named it
            path = f"{dir}/{name}"
            try:
                if now_ms - self.io.mtime_ms(path) >= ORPHAN_AGE_MS:
                    deleted += bool(self.io.delete(path))
            except OSError:
                continue
        return deleted

    def _other_versions(self, run_dir_names: list[str]) -> tuple[set, dict] | None:
        """The runs the other branches' current versions name, and those they retired (name -> ms);
        None when one cannot be read. One pointer and manifest per branch that has an index."""
        dirs = [self.runs_dir] + [f"{self.runs_dir}/{n}" for n in run_dir_names if n.startswith(BRANCH_PREFIX)]
        named: set = set()
        retired: dict = {}
        for other in dirs:
            if other == self.dir:
                continue
            peer = Versions(self.io, other, self.layout, self.table_path)
            try:
                pointer = peer._pointer()
                if pointer is None:
                    continue  # a branch whose first version is not saved yet names main's runs
                doc = peer._manifest(pointer)
                named.update(n for shard in doc["runs"] for _, n in shard)
            except (OSError, ValueError, KeyError, TypeError):
                return None
            retired = _newest(retired, _retired_in(doc))
        return named, retired


def _newest(a: dict, b: dict) -> dict:
    """Two maps of retired names (name -> ms) as one, each name at its later time."""
    return {**a, **{n: max(t, a.get(n, t)) for n, t in b.items()}}


def _retired_in(doc: dict) -> dict:
    """A manifest's retired runs and manifests (name -> ms); none in one older code wrote."""
    return {n: int(t) for n, t in doc.get("retired", {}).items()}
