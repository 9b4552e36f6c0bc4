"""FLOAT/DOUBLE primary keys compare as Paimon's RecordComparator compares them: Float.compare /
Double.compare (-0.0 < 0.0 are two keys, every NaN is one key above +inf), in the writer's sort, the
duplicate check, _MIN_KEY/_MAX_KEY, merge-on-read across files and compaction."""

import functools
import math
import os
import random
import struct

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.store import DataError, FileStoreTable
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.compaction.compact import compact_bucket
from dbt_paimon.store.format.datafile import KeyValueFileWriter
from dbt_paimon.store.common.key_order import order_surrogate, sort_indices
from tests.oracle import pypaimon_read
from tests.store.test_key_hash import _check

NAN = float("nan")


def nan_with_payload(bits: int, dtype=np.float64) -> float:
    """A NaN of a given bit pattern (Python floats keep NaN payloads; float32 ones go through numpy)."""
    itype = np.uint64 if dtype == np.float64 else np.uint32
    return np.array([bits], dtype=itype).view(dtype)[0]


ODD_NAN = nan_with_payload(0x7FF8_0000_0000_0001)
NEG_NAN = nan_with_payload(0xFFF8_0000_0000_0000)
ODD_NAN_32 = nan_with_payload(0x7FC0_0001, np.float32)


def double_to_long_bits(x: float) -> int:
    """Java's Double.doubleToLongBits: the bits, with every NaN made the canonical one."""
    return struct.unpack("<q", struct.pack("<d", NAN if math.isnan(x) else x))[0]


def java_compare(a: float, b: float) -> int:
    """Java's Double.compare, as written in java.lang.Double (Float.compare is the same on floats
    widened to double: widening keeps order, -0.0 and NaN)."""
    if a < b:
        return -1
    if a > b:
        return 1
    x, y = double_to_long_bits(a), double_to_long_bits(b)
    return (x > y) - (x < y)


def java_sorted(values):
    return sorted(values, key=functools.cmp_to_key(java_compare))


def same_bits(xs, ys) -> bool:
    """Lists of floats equal as Paimon keys: Double.compare == 0 pairwise (NaN = NaN, -0.0 != 0.0)."""
    return len(xs) == len(ys) and all(java_compare(float(a), float(b)) == 0 for a, b in zip(xs, ys))


SPECIALS = [NAN, ODD_NAN, NEG_NAN, -0.0, 0.0, 1.0, -1.0, math.inf, -math.inf, 5e-324, -5e-324, 1e308, -1e308]


