"""Append tables (no primary key, store/write/append.py): written in Paimon's format, read back by us and by
pypaimon, every row kept, small files merged as Paimon merges them, partitions overwritten."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.write.append import pick_bins
from dbt_paimon.store.common.key_hash import java_bucket, key_hashes
from dbt_paimon.store.schema.schema import build_schema
from dbt_paimon.store.snapshot.snapshot import COMPACT, OVERWRITE
from dbt_paimon.engine import RunSettings, compact
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])
ORDER = ["dt", "id", "v"]


def batch(ids, dt="a", v=1.0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def append(table: FileStoreTable, rows_: pa.Table) -> int:
    w = table.new_write()
    w.write(rows_)
    return w.commit().snapshot.id


def test_every_row_is_kept_and_read_alike_by_pypaimon(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, [], ["dt"])
    assert t.schema.bucket_mode.value == "BUCKET_UNAWARE" and t.schema.is_append
    first = append(t, pa.concat_tables([batch([1, 2, 1], "a"), batch([3], "b", None)]))
    append(t, batch([1, 4], "a", 2.0))  # the same id again: kept, not merged
    expected = rows(pa.concat_tables([batch([1, 2, 1], "a"), batch([3], "b", None), batch([1, 4], "a", 2.0)]), ORDER)
    assert rows(t.to_arrow(), ORDER) == expected
    assert rows(pypaimon_read(table_path), ORDER) == expected
    assert rows(t.to_arrow(snapshot_id=first), ORDER) == rows(
        pa.concat_tables([batch([1, 2, 1], "a"), batch([3], "b", None)]), ORDER)

    # Paimon's append file: the table's columns only; an empty key in its meta; every file level 0,
    # in bucket 0, each bucket's sequence numbers continuing
    splits = t.plan().splits
    assert {s.bucket for s in splits} == {0} and {s.total_buckets for s in splits} == {-1}
    a = next(s for s in splits if s.partition_values == ("a",))
    assert [(f.min_sequence_number, f.max_sequence_number) for f in a.files] == [(0, 2), (3, 4)]
    f = a.files[0]
    assert f.level == 0 and f.key_stats.null_counts == [] and f.min_key == f.max_key
    assert pq.read_schema(f"{a.bucket_path}/{f.file_name}").names == ["id", "dt", "v"]
    # the order of the rows within a file is the order they came in
    assert t.new_read().read_files(a, [f])["id"].to_pylist() == [1, 2, 1]


def test_fixed_bucket_append_puts_rows_where_paimon_would(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, [], [], {"bucket": "3", "bucket-key": "id"})
    assert t.schema.bucket_mode.value == "HASH_FIXED"
    append(t, batch(range(30)))
    for split in t.plan().splits:
        ids = t.new_read().read_split(split)["id"]
        assert set(java_bucket(key_hashes([ids], [t.schema.field('id').type]), 3).tolist()) == {split.bucket}
    assert rows(pypaimon_read(table_path), ORDER) == rows(batch(range(30)), ORDER)


@pytest.mark.parametrize("options, message", [
    ({"merge-engine": "aggregation"}, "need a primary key"),
    ({"sequence.field": "v"}, "need a primary key"),
    ({"fields.v.aggregate-function": "sum"}, "need a primary key"),
    ({"bucket": "4"}, "needs 'bucket-key'"),
])
def test_options_that_need_a_key_are_refused(options, message):
    with pytest.raises(SchemaError, match=message):
        build_schema(SCHEMA, [], [], options)


def test_small_files_are_merged_as_paimon_merges_them(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, [], ["dt"], {"compaction.min.file-num": "3"})
    for i in range(4):
        append(t, batch(range(10 * i, 10 * i + 10)))
    split = t.plan().splits[0]
    assert len(split.files) == 4
    bins = pick_bins(t.schema, split.files)
    assert [len(b) for b in bins] == [3]  # a bin closes at compaction.min.file-num files; the fourth waits
    assert pick_bins(t.schema, split.files[:2]) == []


def test_compaction_and_overwrite_commit_what_paimon_commits(spark, table_path):
    t = FileStoreTable.create(table_path, SCHEMA, [], ["dt"])
    for i in range(3):
        append(t, batch(range(10 * i, 10 * i + 10), "a"))
    append(t, batch([100], "b"))
    before = rows(t.to_arrow(), ORDER)
    sid = compact(spark, table_path, settings=RunSettings(execution="local"))
    t = FileStoreTable.open(table_path)
    assert t.latest_snapshot().commit_kind == COMPACT and t.latest_snapshot().id == sid
    assert [len(s.files) for s in t.plan().splits] == [1, 1]
    assert rows(t.to_arrow(), ORDER) == before == rows(pypaimon_read(table_path), ORDER)
    a = t.plan().splits[0]
    assert (a.files[0].min_sequence_number, a.files[0].max_sequence_number) == (0, 29)

    # OVERWRITE of partition a: b untouched
    w = t.new_write()
    w.write(batch([7, 8], "a", 3.0))
    t.new_commit().overwrite(w.prepare_commit(), {t.partition_bytes(["a"])})
    assert t.latest_snapshot().commit_kind == OVERWRITE
    expected = rows(pa.concat_tables([batch([7, 8], "a", 3.0), batch([100], "b")]), ORDER)
    assert rows(t.to_arrow(), ORDER) == expected == rows(pypaimon_read(table_path), ORDER)
    assert t.latest_snapshot().total_record_count == 3
    # time travel still sees the rows before
    assert rows(t.to_arrow(snapshot_id=sid), ORDER) == before


def test_tags_expiration_rollback_orphans_clone_and_system_tables_on_s3(s3_warehouse):
    """An append table's life on the object store, as a key table's: tagged, expired, rolled back,
    cleaned of orphans, cloned, listed by the system tables, read by pypaimon from the same server."""
    from dbt_paimon.store import system_tables
    from dbt_paimon.store.clone import clone_table
    from dbt_paimon.store.common.fileio import FileIO

    path = f"{s3_warehouse}/db.db/events"
    t = FileStoreTable.create(path, SCHEMA, [], ["dt"], {"snapshot.num-retained.min": "1",
                                                          "snapshot.num-retained.max": "2"})
    append(t, batch(range(5), "a"))
    t.create_tag("first")
    append(t, batch(range(5, 8), "b"))
    append(t, batch(range(8, 10), "a"))
    assert FileStoreTable.open(path).expire_snapshots().expired == [1]
    assert rows(FileStoreTable.open(path).to_arrow(tag="first"), ORDER) == rows(batch(range(5), "a"), ORDER)
    everything = rows(pa.concat_tables([batch(range(5), "a"), batch(range(5, 8), "b"), batch(range(8, 10), "a")]),
                      ORDER)
    assert rows(pypaimon_read(path), ORDER) == everything
    files = system_tables.read(FileStoreTable.open(path), "files")
    assert files.num_rows == 3 and set(files.column("bucket").to_pylist()) == {0}

    orphan = f"{path}/dt=a/bucket-0/data-killed-0.parquet"
    FileIO.get(path).write_bytes(orphan, b"x" * 10)
    assert FileStoreTable.open(path).remove_orphan_files(older_than=0).paths == [orphan]

    clone_table(FileIO.get(path), path, f"{s3_warehouse}/db.db/events_clone")
    assert rows(FileStoreTable.open(f"{s3_warehouse}/db.db/events_clone").to_arrow(), ORDER) == everything

    FileStoreTable.open(path).rollback_to("first")
    t = FileStoreTable.open(path)
    assert rows(t.to_arrow(), ORDER) == rows(batch(range(5), "a"), ORDER) == rows(pypaimon_read(path), ORDER)
    append(t, batch([42], "c"))  # and the table goes on from there
    assert t.to_arrow().num_rows == 6
