"""Spark's filters handed to the `paimon` source, and the splits and files they let a read skip.

A read of a Paimon table plans every live file of the snapshot. Spark hands the source the filters
of the query (`spark.sql.python.filterPushdown.enabled`, Spark 4.1+); comparisons of one column
with literals narrow the plan, as Paimon's scan does:

- on a partition field, the splits of partitions no row of which can pass (partition pruning);
- on the first field of a primary-key table's (trimmed) key, the data files whose key range holds
  no value that can pass. A key's every version, deletes included, lies in files whose range holds
  it, so the kept files merge each passing key exactly as all of them would. Other keys of those
  files may merge with some of their versions missing: their rows are dropped (deduplicate and
  first-row tables only: an aggregation of some of a key's versions may fail where all succeed);
- after the merge, the rows no filter can pass are dropped before they cross to Spark (a key
  query's handful of rows, not its files' every row: the hand-over costs more than the read).

The source still hands every filter back, and Spark applies it to what crosses.

Only types whose order Python and Spark agree on are pruned by (integers, strings, dates,
decimals, booleans); a comparison that Python cannot make keeps the split or file.
"""

from __future__ import annotations

import dataclasses
import operator
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..store import binary_row
from ..store.options import MergeEngine
from ..store.scan import DataSplit
from ..store.schema import TableSchema

try:  # Spark 4.1 gives Python sources its filters
    from pyspark.sql.datasource import (EqualTo, GreaterThan, GreaterThanOrEqual, In, IsNotNull, IsNull, LessThan,
                                        LessThanOrEqual)
except ImportError:  # pragma: no cover - pyspark 4.0: no filters, nothing pruned
    EqualTo = GreaterThan = GreaterThanOrEqual = In = IsNotNull = IsNull = LessThan = LessThanOrEqual = None

_ORDERED = {"TINYINT", "SMALLINT", "INT", "INTEGER", "BIGINT", "STRING", "VARCHAR", "DATE", "DECIMAL",
            "BOOLEAN"}


@dataclass(frozen=True)
class Bound:
    """One pushed filter on one column: `op` one of = in > >= < <= null notnull."""

    column: str
    op: str
    values: tuple = ()

    def admits(self, x: Any) -> bool:
        """Whether a row whose column holds x may pass."""
        if self.op == "null":
            return x is None
        return x is not None and self.admits_range(x, x)  # SQL: a comparison with null is not true

    def admits_range(self, lo: Any, hi: Any) -> bool:
        """Whether some value in [lo, hi] (non-null values: a file's key range) may pass."""
        try:
            if self.op in ("=", "in"):
                return any(lo <= v <= hi for v in self.values)
            if self.op in ("null", "notnull"):
                return self.op == "notnull"
            v = self.values[0]
            return _COMPARE[self.op](hi if self.op[0] == ">" else lo, v)
        except TypeError:
            return True


# a comparison, in Python and in Arrow
_COMPARE = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_ARROW_COMPARE = {">": pc.greater, ">=": pc.greater_equal, "<": pc.less, "<=": pc.less_equal}


def bounds_of(filters: Iterable, schema: TableSchema) -> list[Bound]:
    """The filters on one column of an ordered type, as Bounds (the others are left to Spark)."""
    if EqualTo is None:
        return []
    types = {f.name: f.type.root for f in schema.fields}
    out = []
    for f in filters:
        attribute = getattr(f, "attribute", ())
        if len(attribute) != 1 or types.get(attribute[0]) not in _ORDERED:
            continue
        column = attribute[0]
        if isinstance(f, EqualTo) and f.value is not None:
            out.append(Bound(column, "=", (f.value,)))
        elif isinstance(f, In) and None not in f.value:
            out.append(Bound(column, "in", tuple(f.value)))
        elif isinstance(f, IsNull):
            out.append(Bound(column, "null"))
        elif isinstance(f, IsNotNull):
            out.append(Bound(column, "notnull"))
        elif f.__class__ in _COMPARISONS and f.value is not None:
            out.append(Bound(column, _COMPARISONS[f.__class__], (f.value,)))
    return out


_COMPARISONS = {} if EqualTo is None else {GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                                           LessThanOrEqual: "<="}


def prune(splits: Sequence[DataSplit], schema: TableSchema, bounds: Sequence[Bound]) -> list[DataSplit]:
    """The splits (and their files) a read with these bounds needs."""
    partition_bounds = [(schema.partition_keys.index(b.column), b) for b in bounds if b.column in schema.partition_keys]
    keys = schema.trimmed_primary_keys
    # an aggregation merges a key's versions with functions that may fail on some of them (a sum
    # that overflows): its other keys' versions in a kept file must not be merged without the rest
    key_bounds = [b for b in bounds if keys and b.column == keys[0]] if not schema.is_append and (
        schema.core.merge_engine in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW)) else []
    key_types = [schema.field(k).type for k in keys]
    out = []
    for split in splits:
        if not all(b.admits(split.partition_values[i]) for i, b in partition_bounds):
            continue
        if key_bounds:
            files = [f for f in split.files if _key_range_admitted(f, key_types, key_bounds)]
            if not files:
                continue
            if len(files) < len(split.files):
                split = dataclasses.replace(split, files=files)
        out.append(split)
    return out


def _key_range_admitted(file, key_types: Sequence, bounds: Sequence[Bound]) -> bool:
    try:
        lo = binary_row.deserialize(file.min_key, key_types)[0]
        hi = binary_row.deserialize(file.max_key, key_types)[0]
    except Exception:  # noqa: BLE001 - a key range we cannot read prunes nothing
        return True
    if lo is None or hi is None:
        return True
    return all(b.admits_range(lo, hi) for b in bounds)


def keep_rows(rows: pa.Table, bounds: Sequence[Bound]) -> pa.Table:
    """The merged rows some value of which passes every bound (a bound Arrow cannot evaluate exactly
    as Spark does, on a type it would convert, is left to Spark)."""
    mask = None
    for b in bounds:
        if b.column not in rows.column_names:
            continue
        column = rows.column(b.column)
        try:
            if b.op == "null":
                passing = pc.is_null(column)
            elif b.op == "notnull":
                passing = pc.is_valid(column)
            elif b.op in ("=", "in"):
                passing = pc.is_in(column, value_set=pa.array(b.values, column.type))
            else:
                passing = _ARROW_COMPARE[b.op](column, pa.scalar(b.values[0], column.type))
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue
        passing = pc.fill_null(passing, False)  # SQL: a comparison with null is not true
        mask = passing if mask is None else pc.and_(mask, passing)
    return rows if mask is None else rows.filter(mask)
