"""Dynamic-bucket HASH index: index files and index manifests, checked against pypaimon 2.1.0 both ways."""

import io
import os
import struct

import fastavro
import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.assign.bucket_assigner import BucketAssigner
from dbt_paimon.store import CorruptTableError, FileStoreTable
from dbt_paimon.store.common.fileio import LocalFileIO
from dbt_paimon.store.index.index import (
    ADD, DELETION_VECTORS_INDEX, HASH_INDEX, INDEX_MANIFEST_ENTRY_SCHEMA, HashIndexFile, IndexFileMeta,
    IndexManifestEntry, IndexManifestFile, PartitionHashIndex, apply_changes, load_partition_indexes,
    read_hash_index)
from dbt_paimon.store.common.key_hash import key_hashes
from dbt_paimon.store.common.types import parse_type
from tests.oracle import pypaimon_read, pypaimon_table, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
TARGET = 4  # dynamic-bucket.target-row-num: several buckets per partition
OPTIONS = {"bucket": "-1", "dynamic-bucket.target-row-num": str(TARGET)}


def _batch(ids, tag) -> pa.Table:
    return pa.Table.from_pylist([{"id": i, "dt": f"d{i % 2}", "v": f"{tag}-{i}"} for i in ids], SCHEMA)


def _pypaimon_write(path, batch):
    table = pypaimon_table(path)
    wb = table.new_batch_write_builder()
    write, commit = wb.new_write(), wb.new_commit()
    try:
        write.write_arrow(batch)
        commit.commit(write.prepare_commit())
    finally:
        write.close()
        commit.close()


def _hash_ids(ids) -> np.ndarray:
    """Key hashes of the trimmed primary key (id): what HASH index files hold."""
    return key_hashes([pa.array(ids, pa.int64())], [parse_type("BIGINT NOT NULL")])


def _live_by_bucket(path) -> dict:
    """(partition bytes, bucket) -> the live ids of that bucket, read by our merge-on-read."""
    t = FileStoreTable.open(path)
    read = t.new_read(["id"])
    return {(s.partition, s.bucket): read.read_split(s).column("id").to_numpy() for s in t.plan().splits}


def _assert_index_matches_data(path):
    """Each bucket's HASH file holds exactly the key hashes of its live keys, and no bucket lacks one."""
    fio = LocalFileIO()
    snapshot = FileStoreTable.open(path).latest_snapshot()
    index = read_hash_index(fio, path, snapshot)
    live = _live_by_bucket(path)
    assert set(index) == set(live)
    files = HashIndexFile(fio, path)
    for key, ids in live.items():
        entry = index[key]
        stored = files.read(entry)
        assert entry.kind == ADD and entry.index_type == HASH_INDEX
        assert entry.row_count == stored.size == len(set(stored.tolist()))
        assert entry.file_size == os.path.getsize(f"{path}/index/{entry.file_name}") == 4 * stored.size
        assert sorted(stored.tolist()) == sorted(_hash_ids(ids).tolist()), key
    return index, live


def _bucket_of_key(live: dict) -> dict:
    out = {}
    for (part, bucket), ids in live.items():
        for i in ids.tolist():
            assert (part, i) not in out, f"key {i} is live in buckets {out[(part, i)]} and {bucket}"
            out[(part, i)] = bucket
    return out


# ---- 1. round trips ----------------------------------------------------------------------------------

