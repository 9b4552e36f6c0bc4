"""Snapshot expiration: which snapshots expire (Paimon's rules), which files go, and kills midway.

Tables are written by our FileStoreTable over 12 commits (upserts and deletes across 3 partitions,
every 4th commit a full COMPACT, which also upgrades lone files by metadata only), one of them a
dynamic-bucket table with HASH index files. Every retained snapshot is read back by our reader and
by pypaimon 2.1.0 and compared with the model of that snapshot.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.assign.bucket_assigner import BucketAssigner
from dbt_paimon.store import FileStoreTable, PaimonError
from dbt_paimon.store.compaction.compact import compact_bucket
from dbt_paimon.store.maintenance.expire import ExpireConfig, SnapshotExpiration
from dbt_paimon.store.index.index import (HashIndexFile, IndexManifestFile, PartitionHashIndex, load_partition_indexes,
                                          read_index_entries)
from dbt_paimon.store.common.key_hash import key_hashes
from dbt_paimon.store.manifest.manifest import ManifestFile, ManifestList
from dbt_paimon.store.common.types import parse_type
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
KEY = ["id", "dt"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMNS = ["id", "dt", "v"]


# ---- building tables -----------------------------------------------------------------------------------

def _hashes(ids) -> np.ndarray:
    return key_hashes([pa.array(ids, pa.int64())], [parse_type("BIGINT NOT NULL")])


class Builder:
    """Writes commits to a fixed-bucket or dynamic-bucket (HASH index) table and keeps the model of
    every snapshot: snapshot id -> {(id, dt): row}."""

    def __init__(self, path: str, dynamic: bool = False, options: dict | None = None, seed: int = 7):
        opts = {"bucket": "-1", "dynamic-bucket.target-row-num": "4"} if dynamic else {"bucket": "2"}
        opts["manifest.merge-min-count"] = "3"  # manifests get compacted, so old ones become garbage
        opts.update(options or {})
        self.table = FileStoreTable.create(path, SCHEMA, KEY, ["dt"], opts)
        self.path = path
        self.dynamic = dynamic
        self.assigner = BucketAssigner(4)
        self.model: dict[tuple, dict] = {}
        self.models: dict[int, dict[tuple, dict]] = {}
        self.rng = random.Random(seed)

    def _record(self, result) -> int:
        sid = result.snapshot.id
        self.models[sid] = dict(self.model)
        time.sleep(0.003)  # strictly increasing snapshot times
        return sid

    def write(self, commit_no: int) -> int:
        ids = sorted(self.rng.sample(range(40), 8))
        upserts = [{"id": i, "dt": f"d{i % 3}", "v": f"c{commit_no}-{i}"} for i in ids]
        live = sorted(k for k in self.model if k[0] not in ids)
        deletes = [self.model[k] for k in self.rng.sample(live, min(2, len(live)))]
        batch = pa.Table.from_pylist(upserts + deletes, SCHEMA)
        kinds = [0] * len(upserts) + [3] * len(deletes)
        t = FileStoreTable.open(self.path)
        if self.dynamic:
            result = self._write_dynamic(t, batch, kinds)
        else:
            w = t.new_write()
            w.write(batch, row_kinds=kinds)
            result = w.commit()
        for r in upserts:
            self.model[(r["id"], r["dt"])] = r
        for r in deletes:
            del self.model[(r["id"], r["dt"])]
        return self._record(result)

    def _write_dynamic(self, t: FileStoreTable, batch: pa.Table, kinds: list[int]):
        """As a Paimon dynamic-bucket writer: known keys keep their bucket, new keys get one from the
        assigner, and every bucket that gained keys gets a complete new HASH index file."""
        snapshot = t.latest_snapshot()
        hashes = _hashes(batch.column("id"))
        part_col = batch.column("dt").to_numpy(zero_copy_only=False)
        parts = {v: t.partition_bytes([v]) for v in np.unique(part_col)}
        indexes = load_partition_indexes(t.io, t.path, snapshot, parts.values())
        buckets = np.empty(batch.num_rows, np.int32)
        for value, pbytes in parts.items():
            rows_of = np.flatnonzero(part_col == value)
            index = indexes.setdefault(pbytes, PartitionHashIndex.empty())
            found = index.lookup(hashes[rows_of])
            assert (found[np.array(kinds)[rows_of] == 3] >= 0).all()  # deletes hit known keys
            new = found < 0
            found[new] = self.assigner.assign(pbytes, int(new.sum()))
            buckets[rows_of] = found
        w = t.new_write()
        w.write(batch, buckets=buckets, row_kinds=kinds)
        files = HashIndexFile(t.io, t.path)
        new_files = {}
        for value, pbytes in parts.items():
            rows_of = np.flatnonzero(part_col == value)
            for bucket in np.unique(buckets[rows_of]).tolist():
                old = indexes[pbytes].bucket_hashes(bucket)
                added = hashes[rows_of][buckets[rows_of] == bucket]
                if not np.isin(added, old).all():
                    new_files[(pbytes, bucket)] = files.write(np.concatenate([old, added]))
        manifest = IndexManifestFile(t.io, t.path).combine(snapshot.index_manifest if snapshot else None, new_files)
        return t.new_commit().commit(w.prepare_commit(), index_manifest=manifest)

    def compact(self) -> int:
        t = FileStoreTable.open(self.path)
        entries = [e for split in t.plan().splits for e in compact_bucket(t, split)]
        return self._record(t.new_commit().commit(entries, kind="COMPACT"))

    def run(self, commits: int = 12, compact_every: int = 4) -> "Builder":
        for c in range(1, commits + 1):
            if c % compact_every == 0:
                self.compact()
            else:
                self.write(c)
        return self

    def expected(self, snapshot_id: int) -> list[dict]:
        return sorted(self.models[snapshot_id].values(), key=lambda r: (r["id"], r["dt"]))


def build(warehouse, name="t", dynamic=False, commits=12, options=None) -> Builder:
    return Builder(os.path.join(warehouse, "db.db", name), dynamic, options).run(commits)


# ---- what is on disk and what is referenced ---------------------------------------------------------

def on_disk(path: str) -> set[str]:
    """Data, manifest and index files under the table (schema, snapshot, tag dirs left out)."""
    out = set()
    for folder, _, files in os.walk(path):
        rel = os.path.relpath(folder, path)
        if rel.split(os.sep)[0] in ("schema", "snapshot", "tag", "consumer"):
            continue
        out.update(os.path.normpath(os.path.join(rel, f)) for f in files if not f.startswith("."))
    return out


def references(path: str, snapshot) -> set[str]:
    """Every file one snapshot needs, found through the scan (not through expire.py)."""
    t = FileStoreTable.open(path)
    lists = ManifestList(t.io, path)
    out = {f"manifest/{snapshot.base_manifest_list}", f"manifest/{snapshot.delta_manifest_list}"}
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        out.update(f"manifest/{m.file_name}" for m in lists.read(name))
    for split in t.new_scan().plan_snapshot(snapshot).splits:
        out.update(os.path.relpath(f"{split.bucket_path}/{f.file_name}", path) for f in split.files)
    if snapshot.index_manifest:
        out.add(f"manifest/{snapshot.index_manifest}")
        out.update(f"index/{e.file_name}" for e in read_index_entries(t.io, path, snapshot))
    return out


def referenced(path: str) -> set[str]:
    """Files referenced by any existing snapshot or tag."""
    t = FileStoreTable.open(path)
    snaps = [t.snapshots.snapshot(i) for i in t.snapshots.ids()] + [tag.snapshot for tag in t.list_tags()]
    out: set[str] = set()
    for s in snaps:
        out |= references(path, s)
    return out


def assert_reads(b: Builder, snapshot_ids, pypaimon_ids=None):
    """Our reader (every id) and pypaimon (pypaimon_ids, default: first and last) see the model."""
    t = FileStoreTable.open(b.path)
    ids = sorted(snapshot_ids)
    for sid in ids:
        assert rows(t.to_arrow(snapshot_id=sid), KEY) == b.expected(sid), f"snapshot {sid}"
    for sid in (pypaimon_ids if pypaimon_ids is not None else sorted({ids[0], ids[-1]})):
        assert rows(pypaimon_read(b.path, sid).select(COLUMNS), KEY) == b.expected(sid), f"pypaimon {sid}"


def expire(b: Builder, now_ms=None, before_delete=None, **kw):
    t = FileStoreTable.open(b.path)
    clock = None if now_ms is None else (lambda: now_ms)
    return SnapshotExpiration(t.io, t.path, t.schema, ExpireConfig(**kw), now_ms=clock,
                              before_delete=before_delete).expire()


def snapshot_time(b: Builder, sid: int) -> int:
    return FileStoreTable.open(b.path).snapshots.snapshot(sid).time_millis


def earliest_hint(path: str) -> int:
    with open(os.path.join(path, "snapshot", "EARLIEST")) as f:
        return int(f.read())


# ---- which snapshots expire -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def twelve(tmp_path_factory):
    """One 12-snapshot table, copied fresh for each rule test (building it is the slow part)."""
    wh = tmp_path_factory.mktemp("wh12")
    os.makedirs(wh / "db.db")
    return build(str(wh), "base")


def copy_of(b: Builder, warehouse: str, name: str) -> Builder:
    """The same table (files and models) at another path."""
    path = os.path.join(warehouse, "db.db", name)
    shutil.copytree(b.path, path)
    out = Builder.__new__(Builder)
    out.__dict__.update(b.__dict__)
    out.path = path
    return out


@pytest.fixture
def fresh(twelve, warehouse):
    return copy_of(twelve, warehouse, "t")


def remaining(b: Builder) -> list[int]:
    return FileStoreTable.open(b.path).snapshots.ids()


def test_built_table_has_what_the_tests_need(twelve):
    t = FileStoreTable.open(twelve.path)
    kinds = [t.snapshots.snapshot(i).commit_kind for i in range(1, 13)]
    assert kinds.count("COMPACT") == 3 and kinds.count("APPEND") == 9
    times = [t.snapshots.snapshot(i).time_millis for i in range(1, 13)]
    assert times == sorted(set(times))
    assert len({r["dt"] for r in twelve.expected(12)}) == 3
    assert len(twelve.models[3]) > len(twelve.models[2]) - 2  # deletes and inserts both happen
    # a compaction that only moved a lone file up a level (DELETE + ADD of the same file)
    manifests = ManifestFile(t.io, t.path, t.schema.partition_types, 0)
    upgraded = 0
    for sid in (4, 8, 12):
        delta = t.snapshots.snapshot(sid).delta_manifest_list
        entries = [e for m in ManifestList(t.io, t.path).read(delta) for e in manifests.read(m.file_name)]
        names = [e.file.file_name for e in entries]
        upgraded += len(names) - len(set(names))
    assert upgraded > 0


@pytest.mark.parametrize("kw, now_offset, expected_left", [
    # table defaults (num-retained.min 10, time-retained 1 h): all snapshots are younger than 1 h
    ({}, 0, list(range(1, 13))),
    # ... and two hours later the 10 newest stay
    ({}, 2 * 3600_000, list(range(3, 13))),
    # num-retained.min with no time limit
    ({"retain_min": 3, "time_retained_ms": 0}, 0, [10, 11, 12]),
    # num-retained.max beats time-retained: 5 stay although all are young
    ({"retain_min": 1, "retain_max": 5, "time_retained_ms": 3600_000}, 0, [8, 9, 10, 11, 12]),
    # snapshot.expire.limit: at most 4 per run
    ({"retain_min": 1, "time_retained_ms": 0, "max_deletes": 4}, 0, list(range(5, 13))),
    # retain_min == retain_max == 1: only the latest
    ({"retain_min": 1, "retain_max": 1, "time_retained_ms": 3600_000}, 0, [12]),
])
def test_expiration_keeps_exactly_what_the_options_say(fresh, kw, now_offset, expected_left):
    import dataclasses
    cfg = ExpireConfig.from_options(FileStoreTable.open(fresh.path).schema)
    # Paimon's defaults: num-retained.min 10, .max Integer.MAX_VALUE, time-retained 1 h, expire.limit 50
    assert cfg == ExpireConfig(retain_max=2**31 - 1, retain_min=10, time_retained_ms=3600_000, max_deletes=50)
    cfg = dataclasses.replace(cfg, **kw)
    t = FileStoreTable.open(fresh.path)
    now = snapshot_time(fresh, 12) + now_offset
    result = SnapshotExpiration(t.io, t.path, t.schema, cfg, now_ms=lambda: now).expire()
    assert remaining(fresh) == expected_left
    assert result.expired == [i for i in range(1, 13) if i not in expected_left]
    assert earliest_hint(fresh.path) == expected_left[0]
    assert_reads(fresh, expected_left)
    assert on_disk(fresh.path) == referenced(fresh.path)


def test_time_retained_expires_a_snapshot_only_when_its_next_one_is_old_enough(fresh):
    # older_than = time of snapshot 6: snapshots 1-4 go; 5 stays because snapshot 6 is not older
    retained = 10_000
    now = snapshot_time(fresh, 6) + retained
    result = expire(fresh, now_ms=now, retain_min=1, time_retained_ms=retained)
    assert result.expired == [1, 2, 3, 4]
    assert remaining(fresh) == list(range(5, 13))
    # one millisecond later snapshot 6 is older than the limit too, so 5 goes
    assert expire(fresh, now_ms=now + 1, retain_min=1, time_retained_ms=retained).expired == [5]
    assert_reads(fresh, range(6, 13), pypaimon_ids=[6])


def test_expire_limit_spreads_work_over_runs_and_hint_follows(fresh):
    for run, expected in enumerate(([1, 2, 3], [4, 5, 6], [7, 8, 9], [10], [])):
        result = expire(fresh, retain_min=2, time_retained_ms=0, max_deletes=3)
        assert result.expired == expected, run
        assert earliest_hint(fresh.path) == (expected[-1] + 1 if expected else 11)
    assert remaining(fresh) == [11, 12]
    assert_reads(fresh, [11, 12])


def test_consumer_protects_the_snapshot_it_reads_next(fresh):
    os.makedirs(os.path.join(fresh.path, "consumer"))
    with open(os.path.join(fresh.path, "consumer", "consumer-job1"), "w") as f:
        json.dump({"nextSnapshot": 4}, f)
    assert expire(fresh, retain_min=1, time_retained_ms=0).expired == [1, 2, 3]
    os.remove(os.path.join(fresh.path, "consumer", "consumer-job1"))
    assert expire(fresh, retain_min=1, time_retained_ms=0).expired == list(range(4, 12))


def test_invalid_retention_is_refused_and_changes_nothing(fresh):
    before = on_disk(fresh.path)
    with pytest.raises(PaimonError, match="at least 1"):
        expire(fresh, retain_min=0, time_retained_ms=0)
    with pytest.raises(PaimonError, match=r"retainMax \(2\) must not be less than retainMin \(3\)"):
        expire(fresh, retain_min=3, retain_max=2, time_retained_ms=0)
    assert on_disk(fresh.path) == before and remaining(fresh) == list(range(1, 13))


def test_expire_on_empty_table_and_nothing_to_expire_writes_earliest_hint(table_path, warehouse):
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "1"})
    assert t.expire_snapshots().expired == []
    b = build(warehouse, "small", commits=2)
    os.remove(os.path.join(b.path, "snapshot", "EARLIEST"))
    assert expire(b, retain_min=5, time_retained_ms=0).expired == []
    assert earliest_hint(b.path) == 1


def test_table_options_drive_expire_snapshots(warehouse):
    b = build(warehouse, "opts", commits=6, options={
        "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "4", "snapshot.time-retained": "1 h",
        "snapshot.expire.limit": "1"})
    t = FileStoreTable.open(b.path)
    assert t.expire_snapshots().expired == [1]  # max 4 -> [1, 2] due, but limit 1
    assert t.expire_snapshots().expired == [2]
    assert t.expire_snapshots().expired == []  # 4 left: the min of 2 is protected by 1 h
    assert t.expire_snapshots(time_retained_ms=0).expired == [3]  # still one at a time
    assert t.expire_snapshots(time_retained_ms=0, max_deletes=10).expired == [4]
    assert remaining(b) == [5, 6]
    assert_reads(b, [5, 6])


# ---- which files go -----------------------------------------------------------------------------

@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed-bucket", "dynamic-bucket"])
def test_full_expiration_leaves_no_unreferenced_file(warehouse, dynamic):
    b = build(warehouse, "full", dynamic=dynamic)
    t = FileStoreTable.open(b.path)
    if dynamic:
        assert t.schema.bucket_mode == "HASH_DYNAMIC"
        assert len(os.listdir(os.path.join(b.path, "index"))) > 6  # index files were rewritten over time
    before = on_disk(b.path)
    result = expire(b, retain_min=1, retain_max=1, time_retained_ms=0)
    assert result.expired == list(range(1, 12)) and remaining(b) == [12]
    left = on_disk(b.path)
    assert left == references(b.path, t.snapshots.snapshot(12))
    gone = before - left
    assert {os.path.relpath(p, b.path) for k, p in result.deleted if k != "snapshot"} == gone
    assert {os.path.relpath(p, b.path) for k, p in result.deleted if k == "snapshot"} == {
        f"snapshot/snapshot-{i}" for i in range(1, 12)}
    assert result.count("data") > 10 and result.count("manifest") > 10 and result.count("manifest-list") == 22
    if dynamic:
        assert result.count("index") > 0 and result.count("index-manifest") > 0
        assert any(p.startswith("index/") for p in left)
    assert_reads(b, [12])
    # the table keeps working: a new commit, then expire again down to it
    b.write(13)
    assert expire(b, retain_min=1, time_retained_ms=0).expired == [12]
    assert on_disk(b.path) == references(b.path, t.snapshots.snapshot(13))
    assert_reads(b, [13])


@pytest.mark.parametrize("dynamic", [False, True], ids=["fixed-bucket", "dynamic-bucket"])
def test_no_deletion_ever_touches_a_file_of_a_retained_snapshot(warehouse, dynamic):
    b = build(warehouse, "inv", dynamic=dynamic)
    t = FileStoreTable.open(b.path)
    keep = set()
    for sid in range(9, 13):
        keep |= references(b.path, t.snapshots.snapshot(sid))
    seen = []

    def check(kind, path):
        rel = os.path.relpath(path, b.path)
        seen.append(kind)
        assert rel not in keep, f"{kind} {rel} is still referenced by a retained snapshot"
        if kind == "snapshot":
            assert int(rel.split("-")[-1]) < 9

    result = expire(b, before_delete=check, retain_min=4, time_retained_ms=0)
    assert result.expired == list(range(1, 9))
    # the phases come in Paimon's order: data files, manifests, then snapshot files, then the hint
    order = [k for i, k in enumerate(seen) if i == 0 or seen[i - 1] != k]
    assert order[0] == "data" and order[-2:] == ["snapshot", "earliest-hint"]
    assert order.index("manifest") < order.index("manifest-list") < order.index("snapshot")
    assert_reads(b, range(9, 13))
    assert on_disk(b.path) == referenced(b.path)


# ---- killed midway -------------------------------------------------------------------------------

KILL_SCRIPT = """
import os, signal, sys
sys.path.insert(0, {repo!r})
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.maintenance.expire import ExpireConfig, SnapshotExpiration
t = FileStoreTable.open({path!r})
seen = {{}}
def hook(kind, path):
    seen[kind] = seen.get(kind, 0) + 1
    if kind == {kind!r} and seen[kind] == {nth}:
        os.kill(os.getpid(), signal.SIGKILL)
