"""Key order and key equality as Paimon's RecordComparator has them, for Arrow's sort, join and group.

Paimon compares primary keys field by field with a generated RecordComparator whose FLOAT and DOUBLE
fields compare by `Float.compare` / `Double.compare` (paimon-codegen GenerateUtils.generateCompare):
-inf < ... < -0.0 < 0.0 < ... < +inf < NaN, and every NaN equals every other NaN. That order decides
which rows are one key (writer, merge-on-read, compaction, the cross-partition index) and what a
data file's _MIN_KEY/_MAX_KEY are.

Arrow does not compare floats that way: its sort puts -0.0 and 0.0 together as equal (in arrival
order), `not_equal(NaN, NaN)` is true, and its hash joins and group-bys compare raw bits, so NaNs of
different bit patterns differ. So wherever keys are sorted, deduplicated, joined or grouped, a FLOAT
or DOUBLE column is replaced by an integer "order surrogate": its bits with NaN made canonical (as
`Float.floatToIntBits` / `Double.doubleToLongBits` do), then the negative half's magnitude bits
flipped, so that signed-integer order is exactly Float.compare / Double.compare order and integer
equality is `compare(a, b) == 0`. Stored values are never touched; only what Arrow compares.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_SURROGATE_PREFIX = "__key_order_"
# pyarrow 25 takes null_placement per sort key and deprecates the option for the whole sort; older
# releases know only the latter
_NULL_PLACEMENT_PER_KEY = int(pa.__version__.split(".")[0]) >= 25


def is_floating(dtype: pa.DataType) -> bool:
    return pa.types.is_floating(dtype)


def order_surrogate(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """An int32 (FLOAT) or int64 (DOUBLE) column ordered and equal as Float.compare / Double.compare
    order the floats (nulls stay null); any other column is returned as it is."""
    if not is_floating(col.type):
        return col
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_float16(arr.type):
        arr = arr.cast(pa.float32())  # exact; Paimon has no half floats, but order is order
    fdt, idt = (np.float32, np.int32) if pa.types.is_float32(arr.type) else (np.float64, np.int64)
    nulls = arr.null_count
    x = arr.fill_null(0).to_numpy(zero_copy_only=False).astype(fdt, copy=True)
    x[np.isnan(x)] = fdt(np.nan)  # one NaN: floatToIntBits / doubleToLongBits canonicalise it
    bits = x.view(idt)
    # Non-negative floats already order as their bits do; negative ones order in reverse of their
    # magnitude bits: flipping those (sign kept) makes -0.0 the greatest negative (-1), below 0.0.
    key = bits ^ ((bits >> (bits.dtype.itemsize * 8 - 1)) & idt(np.iinfo(idt).max))
    mask = arr.is_null().to_numpy(zero_copy_only=False) if nulls else None
    return pa.array(key, mask=mask)


def canonical_nan(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The column with every NaN replaced by the canonical NaN (other values, -0.0 included, kept):
    for hashes of our own (the batch-key Bloom filter) that must agree for keys that compare equal."""
    if not is_floating(col.type) or not pc.any(pc.is_nan(col)).as_py():
        return col
    return pc.if_else(pc.is_nan(col), pa.scalar(float("nan"), col.type), col)


def comparable_key_columns(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """table.select(names) with every FLOAT/DOUBLE column replaced by its order surrogate, under the
    same name: sort, compare adjacent rows or group on it to get Paimon's key semantics."""
    return pa.Table.from_arrays([order_surrogate(table.column(n)) for n in names], names=list(names))


def _integers(col: pa.Array | pa.ChunkedArray) -> np.ndarray | None:
    """A column without nulls whose Arrow order is its values' order as integers (integers,
    dates, times, timestamps; a FLOAT/DOUBLE order surrogate), as numpy integers; else None."""
    t = col.type
    integral = (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t)
                or pa.types.is_timestamp(t))
    if col.null_count or not integral:
        return None
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return np.frombuffer(arr.buffers()[1], dtype=np.dtype(f"{'u' if pa.types.is_unsigned_integer(t) else 'i'}"
                                                           f"{t.bit_width // 8}"))[arr.offset:arr.offset + len(arr)]


def _offsets(values: np.ndarray, low: int) -> np.ndarray:
    """values - low as int64s, taken in a type that cannot wrap (unsigned values above 2^63 too);
    for a range that fits an int64."""
    return (values - values.dtype.type(low)).astype(np.int64) if values.dtype.kind == "u" \
        else values.astype(np.int64) - np.int64(low)


