"""Paimon's `diff` incremental read (`incremental-between-scan-mode = 'diff'`, and the default between
two tags): the rows of a primary-key table that differ between two snapshots, as Paimon's
IncrementalDiffSplitRead gives them.

Per (partition, bucket), the key's merged record at the start snapshot is held against the one at
the end (each side's files merged, deletion vectors applied; which files: plan_diff):
- a key only at the end, or whose values or add/delete kind differ: its record at the end;
- a key only at the start: gone; its record as -D when deletes are kept (the audit log);
- a key alike at both: nothing.
A plain read keeps only added records (+I/+U); the audit log keeps -D too. Buckets whose files are
the same at both snapshots are not read: the cost follows the buckets the range changed.

An append table has no key to hold rows against: as Paimon reads it, its diff is the rows of the
files the end holds and the start does not, each +I (a file only the start holds gives nothing, so
rows a DELETE or an overwrite removed do not come out, even in the audit log).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common.fileio import FileIO
from ..format.datafile import VALUE_KIND
from ..schema.schema import TableSchema
from ..snapshot.snapshot import Snapshot
from .incremental import ROW_KIND, row_kinds
from .read import TableRead
from .scan import DataSplit, FileStoreScan

_DELETE = 3  # RowKind -D
_ADDS = (0, 2)  # +I, +U


@dataclass(frozen=True)
class DiffSplit:
    """One (partition, bucket) at both ends; a side is None where the bucket has no files."""
    before: DataSplit | None
    after: DataSplit | None


def plan_diff(io: FileIO, table_path: str, schema: TableSchema, start: Snapshot | None, end: Snapshot,
              whole: bool = False) -> list[DiffSplit]:
    """The buckets whose files differ between the two snapshots (manifests only). As Paimon plans
    it, a bucket's files at both ends are left out of both sides: a key whose older record sits in
    such a file and that the range wrote again (even as it was) is read at the end only, and so
    comes out. whole: each side the bucket's every file, so the rows of the two snapshots are
    compared as a read of each gives them (what a change of the rows is: engine/read/changes.py)."""
    scan = FileStoreScan(io, table_path, schema)
    before = {(s.partition, s.bucket): s for s in scan.plan_snapshot(start).splits}
    after = {(s.partition, s.bucket): s for s in scan.plan_snapshot(end).splits}
    out = []
    for where in sorted(before.keys() | after.keys(), key=lambda k: (k[0], k[1])):
        b, a = before.get(where), after.get(where)
        if b is not None and a is not None:
            if _same(b, a):
                continue
            if not whole or schema.is_append:
                common = {f.file_name for f in b.files} & {f.file_name for f in a.files}
                b = _without(b, common)
                a = _without(a, common)
                if b is None and a is None:  # only deletion vectors changed: Paimon reads nothing
                    continue
        if schema.is_append and a is None:  # files gone, none new: nothing, as in Paimon
            continue
        out.append(DiffSplit(None if schema.is_append else b, a))
    return out


def _without(split: DataSplit, names: set) -> DataSplit | None:
    files = [f for f in split.files if f.file_name not in names]
    return dataclasses.replace(split, files=files) if files else None


def _same(b: DataSplit, a: DataSplit) -> bool:
    files = {f.file_name for f in b.files} == {f.file_name for f in a.files}
    vectors = (b.deletion_index.file_name if b.deletion_index else None) == (
        a.deletion_index.file_name if a.deletion_index else None)
    return files and vectors


def read_diff(io: FileIO, table_path: str, schema: TableSchema, splits: Sequence[DiffSplit],
              projection: Sequence[str] | None = None, keep_deletes: bool = False) -> pa.Table:
    """The differing records of some buckets of plan_diff, `rowkind` first, then the projected columns."""
    full = TableRead(io, table_path, schema)  # every field: a change in any of them counts
    out_reader = TableRead(io, table_path, schema, projection)
    out_schema = pa.schema([pa.field(ROW_KIND, pa.string(), False)] + list(out_reader.output_schema))
    parts = []
    for split in splits:  # per bucket, never per row
        if schema.is_append:  # the end's new files, their rows as +I
            rows = out_reader.read([split.after], threads=1)
            parts.append(pa.Table.from_arrays([pa.repeat(pa.scalar("+I"), rows.num_rows)] + rows.columns,
                                              schema=out_schema))
            continue
        rows = _diff_bucket(full, split, keep_deletes)
        if rows.num_rows:
            parts.append(pa.Table.from_arrays([row_kinds(rows.column(VALUE_KIND))]
                                              + [rows.column(c) for c in out_reader.projection], schema=out_schema))
    return pa.concat_tables(parts) if parts else out_schema.empty_table()


def _diff_bucket(reader: TableRead, split: DiffSplit, keep_deletes: bool) -> pa.Table:
    before = reader.read_split_kv(split.before, drop_deletes=False) if split.before is not None else None
    after = reader.read_split_kv(split.after, drop_deletes=False) if split.after is not None else None
    if before is None:
        before = after.slice(0, 0)
    if after is None:
        after = before.slice(0, 0)
    keys = list(reader.schema.primary_keys)
    values = [f.name for f in reader.schema.fields]
    b = before.select(keys).append_column("__b", pa.array(np.arange(before.num_rows, dtype=np.int64)))
    a = after.select(keys).append_column("__a", pa.array(np.arange(after.num_rows, dtype=np.int64)))
    joined = b.join(a, keys, join_type="full outer", use_threads=False)
    bi, ai = joined.column("__b"), joined.column("__a")
    both = pc.and_(pc.is_valid(bi), pc.is_valid(ai))
    # keys at both ends: the end's record where its values or add/delete kind differ
    pair = joined.filter(both)
    b_rows = before.take(pair.column("__b"))
    a_rows = after.take(pair.column("__a"))
    differs = pc.not_equal(_is_add(b_rows), _is_add(a_rows))
    nested = [n for n in values if pa.types.is_nested(a_rows.schema.field(n).type)]
    for name in values:
        if name not in nested:
            differs = pc.or_(differs, _differ(b_rows.column(name), a_rows.column(name)))
    if nested:
        # compute has no equality of lists, maps and structs: Arrow's own comparison of single
        # values, for the pairs nothing else told apart (a changed bucket's, never the table's)
        differs = differs.to_numpy(zero_copy_only=False).copy()
        for i in np.flatnonzero(~differs):
            differs[i] = any(not b_rows.column(n).slice(i, 1).equals(a_rows.column(n).slice(i, 1)) for n in nested)
        differs = pa.array(differs)
    changed = a_rows.filter(differs)
    # keys only at the end: their record there; only at the start: gone (as -D)
    added = after.take(joined.filter(pc.invert(pc.is_valid(bi))).column("__a"))
    gone = before.take(joined.filter(pc.invert(pc.is_valid(ai))).column("__b"))
    gone = gone.filter(_is_add(gone))
    kind = gone.schema.field(VALUE_KIND).type
    gone = gone.set_column(gone.schema.get_field_index(VALUE_KIND), VALUE_KIND,
                           pa.array(np.full(gone.num_rows, _DELETE, dtype=np.int8)).cast(kind))
    out = pa.concat_tables([changed, added, gone])
    if not keep_deletes:
        out = out.filter(_is_add(out))
    return out


def _is_add(rows: pa.Table) -> pa.ChunkedArray:
    return pc.is_in(pc.cast(rows.column(VALUE_KIND), pa.int8()), pa.array(_ADDS, pa.int8()))


def _differ(x: pa.ChunkedArray, y: pa.ChunkedArray) -> pa.ChunkedArray:
    """Null-safe inequality of two columns of flat values."""
    eq = pc.equal(x, y)
    both_null = pc.and_(pc.is_null(x), pc.is_null(y))
    return pc.invert(pc.or_(pc.fill_null(eq, False), both_null))