def test_hash_index_file_round_trip(tmp_path):
    fio, path = LocalFileIO(), str(tmp_path / "t")
    files = HashIndexFile(fio, path)
    meta = files.write(np.array([5, -1, 2**31 - 1, -2**31, 5, 0], dtype=np.int64))
    assert meta == IndexFileMeta(HASH_INDEX, meta.file_name, 20, 5)
    assert meta.file_name.startswith("index-")
    raw = (tmp_path / "t" / "index" / meta.file_name).read_bytes()
    assert raw == struct.pack(">5i", -2**31, -1, 0, 5, 2**31 - 1)  # headerless big-endian int32
    assert files.read(meta).tolist() == [-2**31, -1, 0, 5, 2**31 - 1]
    assert files.read(meta.file_name).dtype == np.int32
    # a second file gets a new name; an empty bucket is an empty file
    empty = files.write(np.zeros(0, np.int32))
    assert empty.file_name != meta.file_name and empty.row_count == empty.file_size == 0
    assert files.read(empty).size == 0
    with pytest.raises(ValueError):
        files.write([2**31])
    # damage is reported, never read as other hashes
    (tmp_path / "t" / "index" / meta.file_name).write_bytes(raw[:-1])
    with pytest.raises(CorruptTableError):
        files.read(meta.file_name)
    (tmp_path / "t" / "index" / meta.file_name).write_bytes(raw[:-4])
    with pytest.raises(CorruptTableError):
        files.read(meta)  # 4 hashes where the entry says 5
    with pytest.raises(CorruptTableError):
        files.read("index-missing-0")


def test_index_manifest_file_round_trip(tmp_path):
    fio, path = LocalFileIO(), str(tmp_path / "t")
    p0, p1 = (b"\x00\x00\x00\x01" + bytes(8) + d + bytes(5) + b"\x82" for d in (b"d0", b"d1"))
    dv = (("f0", "data-1.parquet"), ("f1", 1), ("f2", 24), ("_CARDINALITY", 3))
    gi = (("_ROW_RANGE_START", 0), ("_ROW_RANGE_END", 9), ("_INDEX_FIELD_ID", 2), ("_EXTRA_FIELD_IDS", (4, 5)),
          ("_INDEX_META", b"m"), ("_SOURCE_META", None))
    entries = [
        IndexManifestEntry(ADD, p0, 0, HASH_INDEX, "index-a-0", 20, 5),
        IndexManifestEntry(ADD, p1, 3, HASH_INDEX, "index-b-0", 8, 2, external_path="file:/elsewhere/index-b-0"),
        IndexManifestEntry(ADD, p0, 0, DELETION_VECTORS_INDEX, "index-c-0", 40, 1, dv_ranges=(dv,)),
        IndexManifestEntry(ADD, p0, 1, "btree", "index-d-0", 7, 10, global_index=gi),
    ]
    files = IndexManifestFile(fio, path)
    name = files.write(entries)
    assert name.startswith("index-manifest-")
    assert files.read(name) == entries
    with open(f"{path}/manifest/{name}", "rb") as f:
        reader = fastavro.reader(f)
        records = list(reader)
        assert reader.codec == "zstandard"
        assert [f["name"] for f in reader.writer_schema["fields"]] == [
            "_VERSION", "_KIND", "_PARTITION", "_BUCKET", "_INDEX_TYPE", "_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT",
            "_DELETIONS_VECTORS_RANGES", "_EXTERNAL_PATH", "_GLOBAL_INDEX"]
    assert {r["_VERSION"] for r in records} == {1}
    assert records[2]["_DELETIONS_VECTORS_RANGES"] == [dict(dv)]
    assert records[3]["_GLOBAL_INDEX"]["_EXTRA_FIELD_IDS"] == [4, 5]
    # an unknown format identifier is refused, not misread
    buf = io.BytesIO()
    fastavro.writer(buf, fastavro.parse_schema(reader.writer_schema), [dict(records[0], _VERSION=2)])
    (tmp_path / "t" / "manifest" / "index-manifest-bad-0").write_bytes(buf.getvalue())
    with pytest.raises(CorruptTableError):
        files.read("index-manifest-bad-0")