def stable_argsort(values: np.ndarray) -> np.ndarray:
    """np.argsort(values, kind="stable") of integers, faster: a 16-bit range by numpy's radix sort;
    a 32-bit range as one sort of values, (value, position) packed in an int64 each (200K int32
    hashes: 3 ms, 16 ms stably); wider ones by the unstable sort (a third of the stable one's time
    for 200K int64 keys) with their runs of equal values put back in input order, when few."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low < 1 << 32:
        offset = _offsets(values, low)
        if high - low < 1 << 16:
            return np.argsort(offset.astype(np.uint16), kind="stable")
        if len(values) < 1 << 31:
            # (offset - 2^31: the value's 32 bits signed, so that shifted up they fit an int64)
            packed = ((offset - np.int64(1 << 31)) << np.int64(32)) | np.arange(len(values), dtype=np.int64)
            packed.sort()
            return packed & np.int64(0xFFFFFFFF)
    order = np.argsort(values)
    ordered = values[order]
    tied = np.flatnonzero(ordered[1:] == ordered[:-1])
    if tied.size > len(values) // 8:  # many equal values: the stable sort is the cheaper
        return np.argsort(values, kind="stable")
    if tied.size:
        at = np.union1d(tied, tied + 1)  # the runs of equal values, each contiguous, in value order
        order[at] = order[at][np.lexsort((order[at], ordered[at]))]
    return order


def _packed(columns: Sequence[np.ndarray]) -> np.ndarray | None:
    """The columns' values (each less its minimum) side by side in one int64 per row, ordered as
    the rows' tuples are; None when their ranges need more than 63 bits together."""
    lows = [int(c.min()) for c in columns]
    widths = [(int(c.max()) - low).bit_length() for c, low in zip(columns, lows)]
    if sum(widths) > 63:
        return None
    out = np.zeros(len(columns[0]), np.int64)
    for c, low, width in zip(columns, lows, widths):
        out = (out << np.int64(width)) | _offsets(c, low)
    return out


def sort_indices(table: pa.Table, names: Sequence[str], null_placement: str = "at_end") -> pa.Array:
    """Indices that sort table ascending by `names` in Paimon's key order (ties keep input order)."""
    view = comparable_key_columns(table, names)
    columns = [_integers(view.column(n)) for n in names]
    if all(c is not None for c in columns) and table.num_rows:
        # integer-ordered columns without nulls, by numpy: packed into one int64 when their ranges
        # fit (W1's writer, (group, key) of 125K rows: 4 ms, 15 ms by Arrow), else the last column
        # first, each sort stable
        packed = _packed(columns)
        if packed is not None:
            return pa.array(stable_argsort(packed))
        order = stable_argsort(columns[-1])
        for values in reversed(columns[:-1]):
            order = order[stable_argsort(values[order])]
        return pa.array(order)
    if null_placement == "at_end":  # Arrow's default either way: no option, no deprecation warning
        return pc.sort_indices(view, sort_keys=[(n, "ascending") for n in names])
    if _NULL_PLACEMENT_PER_KEY:
        return pc.sort_indices(view, sort_keys=[(n, "ascending", null_placement) for n in names])
    return pc.sort_indices(view, sort_keys=[(n, "ascending") for n in names], null_placement=null_placement)


def join(left: pa.Table, right: pa.Table, keys: Sequence[str], join_type: str = "left outer") -> pa.Table:
    """left.join(right, keys) where FLOAT/DOUBLE keys match by Float.compare / Double.compare
    equality (NaN = NaN, -0.0 != 0.0): they are joined through their order surrogates. The key
    columns of the result hold left's values (right's floating keys are dropped before the join)."""
    floating = [k for k in keys if is_floating(left.schema.field(k).type)]
    if not floating:
        return left.join(right, list(keys), join_type=join_type, use_threads=False)
    on = [_SURROGATE_PREFIX + k if k in floating else k for k in keys]
    for k in floating:
        left = left.append_column(_SURROGATE_PREFIX + k, order_surrogate(left.column(k)))
        right = right.append_column(_SURROGATE_PREFIX + k, order_surrogate(right.column(k))).drop_columns([k])
    out = left.join(right, on, join_type=join_type, use_threads=False)
    return out.drop_columns([_SURROGATE_PREFIX + k for k in floating])


def match(left: pa.Table, right: pa.Table, keys: Sequence[str], left_order: np.ndarray | None = None) -> np.ndarray:
    """For each row of left, the index of the row of right with an equal key (Paimon's equality, as
    join), -1 for none; right's keys must be unique. One integer-ordered key column: right's keys
    sorted and searched (W1: 200K keys in 100K, a quarter of a hash join's time); else a join of
    the keys and row numbers. left_order: left's rows in key order (sort_indices), when the caller
    has it: the search then goes through left's keys in order (W1: 15 -> 2 ms)."""
    found = np.full(left.num_rows, -1, np.int64)
    if left.num_rows == 0 or right.num_rows == 0:
        return found
    if len(keys) == 1 and left.schema.field(keys[0]).type == right.schema.field(keys[0]).type:
        ours, theirs = (_integers(order_surrogate(t.column(keys[0]))) for t in (left, right))
        if ours is not None and theirs is not None:
            order = np.argsort(theirs)
            ordered = theirs[order]
            if left_order is not None:
                ours = ours[left_order]
            at = np.minimum(np.searchsorted(ordered, ours), len(ordered) - 1)
            hit = ordered[at] == ours
            found[hit if left_order is None else left_order[hit]] = order[at[hit]]
            return found
    row, other = _SURROGATE_PREFIX + "left", _SURROGATE_PREFIX + "right"
    pairs = join(left.select(list(keys)).append_column(row, pa.array(np.arange(left.num_rows, dtype=np.int64))),
                 right.select(list(keys)).append_column(other, pa.array(np.arange(right.num_rows, dtype=np.int64))),
                 keys, join_type="inner")
    found[pairs.column(row).to_numpy()] = pairs.column(other).to_numpy()
    return found
