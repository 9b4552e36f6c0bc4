"""remove_orphan_files on real tables: exactly the unreferenced old files go, nothing a snapshot or a
tag references does, nor anything younger than older_than; the table reads the same afterwards.

Every file of the table is made two days old before a clean, so the only thing that keeps a
referenced file is the reference check itself (and only the planted young orphan is young).
"""

from __future__ import annotations

import hashlib
import os
import time
import uuid

import pyarrow as pa
import pytest

from dbt_paimon.store import CorruptTableError, FileStoreTable, PaimonError
from dbt_paimon.store.maintenance.orphan_files import OrphanFilesClean, older_than_millis, remove_orphan_files
from tests.oracle import rows
from tests.store.test_expire import KEY, SCHEMA, assert_reads, build, expire, references

DAY_MS = 86_400_000


def _age(path: str, millis: int) -> None:
    t = (time.time() * 1000 - millis) / 1000
    os.utime(path, (t, t))


def age_everything(root: str, millis: int = 2 * DAY_MS) -> None:
    """Files first, then directories deepest first (touching a file leaves its directory's mtime)."""
    for folder, _dirs, files in os.walk(root):
        for f in files:
            _age(os.path.join(folder, f), millis)
    for folder, _, _ in sorted(os.walk(root), key=lambda w: -w[0].count(os.sep)):
        _age(folder, millis)


def contents(root: str) -> dict[str, str]:
    """Every file under root (hidden ones too) -> hash of its bytes."""
    out = {}
    for folder, _, files in os.walk(root):
        for f in files:
            p = os.path.join(folder, f)
            with open(p, "rb") as fh:
                out[p] = hashlib.sha256(fh.read()).hexdigest()
    return out


def plant(path: str, data: bytes = b"orphan") -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return path


def some_bucket_dir(table_path: str) -> str:
    t = FileStoreTable.open(table_path)
    return t.plan().splits[0].bucket_path


@pytest.fixture
def tagged_table(warehouse):
    """12 commits on a dynamic-bucket table (HASH index files), every 4th a COMPACT; tag v1 on
    snapshot 3; snapshots 1-9 expired, so some files are referenced by the tag alone."""
    b = build(warehouse, dynamic=True, commits=12)
    t = FileStoreTable.open(b.path)
    t.create_tag("v1", snapshot_id=3)
    result = expire(b, retain_max=3)
    assert result.expired == list(range(1, 10))
    return b


