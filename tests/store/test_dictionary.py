"""Dictionary encoding of data files (store/format/datafile.py dictionary_columns): a value column gets a
dictionary when its values repeat, plain encoding when they are (nearly) unique, as parquet-mr
falls back to plain where a dictionary does not pay; the key and the sequence number never get one.
pypaimon reads the files back."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.compaction.compact import compact_bucket
from tests.oracle import pypaimon_read, rows

N = 5000
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("status", pa.string()), ("name", pa.string()),
                    ("qty", pa.int32())])


def _data(offset: int = 0) -> pa.Table:
    ids = range(offset, offset + N)
    return pa.table({"id": pa.array(ids, pa.int64()), "dt": ["d%d" % (i % 2) for i in ids],
                     "status": ["new", "open", "closed"] * (N // 3) + ["new"] * (N % 3),
                     "name": [f"customer-{i:08d}" for i in ids], "qty": pa.array([i % 7 for i in ids], pa.int32())})


def _dictionary_encoded(path: str) -> dict:
    """Per column of a data file: whether its first row group has a dictionary page."""
    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).has_dictionary_page for i in range(group.num_columns)}


@pytest.mark.parametrize("partitioned", [False, True], ids=["one bucket", "two partitions"])
def test_repeating_columns_get_a_dictionary_unique_ones_do_not(tmp_path, partitioned):
    t = FileStoreTable.create(str(tmp_path / "db.db" / "t"), SCHEMA, ["id", "dt"] if partitioned else ["id"],
                              ["dt"] if partitioned else [], {"bucket": "1"})
    w = t.new_write()
    w.write(_data())
    w.commit()
    files = [f"{s.bucket_path}/{f.file_name}" for s in t.plan().splits for f in s.files]
    assert len(files) == (2 if partitioned else 1)
    for path in files:
        encoded = _dictionary_encoded(path)
        assert encoded["status"] and encoded["qty"] and encoded["dt"]
        assert not encoded["name"] and not encoded["_KEY_id"] and not encoded["_SEQUENCE_NUMBER"]
    assert rows(pypaimon_read(t.path), ["id"]) == rows(_data(), ["id"])


def test_a_compaction_chooses_for_its_own_rows(tmp_path):
    t = FileStoreTable.create(str(tmp_path / "db.db" / "t"), SCHEMA, ["id"], [], {"bucket": "1"})
    for offset in (0, N // 2):
        w = t.new_write()
        w.write(_data(offset))
        w.commit()
    (split,) = t.plan().splits
    t.new_commit().commit(compact_bucket(t, split), kind="COMPACT")
    (split,) = t.plan().splits
    (f,) = split.files
    encoded = _dictionary_encoded(f"{split.bucket_path}/{f.file_name}")
    assert encoded["status"] and not encoded["name"]
    assert f.row_count == N + N // 2
