"""Folding the change records of an incremental read into one per key: what each changed key became,
or its deletion (the input of a model that consumes its upstream's changes: engine/read/changes.py).

A range's records (incremental.py, read with their place in the table's history: ORDER_SCHEMA) hold
a key as often as the range wrote it, an update from a changelog as -U then +U, a key that moved
partitions as -D where it was and +I where it went. Two steps fold them:

1. within one bucket of one partition, a key's records ordered by the snapshot that wrote them, then
   their sequence number (a bucket's sequence numbers only grow), a retraction (-U) before what
   follows it: the last one is the key's state in that bucket;
2. across buckets and partitions (a key that moved): the latest snapshot wins, and within one
   snapshot the bucket the key went to (its +I/+U) over the one it left (its -D).

A key whose last record is -D comes out as -D (its last values), others as their last +I/+U; -U
records never come out. Each step is a sort and a comparison of neighbours (pyarrow compute): the
records of one task, never a loop per row.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .incremental import ORDER_SCHEMA, ROW_KIND

_SNAPSHOT, _BUCKET, _SEQUENCE = ORDER_SCHEMA.names
_NOT_RETRACTION, _NOT_DELETION = "__not_retraction", "__not_deletion"


def fold(records: pa.Table, keys: Sequence[str], partition_keys: Sequence[str] = ()) -> pa.Table:
    """records: `rowkind`, the ORDER_SCHEMA columns, then the values (keys and partition fields among
    them). Returns `rowkind` and the values, one record per key (see above)."""
    values = [n for n in records.column_names if n != ROW_KIND and n not in ORDER_SCHEMA.names]
    where = list(keys) + [p for p in partition_keys if p not in keys]
    kinds = records.column(ROW_KIND)
    # the steps sort and compare only the columns they order by; the records are taken once, at the end
    order = records.select(where + list(ORDER_SCHEMA.names))
    order = order.append_column(_NOT_RETRACTION, pc.cast(pc.not_equal(kinds, "-U"), pa.int8()))
    order = order.append_column(_NOT_DELETION, pc.cast(pc.not_equal(kinds, "-D"), pa.int8()))
    in_bucket = _last_of_each(order, where + [_BUCKET], [_SNAPSHOT, _SEQUENCE, _NOT_RETRACTION])
    latest = in_bucket.take(_last_of_each(order.take(in_bucket), list(keys), [_SNAPSHOT, _NOT_DELETION]))
    out = records.take(latest)
    return out.filter(pc.not_equal(out.column(ROW_KIND), "-U")).select([ROW_KIND] + values)


def _last_of_each(t: pa.Table, group: list[str], order: list[str]) -> pa.Array:
    """The positions in `t` of the last row of each group of equal `group` values, rows ordered by
    `order` within a group."""
    ordered = pc.sort_indices(t, sort_keys=[(c, "ascending") for c in group + order])
    n = len(ordered)
    if n < 2:
        return ordered
    # a row is its group's last where the next row's group differs (the last row always is)
    differs = np.zeros(n - 1, dtype=bool)
    for name in group:
        column = t.column(name).take(ordered).combine_chunks()
        differs |= _unequal(column.slice(0, n - 1), column.slice(1))
    return ordered.filter(pa.array(np.append(differs, True)))


def _unequal(a: pa.Array, b: pa.Array) -> np.ndarray:
    """a[i] != b[i] as grouping compares: nulls equal each other, and NaNs (as Spark groups them)."""
    unequal = pc.fill_null(pc.not_equal(a, b), False)
    if pa.types.is_floating(a.type):
        unequal = pc.and_(unequal, pc.invert(pc.and_(pc.is_nan(a), pc.is_nan(b))))
    unequal = pc.or_(pc.fill_null(unequal, False), pc.not_equal(pc.is_null(a), pc.is_null(b)))
    return unequal.to_numpy(zero_copy_only=False)
