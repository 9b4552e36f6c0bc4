"""The order of a key's versions, as Paimon's merge readers, compaction and write buffer order them
(SortMergeReader, UserDefinedSeqComparator): by the key, then the `sequence.field` columns in the
order declared, then the sequence number, oldest first; the last version is the latest.

A null sequence value is older than any value, in either sort order; `sequence.field.sort-order =
descending` reverses the order of the values only, never of the sequence number. FLOAT/DOUBLE
values order as Float.compare / Double.compare (Paimon 2.x; 1.x compared them with < and >, which
leaves NaN unordered); strings by their UTF-8 bytes, as BinaryString.compareTo.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..common import key_order
from ..format.datafile import SEQUENCE_NUMBER


@dataclass(frozen=True)
class SequenceOrder:
    """`sequence.field` (its columns, in order) and `sequence.field.sort-order` of one table."""

    fields: tuple = ()
    ascending: bool = True


def sequence_rank(col: pa.ChunkedArray | pa.Array, ascending: bool) -> pa.Array:
    """A uint64 column that orders as the sequence column does: nulls 0, values 1..k by their order
    (FLOAT/DOUBLE as Float.compare / Double.compare; strings by their UTF-8 bytes, as BinaryString)."""
    arr = key_order.order_surrogate(col)
    arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
    rank = pc.rank(arr, sort_keys="ascending", null_placement="at_start", tiebreaker="dense")
    if arr.null_count:
        rank = pc.subtract(rank, pa.scalar(1, pa.uint64()))  # the nulls share rank 1: make it 0
    if not ascending:
        top = pc.max(rank).as_py() or 0
        rank = pc.if_else(pc.is_valid(arr), pc.subtract(pa.scalar(top + 1, pa.uint64()), rank), rank)
    return rank


def version_columns(table: pa.Table, key_cols: Sequence[str], sequence: SequenceOrder = SequenceOrder()) -> pa.Table:
    """The columns a key's versions are ordered by, all ascending: the key (its order surrogates),
    the sequence fields' ranks, the sequence number."""
    names = list(key_cols) + [f"__seq{i}" for i in range(len(sequence.fields))] + [SEQUENCE_NUMBER]
    arrays = ([key_order.order_surrogate(table.column(k)) for k in key_cols]
              + [sequence_rank(table.column(f), sequence.ascending) for f in sequence.fields]
              + [table.column(SEQUENCE_NUMBER)])
    return pa.Table.from_arrays(arrays, names=names)


def version_order(view: pa.Table) -> pa.Array:
    """Indices that sort version_columns(...) (a view of a table's rows): oldest first per key."""
    return key_order.sort_indices(view, view.column_names)


def sort_versions(table: pa.Table, key_cols: Sequence[str], sequence: SequenceOrder = SequenceOrder()) -> pa.Table:
    """Order by key (Paimon's key order, key_order.py), then the sequence fields, then sequence
    number: the versions of a key become adjacent, oldest first."""
    return table.take(version_order(version_columns(table, key_cols, sequence)))
