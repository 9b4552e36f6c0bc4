"""Column stats follow metadata.stats-mode (default truncate(16)), fields.<f>.stats-mode,
metadata.stats-keep-first-n-columns and metadata.stats-dense-store, as Paimon's collectors store
them; pypaimon reads every table and prunes correctly on truncated value and key stats."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, SchemaError
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.format import stats_collector
from dbt_paimon.store.compaction.compact import compact_bucket
from dbt_paimon.store.manifest.manifest import ManifestList
from tests.oracle import pypaimon_read, pypaimon_table, rows

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("b", pa.binary()), ("i", pa.int32()),
                    ("e", pa.string())])
ROWS = [
    {"id": 1, "s": "apple", "b": b"\x01\x02\x03\x04", "i": 5, "e": None},
    {"id": 2, "s": "banana", "b": b"\x01\x02", "i": None, "e": None},
    {"id": 3, "s": None, "b": None, "i": -7, "e": None},
    {"id": 4, "s": "cherry", "b": b"\x05\xff\xff\xff", "i": 2, "e": None},
]


def write(path: str, options: dict, data=ROWS, schema=SCHEMA, keys=("id",)) -> FileStoreTable:
    t = FileStoreTable.create(path, schema, list(keys), [], {"bucket": "1", **options})
    w = t.new_write()
    w.write(pa.Table.from_pylist(data, schema))
    w.commit()
    return t


def only_file(t: FileStoreTable):
    (split,) = t.plan().splits
    (f,) = split.files
    return f


def value_stats_of(t: FileStoreTable, f) -> tuple:
    """(_VALUE_STATS_COLS, {column: (min, max, null count)}) as stored, decoded by the columns named."""
    names = list(f.value_stats_cols) if f.value_stats_cols is not None else t.schema.field_names
    types = [t.schema.field(n).type for n in names]
    mins = binary_row.deserialize(f.value_stats.min_values, types)
    maxs = binary_row.deserialize(f.value_stats.max_values, types)
    return f.value_stats_cols, {n: (mins[i], maxs[i], f.value_stats.null_counts[i]) for i, n in enumerate(names)}


def value_stats(t: FileStoreTable) -> tuple:
    return value_stats_of(t, only_file(t))


def assert_pypaimon_reads(t: FileStoreTable, data=ROWS, key="id"):
    assert rows(pypaimon_read(t.path), key) == rows(t.to_arrow(), key) == rows(pa.Table.from_pylist(data), key)


# What Paimon's collectors keep for ROWS (TruncateSimpleColStatsCollector and friends, by hand).
EXPECTED = {
    "full": (None, {"id": (1, 4, 0), "s": ("apple", "cherry", 1), "b": (b"\x01\x02", b"\x05\xff\xff\xff", 1),
                    "i": (-7, 5, 1), "e": (None, None, 4)}),
    # min cut to 3; max cut to 3 and its last code point (byte) that can grow incremented
    "truncate(3)": (None, {"id": (1, 4, 0), "s": ("app", "chf", 1), "b": (b"\x01\x02", b"\x06", 1),
                           "i": (-7, 5, 1), "e": (None, None, 4)}),
    "counts": (None, {"id": (None, None, 0), "s": (None, None, 1), "b": (None, None, 1), "i": (None, None, 1),
                      "e": (None, None, 4)}),
    "none": ((), {}),
}


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_each_mode_stores_what_paimons_collector_stores(warehouse, mode):
    t = write(os.path.join(warehouse, "db.db", "t"), {"metadata.stats-mode": mode})
    assert value_stats(t) == EXPECTED[mode]
    if mode == "none":  # nothing at all: empty rows, no null counts
        f = only_file(t)
        assert f.value_stats.min_values == f.value_stats.max_values == binary_row.empty_row()
        assert f.value_stats.null_counts == []
    assert_pypaimon_reads(t)


def test_default_is_truncate_16(table_path):
    long_rows = [{"id": 1, "s": "a" * 40, "b": b"\x07" * 40, "i": 1, "e": "short"},
                 {"id": 2, "s": "b" * 40, "b": b"\x08" * 40, "i": 2, "e": "tiny"}]
    t = write(table_path, {}, long_rows)
    assert "metadata.stats-mode" not in t.schema.options
    cols, stats = value_stats(t)
    assert cols is None  # every column has stats: stored in full width, as before
    assert stats["s"] == ("a" * 16, "b" * 15 + "c", 0)
    assert stats["b"] == (b"\x07" * 16, b"\x08" * 15 + b"\x09", 0)
    assert stats["e"] == ("short", "tiny", 0)  # short enough: left as they are, max not incremented
    assert_pypaimon_reads(t, long_rows)


def test_no_upper_bound_drops_min_and_max(table_path):
    top = "\U0010ffff"
    data = [{"id": 1, "s": top * 3 + "x", "b": b"\xff\xff\xff", "i": 1, "e": "\U0010ffffa"}]
    t = write(table_path, {"metadata.stats-mode": "truncate(2)"}, data)
    cols, stats = value_stats(t)
    assert stats["s"] == (None, None, 0)
    assert stats["b"] == (None, None, 0)
    assert stats["e"] == ("\U0010ffffa", "\U0010ffffa", 0)  # exactly 2 code points: not cut
    assert_pypaimon_reads(t, data)


def test_surrogates_are_skipped_when_incrementing(table_path):
    data = [{"id": 1, "s": "a\ud7ffzz", "b": None, "i": None, "e": None}]  # U+D7FF + 1 would be a surrogate
    t = write(table_path, {"metadata.stats-mode": "truncate(2)"}, data)
    assert value_stats(t)[1]["s"] == ("a\ud7ff", "a\ue000", 0)


def test_per_field_mode_and_dense_columns(warehouse):
    t = write(os.path.join(warehouse, "db.db", "a"), {"metadata.stats-mode": "none", "fields.s.stats-mode": "full",
                                                      "fields.b.stats-mode": "TRUNCATE(1)"})
    assert value_stats(t) == (("s", "b"), {"s": ("apple", "cherry", 1), "b": (b"\x01", b"\x06", 1)})
    assert_pypaimon_reads(t)

    # keep-first-n: columns after the first n get none, unless they have their own mode
    t = write(os.path.join(warehouse, "db.db", "b"), {"metadata.stats-keep-first-n-columns": "2",
                                                      "fields.i.stats-mode": "counts"})
    assert value_stats(t) == (("id", "s", "i"), {"id": (1, 4, 0), "s": ("apple", "cherry", 1), "i": (None, None, 1)})
    assert_pypaimon_reads(t)

    # dense store off: every column keeps its slot, none stored as nulls
    t = write(os.path.join(warehouse, "db.db", "c"), {"metadata.stats-dense-store": "false",
                                                      "fields.s.stats-mode": "none"})
    cols, stats = value_stats(t)
    assert cols is None and stats["s"] == (None, None, None) and stats["i"] == (-7, 5, 1)
    assert_pypaimon_reads(t)


def test_options_are_validated(table_path):
    for bad in ({"metadata.stats-mode": "truncate(0)"}, {"metadata.stats-mode": "truncate"},
                {"metadata.stats-mode": "trunc(3)"}, {"fields.nope.stats-mode": "full"},
                {"fields.s.stats-mode": "some"}, {"metadata.stats-dense-store": "maybe"},
                {"metadata.stats-keep-first-n-columns": "x"}):
        with pytest.raises(SchemaError):
            FileStoreTable.create(table_path, SCHEMA, ["id"], [], bad)
    t = FileStoreTable.create(table_path, SCHEMA, ["id"], [], {"metadata.stats-mode": "Full"})
    t.alter_options({"metadata.stats-mode": "TRUNCATE(8)"})  # changes apply to files written later
    assert FileStoreTable.open(table_path).schema.options["metadata.stats-mode"] == "TRUNCATE(8)"


def test_key_stats_are_truncated_to_128_but_min_max_key_are_whole(table_path):
    schema = pa.schema([("k", pa.string()), ("v", pa.int64())])
    data = [{"k": "k" * 200, "v": 1}, {"k": "m" * 200, "v": 2}]
    t = write(table_path, {}, data, schema, keys=("k",))
    f = only_file(t)
    key_type = [t.schema.field("k").type]
    assert binary_row.deserialize(f.min_key, key_type) == ("k" * 200,)
    assert binary_row.deserialize(f.max_key, key_type) == ("m" * 200,)
    assert binary_row.deserialize(f.key_stats.min_values, key_type) == ("k" * 128,)
    assert binary_row.deserialize(f.key_stats.max_values, key_type) == ("m" * 127 + "n",)
    assert_pypaimon_reads(t, data, key="k")


def test_a_10mb_value_keeps_manifests_small(warehouse):
    big = os.urandom(5 * 1024 * 1024).hex()  # 10 MB, barely compressible
    data = [{"id": 1, "s": big, "b": None, "i": 1, "e": None}, {"id": 2, "s": "x", "b": None, "i": 2, "e": None}]
    sizes = {}
    for mode in ("truncate(16)", "full"):
        t = write(os.path.join(warehouse, "db.db", mode[:4]), {"metadata.stats-mode": mode} if mode == "full" else {},
                  data)
        s = t.latest_snapshot()
        (meta,) = ManifestList(t.io, t.path).read(s.delta_manifest_list)
        sizes[mode] = meta.file_size
    assert sizes["truncate(16)"] < 4096 < 1024 * 1024 < sizes["full"]
    t = FileStoreTable.open(os.path.join(warehouse, "db.db", "trun"))
    assert value_stats(t)[1]["s"] == (big[:16], "x", 0)
    assert pypaimon_read(t.path).sort_by("id").column("s").to_pylist() == [big, "x"]


# ---- pruning: pypaimon skips files by the truncated stats, and still finds every row ---------------------

def _pypaimon_filtered(path: str, column: str, value) -> tuple[list[dict], int]:
    """pypaimon's rows for column == value, and how many data files its plan kept."""
    table = pypaimon_table(path)
    rb = table.new_read_builder()
    rb = rb.with_filter(rb.new_predicate_builder().equal(column, value))
    splits = rb.new_scan().plan().splits()
    return rb.new_read().to_arrow(splits).to_pylist(), sum(len(s.files) for s in splits)