def test_dry_run_lists_exactly_the_orphans_then_the_real_run_deletes_them(tagged_table, warehouse):
    b = tagged_table
    root = b.path
    t = FileStoreTable.open(root)
    tag_snapshot = t.tags.get_or_throw("v1").snapshot
    retained = [t.snapshots.snapshot(i) for i in t.snapshots.ids()]
    in_retained = set().union(*(references(root, s) for s in retained))
    only_tag = references(root, tag_snapshot) - in_retained
    assert any(f.endswith(".parquet") for f in only_tag) and any(f.startswith("index/") for f in only_tag)

    bucket = some_bucket_dir(root)
    real_data = next(os.path.join(bucket, n) for n in os.listdir(bucket) if n.endswith(".parquet"))
    with open(real_data, "rb") as f:
        parquet_bytes = f.read()
    hexid = uuid.uuid4().hex
    orphans = {
        plant(f"{bucket}/data-{uuid.uuid4()}-0.parquet", parquet_bytes),        # a killed writer's data file
        plant(f"{root}/manifest/manifest-{uuid.uuid4()}-0", b"m" * 100),         # ... its manifest
        plant(f"{root}/manifest/manifest-list-{uuid.uuid4()}-0", b"l" * 10),     # ... its manifest lists
        plant(f"{root}/manifest/index-manifest-{uuid.uuid4()}-0", b"i"),
        plant(f"{root}/index/index-{uuid.uuid4()}-0", b"\x00" * 8),
        plant(f"{root}/manifest/.manifest-{uuid.uuid4()}-0.{hexid}.tmp"),     # FileIO temp files of a kill
        plant(f"{root}/snapshot/.snapshot-13.{hexid}.tmp", b"{}"),
        plant(f"{root}/schema/.schema-1.{hexid}.tmp", b"{}"),
        plant(f"{root}/tag/.tag-v2.{hexid}.tmp", b"{}"),
        plant(f"{root}/statistics/stats-{uuid.uuid4()}-0", b"s"),
        plant(f"{root}/dt=zz/bucket-0/data-{uuid.uuid4()}-0.parquet", b"x" * 7),  # alone in its partition
    }
    untouched = {
        plant(f"{root}/README.txt"),                                  # outside Paimon's file directories
        plant(f"{root}/misc/data-{uuid.uuid4()}-0.parquet"),          # a directory that is no partition
        plant(f"{root}/dt=d0/notabucket/data-{uuid.uuid4()}-0.parquet"),
        plant(f"{root}/schema/schema-7-not-a-temp-file"),             # schema/ and tag/: temp files only
        plant(f"{warehouse}/db.db/.t.dbt-refresh-{hexid}/bucket-0/data-{uuid.uuid4()}-0.parquet"),
    }
    age_everything(warehouse)
    young = plant(f"{bucket}/data-{uuid.uuid4()}-0.parquet", b"young")
    _age(young, DAY_MS - 60_000)  # just under the default one day
    before = contents(warehouse)
    expected_bytes = sum(os.path.getsize(p) for p in orphans)

    dry = t.remove_orphan_files(dry_run=True)
    assert dry.dry_run and sorted(dry.paths) == sorted(orphans)
    assert dry.total_bytes == expected_bytes
    assert dry.directories == [f"{root}/dt=zz", f"{root}/dt=zz/bucket-0"]
    assert contents(warehouse) == before
    assert "would delete 11 file(s)" in dry.summary()

    done = t.remove_orphan_files()
    assert sorted(done.paths) == sorted(orphans) and done.total_bytes == expected_bytes
    assert done.directories == [f"{root}/dt=zz", f"{root}/dt=zz/bucket-0"]
    after = contents(warehouse)
    assert set(after) == set(before) - orphans
    assert all(after[p] == before[p] for p in after)
    assert not os.path.exists(f"{root}/dt=zz")
    assert young in after and untouched <= set(after)
    assert all(os.path.exists(os.path.join(root, f)) for f in only_tag)
    assert done.as_dict()["deleted_file_count"] == 11

    # The table reads as before: retained snapshots (ours and pypaimon) and the tag.
    assert_reads(b, [10, 11, 12], pypaimon_ids=[10, 12])
    assert rows(t.to_arrow(tag="v1"), KEY) == b.expected(3)
    # A second clean finds nothing left.
    assert t.remove_orphan_files().paths == []


def test_a_killed_writers_files_are_found(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "2"})
    w = t.new_write()
    w.write(pa.Table.from_pylist([{"id": i, "dt": f"d{i % 2}", "v": "a"} for i in range(20)], SCHEMA))
    w.commit()
    expected = rows(t.to_arrow(), KEY)
    # A writer killed before committing: its data files exist, nothing references them.
    w = t.new_write()
    killed = w.write(pa.Table.from_pylist([{"id": i, "dt": f"d{i % 2}", "v": "b"} for i in range(10)], SCHEMA))
    # Another one killed after writing its manifest and manifest lists, before snapshot-2.
    w2 = t.new_write()
    killed2 = w2.write(pa.Table.from_pylist([{"id": 100, "dt": "d9", "v": "c"}], SCHEMA))
    commit = t.new_commit()

    class Killed(BaseException):
        pass

    def kill():
        raise Killed()
    commit.before_snapshot = kill
    with pytest.raises(Killed):
        commit.commit(w2.prepare_commit())
    manifest_files = set(os.listdir(f"{table_path}/manifest"))
    referenced = references(table_path, t.latest_snapshot())
    metadata_orphans = {f"{table_path}/manifest/{n}" for n in manifest_files if f"manifest/{n}" not in referenced}
    assert len(metadata_orphans) == 3  # the delta manifest, the base and delta manifest lists

    data_orphans = {t.bucket_path(binary_partition(t, e.partition), e.bucket) + "/" + e.file.file_name
                    for e in killed + killed2}
    assert len(data_orphans) == len(killed) + len(killed2) >= 3 and all(os.path.exists(p) for p in data_orphans)
    age_everything(table_path)

    result = remove_orphan_files(table_path)
    assert sorted(result.paths) == sorted(data_orphans | metadata_orphans)
    assert not any(os.path.exists(p) for p in data_orphans | metadata_orphans)
    # d9 held nothing but the killed file: its bucket and partition directories go too.
    assert result.directories == [f"{table_path}/dt=d9", f"{table_path}/dt=d9/bucket-{killed2[0].bucket}"]
    assert rows(FileStoreTable.open(table_path).to_arrow(), KEY) == expected


