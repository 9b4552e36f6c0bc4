"""Column statistics of a data file as Paimon collects them (SimpleColStatsCollector) and stores them
in the manifest (SimpleStatsConverter).

Which collector a column gets is Paimon's StatsCollectorFactories.createStatsFactories:
- `fields.<f>.stats-mode` first;
- then `metadata.stats-keep-first-n-columns` (default -1, off): value columns after the first n get
  `none`;
- then `metadata.stats-mode`, default `truncate(16)`.
The `_KEY_*` columns are system fields: they always get `truncate(128)`. `_MIN_KEY`/`_MAX_KEY` are
whole keys and never truncated (they are not stats but the file's key range, which merging relies on).

What each collector keeps (Java's `convert`, applied to min/max/null count of the whole column):
- `none`: nothing at all (SimpleColStats.NONE: min, max and null count all null);
- `counts`: the null count only;
- `full`: min, max and null count as they are;
- `truncate(n)`: strings cut to their first n code points; the max additionally gets its last
  kept code point incremented (trying earlier ones when it would overflow) so it stays an upper
  bound; when no code point can be incremented, min and max are both dropped (null).
  BYTES are cut the same way, by bytes. Paimon's collector leaves byte[] whole, relying on its
  Parquet writer, which keeps no footer statistics over 4 KB, so a huge BYTES value never reaches
  Java's manifests either; we have no such filter, and a truncated lower bound and incremented upper
  bound are still valid bounds for the byte-wise comparison every reader applies.

Value stats are stored densely when `metadata.stats-dense-store` is true (Paimon's default): the
columns whose stats are NONE are left out of `_VALUE_STATS`, and `_VALUE_STATS_COLS` names the columns
kept, or is null when every column is kept (so the default table looks as before). Readers (Java,
pypaimon) map the stats back by name. With dense store off, every column has a slot and NONE is
stored as nulls. Key stats are always stored for every key column.

Only min/max scalars are truncated, so nothing here runs per data row: pc.min_max does the per-row
work, and the cut happens on the two results with Arrow's slice kernels before any of it reaches
Python (a 10 MB value is never copied into a Python string).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common import binary_row
from ..manifest.manifest import SimpleStats
from ..schema.stats_mode import COUNTS, KEY_STATS_MODE, NONE, STATS_DENSE_STORE, TRUNCATE, StatsMode, value_stats_modes
from ..common.types import DataType

if TYPE_CHECKING:
    from ..schema.schema import TableSchema

_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


@dataclass(frozen=True)
class ColStats:
    """SimpleColStats: min, max, null count; all three null is NONE (no stats at all)."""
    min: Any
    max: Any
    null_count: int | None

    @property
    def is_none(self) -> bool:
        return self.min is None and self.max is None and self.null_count is None


COL_STATS_NONE = ColStats(None, None, None)
NO_STATS = StatsMode(NONE)


def _truncated_upper_string(prefix: str) -> str | None:
    """TruncateSimpleColStatsCollector.truncateMax on a string already cut to n code points: the
    smallest string above every string with this prefix made by incrementing one code point (the
    last one that does not overflow), or None. Surrogates are skipped (U+D7FF goes to U+E000): they
    cannot be encoded in UTF-8, and Java would turn the lone surrogate into '?', a wrong bound."""
    for i in range(len(prefix) - 1, -1, -1):
        nxt = ord(prefix[i]) + 1
        if nxt in _SURROGATES:
            nxt = _SURROGATES.stop
        if nxt <= _MAX_CODE_POINT:
            return prefix[:i] + chr(nxt)
    return None


def _truncated_upper_bytes(prefix: bytes) -> bytes | None:
    """The bytes counterpart: increment the last byte below 0xFF and drop what follows it."""
    for i in range(len(prefix) - 1, -1, -1):
        if prefix[i] < 0xFF:
            return prefix[:i] + bytes([prefix[i] + 1])
    return None


def _col_stats(low: Any, high: Any, nulls: int, dtype: DataType, mode: StatsMode) -> ColStats:
    """A collector's stats from a column's min and max (Python values, scalar_value's form) and
    null count; min and max are None when every value is null."""
    if mode.kind == COUNTS or low is None:
        return ColStats(None, None, nulls)
    if dtype.root in ("FLOAT", "DOUBLE"):
        # -0.0 and 0.0 are equal to a min/max, which then keeps whichever zero it met first (a
        # hash aggregation and a scan of the same rows differ); Paimon compares them apart
        # (Double.compare). A zero bound is written as Parquet's writers write it: -0.0 as the
        # min, 0.0 as the max, which holds whichever zeros the rows have.
        low = -0.0 if low == 0 else low
        high = 0.0 if high == 0 else high
    if mode.kind == TRUNCATE and dtype.root in ("STRING", "BYTES"):
        # cut to n code points (bytes for BYTES), as BinaryString.substring does
        n = mode.length
        low, cut = low[:n], high[:n]
        if len(cut) == len(high):
            return ColStats(low, cut, nulls)  # short enough: kept as it is, not incremented
        up = _truncated_upper_string(cut) if dtype.root == "STRING" else _truncated_upper_bytes(cut)
        return ColStats(None, None, nulls) if up is None else ColStats(low, up, nulls)
    return ColStats(low, high, nulls)


def collect(column: pa.Array | pa.ChunkedArray, dtype: DataType, mode: StatsMode) -> ColStats:
    """The stats one collector keeps for a whole column."""
    if mode.kind == NONE:
        return COL_STATS_NONE
    nulls = column.null_count
    if mode.kind == COUNTS or nulls == len(column):
        return ColStats(None, None, nulls)
    mm = pc.min_max(column)
    return _col_stats(binary_row.scalar_value(mm["min"]), binary_row.scalar_value(mm["max"]), nulls, dtype, mode)


# Up to this many groups, collect() of each group's slice: the groups are contiguous, and a hash
# aggregation hashes every row for its group. 125K rows of W1 in 5 groups, 7 columns: 6.5 ms by
# slices, 24 ms aggregated (each of ~35 slice calls costs ~15 us beyond its rows: even at 64 groups
# the slices are the cheaper).
FEW_GROUPS = 64


def collect_groups(column: pa.Array | pa.ChunkedArray, dtype: DataType, mode: StatsMode,
                   groups: pa.Array, offsets: Sequence[int]) -> list[ColStats]:
    """collect() of each group of a column's rows, in one hash aggregation instead of one compute
    call per group: the files of an upsert that touches many buckets. groups: each row's group
    (0, 1, ... in row order); offsets: where each group starts, and the end."""
    count = len(offsets) - 1
    if mode.kind == NONE:
        return [COL_STATS_NONE] * count
    if count <= FEW_GROUPS:
        return [collect(column.slice(a, b - a), dtype, mode) for a, b in zip(offsets[:-1], offsets[1:])]
    aggregates = [("v", "count", pc.CountOptions("only_null"))]
    if mode.kind != COUNTS:
        aggregates.append(("v", "min_max"))
    try:
        out = pa.table({"g": groups, "v": column}).group_by("g", use_threads=False).aggregate(aggregates)
    except pa.ArrowNotImplementedError:  # a type hash aggregation lacks: group by group
        return [collect(column.slice(a, b - a), dtype, mode) for a, b in zip(offsets[:-1], offsets[1:])]
    out = out.sort_by("g")
    nulls = out.column("v_count").to_pylist()
    if mode.kind == COUNTS:
        return [ColStats(None, None, n) for n in nulls]
    mm = out.column("v_min_max").combine_chunks()
    lows, highs = binary_row.array_values(mm.field("min")), binary_row.array_values(mm.field("max"))
    sizes = np.diff(offsets)
    return [_col_stats(lo, hi, n, dtype, mode) if n < size else ColStats(None, None, n)
            for lo, hi, n, size in zip(lows, highs, nulls, sizes)]  # per group, not per row


def to_binary_all(stats: Sequence[ColStats], types: Sequence[DataType]) -> SimpleStats:
    """SimpleStatsConverter.toBinaryAllMode: one slot per column, NONE stored as nulls."""
    return SimpleStats(binary_row.serialize([s.min for s in stats], types),
                       binary_row.serialize([s.max for s in stats], types),
                       [s.null_count for s in stats])


def to_binary_dense(stats: Sequence[ColStats], names: Sequence[str],
                    types: Sequence[DataType]) -> tuple[tuple[str, ...] | None, SimpleStats]:
    """SimpleStatsConverter.toBinaryDenseMode: columns without stats left out; the names of the
    columns kept, or None when that is every column."""
    kept = [i for i, s in enumerate(stats) if not s.is_none]
    simple = to_binary_all([stats[i] for i in kept], [types[i] for i in kept])
    return (None if len(kept) == len(stats) else tuple(names[i] for i in kept)), simple


class DataFileStatsCollector:
    """Key and value stats of the KeyValue files of one table, by the table's options."""

    def __init__(self, schema: "TableSchema"):
        options = schema.options
        self.key_types = schema.key_types
        self.value_names = schema.field_names
        self.value_types = schema.value_types
        # a nested column has no stats, as Java's Parquet writer keeps none (dense store leaves it out)
        self.value_modes = [NO_STATS if t.is_nested else m
                            for t, m in zip(self.value_types, value_stats_modes(options, self.value_names))]
        self.dense = options.get(STATS_DENSE_STORE, "true").lower() == "true"

    def key_stats(self, key_columns: Sequence) -> SimpleStats:
        return to_binary_all([collect(c, t, KEY_STATS_MODE) for c, t in zip(key_columns, self.key_types)],
                             self.key_types)

    def value_stats(self, value_columns: Sequence) -> tuple[tuple[str, ...] | None, SimpleStats]:
        """(`_VALUE_STATS_COLS`, `_VALUE_STATS`) of the table's columns, in schema order."""
        return self._value_binary([collect(c, t, m)
                                   for c, t, m in zip(value_columns, self.value_types, self.value_modes)])

    def _value_binary(self, stats: Sequence[ColStats]) -> tuple[tuple[str, ...] | None, SimpleStats]:
        if self.dense:
            return to_binary_dense(stats, self.value_names, self.value_types)
        return None, to_binary_all(stats, self.value_types)

    def group_stats(self, key_columns: Sequence, value_columns: Sequence, groups: pa.Array,
                    offsets: Sequence[int]) -> list[tuple[SimpleStats, tuple[tuple[str, ...] | None, SimpleStats]]]:
        """(key_stats, value_stats) of each group of rows (collect_groups), as if each group were
        passed to key_stats and value_stats alone."""
        keys = [collect_groups(c, t, KEY_STATS_MODE, groups, offsets) for c, t in zip(key_columns, self.key_types)]
        values = [collect_groups(c, t, m, groups, offsets)
                  for c, t, m in zip(value_columns, self.value_types, self.value_modes)]
        return [(to_binary_all([k[g] for k in keys], self.key_types), self._value_binary([v[g] for v in values]))
                for g in range(len(offsets) - 1)]
