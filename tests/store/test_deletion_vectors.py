"""The DV index file (deletion_vectors.py) byte for byte as Java's DeletionFileWriter writes it, and
what a reader refuses."""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa
import pytest

from dbt_paimon.store.index.deletion_vectors import (DeletionVectorsIndexFile, changed_vectors, live_mask, read_vectors,
                                                     ranges)
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.compaction.compact import compact_bucket_dv
from dbt_paimon.store.common.errors import CommitConflictError, CorruptTableError
from dbt_paimon.store.common.fileio import FileIO

# One data file with rows 1 and 5 deleted, as Java 2.x writes it (BitmapDeletionVector /
# Bitmap64DeletionVector serializeTo, CRC32 included): version byte, then the entry at offset 1
JAVA_V1 = "01 00000018 5e43f2d0 3a300000 01000000 0000 0100 10000000 0100 0500 8c77fe55"
JAVA_V2 = "01 00000024 d1d33964 0100000000000000 00000000 3a300000 01000000 0000 0100 10000000 0100 0500 3e6e302f"


@pytest.mark.parametrize("bitmap64, java, length", [(False, JAVA_V1, 24), (True, JAVA_V2, 44)], ids=["v1", "v2"])
def test_an_index_file_is_javas_bytes_and_reads_back(tmp_path, bitmap64, java, length):
    io, table = FileIO.get(str(tmp_path)), str(tmp_path / "t")
    meta = DeletionVectorsIndexFile(io, table, bitmap64).write({"data-0.parquet": np.array([5, 1])})
    assert (tmp_path / "t" / "index" / meta.file_name).read_bytes() == bytes.fromhex(java.replace(" ", ""))
    assert (meta.index_type, meta.row_count, meta.file_size) == ("DELETION_VECTORS", 1, len(bytes.fromhex(
        java.replace(" ", ""))))
    r = ranges(meta)["data-0.parquet"]
    assert (r.offset, r.length, r.cardinality) == (1, length, 2)
    assert read_vectors(io, table, meta)["data-0.parquet"].tolist() == [1, 5]


def test_a_damaged_entry_or_a_vector_past_the_file_is_refused(tmp_path):
    io, table = FileIO.get(str(tmp_path)), str(tmp_path / "t")
    meta = DeletionVectorsIndexFile(io, table).write({"f": np.array([1, 5])})
    path = tmp_path / "t" / "index" / meta.file_name
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF  # the magic
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptTableError, match="invalid magic"):
        read_vectors(io, table, meta)
    with pytest.raises(CorruptTableError, match="row 5 of a file of 3 rows"):
        live_mask(3, np.array([1, 5]))
    assert live_mask(6, np.array([1, 5])).to_pylist() == [True, False, True, True, True, False]


def test_a_compaction_drops_the_vectors_of_what_it_rewrote_and_adds_what_it_deleted():
    before = {"a": np.array([1]), "b": np.array([2])}
    after = changed_vectors(before, {"a"}, {"b": np.array([0, 2]), "c": np.array([3])})
    assert {n: v.tolist() for n, v in after.items()} == {"b": [0, 2], "c": [3]}
    assert changed_vectors(before, set(), {"b": np.array([2])}) is None  # nothing new


def _dv_table(path: str):
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = FileStoreTable.create(path, schema, ["id"], options={"bucket": "1", "deletion-vectors.enabled": "true"})

    def write(ids, v):
        w = table.new_write()
        w.write(pa.table({"id": ids, "v": [v] * len(ids)}, schema=schema))
        table.new_commit().commit(w.prepare_commit())

    def compaction(level: int, level0_only: bool):
        split = table.plan().splits[0]
        unit = [f for f in split.files if f.level == 0] if level0_only else split.files
        return compact_bucket_dv(table, dataclasses.replace(split, files=unit), level, split.files)
    return table, write, compaction


@pytest.mark.parametrize("first", ["full", "lookup"])
def test_two_compactions_of_one_bucket_cannot_both_commit(tmp_path, first):
    """A full compaction (no vectors of its own to write) and a level-0 compaction that deletes a row
    of a file the first rewrites: whichever commits second conflicts (else the key is live twice)."""
    table, write, compaction = _dv_table(str(tmp_path / "t"))
    write([1, 2, 3], "a")
    entries, vectors = compaction(5, False)
    table.new_commit().commit(entries, "COMPACT", vectors=vectors)
    write([4], "b")
    entries, vectors = compaction(4, True)
    table.new_commit().commit(entries, "COMPACT", vectors=vectors)  # key 4 is new: level 4, no vector
    full = compaction(5, False)  # reads levels 4 and 5
    write([1], "c")
    lookup = compaction(3, True)  # key 1's row in the level-5 file gets deleted
    assert lookup[1][0].marked
    order = [full, lookup] if first == "full" else [lookup, full]
    table.new_commit().commit(order[0][0], "COMPACT", vectors=order[0][1])
    with pytest.raises(CommitConflictError, match="deletion vectors of bucket 0 changed"):
        table.new_commit().commit(order[1][0], "COMPACT", vectors=order[1][1])