GROUP = 16 * "a"  # files hold values sharing their first 16 characters, GROUP + X with X per file


def test_pypaimon_prunes_on_truncated_value_stats(table_path):
    """A first-row table read at levels >= 1, where pypaimon (as Java) filters by value stats."""
    schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("v", pa.string())])
    data = []
    for part, lead in enumerate("abcd"):  # one file per partition; v cut to 16 chars in the stats
        data += [{"id": part * 10 + j, "p": f"p{part}", "v": GROUP[:-1] + lead + "-" + "z" * j} for j in range(5)]
    t = FileStoreTable.create(table_path, schema, ["id", "p"], ["p"], {"bucket": "1", "merge-engine": "first-row"})
    w = t.new_write()
    w.write(pa.Table.from_pylist(data, schema))
    w.commit()
    entries = [e for split in t.plan().splits for e in compact_bucket(t, split)]
    t.new_commit().commit(entries, kind="COMPACT")
    stored = sorted(value_stats_of(t, f)[1]["v"] for s in t.plan().splits for f in s.files if f.level > 0)
    assert stored == [(GROUP[:-1] + a, GROUP[:-1] + b, 0) for a, b in ("ab", "bc", "cd", "de")]

    for row in data:  # every value found, whatever file holds it; the greatest of each file included
        found, kept = _pypaimon_filtered(table_path, "v", row["v"])
        assert found == [row]
        assert kept == 1  # the stats were used: three of the four files were skipped
    assert _pypaimon_filtered(table_path, "v", "b")[1] == 0
    assert rows(pypaimon_read(table_path), "id") == rows(t.to_arrow(), "id") == rows(pa.Table.from_pylist(data), "id")


