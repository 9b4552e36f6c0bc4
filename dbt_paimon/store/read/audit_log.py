"""The `audit_log` system table, as Paimon's AuditLogTable reads it: every row with its row kind in a
first column `rowkind` (+I, -U, +U, -D).

A batch read gives each key's merged record of the snapshot read, its kind the merged record's, a
deleted key included as its `-D` record (the merge keeps deletes here, where a table's own read
drops them); an append table's rows are all `+I`. With `incremental-between` it gives the range's
records, unmerged (incremental.py).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..format.datafile import VALUE_KIND
from .incremental import ROW_KIND, row_kinds
from .read import TableRead
from .scan import DataSplit

AUDIT_LOG = "audit_log"
# Paimon's BinlogTable: the audit log with each value in an array; a batch read's arrays hold one
# value (an update's before and after are packed into one row by its streaming reads only)
BINLOG = "binlog"


def with_kinds_schema(reader: TableRead) -> pa.Schema:
    return pa.schema([pa.field(ROW_KIND, pa.string(), False)] + list(reader.output_schema))


def read_split(reader: TableRead, split: DataSplit) -> pa.Table:
    """One split's rows as the audit log gives them."""
    if reader.merge_function is None:
        rows = reader.read_files(split, split.files)
        kinds = pa.repeat(pa.scalar("+I"), rows.num_rows)
    else:
        kv = reader.read_split_kv(split, drop_deletes=False)
        rows = kv.select(reader.projection)
        kinds = row_kinds(kv.column(VALUE_KIND))
    return pa.Table.from_arrays([kinds] + rows.columns, schema=with_kinds_schema(reader))


def read_splits(reader: TableRead, splits: Sequence[DataSplit]) -> pa.Table:
    parts = [read_split(reader, s) for s in splits]  # per split (a bucket), not per row
    return pa.concat_tables(parts) if parts else with_kinds_schema(reader).empty_table()


def as_binlog(rows: pa.Table) -> pa.Table:
    """Each column of `rows` as one-element arrays (the binlog's layout of a batch read)."""
    offsets = pa.array(np.arange(rows.num_rows + 1, dtype=np.int32))
    arrays = [pa.ListArray.from_arrays(offsets, c.combine_chunks()) for c in rows.columns]
    return pa.Table.from_arrays(arrays, names=rows.column_names)