def binary_partition(t: FileStoreTable, pbytes: bytes):
    from dbt_paimon.store.common import binary_row
    return binary_row.deserialize(pbytes, t.schema.partition_types)


@pytest.mark.parametrize("rollback_first", [False, True])
def test_a_commit_landing_during_the_clean_keeps_its_files(table_path, rollback_first):
    """Files written long ago by a job that commits while the clean runs: the snapshot list is read
    again before deleting, so they stay (Paimon's age rule alone would not keep them). With a
    rollback first, the new commit reuses the id of a snapshot already read: it is read again too."""
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "1"})
    for v in ("a", "b"):
        w = t.new_write()
        w.write(pa.Table.from_pylist([{"id": 1, "dt": "d", "v": v}], SCHEMA))
        w.commit()
    slow = t.new_write()
    entries = slow.write(pa.Table.from_pylist([{"id": 2, "dt": "d", "v": "c"}], SCHEMA))
    age_everything(table_path)

    def land():
        if rollback_first:
            t.rollback_to(1)
        slow.commit()
    clean = OrphanFilesClean(t.io, t.path, t.schema, older_than_millis())
    clean.after_collect = land
    result = clean.clean()
    assert result.paths == []
    assert t.latest_snapshot().id == (2 if rollback_first else 3)
    assert os.path.exists(f"{t.bucket_path(['d'], 0)}/{entries[0].file.file_name}")
    assert rows(FileStoreTable.open(table_path).to_arrow(), KEY) == [
        {"id": 1, "dt": "d", "v": "a" if rollback_first else "b"}, {"id": 2, "dt": "d", "v": "c"}]


def test_an_unreadable_manifest_aborts_before_deleting_anything(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "1"})
    w = t.new_write()
    w.write(pa.Table.from_pylist([{"id": 1, "dt": "d", "v": "a"}], SCHEMA))
    w.commit()
    orphan = plant(f"{t.bucket_path(['d'], 0)}/data-{uuid.uuid4()}-0.parquet")
    s = t.latest_snapshot()
    with open(f"{table_path}/manifest/{s.delta_manifest_list}", "wb") as f:
        f.write(b"not avro")
    age_everything(table_path)
    with pytest.raises(CorruptTableError):
        t.remove_orphan_files()
    assert os.path.exists(orphan)


def test_older_than_as_paimon_takes_it(table_path):
    now = 1_700_000_000_000
    assert older_than_millis(None, now) == now - DAY_MS
    assert older_than_millis("1 d", now) == now - DAY_MS
    assert older_than_millis("2 h", now) == now - 7_200_000
    assert older_than_millis(5000, now) == now - 5000
    import datetime as dt
    assert older_than_millis(dt.timedelta(minutes=3), now) == now - 180_000
    point = dt.datetime(2023, 10, 31, 12, 0, 0)
    assert older_than_millis("2023-10-31 12:00:00", now) == int(point.timestamp() * 1000)
    with pytest.raises(PaimonError, match="less than now"):
        older_than_millis("2999-01-01 00:00:00", now)
    with pytest.raises(PaimonError):
        older_than_millis("yesterday", now)

    # The default is one day: an orphan 23 h old stays, one 25 h old goes.
    t = FileStoreTable.create(table_path, SCHEMA, KEY, ["dt"], {"bucket": "1"})
    w = t.new_write()
    w.write(pa.Table.from_pylist([{"id": 1, "dt": "d", "v": "a"}], SCHEMA))
    w.commit()
    folder = t.bucket_path(["d"], 0)
    age_everything(table_path)
    fresh, stale = plant(f"{folder}/data-fresh.parquet"), plant(f"{folder}/data-stale.parquet")
    _age(fresh, 23 * 3_600_000)
    _age(stale, 25 * 3_600_000)
    assert t.remove_orphan_files().paths == [stale]
    # An old orphan in a directory made just now: the file goes, the young directory stays.
    in_new_dir = plant(f"{table_path}/dt=new/bucket-0/data-old.parquet")
    _age(in_new_dir, 2 * DAY_MS)
    result = t.remove_orphan_files(older_than="1 h")
    assert result.paths == [fresh, in_new_dir] and result.directories == []
    assert os.path.isdir(f"{table_path}/dt=new/bucket-0")