def test_apply_changes_replaces_hash_entry_of_each_changed_bucket():
    p, q = b"P", b"Q"
    old0 = IndexManifestEntry(ADD, p, 0, HASH_INDEX, "h-p0", 4, 1)
    old1 = IndexManifestEntry(ADD, p, 1, HASH_INDEX, "h-p1", 8, 2)
    dv0 = IndexManifestEntry(ADD, p, 0, DELETION_VECTORS_INDEX, "dv-p0", 9, 1)
    other = IndexManifestEntry(ADD, q, 1, HASH_INDEX, "h-q1", 4, 1)
    new_p1 = IndexFileMeta(HASH_INDEX, "h-p1-new", 12, 3)
    new_q0 = IndexFileMeta(HASH_INDEX, "h-q0", 4, 1)
    out = apply_changes([old0, old1, dv0, other], {(p, 1): new_p1, (q, 0): new_q0})
    assert out == [old0, IndexManifestEntry.of(ADD, p, 1, new_p1), dv0, other, IndexManifestEntry.of(ADD, q, 0, new_q0)]
    assert all(e.kind == ADD for e in out)
    # a bucket can also be dropped (its partition overwritten); deletion vectors stay
    assert apply_changes(out, {}, removed=[(p, 0)]) == [IndexManifestEntry.of(ADD, p, 1, new_p1), dv0, other,
                                                        IndexManifestEntry.of(ADD, q, 0, new_q0)]
    with pytest.raises(CorruptTableError):
        apply_changes([IndexManifestEntry(1, p, 0, HASH_INDEX, "x", 4, 1)], {})
    with pytest.raises(ValueError):
        apply_changes([], {(p, 0): IndexFileMeta(DELETION_VECTORS_INDEX, "x", 4, 1)})


# ---- 2. we read pypaimon's index -------------------------------------------------------------------

def test_we_read_pypaimon_hash_index(warehouse):
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": warehouse})
    catalog.create_table("db.pp", Schema.from_pyarrow_schema(SCHEMA, partition_keys=["dt"], primary_keys=["id", "dt"],
                                                             options=OPTIONS), False)
    path = os.path.join(warehouse, "db.db", "pp")
    _pypaimon_write(path, _batch(range(0, 15), "a"))
    _pypaimon_write(path, _batch(range(9, 27), "b"))  # 6 updates, 12 new keys
    index, live = _assert_index_matches_data(path)
    assert len(index) >= 6 and max(b for _, b in index) >= 2  # several buckets per partition really used
    assert max(e.row_count for e in index.values()) == TARGET
    # the first snapshot's index is still readable and matches what that snapshot had
    t = FileStoreTable.open(path)
    first = read_hash_index(LocalFileIO(), path, t.snapshots.snapshot(1))
    assert sum(e.row_count for e in first.values()) == 15
    assert set(first.values()) != set(index.values())  # buckets that got keys got new files
    # per-partition key index: every live key maps to its bucket, unknown hashes to -1
    parts = load_partition_indexes(LocalFileIO(), path, t.latest_snapshot())
    for (part, bucket), ids in live.items():
        assert (parts[part].lookup(_hash_ids(ids)) == bucket).all()
        assert parts[part].row_counts[bucket] == len(ids)
    assert parts[next(iter(parts))].lookup(_hash_ids([10**9])).tolist() == [-1]
    assert PartitionHashIndex.empty().lookup(np.array([1, 2])).tolist() == [-1, -1]
    # our writer schema has the fields pypaimon and Java write, in their order
    with open(f"{path}/manifest/{t.latest_snapshot().index_manifest}", "rb") as f:
        theirs = [fld["name"] for fld in fastavro.reader(f).writer_schema["fields"]]
    assert [fld["name"] for fld in INDEX_MANIFEST_ENTRY_SCHEMA["fields"]] == theirs


# ---- 3. pypaimon appends to our dynamic-bucket table ----------------------------------------------

