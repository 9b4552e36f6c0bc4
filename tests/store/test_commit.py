"""Commit atomicity: killed writers, racing writers, conflicts, damaged metadata."""

import os
import signal
import subprocess
import sys
import textwrap
import threading

import pyarrow as pa
import pytest

from dbt_paimon.store import CommitConflictError, CorruptTableError, FileStoreTable, PaimonError
from dbt_paimon.store.manifest.manifest import DELETE, ManifestEntry
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _table(path, n=20, start=0, v="a"):
    if FileStoreTable.exists(path):
        t = FileStoreTable.open(path)
    else:
        t = FileStoreTable.create(path, SCHEMA, ["id", "dt"], ["dt"])
    w = t.new_write()
    ids = list(range(start, start + n))
    w.write(pa.table({"id": ids, "dt": [f"d{i % 2}" for i in ids], "v": [v] * n}), buckets=[i % 2 for i in ids])
    w.commit()
    return t


def _data_files(path):
    return {f for _, _, files in os.walk(path) for f in files if f.endswith(".parquet")}


def test_writer_killed_after_writing_files_leaves_previous_snapshot(table_path):
    _table(table_path)
    before_files = _data_files(table_path)
    script = textwrap.dedent(f"""
        import sys, time, pyarrow as pa
        sys.path.insert(0, {REPO!r})
        from dbt_paimon.store import FileStoreTable
        t = FileStoreTable.open({table_path!r})
        w = t.new_write()
        w.write(pa.table({{"id": list(range(100, 150)), "dt": ["d9"] * 50, "v": ["new"] * 50}}), buckets=0)
        commit = t.new_commit()
        def wait_to_be_killed():
            print("FILES WRITTEN", flush=True)
            time.sleep(120)
        commit.before_snapshot = wait_to_be_killed
        commit.commit(w.prepare_commit())
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "FILES WRITTEN"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(_data_files(table_path)) > len(before_files)  # the killed writer did write data files
    t = FileStoreTable.open(table_path)
    assert t.snapshots.latest_id() == 1
    expected = rows(pa.table({"id": list(range(20)), "dt": [f"d{i % 2}" for i in range(20)], "v": ["a"] * 20}), "id")
    assert rows(t.to_arrow(), "id") == expected
    assert rows(pypaimon_read(table_path).select(["id", "dt", "v"]), "id") == expected
    # and the table takes the next commit normally
    _table(table_path, n=5, start=1000)
    assert FileStoreTable.open(table_path).to_arrow().num_rows == 25


def test_two_writers_racing_for_the_same_snapshot(table_path):
    _table(table_path)
    t = FileStoreTable.open(table_path)
    barrier = threading.Barrier(2)
    results, errors = {}, []

    def writer(name, start):
        try:
            w = t.new_write()
            w.write(pa.table({"id": list(range(start, start + 10)), "dt": ["d0"] * 10, "v": [name] * 10}), buckets=0)
            commit = t.new_commit()
            seen = []

            def both_ready():
                if not seen:  # only the first attempt waits, so both try snapshot 2 together
                    seen.append(1)
                    barrier.wait(timeout=30)
            commit.before_snapshot = both_ready
            results[name] = commit.commit(w.prepare_commit())
        except Exception as e:  # noqa: BLE001 - surfaced below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n, s)) for n, s in (("x", 100), ("y", 200))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sorted(r.snapshot.id for r in results.values()) == [2, 3]
    assert sorted(r.attempts for r in results.values()) == [1, 2]
    final = FileStoreTable.open(table_path).to_arrow()
    assert final.num_rows == 40 and pypaimon_read(table_path).num_rows == 40
    # no lost files: every data file on disk is referenced
    live = {f.file_name for s in FileStoreTable.open(table_path).plan().splits for f in s.files}
    assert live == _data_files(table_path)


def test_commit_deleting_a_file_that_is_gone_fails_cleanly(table_path):
    t = _table(table_path)
    split = t.plan().splits[0]
    victim = split.files[0]
    delete = ManifestEntry(DELETE, split.partition, split.bucket, split.total_buckets, victim)
    t.new_commit().commit([delete])  # another writer removes it first
    state = rows(t.to_arrow(), "id")
    with pytest.raises(CommitConflictError, match=f"no longer live, e.g. {victim.file_name}"):
        t.new_commit().commit([delete])
    assert t.snapshots.latest_id() == 2 and rows(t.to_arrow(), "id") == state


def test_expected_latest_guards_read_then_write_jobs(table_path):
    t = _table(table_path)
    _table(table_path, n=3, start=50)
    w = t.new_write()
    w.write(pa.table({"id": [7], "dt": ["d1"], "v": ["late"]}), buckets=1)
    with pytest.raises(CommitConflictError, match="moved from snapshot 1 to 2"):
        t.new_commit().commit(w.prepare_commit(), expected_latest=1)
    assert t.snapshots.latest_id() == 2


def test_damaged_metadata_gets_clear_errors(table_path):
    t = _table(table_path)
    _table(table_path, start=100)
    # a snapshot asked for that is not there is the reader's mistake, not damage: what is there
    with pytest.raises(PaimonError, match=r"snapshot 7 does not exist: the table has snapshots 1\.\.2") as raised:
        t.to_arrow(snapshot_id=7)
    assert not isinstance(raised.value, CorruptTableError)
    with open(os.path.join(table_path, "snapshot", "snapshot-2"), "w") as f:
        f.write("{not json")
    with pytest.raises(CorruptTableError, match="snapshot-2 is not valid JSON"):
        t.to_arrow()
    os.remove(os.path.join(table_path, "snapshot", "snapshot-2"))
    assert t.snapshots.latest_id() == 1  # LATEST is a hint; the last existing snapshot wins
    snap = t.snapshots.snapshot(1)
    os.remove(os.path.join(table_path, "manifest", snap.delta_manifest_list))
    with pytest.raises(CorruptTableError, match="manifest file .*manifest-list-.* is missing"):
        t.to_arrow()


def test_damaged_data_file_gets_clear_error(table_path):
    t = _table(table_path)
    split = t.plan().splits[0]
    with open(os.path.join(split.bucket_path, split.files[0].file_name), "wb") as f:
        f.write(b"garbage")
    with pytest.raises(CorruptTableError, match="is unreadable"):
        t.to_arrow()


def test_a_manifest_is_decoded_once_per_process(table_path, monkeypatch):
    """Manifests are immutable: a plan, a commit's conflict check, compaction and expiration in
    one upsert decode each once (the manifest cache); a new commit's manifests are decoded when
    first read, and what the cache gives equals what the files say."""
    from dbt_paimon.store.manifest import manifest

    manifest._MANIFEST_CACHE.clear()
    _table(table_path)
    decoded = []
    real = manifest.read_avro
    monkeypatch.setattr(manifest, "read_avro",
                        lambda io_, path: decoded.append(os.path.basename(path)) or real(io_, path))
    t = FileStoreTable.open(table_path)
    first = t.plan()
    assert any(not n.startswith("manifest-list-") for n in decoded)
    decoded.clear()
    again = t.plan()
    assert decoded and all(n.startswith("manifest-list-") for n in decoded), decoded
    _table(table_path, start=100)
    decoded.clear()
    latest = FileStoreTable.open(table_path).plan()
    new = [n for n in decoded if not n.startswith("manifest-list-")]
    assert len(new) == 1, decoded  # the new commit's delta manifest only
    manifest._MANIFEST_CACHE.clear()
    fresh = FileStoreTable.open(table_path).plan()
    assert [s.files for s in fresh.splits] == [s.files for s in latest.splits] != [s.files for s in first.splits]
    assert [s.files for s in again.splits] == [s.files for s in first.splits]


def test_manifests_mostly_cancelled_out_are_compacted_by_the_next_commit(table_path):
    """After a compaction (a DELETE per file rewritten, beside the ADD that wrote it), the next
    commit rewrites the manifests as their live ADD entries only, as Paimon's full manifest
    compaction does: every later plan decodes the live files, not the history; every reader still
    reads the same rows."""
    from dbt_paimon.store.compaction.compact import compact_bucket
    from dbt_paimon.store.manifest.manifest import ADD

    def entries(t):
        s = t.latest_snapshot()
        scan = t.new_scan()
        metas = scan.manifest_lists.read(s.base_manifest_list) + scan.manifest_lists.read(s.delta_manifest_list)
        return [e for m in metas for e in scan.manifests.read(m.file_name, m.file_size)]

    for i in range(3):
        t = _table(table_path, start=10 * i, v=f"v{i}")
    compacted = [e for s in t.plan().splits for e in compact_bucket(t, s)]
    t.new_commit().commit(compacted, "COMPACT")
    t = FileStoreTable.open(table_path)
    before = entries(t)
    live = sum(len(s.files) for s in t.plan().splits)
    assert sum(e.kind == DELETE for e in before) == 6 and len(before) == 12 + live
    expected = rows(pypaimon_read(table_path), "id") + [{"id": 100, "dt": "d0", "v": "new"},
                                                        {"id": 101, "dt": "d1", "v": "new"}]
    t = _table(table_path, start=100, n=2, v="new")
    after = entries(t)
    assert all(e.kind == ADD for e in after) and len(after) == sum(len(s.files) for s in t.plan().splits)
    assert rows(pypaimon_read(table_path), "id") == expected
    assert rows(t.to_arrow(), "id") == expected
