"""Changelog producers in the store: which tables may have one; what a commit writes for 'input', and
what an overwrite, a failed commit, a rollback and an expiration do with a snapshot's changelog files;
what a compaction derives for 'lookup' (deduplicate, first-row; a file moved up without a rewrite).
(Paimon's streaming read of our changelog: tests/java_paimon/test_changelog.py.)"""

import dataclasses
import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.compaction.compact import compact_bucket
from dbt_paimon.store.format.datafile import CHANGELOG_FILE_PREFIX
from dbt_paimon.store.maintenance.file_deletion import FileDeletion
from dbt_paimon.store.manifest.manifest import DELETE, ManifestEntry
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())])
INPUT = {"bucket": "2", "changelog-producer": "input"}


def _write(table: FileStoreTable, ids, v: str, kinds=None):
    w = table.new_write()
    w.write(pa.table({"id": ids, "dt": ["d"] * len(ids), "v": [v] * len(ids)}), row_kinds=kinds)
    return w


def _files(path: str, prefix: str) -> set[str]:
    return {n for _, _, names in os.walk(path) for n in names if n.startswith(prefix)}


def _changelog(table: FileStoreTable, snapshot_id: int) -> list[tuple]:
    """(kind byte, id, v) of every record of a snapshot's changelog files."""
    snapshot = table.snapshots.snapshot(snapshot_id)
    out = []
    for e in FileDeletion(table.io, table.path, table.schema).changelog_files(snapshot):
        t = pq.read_table(f"{table.bucket_path([], e.bucket)}/{e.file.file_name}")
        out += zip(t.column("_VALUE_KIND").to_pylist(), t.column("id").to_pylist(), t.column("v").to_pylist())
    return sorted(out)


@pytest.mark.parametrize("options, message", [
    ({"changelog-producer": "full-compaction", "deletion-vectors.enabled": "true"}, "only supports 'none', 'input'"),
    ({"changelog-producer": "lookup", "full-compaction.delta-commits": "2"}, "incompatible with 'changelog-producer'"),
    ({"changelog-producer": "lookup", "merge-engine": "aggregation"},
     "'lookup' on a aggregation table is not supported"),
    ({"changelog-producer": "inpt"}, "must be one of none, input, lookup, full-compaction, got 'inpt'"),
    ({"changelog-producer": "input", "merge-engine": "first-row"}, "only supports 'none' and 'lookup'"),
    ({"changelog.num-retained.max": "20", "snapshot.num-retained.max": "10"}, "decoupled changelog"),
    ({"changelog.num-retained.min": "0"}, "changelog.num-retained.min (0) must be at least 1"),
])
def test_refused_changelog_options_name_the_problem_and_create_nothing(table_path, options, message):
    with pytest.raises(SchemaError) as e:
        FileStoreTable.create(table_path, SCHEMA, ["id"], options=options)
    assert message in str(e.value)
    assert not FileStoreTable.exists(table_path)


def test_an_append_table_has_no_changelog_producer(table_path):
    with pytest.raises(SchemaError, match="need a primary key"):
        FileStoreTable.create(table_path, SCHEMA, [], options={"changelog-producer": "input"})
    table = FileStoreTable.create(table_path, SCHEMA, [])
    with pytest.raises(SchemaError, match="need a primary key"):  # nor by ALTER
        table.alter_options({"changelog-producer": "lookup"})
    assert FileStoreTable.open(table_path).schema.id == 0


def test_a_commit_lists_the_rows_it_wrote_in_its_changelog(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options={**INPUT, "changelog-producer": "INPUT"})
    _write(table, [1, 2, 3], "a").commit()
    _write(table, [2, 3], "b", kinds=[0, 3]).commit()  # 2 upserted, 3 deleted
    first, second = table.snapshots.snapshot(1), table.snapshots.snapshot(2)
    with open(f"{table_path}/snapshot/snapshot-2") as f:
        stored = json.load(f)
    assert stored["changelogManifestList"] == second.changelog_manifest_list
    assert stored["changelogManifestListSize"] > 0 and stored["changelogRecordCount"] == 2
    assert first.changelog_record_count == 3
    assert _changelog(table, 1) == [(0, 1, "a"), (0, 2, "a"), (0, 3, "a")]
    assert _changelog(table, 2) == [(0, 2, "b"), (3, 3, "b")]
    # the data is what it was without a changelog; readers do not see the changelog files
    assert rows(table.to_arrow(), "id") == [{"id": 1, "dt": "d", "v": "a"}, {"id": 2, "dt": "d", "v": "b"}]
    assert rows(pypaimon_read(table_path), "id") == rows(table.to_arrow(), "id")


def test_an_overwrite_commits_no_changelog_and_keeps_no_changelog_file(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options=INPUT)
    _write(table, [1, 2], "a").commit()
    before = _files(table_path, CHANGELOG_FILE_PREFIX)
    w = _write(table, [3], "b")
    result = table.new_commit().overwrite(w.prepare_commit(), None)
    assert result.snapshot.changelog_manifest_list is None and result.snapshot.changelog_record_count is None
    assert _files(table_path, CHANGELOG_FILE_PREFIX) == before  # Paimon: overwrite commits no changelog
    assert rows(table.to_arrow(), "id") == [{"id": 3, "dt": "d", "v": "b"}]