def _write_ours(t: FileStoreTable, batch: pa.Table, assigner: BucketAssigner):
    """Write `batch` the way a Paimon dynamic-bucket writer does: known keys keep their bucket, new keys
    get one from the partition's assigner; then every bucket that gained keys gets a full new HASH file."""
    fio = t.io
    snapshot = t.latest_snapshot()
    hashes = _hash_ids(batch.column("id"))
    part_col = batch.column("dt").to_numpy(zero_copy_only=False)
    parts = {v: t.partition_bytes([v]) for v in np.unique(part_col)}
    indexes = load_partition_indexes(fio, t.path, snapshot, parts.values())
    buckets = np.empty(batch.num_rows, np.int32)
    for value, pbytes in parts.items():
        rows_of = np.flatnonzero(part_col == value)
        index = indexes.get(pbytes, PartitionHashIndex.empty())
        found = index.lookup(hashes[rows_of])
        new = found < 0
        buckets[rows_of] = found
        buckets[rows_of[new]] = assigner.assign(pbytes, int(new.sum()))
        indexes[pbytes] = index
    w = t.new_write()
    w.write(batch, buckets=buckets)
    entries = w.prepare_commit()
    files = HashIndexFile(fio, t.path)
    new_files = {}
    for value, pbytes in parts.items():
        rows_of = np.flatnonzero(part_col == value)
        for bucket in np.unique(buckets[rows_of]).tolist():
            old = indexes[pbytes].bucket_hashes(bucket)
            added = hashes[rows_of][buckets[rows_of] == bucket]
            if np.isin(added, old).all():
                continue  # only updates: Paimon keeps the bucket's file
            new_files[(pbytes, bucket)] = files.write(np.concatenate([old, added]))
    manifest = IndexManifestFile(fio, t.path).combine(snapshot.index_manifest if snapshot else None, new_files)
    t.new_commit().commit(entries, index_manifest=manifest)
    return buckets


def test_pypaimon_appends_to_our_dynamic_bucket_table(warehouse):
    path = os.path.join(warehouse, "db.db", "ours")
    t = FileStoreTable.create(path, SCHEMA, ["id", "dt"], ["dt"], OPTIONS)
    assigner = BucketAssigner(TARGET)
    model = {}

    def apply(batch):
        for r in batch.to_pylist():
            model[(r["id"], r["dt"])] = r

    first = _batch(range(0, 21), "a")
    _write_ours(t, first, assigner)
    apply(first)
    index, live = _assert_index_matches_data(path)
    assert {b for _, b in index} == {0, 1, 2}  # 11 and 10 keys at 4 per bucket
    before = _bucket_of_key(live)

    _pypaimon_write(path, _batch(range(10, 30), "b"))  # 11 updates, 9 new keys: pypaimon accepts our index
    apply(_batch(range(10, 30), "b"))
    _, live = _assert_index_matches_data(path)  # pypaimon's rewritten files are complete too
    after = _bucket_of_key(live)
    assert {k: after[k] for k in before} == before  # updated keys stayed in their bucket
    assert len(after) == len(model)
    ours = FileStoreTable.open(path).to_arrow()
    assert rows(ours, ["id", "dt"]) == rows(pypaimon_read(path).select(ours.column_names), ["id", "dt"]) == sorted(
        model.values(), key=lambda r: (r["id"], r["dt"]))

    # and back: we update on top of pypaimon's index (its buckets and ours), then pypaimon again
    t = FileStoreTable.open(path)
    for part, counts in {p: idx.row_counts for p, idx in load_partition_indexes(
            t.io, path, t.latest_snapshot()).items()}.items():
        assigner.counts[part] = dict(counts)
    _write_ours(t, _batch(range(24, 36), "c"), assigner)
    apply(_batch(range(24, 36), "c"))
    _pypaimon_write(path, _batch([0, 1, 33, 34, 40, 41], "d"))
    apply(_batch([0, 1, 33, 34, 40, 41], "d"))
    _, live = _assert_index_matches_data(path)
    final = _bucket_of_key(live)
    assert {k: final[k] for k in after} == after
    assert len(final) == len(model)
    ours = FileStoreTable.open(path).to_arrow()
    expected = sorted(model.values(), key=lambda r: (r["id"], r["dt"]))
    assert rows(ours, ["id", "dt"]) == rows(pypaimon_read(path).select(ours.column_names), ["id", "dt"]) == expected


def test_pypaimon_refuses_our_table_without_index(warehouse):
    """The control: the same data committed without HASH index files is rejected by pypaimon."""
    path = os.path.join(warehouse, "db.db", "noindex")
    t = FileStoreTable.create(path, SCHEMA, ["id", "dt"], ["dt"], OPTIONS)
    w = t.new_write()
    w.write(_batch(range(4), "a"), buckets=0)
    w.commit()
    with pytest.raises(RuntimeError, match="HASH index"):
        _pypaimon_write(path, _batch([1, 9], "b"))
