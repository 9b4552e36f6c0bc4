"""Merge functions: collapse all versions of a key in one bucket into its current row.

Input is the concatenation of a bucket's KeyValue rows (`_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`,
value columns). Everything is a sort plus vectorised selection; no per-row Python.
"""

from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from .datafile import DELETE, SEQUENCE_NUMBER, UPDATE_BEFORE, VALUE_KIND, boundaries
from .errors import PaimonError


def _is_retract(kinds: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.or_(pc.equal(kinds, DELETE), pc.equal(kinds, UPDATE_BEFORE))


def drop_retracts(table: pa.Table) -> pa.Table:
    kinds = table.column(VALUE_KIND)
    return table.filter(pc.invert(_is_retract(kinds)))


def sort_versions(table: pa.Table, key_cols: Sequence[str]) -> pa.Table:
    """Order by key, then sequence number: the versions of a key become adjacent, oldest first."""
    idx = pc.sort_indices(table, sort_keys=[(k, "ascending") for k in key_cols] + [(SEQUENCE_NUMBER, "ascending")])
    return table.take(idx)


def deduplicate(table: pa.Table, key_cols: Sequence[str], ignore_delete: bool = False) -> pa.Table:
    """Deduplicate engine: the highest sequence number wins; a winning -D/-U removes the key."""
    if ignore_delete:
        table = drop_retracts(table)
    if table.num_rows == 0:
        return table
    ordered = sort_versions(table, key_cols)
    latest = ordered.filter(pa.array(boundaries(ordered, key_cols)))
    return drop_retracts(latest)


def merge(tables: Sequence[pa.Table], key_cols: Sequence[str], engine: str, ignore_delete: bool = False,
          overlapping: bool = True) -> pa.Table:
    """Merge the rows of one bucket's files. `overlapping=False` when keys are known unique across them."""
    if engine != "deduplicate":
        raise PaimonError(f"merge-engine {engine!r} is not readable by this version of the store")
    table = pa.concat_tables(tables, promote_options="none") if len(tables) != 1 else tables[0]
    if not overlapping:
        return drop_retracts(table)
    return deduplicate(table, key_cols, ignore_delete)