def test_pypaimon_prunes_on_truncated_key_stats(table_path):
    """pypaimon filters any primary-key table by key stats, cut to 128 characters."""
    schema = pa.schema([("k", pa.string()), ("p", pa.string()), ("v", pa.int64())])
    prefix = "k" * 127
    data = []
    for part, lead in enumerate("abcd"):
        data += [{"k": prefix + lead + "-" + "z" * j, "p": f"p{part}", "v": j} for j in range(5)]
    t = FileStoreTable.create(table_path, schema, ["k", "p"], ["p"], {"bucket": "1"})
    w = t.new_write()
    w.write(pa.Table.from_pylist(data, schema))
    w.commit()
    for row in data:
        found, kept = _pypaimon_filtered(table_path, "k", row["k"])
        assert found == [row]
        assert kept == 1


@pytest.mark.parametrize("options", [{}, {"metadata.stats-mode": "full"}, {"metadata.stats-mode": "counts"},
                                     {"metadata.stats-mode": "truncate(3)", "metadata.stats-dense-store": "false"},
                                     {"metadata.stats-mode": "none", "fields.s.stats-mode": "truncate(2)"}])
@pytest.mark.parametrize("buckets, n", [(16, 400), (128, 1500)], ids=["by slices", "aggregated"])
def test_files_written_together_get_the_stats_each_would_get_alone(warehouse, options, buckets, n):
    """A write touching many buckets takes every file's stats together (collect_groups: by slices
    for a few files, in one hash aggregation for many); each file must hold what the per-file
    collectors give for its rows alone: nulls, all-null files, NaN, -0.0, strings cut with and
    without an upper bound, 0xFF bytes, timestamps, dates, decimals."""
    import datetime as dt
    import decimal
    import random

    from dbt_paimon.store.format.datafile import file_stats, read_kv_file
    from dbt_paimon.store.format.stats_collector import DataFileStatsCollector

    schema = pa.schema([("id", pa.int64()), ("s", pa.string()), ("b", pa.binary()), ("f", pa.float64()),
                        ("t", pa.timestamp("us")), ("d", pa.date32()), ("m", pa.decimal128(12, 3)),
                        ("ok", pa.bool_()), ("e", pa.string())])
    rnd = random.Random(7)
    strings = ["", "a", "apple", "\U0010ffff\U0010ffff\U0010ffff\U0010ffff", "zz\U0010ffffq", "é" * 20, "b" * 40]
    data = [{"id": i, "s": rnd.choice(strings + [None]), "b": rnd.choice([b"", b"\xff\xff\xff\xff", b"\x00\x01", None]),
             "f": rnd.choice([float("nan"), -0.0, 0.0, 1.5, -2.25, None]),
             "t": rnd.choice([dt.datetime(1970, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
                              dt.datetime(2024, 5, 6, 7, 8, 9, 123456), None]),
             "d": rnd.choice([dt.date(1, 1, 1), dt.date(2024, 2, 29), None]),
             "m": rnd.choice([decimal.Decimal("-123456789.123"), decimal.Decimal("0.001"), None]),
             "ok": rnd.choice([True, False, None]), "e": None} for i in range(n)]
    t = write(f"{warehouse}/db.db/grouped", {"bucket": str(buckets), **options}, data, schema)
    files = [(s, f) for s in t.plan().splits for f in s.files]
    assert (len(files) <= stats_collector.FEW_GROUPS) == (buckets <= stats_collector.FEW_GROUPS)
    collector = DataFileStatsCollector(t.schema)
    for split, f in files:
        alone = file_stats(read_kv_file(t.io, f"{split.bucket_path}/{f.file_name}"), collector)
        assert (f.key_stats, f.value_stats, f.value_stats_cols) == (alone.key_stats, alone.value_stats,
                                                                   alone.value_stats_cols), f.file_name
        assert (f.min_sequence_number, f.max_sequence_number, f.delete_row_count) == (
            alone.min_sequence, alone.max_sequence, alone.deletes)

    def same(table):  # NaN equal to NaN
        return [{k: "NaN" if v != v else v for k, v in r.items()} for r in rows(table, "id")]
    assert same(pypaimon_read(t.path)) == same(pa.Table.from_pylist(data, schema))