SnapshotExpiration(t.io, t.path, t.schema, ExpireConfig(retain_min={retain}, time_retained_ms=0),
                   before_delete=hook).expire()
print("NOT KILLED", seen)
"""


@pytest.fixture(scope="module")
def dynamic_twelve(tmp_path_factory):
    """A 12-snapshot dynamic-bucket table, and the same table after an uninterrupted expiration."""
    wh = tmp_path_factory.mktemp("whdyn")
    os.makedirs(wh / "db.db")
    b = build(str(wh), "base", dynamic=True)
    ref = copy_of(b, str(wh), "reference")
    assert expire(ref, retain_min=4, time_retained_ms=0).expired == list(range(1, 9))
    return b, ref


@pytest.mark.parametrize("kind, nth", [
    ("data", 3), ("manifest", 4), ("index", 2), ("index-manifest", 2), ("manifest-list", 5), ("snapshot", 3),
    ("earliest-hint", 1),
])
def test_kill_midway_leaves_retained_snapshots_readable_and_a_rerun_finishes(dynamic_twelve, warehouse, kind, nth):
    base, ref = dynamic_twelve
    b = copy_of(base, warehouse, "killed")

    before = on_disk(b.path)
    script = textwrap.dedent(KILL_SCRIPT.format(repo=REPO, path=b.path, kind=kind, nth=nth, retain=4))
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr
    # the killed run deleted some files, never one the finished run keeps
    after_kill = on_disk(b.path)
    assert on_disk(ref.path) <= after_kill < before
    if kind in ("data", "manifest", "index", "index-manifest", "manifest-list"):
        assert on_disk(ref.path) < after_kill  # stopped before the end of the file phases
    t = FileStoreTable.open(b.path)
    assert t.snapshots.latest_id() == 12
    assert_reads(b, range(9, 13), pypaimon_ids=[9])
    assert rows(pypaimon_read(b.path).select(COLUMNS), KEY) == b.expected(12)  # pypaimon's latest

    # the next run finishes the job: the same snapshots and files as an uninterrupted run
    expire(b, retain_min=4, time_retained_ms=0)
    assert remaining(b) == remaining(ref) == [9, 10, 11, 12]
    assert on_disk(b.path) == on_disk(ref.path) == referenced(b.path)
    assert earliest_hint(b.path) == 9
    assert_reads(b, range(9, 13), pypaimon_ids=[9])


@pytest.mark.parametrize("add_first", [False, True], ids=["delete-then-add", "add-then-delete"])
def test_file_moved_up_a_level_is_not_deleted_with_its_old_entry(table_path, add_first):
    """A compaction that upgrades a lone file DELETEs it at level 0 and ADDs the same file at a higher
    level in one delta; expiring that snapshot's predecessors must keep the file, in either order."""
    import dataclasses

    from dbt_paimon.store.manifest.manifest import ADD, DELETE, ManifestEntry
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "1"})
    w = t.new_write()
    w.write(pa.table({"id": [1, 2], "dt": ["quiet"] * 2, "v": ["a", "b"]}))
    w.commit()
    split = t.plan().splits[0]
    f = split.files[0]
    moved = [ManifestEntry(ADD, split.partition, 0, 1, dataclasses.replace(f, level=5)),
             ManifestEntry(DELETE, split.partition, 0, 1, f)]
    t.new_commit().commit(moved if add_first else moved[::-1], kind="COMPACT")
    for i in range(3):  # other partitions move on
        w = t.new_write()
        w.write(pa.table({"id": [10 + i], "dt": ["busy"], "v": [str(i)]}))
        w.commit()
    result = t.expire_snapshots(retain_min=1, retain_max=1, time_retained_ms=0)
    assert result.expired == [1, 2, 3, 4]
    assert os.path.exists(f"{split.bucket_path}/{f.file_name}")
    expected = [{"id": 1, "dt": "quiet", "v": "a"}, {"id": 2, "dt": "quiet", "v": "b"}] + [
        {"id": 10 + i, "dt": "busy", "v": str(i)} for i in range(3)]
    assert rows(t.to_arrow(), KEY) == rows(pypaimon_read(table_path).select(COLUMNS), KEY) == rows(
        pa.Table.from_pylist(expected), KEY)
    assert on_disk(table_path) == referenced(table_path)