@pytest.mark.parametrize("dtype", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_order_surrogate_orders_and_equates_as_java_compare(dtype):
    rng = random.Random(7)
    values = SPECIALS + [rng.uniform(-1e6, 1e6) for _ in range(40)] + [0.0, -0.0, NAN]
    arr = pa.array(values, dtype)
    if dtype == pa.float32():
        arr = pa.concat_arrays([arr, pa.array([ODD_NAN_32], dtype)])
    vals = [float(v) for v in arr.to_pylist()]  # float32 values widened: Float.compare == Double.compare
    got = arr.take(sort_indices(pa.table({"k": arr}), ["k"])).to_pylist()
    assert same_bits(got, java_sorted(vals))
    s = order_surrogate(arr).to_numpy()
    eq = s[:, None] == s[None, :]
    lt = s[:, None] < s[None, :]
    want = np.array([[java_compare(a, b) for b in vals] for a in vals])
    assert (eq == (want == 0)).all() and (lt == (want < 0)).all()
    # nulls stay null and other types pass through untouched
    assert order_surrogate(pa.array([1.5, None], dtype)).null_count == 1
    ints = pa.array([3, 1])
    assert order_surrogate(ints) is ints


def test_key_hash_of_nan_and_signed_zeros_is_javas():
    # BinaryRow writes Double.doubleToRawLongBits: -0.0 and 0.0 hash apart; a NaN hashes its own bits
    _check([pa.array([NAN, ODD_NAN, -0.0, 0.0, math.inf])], ["DOUBLE"])
    _check([pa.array([float("nan"), -0.0, 0.0], pa.float32())], ["FLOAT"])


SCHEMA = pa.schema([("k", pa.float64()), ("p", pa.string()), ("v", pa.int64())])


def _table(path, key_type=pa.float64(), **options):
    schema = pa.schema([("k", key_type), ("p", pa.string()), ("v", pa.int64())])
    return FileStoreTable.create(path, schema, ["k", "p"], ["p"], {"bucket": "1", **options}), schema


@pytest.mark.parametrize("key_type", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_writer_sorts_keys_as_paimon_and_records_min_max_key(table_path, key_type):
    t, schema = _table(table_path, key_type)
    # 0.0 comes before -0.0: a sort that ties the zeros would keep them in this order
    keys = [1.0, NAN, 0.0, math.inf, -0.0, -1.0, -math.inf, 2.5]
    w = t.new_write()
    w.write(pa.table({"k": pa.array(keys, key_type), "p": ["x"] * len(keys), "v": list(range(len(keys)))},
                     schema=schema))
    w.commit()
    (split,) = t.plan().splits
    (f,) = split.files
    stored = pq.ParquetFile(os.path.join(split.bucket_path, f.file_name)).read().column("_KEY_k").to_pylist()
    want = [-math.inf, -1.0, -0.0, 0.0, 1.0, 2.5, math.inf, NAN]
    assert same_bits(stored, want)  # -0.0 before 0.0, NaN last: Double.compare order
    (lo,) = binary_row.deserialize(f.min_key, t.schema.key_types)
    (hi,) = binary_row.deserialize(f.max_key, t.schema.key_types)
    assert lo == -math.inf and math.isnan(hi)
    got = {(double_to_long_bits(r["k"]), r["v"]) for r in t.to_arrow().to_pylist()}
    assert got == {(double_to_long_bits(float(k)), i) for i, k in enumerate(pa.array(keys, key_type).to_pylist())}
    ppm = {(double_to_long_bits(r["k"]), r["v"]) for r in pypaimon_read(table_path).to_pylist()}
    assert ppm == got


def test_key_value_file_writer_sorts_unsorted_rows_as_paimon(table_path):
    t, schema = _table(table_path)
    writer = KeyValueFileWriter(t.io, t.schema, t.bucket_path(("x",), 0))
    rows = pa.table({"k": [NAN, 0.0, 2.0, -0.0], "p": ["x"] * 4, "v": [1, 2, 3, 4]}, schema=schema)
    (meta,) = writer.write(rows, None, start_sequence=0)
    stored = pq.ParquetFile(os.path.join(t.bucket_path(("x",), 0), meta.file_name)).read()
    assert same_bits(stored.column("_KEY_k").to_pylist(), [-0.0, 0.0, 2.0, NAN])
    assert stored.column("v").to_pylist() == [4, 2, 3, 1]
    (hi,) = binary_row.deserialize(meta.max_key, t.schema.key_types)
    assert math.isnan(hi)


def test_a_data_file_holds_both_zeros_but_one_nan(table_path):
    t, schema = _table(table_path)
    w = t.new_write()
    w.write(pa.table({"k": [-0.0, 0.0], "p": ["x", "x"], "v": [1, 2]}, schema=schema))
    w.commit()
    assert sorted((math.copysign(1, r["k"]), r["v"]) for r in t.to_arrow().to_pylist()) == [(-1, 1), (1, 2)]
    # two NaNs are one key, whatever their bits
    with pytest.raises(DataError, match="duplicate keys"):
        t.new_write().write(pa.table({"k": [NAN, ODD_NAN], "p": ["x", "x"], "v": [1, 2]}, schema=schema))


ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
    "first-row": {"merge-engine": "first-row"},
}


def _model(engine, commits):
    """Per key (doubleToLongBits of k), the merged v, merging in commit order with plain Python."""
    state = {}
    for rows in commits:
        for k, v in rows:
            key = double_to_long_bits(k)
            if key not in state:
                state[key] = v
            elif engine in ("deduplicate", "partial-update"):
                state[key] = v
            elif engine == "aggregation":
                state[key] += v
    return sorted(state.items())


def _read(rows):
    return sorted((double_to_long_bits(r["k"]), r["v"]) for r in rows)


@pytest.mark.parametrize("engine", list(ENGINES))
def test_merge_across_files_with_nan_and_signed_zero_keys(warehouse, engine):
    path = os.path.join(warehouse, "db.db", engine.replace("-", "_"))
    t, schema = _table(path, **ENGINES[engine])
    rng = random.Random(len(engine))
    pool = [NAN, ODD_NAN, NEG_NAN, -0.0, 0.0, 1.0, -1.0, math.inf, -math.inf, 3.5]
    commits = []
    for c in range(4):
        # one version per key per file: a file never holds NaN twice, nor both NaN payloads
        picked, seen = [], set()
        for k in rng.sample(pool, 6):
            if double_to_long_bits(k) not in seen:
                seen.add(double_to_long_bits(k))
                picked.append((k, 10 * c + len(picked) + 1))
        commits.append(picked)
        w = t.new_write()
        w.write(pa.table({"k": [k for k, _ in picked], "p": ["x"] * len(picked), "v": [v for _, v in picked]},
                         schema=schema))
        w.commit()
    want = _model(engine, commits)
    assert len({k for k, _ in want}) == len(want) and any(k == double_to_long_bits(-0.0) for k, _ in want)
    (split,) = t.plan().splits
    assert len(split.files) == 4
    merged = t.new_read().read(t.plan().splits)  # every file (a first-row batch read skips level 0)
    assert _read(merged.to_pylist()) == want
    entries = compact_bucket(t, split)
    t.new_commit().commit(entries, kind="COMPACT")
    (split,) = t.plan().splits
    (f,) = split.files
    stored = pq.ParquetFile(os.path.join(split.bucket_path, f.file_name)).read()
    keys = stored.column("_KEY_k").to_pylist()
    assert same_bits(keys, java_sorted(keys)) and len({double_to_long_bits(k) for k in keys}) == len(keys)
    lo, hi = (binary_row.deserialize(b, t.schema.key_types)[0] for b in (f.min_key, f.max_key))
    assert same_bits([lo, hi], [keys[0], keys[-1]])
    assert _read(t.to_arrow().to_pylist()) == want
    # one file per bucket, so pypaimon reads it without merging: pypaimon 2.1.0's merge compares
    # keys with Python's < and >, under which a NaN key equals every key
    assert _read(pypaimon_read(path).to_pylist()) == want


_ONE_COLUMN = {
    "int64 with ties": pa.array(np.random.default_rng(1).integers(0, 50, 5000)),
    "int64 full range": pa.array(np.random.default_rng(2).integers(-2**62, 2**62, 5000)),
    "uint8": pa.array(np.random.default_rng(3).integers(0, 200, 5000).astype(np.uint8)),
    "int32 full range, ties": pa.array(np.random.default_rng(8).integers(-2**31, 2**31, 5000).astype(np.int32)[
        np.random.default_rng(9).integers(0, 2500, 5000)]),
    "int64 in a 32-bit range": pa.array(np.random.default_rng(10).integers(2**40, 2**40 + 2**31, 5000)),
    "int32 slice": pa.array(np.random.default_rng(4).integers(0, 9, 4000).astype(np.int32)).slice(7, 3000),
    "date": pa.array(np.random.default_rng(5).integers(0, 1000, 3000).astype(np.int32)).cast(pa.date32()),
    "timestamp": pa.array(np.random.default_rng(6).integers(0, 100, 3000)).cast(pa.timestamp("us")),
    "double zeros and NaNs": pa.array(np.random.default_rng(7).choice([0.0, -0.0, NAN, 1.5, -2.0], 3000)),
    "chunked": pa.chunked_array([pa.array([3, 1, 2]), pa.array([1, 3])]),
    "string": pa.array([f"k{i % 37}" for i in range(2000)]),
    "nulls": pa.array([3, None, 1, None, 2]),
}


@pytest.mark.parametrize("name", list(_ONE_COLUMN))
def test_one_key_column_sorts_as_arrows_stable_sort_of_its_surrogate(name):
    """One integer-ordered key column is sorted by numpy (its runs of equal keys put back in input
    order); the result is Arrow's stable sort of the order surrogate, whatever the type."""
    import pyarrow.compute as pc
    from dbt_paimon.store.common.key_order import comparable_key_columns
    table = pa.table({"k": _ONE_COLUMN[name]})
    want = pc.sort_indices(comparable_key_columns(table, ["k"]), sort_keys=[("k", "ascending")])
    assert sort_indices(table, ["k"]).to_pylist() == want.to_pylist()


@pytest.mark.parametrize("keys", [["k"], ["k", "j"]], ids=["one column: sorted and searched", "two: joined"])
@pytest.mark.parametrize("dtype", [pa.int64(), pa.float64(), pa.string()])
def test_match_finds_each_rows_equal_key_as_paimon_compares_them(keys, dtype):
    from dbt_paimon.store.common.key_order import match, sort_indices
    values = {pa.int64(): [5, -3, 0, 7, 11, 2], pa.float64(): [NAN, -0.0, 0.0, 1.5, -2.0, math.inf],
              pa.string(): ["a", "b", "", "é", "zz", "a "]}[dtype]
    other_nan = nan_with_payload(0x7FF8000000000001)
    left_values = [values[3], values[0], values[1], values[4], values[2]]  # not in right: values[4] is
    right_values = [values[0], values[1], values[2], values[3], values[5]]
    if dtype == pa.float64():  # another NaN's bits find the stored NaN; -0.0 never finds 0.0
        left_values[1] = other_nan
    def table(vals):
        t = pa.table({"k": pa.array(vals, dtype)})
        return t.append_column("j", pa.array([1] * len(vals))) if "j" in keys else t
    found = match(table(left_values), table(right_values), keys)
    assert found.tolist() == [3, 0, 1, -1, 2]
    # given left's key order (the assigner has it from its duplicate check), the same answer
    by_key = sort_indices(table(left_values), ["k"]).to_numpy()
    assert match(table(left_values), table(right_values), keys, by_key).tolist() == [3, 0, 1, -1, 2]
    assert match(table(left_values), table([]).slice(0, 0), keys).tolist() == [-1] * 5


def test_integer_key_columns_sort_as_arrows_stable_sort():
    """Several integer-ordered columns are sorted by numpy: packed into one int64 when their
    ranges fit, else last column first: small ranges (a 16-bit radix sort, int8 around zero),
    wide ones with few and with many equal values, unsigned ones above 2^63, timestamps, a
    float's surrogate; always Arrow's stable sort of the surrogates."""
    import pyarrow.compute as pc
    from dbt_paimon.store.common.key_order import comparable_key_columns
    rng = np.random.default_rng(11)
    n = 4000
    table = pa.table({
        "g": pa.array(rng.integers(-100, 100, n).astype(np.int8)),
        "wide": pa.array(rng.integers(-2**62, 2**62, n)),
        "wide_ties": pa.array(rng.choice([-2**60, 5, 2**61], n)),
        "u": pa.array(rng.integers(2**63, 2**63 + 3, n, dtype=np.uint64)),
        "t": pa.array(rng.integers(0, 50, n)).cast(pa.timestamp("us")),
        "f": pa.array(rng.choice([0.0, -0.0, NAN, 1.5], n)),
    })
    # packed into one int64: ["g", "t"], ["u", "g"], ["t"]; too wide for that: the others
    for names in (["g", "t"], ["u", "g"], ["t"], ["g", "wide"], ["wide_ties", "t"], ["u", "g", "f"],
                  ["f", "wide_ties", "g"]):
        want = pc.sort_indices(comparable_key_columns(table, names), sort_keys=[(c, "ascending") for c in names])
        assert sort_indices(table, names).to_pylist() == want.to_pylist(), names
