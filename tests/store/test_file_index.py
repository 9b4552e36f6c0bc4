"""Data-file indexes (file_index.py, bloom_filter.py, bitmap_index.py): the bytes Java Paimon writes
for the same values (the reference release's, from FileIndexVectors), where they live, and files skipped."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.index import bitmap_index, bloom_filter
from dbt_paimon.store.compaction.compact import compact_bucket_dv
from dbt_paimon.store.index.file_index import Condition, read_container, write_container
from dbt_paimon.store.read.read import TableRead
from dbt_paimon.store.schema.schema import build_schema
from dbt_paimon.store.common.types import parse_type

INT, STRING = parse_type("INT"), parse_type("STRING")
SCHEMA = pa.schema([("id", pa.int32()), ("i", pa.int32()), ("b", pa.int64()), ("s", pa.string())])


def hexed(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_hashes_and_bloom_filters_are_javas():
    assert bloom_filter.value_hashes(pa.array([1, 2, 3], pa.int32()), INT).view("uint64").tolist() == [
        0x5BCA7C69B794F8CE, 0xB795033F6F2A0674, 0x135FDDF6A6BFBBDD]
    assert [hex(h) for h in bloom_filter.xxh64(pa.array(["a", "", "hello"]))] == [
        "0xd24ec4f1a98c6e5b", "0xef46db3751d8e999", "0x26c7827d889f6da3"]
    assert bloom_filter.sizing(1_000_000, 0.1) == (4_792_536, 3) and bloom_filter.sizing(100, 0.01) == (960, 7)
    assert bloom_filter.write(pa.array([1, 2, 3], pa.int32()), INT, 10, 0.1) == hexed("00000003 89200150 4000")
    assert bloom_filter.write(pa.array(["a", "b", "a"]), STRING, 10, 0.1) == hexed("00000003 08200070 0200")
    assert bloom_filter.write(pa.array([1, None, 3], pa.int32()), INT, 10, 0.1) == hexed("00000003 81000110 4000")


def test_bitmaps_are_javas_and_answer_for_values_and_nulls():
    ints = bitmap_index.write(pa.array([1, 2, 3], pa.int32()), INT)
    assert ints == hexed("02 00000003 00000003 00 00000001 00000001 00000000 00000028 00000003 00000001 ffffffff "
                         "ffffffff 00000002 fffffffe ffffffff 00000003 fffffffd ffffffff")
    strings = bitmap_index.write(pa.array(["a", "b", "a"]), STRING)
    assert strings == hexed("02 00000003 00000002 00 00000001 00000001 61 00000000 0000001e 00000002 00000001 61 "
                            "00000000 00000014 00000001 62 fffffffe ffffffff 3a300000 01000000 00000100 10000000 "
                            "00000200")
    nulls = bitmap_index.write(pa.array([1, 1, 2, None, None, 3], pa.int32()), INT)
    assert len(nulls) == 114 and nulls[:20] == hexed("02 00000006 00000003 01 00000000 00000014 00000001")[:20]
    assert list(bitmap_index.rows_of(nulls, pa.array([1, 3], pa.int32()), INT)) == [0, 1, 5]
    assert list(bitmap_index.rows_of(nulls, None, INT)) == [3, 4]
    assert not bitmap_index.rows_of(strings, pa.array(["z"]), STRING)


def test_a_container_is_javas_and_reads_back():
    schema = build_schema(SCHEMA, ["id"], [], {"bucket": "1", "file-index.bloom-filter.columns": "i",
                                               "file-index.bloom-filter.i.items": "10"})
    data = write_container(schema, pa.table({"id": [3, 1, 2], "i": pa.array([1, 2, 3], pa.int32()),
                                             "b": [1, 2, 3], "s": ["a", "b", "a"]}))
    assert data == hexed("00054e4ed01a35ae 00000001 00000035 00000001 0001 69 00000001 000c "
                         "626c6f6f6d2d66696c746572 00000035 0000000a 00000000 00000003 89200150 4000")
    assert read_container(data) == {"i": {"bloom-filter": hexed("00000003 89200150 4000")}}


OPTIONS = {"bucket": "2", "deletion-vectors.enabled": "true", "file-index.bitmap.columns": "i,s",
           "file-index.bloom-filter.columns": "b", "file-index.bloom-filter.b.items": "100"}


def test_small_indexes_are_embedded_big_ones_are_files_and_files_are_skipped(tmp_path):
    path = str(tmp_path / "db.db" / "t")
    table = FileStoreTable.create(path, SCHEMA, ["id"], options={**OPTIONS, "file-index.bloom-filter.s.items": "2000",
                                                                 "file-index.bloom-filter.columns": "b,s"})
    w = table.new_write()
    w.write(pa.table({"id": pa.array(range(20), pa.int32()), "i": pa.array([k % 4 for k in range(20)], pa.int32()),
                      "b": list(range(20)), "s": [f"s{k}" for k in range(20)]}, schema=SCHEMA))
    table.new_commit().commit(w.prepare_commit())
    files = [f for s in table.plan().splits for f in s.files]
    assert all(f.embedded_index is None and f.extra_files == (f.file_name + ".index",) for f in files)
    assert all(os.path.exists(f"{s.bucket_path}/{x}") for s in table.plan().splits for f in s.files
               for x in f.extra_files)

    small = FileStoreTable.create(str(tmp_path / "db.db" / "small"), SCHEMA, ["id"], options=OPTIONS)
    w = small.new_write()
    w.write(pa.table({"id": pa.array([1, 2, 3, 4], pa.int32()), "i": pa.array([1, 1, 2, 2], pa.int32()),
                      "b": [10, 20, 30, 40], "s": ["x", "y", "x", "y"]}, schema=SCHEMA))
    small.new_commit().commit(w.prepare_commit())
    level0 = small.plan().splits
    ruled_out = TableRead(small.io, small.path, small.schema, conditions=[Condition("i", (7,))])
    # a level-0 file may hold a key's newest version: read whatever its index says
    assert all(not ruled_out.may_match(s, f) for s in level0 for f in s.files)
    assert sum(ruled_out.read_split(s).num_rows for s in level0) == 4
    for s in level0:  # compacted up, as after every write to such a table
        entries, changed = compact_bucket_dv(small, s, 5)
        small.new_commit().commit(entries, "COMPACT", vectors=changed)
    splits = small.plan().splits
    assert all(f.level == 5 and f.embedded_index is not None and not f.extra_files for s in splits for f in s.files)
    every = small.to_arrow().to_pylist()
    for condition, skipped_some in ((Condition("b", (10,)), True), (Condition("i", (7,)), True),
                                    (Condition("s", ("x",)), False), (Condition("i", None), True)):
        reader = TableRead(small.io, small.path, small.schema, conditions=[condition])
        kept = [f for s in splits for f in s.files if reader.may_match(s, f)]
        assert (len(kept) < len(splits)) == skipped_some, condition
        got = [r for s in splits for r in reader.read_split(s).to_pylist()]  # the caller still filters
        col, values = condition.column, condition.values
        want = [r for r in every if (r[col] is None if values is None else r[col] in values)]
        assert all(r in got for r in want) and all(r in every for r in got), condition


@pytest.mark.parametrize("options, message", [
    ({"file-index.bloom-filter.columns": "nope"}, "names 'nope', which the table does not have"),
    ({"file-index.bitmap.columns": "b", "file-index.bitmap.b.version": "1"}, "writes version 2"),
    ({"file-index.bloom-filter.columns": "i", "file-index.bloom-filter.s.items": "5"}, "does not name"),
    ({"file-index.bsi.columns": "i"}, "writes the file indexes bloom-filter, bitmap"),
    ({"file-index.bloom-filter.i.size": "5", "file-index.bloom-filter.columns": "i"}, "unknown table option"),
])
def test_file_index_options_paimon_refuses_are_refused(tmp_path, options, message):
    with pytest.raises(SchemaError, match=message):
        FileStoreTable.create(str(tmp_path / "t"), SCHEMA, ["id"], options=options)


def test_an_indexed_column_counts_as_named_by_the_options():
    """So dropping or renaming it is refused (Paimon 2.x refuses it too), not left to break every write."""
    from dbt_paimon.engine.writes.schema_change import referenced_by_options

    schema = build_schema(SCHEMA, ["id"], [], {**OPTIONS, "file-index.bloom-filter.columns": "b,s",
                                               "file-index.bloom-filter.s.items": "10"})
    assert referenced_by_options(schema, "s") == ["file-index.bitmap.columns", "file-index.bloom-filter.columns",
                                                  "file-index.bloom-filter.s.items"]
    assert referenced_by_options(schema, "id") == []
