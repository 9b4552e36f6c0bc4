"""store/clone.py: a clone is an independent Paimon table with the source's latest rows, its data
files shared (hard links here, no bytes copied), readable by pypaimon; writes, compaction and
expiration on either side leave the other's rows as they were."""

import os

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.clone import clone_table
from dbt_paimon.store.common.fileio import FileIO
from tests.oracle import pypaimon_read

ARROW = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])


def _write(table, rows):
    write = table.new_write()
    fixed = table.schema.core.bucket > 0  # a dynamic-bucket table is given its bucket (0 here)
    entries = write.write(pa.Table.from_pylist(rows, ARROW), None if fixed else 0)
    table.new_commit().commit(entries)


def _rows(path):
    return sorted((r["id"], r["dt"], r["v"]) for r in FileStoreTable.open(path).to_arrow().to_pylist())


@pytest.mark.parametrize("options", [{"bucket": "2"}, {"bucket": "-1"}])
def test_a_clone_shares_files_and_lives_on_its_own(tmp_path, options):
    source, target = str(tmp_path / "db.db" / "src"), str(tmp_path / "dev.db" / "src")
    table = FileStoreTable.create(source, ARROW, ["id", "dt"], ["dt"], options)
    _write(table, [{"id": i, "dt": "ab"[i % 2], "v": i} for i in range(10)])
    _write(table, [{"id": 1, "dt": "b", "v": 100}])
    before = _rows(source)
    result = clone_table(FileIO.get(source), source, target)
    assert (result.source_snapshot, result.snapshot_id) == (2, 1) and result.files >= 3
    assert _rows(target) == before
    assert sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(target).to_pylist()) == before
    clone = FileStoreTable.open(target)
    split = clone.plan().splits[0]
    data = os.path.join(clone.bucket_path(split.partition_values, split.bucket), split.files[0].file_name)
    assert os.stat(data).st_nlink == 2  # shared with the source, not copied
    _write(FileStoreTable.open(target), [{"id": 50, "dt": "a", "v": 5}])  # the clone moves on alone
    assert _rows(source) == before
    assert (50, "a", 5) in _rows(target)
    with pytest.raises(SchemaError, match="a table is there already"):
        clone_table(FileIO.get(source), source, target)


def test_a_clone_on_an_object_store_copies_on_the_server(s3_warehouse):
    source, target = f"{s3_warehouse}/db.db/src", f"{s3_warehouse}/dev.db/src"
    table = FileStoreTable.create(source, ARROW, ["id", "dt"], ["dt"], {"bucket": "2"})
    _write(table, [{"id": i, "dt": "ab"[i % 2], "v": i} for i in range(10)])
    result = clone_table(FileIO.get(source), source, target)
    assert result.snapshot_id == 1 and _rows(target) == _rows(source)
    _write(FileStoreTable.open(target), [{"id": 1, "dt": "b", "v": 100}])
    assert (1, "b", 100) in _rows(target) and (1, "b", 1) in _rows(source)


def test_a_clone_between_file_uris_shares_files(tmp_path):
    """`file:` URIs are local paths too (FileIO.get): the clone links the files, not a directory
    named `file:` in the working directory."""
    from dbt_paimon.store.common.fileio import local_path

    source, target = f"file:{tmp_path}/db.db/src", f"file://{tmp_path}/dev.db/src"
    table = FileStoreTable.create(source, ARROW, ["id", "dt"], ["dt"], {"bucket": "2"})
    _write(table, [{"id": i, "dt": "ab"[i % 2], "v": i} for i in range(6)])
    clone_table(FileIO.get(source), source, target)
    assert _rows(target) == _rows(source)
    clone = FileStoreTable.open(target)
    split = clone.plan().splits[0]
    data = local_path(f"{clone.bucket_path(split.partition_values, split.bucket)}/{split.files[0].file_name}")
    assert os.stat(data).st_nlink == 2
    assert not os.path.exists("file:")