def test_a_failed_commit_deletes_its_changelog_files(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options=INPUT)
    _write(table, [1], "a").commit()
    before = _files(table_path, CHANGELOG_FILE_PREFIX)
    w = _write(table, [2], "b")
    gone = table.plan().splits[0]
    entries = w.prepare_commit() + [ManifestEntry(DELETE, gone.partition, gone.bucket, gone.total_buckets, f)
                                    for f in gone.files]
    table.new_commit().commit([entries[-1]])  # another writer deletes the file first
    with pytest.raises(Exception, match="no longer live"):
        table.new_commit().commit_or_abort(entries)
    assert _files(table_path, CHANGELOG_FILE_PREFIX) == before


def test_rollback_and_expiration_delete_the_changelog_of_the_snapshots_they_remove(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options=INPUT)
    for i in range(4):
        _write(table, [i], str(i)).commit()
    per_snapshot = {s: {e.file.file_name for e in FileDeletion(table.io, table_path, table.schema).changelog_files(
        table.snapshots.snapshot(s))} for s in range(1, 5)}
    lists = {s: table.snapshots.snapshot(s).changelog_manifest_list for s in range(1, 5)}
    table.rollback_to(3)
    assert _files(table_path, CHANGELOG_FILE_PREFIX) == per_snapshot[1] | per_snapshot[2] | per_snapshot[3]
    assert not os.path.exists(f"{table_path}/manifest/{lists[4]}")
    table.expire_snapshots(retain_max=1, retain_min=1)
    assert _files(table_path, CHANGELOG_FILE_PREFIX) == per_snapshot[3]
    assert [os.path.exists(f"{table_path}/manifest/{lists[s]}") for s in (1, 2, 3)] == [False, False, True]


def _compact(table: FileStoreTable):
    """Every bucket's level-0 files (and the rest) compacted up, as one COMPACT commit."""
    entries = [e for split in table.plan().splits for e in compact_bucket(table, split)]
    result = table.new_commit().commit(entries, "COMPACT")
    return result.snapshot if result else None


@pytest.mark.parametrize("engine, expected", [
    # 1 updated, 2 deleted, 3 new: -U/+U, -D of the stored row, +I
    ("deduplicate", [(0, 3, "b"), (1, 1, "a"), (2, 1, "b"), (3, 2, "a")]),
    # 1 and 2 stay as they were: only the new key
    ("first-row", [(0, 3, "b")]),
])
def test_a_lookup_compaction_derives_each_keys_change(table_path, engine, expected):
    options = {"bucket": "1", "changelog-producer": "lookup", "merge-engine": engine}
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options=options)
    _write(table, [1, 2], "a").commit()
    first = _compact(table)  # nothing above level 0 yet: every key is new
    assert _changelog(table, first.id) == [(0, 1, "a"), (0, 2, "a")]
    _write(table, [1, 2, 3], "b", kinds=[0, 3, 0] if engine == "deduplicate" else None).commit()
    second = _compact(table)
    assert second.changelog_record_count == len(expected)
    assert _changelog(table, second.id) == expected
    assert _compact(table) is None  # one file at the top level: nothing to rewrite, nothing to derive


def test_a_full_compaction_derives_each_keys_change_since_the_last_one(table_path):
    """full-compaction: the top level (the previous full compaction) against the merge of every
    version; compactions below the top level derive nothing."""
    table = FileStoreTable.create(table_path, SCHEMA, ["id"],
                                  options={"bucket": "1", "changelog-producer": "full-compaction"})
    _write(table, [1, 2], "a").commit()
    first = _compact(table)
    assert _changelog(table, first.id) == [(0, 1, "a"), (0, 2, "a")]
    _write(table, [1, 2, 3], "b", kinds=[0, 3, 0]).commit()
    _write(table, [3], "c").commit()
    split = table.plan().splits[0]
    newer = dataclasses.replace(split, files=[f for f in split.files if f.level == 0])
    below = table.new_commit().commit(compact_bucket(table, newer, output_level=4, drop_deletes=False),
                                      "COMPACT").snapshot
    assert below.changelog_manifest_list is None  # not the top level
    second = _compact(table)
    # 1 updated, 2 deleted, 3 new (written twice: its merged version): -U/+U, -D of the stored row, +I
    assert _changelog(table, second.id) == [(0, 3, "c"), (1, 1, "a"), (2, 1, "b"), (3, 2, "a")]
    assert _compact(table) is None


def test_a_level0_file_moved_up_unrewritten_still_gets_its_changelog(table_path):
    table = FileStoreTable.create(table_path, SCHEMA, ["id"], options={"bucket": "1", "changelog-producer": "lookup"})
    _write(table, [1, 2], "a").commit()
    data_files = _files(table_path, "data-")
    snapshot = _compact(table)
    assert _files(table_path, "data-") == data_files  # upgraded by metadata only
    assert _changelog(table, snapshot.id) == [(0, 1, "a"), (0, 2, "a")]
