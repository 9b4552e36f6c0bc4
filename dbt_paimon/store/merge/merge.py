"""Merge functions: collapse all versions of a key in one bucket into its current row.

Input is the concatenation of a bucket's KeyValue rows (`_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`,
value columns). Everything is a sort plus vectorised selection; no per-row Python.

Semantics follow Paimon's merge functions (paimon-core mergetree/compact):

- Versions of a key are merged oldest first (key, then `sequence.field`, then sequence number:
  sequence_order.py), as SortMergeReader does.
- ReducerMergeFunctionWrapper: a key with ONE version is passed through unchanged (kind and sequence
  number kept, the merge function never sees it); only keys with 2+ versions are merged.
- Readers then drop results that are not adds (-U, -D): DropDeleteReader. Compaction drops them only
  when it writes where nothing older can remain below (drop_deletes).

Per engine (keys with 2+ versions):

- deduplicate (DeduplicateMergeFunction): the latest version; with ignore-delete, the latest non-retract.
- first-row (FirstRowMergeFunction): the earliest non-retract version, kind and sequence number kept; a
  -D/-U raises unless ignore-delete, which skips it; none left: the key is gone.
- partial-update (PartialUpdateMergeFunction, no sequence-group): each field takes the latest non-null
  value of the +I/+U versions. A retract raises unless ignore-delete (skipped) or
  partial-update.remove-record-on-delete (a -D replaces the whole state by the -D row's values and the
  result is a -D if it is the last version; a -U is skipped). A retract as the very first version seeds
  the state with its values (Paimon's `initRow`). The result is +I, or -D when no +I/+U was seen;
  its sequence number is that of the last version taken into account.
- aggregation (AggregateMergeFunction + Field*Agg): per field, with Paimon's null rules; retractions
  go to the field's `retract` (sum subtracts, product divides, last_value / last_non_null_value clear,
  primary keys keep) and raise for functions without one unless `fields.<f>.ignore-retract`. With
  ignore-delete the retract rows are dropped before merging (Paimon drops them when writing). The
  result is +I with the sequence number of the last version in that order.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..format.datafile import DELETE, INSERT, SEQUENCE_NUMBER, UPDATE_BEFORE, VALUE_KIND, boundaries, key_column
from ..common.errors import PaimonError
from ..schema.merge_options import (ENGINES, PRIMARY_KEY, RETRACTABLE, FieldAgg, check_sequence_groups, field_agg,
                                    merge_engine)
from . import nested_agg, sequence_group
from .listagg_distinct import distinct_tokens
from .sequence_order import SequenceOrder, sort_versions, version_columns, version_order

# Java's Character.isWhitespace: Unicode space separators except the no-break ones, plus these controls.
_BLANK_RE = (r"^[\t\n\x0B\f\r\x1C-\x1F \x{1680}\x{2000}-\x{2006}\x{2008}-\x{200A}\x{2028}\x{2029}"
             r"\x{205F}\x{3000}]*$")


def _is_retract(kinds: pa.ChunkedArray | pa.Array) -> pa.Array:
    return pc.or_(pc.equal(kinds, DELETE), pc.equal(kinds, UPDATE_BEFORE))


def drop_retracts(table: pa.Table) -> pa.Table:
    kinds = table.column(VALUE_KIND)
    return table.filter(pc.invert(_is_retract(kinds)))


def deduplicate(table: pa.Table, key_cols: Sequence[str], ignore_delete: bool = False,
                drop_deletes: bool = True, sequence: SequenceOrder = SequenceOrder()) -> pa.Table:
    """Deduplicate engine: the latest version wins (by the sequence fields, then the sequence
    number); a winning -D/-U removes the key."""
    if ignore_delete:
        table = drop_retracts(table)
    if table.num_rows == 0:
        return table
    ordered = sort_versions(table, key_cols, sequence)
    latest = ordered.filter(pa.array(boundaries(ordered, key_cols)))
    return drop_retracts(latest) if drop_deletes else latest


# ---- the merge function of a table ------------------------------------------------------------

@dataclass(frozen=True)
class MergeFunction:
    """How one table merges the versions of a key. Plain data, so it pickles to Spark executors."""

    engine: str
    key_cols: tuple
    ignore_delete: bool = False
    remove_record_on_delete: bool = False
    fields: tuple = ()  # FieldAgg per value column (aggregation only)
    sequence: SequenceOrder = SequenceOrder()  # sequence.field: read with the value columns
    groups: tuple = ()  # partial-update sequence groups (sequence_group.py)

    def merge(self, tables: Sequence[pa.Table], overlapping: bool = True, drop_deletes: bool = True) -> pa.Table:
        """Merge the rows of one bucket's files into one row per key, sorted by key.

        `overlapping=False` when keys are known unique across the tables (one version each: passed
        through). `drop_deletes=False` keeps -D/-U results (compaction to a level with older data below).
        """
        table = pa.concat_tables(tables, promote_options="none") if len(tables) != 1 else tables[0]
        if self.ignore_delete and self.engine in ("deduplicate", "aggregation"):
            table = drop_retracts(table)
        if not overlapping or table.num_rows <= 1:
            return drop_retracts(table) if drop_deletes else table
        if self.engine == "deduplicate":
            return deduplicate(table, self.key_cols, False, drop_deletes, self.sequence)
        # Work on the sort order (an index) and take each output column once from the unsorted rows.
        # Keys in Paimon's order (FLOAT/DOUBLE by Float.compare/Double.compare): sort and find the
        # key boundaries on the order surrogates, so NaN keys group and -0.0 stays apart from 0.0.
        view = version_columns(table, self.key_cols, self.sequence)
        order = version_order(view).to_numpy().astype(np.int64)
        last = boundaries(view.select(list(self.key_cols)).take(pa.array(order)), self.key_cols)
        ends = np.flatnonzero(last)
        g = _Groups(np.concatenate(([0], ends[:-1] + 1)), ends, table.num_rows)
        v = _Versions(table, order, g)
        if self.engine == "first-row":
            out = self._first_row(v)
        elif self.engine == "partial-update":
            out = self._partial_update(v)
        elif self.engine == "aggregation":
            out = self._aggregate(v)
        else:
            raise PaimonError(f"merge-engine {self.engine!r} is not readable by this version of the store")
        return drop_retracts(out) if drop_deletes else out

    # -- engines: keys with 2+ versions merge; one version passes through --------------------------
    def _first_row(self, v: "_Versions") -> pa.Table:
        if (v.retract & v.multi_row).any() and not self.ignore_delete:
            raise PaimonError("By default, First row merge engine can not accept DELETE/UPDATE_BEFORE records. "
                              "You can config 'ignore-delete' to ignore the DELETE/UPDATE_BEFORE records.")
        pick = v.passthrough(v.g.first(~v.retract))
        return v.table.take(pa.array(v.order[pick[pick >= 0]]))

    def _partial_update(self, v: "_Versions") -> pa.Table:
        g, retract, kinds = v.g, v.retract, v.kinds
        if (retract & v.multi_row).any() and not (self.ignore_delete or self.remove_record_on_delete or self.groups):
            raise PaimonError(
                "By default, Partial update can not accept delete records (-D/-U rows in a partial-update "
                "table); configure 'ignore-delete' to ignore them or 'partial-update.remove-record-on-delete' "
                "to remove the whole row when receiving delete records.")
        idx = np.arange(g.n)
        insert = ~retract
        # Rows whose values replace the whole state: a retract that opens the key (initRow), and
        # with remove-record-on-delete every -D.
        reset = np.zeros(g.n, dtype=bool)
        reset[g.starts] = retract[g.starts]
        if self.remove_record_on_delete:
            reset |= kinds == DELETE
        reset_row = g.last(reset)[g.gid]
        after_reset = idx > reset_row
        at_reset = idx == reset_row
        arrays = self._sequence_groups(v)
        for name in v.table.column_names:
            if name in self.key_cols:
                arrays[name] = v.take(name, g.ends)
            elif name not in (SEQUENCE_NUMBER, VALUE_KIND) and name not in arrays:
                pick = g.last((insert & v.valid(name) & after_reset) | at_reset)
                arrays[name] = v.take(name, v.passthrough(pick))
        seqs = v.sorted_np(SEQUENCE_NUMBER)
        if self.ignore_delete:  # ignored retracts do not move the sequence number (0 if none is left)
            last_add = g.last(insert)
            seq = np.where(last_add >= 0, seqs[np.maximum(last_add, 0)], 0)
        else:
            seq = seqs[g.ends]
        deleted = ~g.any(insert)
        if self.remove_record_on_delete:
            deleted |= kinds[g.ends] == DELETE
        kind = np.where(deleted, DELETE, INSERT)
        arrays[SEQUENCE_NUMBER] = pa.array(np.where(v.single, seqs[g.starts], seq).astype(np.int64))
        arrays[VALUE_KIND] = pa.array(np.where(v.single, kinds[g.starts], kind).astype(np.int8))
        return pa.Table.from_arrays([arrays[c] for c in v.table.column_names], schema=v.table.schema)

    def _sequence_groups(self, v: "_Versions") -> dict:
        """The columns of each sequence group: the values of the version that takes the group last
        (sequence_group.py); a key opened by a -D/-U row that no version takes keeps its values."""
        g, out = v.g, {}
        for group in self.groups:
            names = [n for n in group.fields if n in v.table.column_names]
            if not names:
                continue
            rank = sequence_group.group_rank([v.values(n, np.arange(g.n)) for n in group.sequence])
            # a -D/-U row that opens the key is the state the others start from (Paimon's initRow);
            # with ignore-delete the other ones change nothing, else each retracts the group
            opening = np.zeros(g.n, dtype=bool)
            opening[g.starts] = v.retract[g.starts]
            eligible = (~v.retract | opening) if self.ignore_delete else np.ones(g.n, dtype=bool)
            win = sequence_group.winners(rank, eligible, g.starts, g.gid)
            base = np.where(win >= 0, win, np.where(opening[g.starts], g.starts, -1))
            retracted = v.retract & ~(opening & self.ignore_delete)
            cleared = np.where((win >= 0) & retracted[np.maximum(win, 0)], -1, base)  # a partial retraction
            for n in names:
                out[n] = v.take(n, v.passthrough(base if n in group.sequence else cleared))
        return out

    def _aggregate(self, v: "_Versions") -> pa.Table:
        g = v.g
        by_name = {f.name: f for f in self.fields}
        has_retract = bool((v.retract & v.multi_row).any())
        if has_retract:
            for f in self.fields:
                if f.name in v.table.column_names and f.function not in RETRACTABLE and not f.ignore_retract:
                    raise PaimonError(
                        f"Aggregate function '{f.function}' (column {f.name!r}) does not support retraction: the "
                        f"table holds -D/-U rows for keys with several versions. If you allow this function to "
                        f"ignore retraction messages, configure 'fields.{f.name}.ignore-retract'='true' (or "
                        f"'ignore-delete'='true' to drop all retractions).")
        arrays = {}
        for name in v.table.column_names:
            if name in self.key_cols or name == SEQUENCE_NUMBER:
                arrays[name] = v.take(name, g.ends)
            elif name == VALUE_KIND:
                arrays[name] = pa.array(np.where(v.single, v.kinds[g.starts], INSERT).astype(np.int8))
            else:
                f = by_name.get(name)
                if f is None:
                    raise PaimonError(f"column {name!r} has no aggregate function (internal error)")
                try:
                    arrays[name] = _aggregate_field(f, v, has_retract)
                except pa.ArrowInvalid as e:
                    raise PaimonError(f"aggregate function '{f.function}' of column {f.name!r} ({f.type.sql()}) "
                                      f"failed: {e} (Paimon fails with an ArithmeticException)") from None
        return pa.Table.from_arrays([arrays[c] for c in v.table.column_names], schema=v.table.schema)


def merge_function(schema, value_columns: Sequence[str] | None = None) -> MergeFunction:
    """The merge function of a table (a TableSchema), for reading `value_columns` (default: all)."""
    core = schema.core
    engine = merge_engine(schema)
    key_cols = tuple(key_column(k) for k in schema.trimmed_primary_keys)
    names = list(value_columns) if value_columns is not None else schema.field_names
    remove = core.partial_update_remove_record_on_delete if engine == "partial-update" else False
    fields = ()
    if engine == "aggregation":
        fields = tuple(field_agg(schema, n) for n in names)
    sequence = SequenceOrder(tuple(core.sequence_fields), core.sequence_ascending)
    groups = check_sequence_groups(schema, engine)
    missing = [f for f in sequence.fields + tuple(f for gr in groups if set(gr.fields) & set(names)
                                                  for f in gr.sequence) if f not in names]
    if missing:
        raise PaimonError(f"reading the sequence field(s) {missing} is needed to merge versions: read them too")
    return MergeFunction(engine, key_cols, core.ignore_delete, remove, fields, sequence, groups)


def merge(tables: Sequence[pa.Table], key_cols: Sequence[str], engine: str, ignore_delete: bool = False,
          overlapping: bool = True) -> pa.Table:
    """Merge without a schema: engines that need none (aggregation needs `merge_function(schema)`)."""
    if engine == "aggregation":
        raise PaimonError("the aggregation engine needs the table schema: use merge_function(schema).merge(...)")
    if engine not in ENGINES:
        raise PaimonError(f"merge-engine {engine!r} is not readable by this version of the store")
    return MergeFunction(engine, tuple(key_cols), ignore_delete).merge(tables, overlapping)


# ---- vectorised helpers -------------------------------------------------------------------------

class _Groups:
    """Contiguous groups (one per key) of rows in sorted order."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray, n: int):
        self.starts = starts.astype(np.int64)
        self.ends = ends.astype(np.int64)
        self.n = n
        self.lens = self.ends - self.starts + 1
        self.gid = np.repeat(np.arange(len(self.starts)), self.lens)

    def __len__(self) -> int:
        return len(self.starts)

    def last(self, mask: np.ndarray) -> np.ndarray:
        """Per group, the last row index where mask holds, or -1."""
        return np.maximum.reduceat(np.where(mask, np.arange(self.n), -1), self.starts)

    def first(self, mask: np.ndarray) -> np.ndarray:
        """Per group, the first row index where mask holds, or -1."""
        r = np.minimum.reduceat(np.where(mask, np.arange(self.n), self.n), self.starts)
        r[r == self.n] = -1
        return r

    def any(self, mask: np.ndarray) -> np.ndarray:
        return np.logical_or.reduceat(mask, self.starts)


class _Versions:
    """A bucket's rows seen in (key, sequence) order through `order`, without sorting the columns."""

    def __init__(self, table: pa.Table, order: np.ndarray, g: _Groups):
        self.table, self.order, self.g = table, order, g
        self.kinds = _np(table.column(VALUE_KIND)).astype(np.int8)[order]
        self.retract = (self.kinds == DELETE) | (self.kinds == UPDATE_BEFORE)
        self.single = g.lens == 1
        self.multi_row = np.repeat(~self.single, g.lens)

    def sorted_np(self, name: str) -> np.ndarray:
        return _np(self.table.column(name))[self.order]

    def valid(self, name: str) -> np.ndarray:
        return _np_valid(self.table.column(name))[self.order]

    def passthrough(self, pick: np.ndarray) -> np.ndarray:
        """Per group: the merged pick, or for a single-version key its one row."""
        return np.where(self.single, self.g.starts, pick)

    def take(self, name: str, positions: np.ndarray) -> pa.Array:
        """The column at sorted positions (null where a position is < 0)."""
        return _take(self.table.column(name), np.where(positions >= 0, self.order[np.maximum(positions, 0)], -1))

    def values(self, name: str, sel: np.ndarray) -> pa.Array:
        """The column's values at the selected sorted positions, in sorted order."""
        return _array(self.table.column(name).take(pa.array(self.order[sel])))


def _np(col) -> np.ndarray:
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return col.to_numpy(zero_copy_only=False)


def _np_valid(col) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return _np(pc.is_valid(col)).astype(bool)


def _array(col) -> pa.Array:
    return col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col


def _take(col, idx: np.ndarray) -> pa.Array:
    """col[idx] with null where idx < 0."""
    missing = idx < 0
    indices = pa.array(np.where(missing, 0, idx), mask=missing if missing.any() else None)
    return _array(col.take(indices))


def _scatter(count: int, at: np.ndarray, values: pa.Array) -> pa.Array:
    """An array of `count` nulls with values[i] put at position at[i]."""
    pos = np.full(count, -1, dtype=np.int64)
    pos[at] = np.arange(len(at))
    return _take(values, pos)


def _aggregate_field(f: FieldAgg, v: _Versions, has_retract: bool) -> pa.Array:
    g, fn, retract = v.g, f.function, v.retract
    considered = ~retract if (has_retract and f.ignore_retract) else np.ones(g.n, dtype=bool)
    if fn == PRIMARY_KEY:
        return v.take(f.name, v.passthrough(g.last(considered)))
    if fn == "last_value":  # agg: the input; retract: null
        p = g.last(considered)
        return v.take(f.name, v.passthrough(np.where((p >= 0) & ~retract[np.maximum(p, 0)], p, -1)))
    present = v.valid(f.name)
    if fn == "last_non_null_value":  # null inputs change nothing; a retracted value clears
        p = g.last(considered & present)
        return v.take(f.name, v.passthrough(np.where((p >= 0) & ~retract[np.maximum(p, 0)], p, -1)))
    if fn == "first_value":
        return v.take(f.name, v.passthrough(g.first(considered)))
    if fn == "first_non_null_value":
        return v.take(f.name, v.passthrough(g.first(considered & present)))
    # The rest compute new values over the keys with 2+ versions; single versions pass through.
    sel = considered & v.multi_row
    if fn in ("min", "max", "bool_and", "bool_or"):
        how = "min" if fn in ("min", "bool_and") else "max"
        merged = _group_extreme(v, f.name, sel & present, how, f.type.root)
    elif fn == "listagg":
        merged = _listagg(v, f.name, sel & present, f.delimiter, f.distinct)
    elif fn in ("collect", "merge_map"):
        merged = _nested(v, f.name, sel & present, nested_agg.collect if fn == "collect" else nested_agg.merge_map)
    elif fn in ("sum", "product"):
        multi = ~v.single
        starts, lens = g.starts[multi], g.lens[multi]
        folded = _fold(starts, lens, v, f.name, considered, _sum_step(f) if fn == "sum" else _product_step(f))
        merged = _scatter(len(g), np.flatnonzero(multi), folded)
    else:
        raise PaimonError(f"aggregate function {fn!r} is not implemented")
    if not v.single.any():
        return merged
    return pc.if_else(pa.array(v.single), v.take(f.name, g.starts), merged)


def _segments(g: _Groups, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For selected sorted rows: the groups that have any, and where each starts among the selected."""
    counts = np.add.reduceat(sel.astype(np.int64), g.starts)
    present = np.flatnonzero(counts)
    offsets = np.concatenate(([0], np.cumsum(counts[present])[:-1]))
    return present, offsets


_NUMPY_EXTREME = {"TINYINT", "SMALLINT", "INT", "BIGINT", "DATE", "TIMESTAMP", "TIMESTAMP_LTZ", "BOOLEAN",
                  "FLOAT", "DOUBLE"}


def _group_extreme(v: _Versions, name: str, sel: np.ndarray, how: str, root: str) -> pa.Array:
    """Per-group min/max over the selected (non-null) rows; null for a group with none.

    Floats compare as Java's Float.compare/Double.compare (NaN above +inf, -0.0 below 0.0): through
    the usual total-order integer key of their bits. Fixed-width types reduce in numpy over the
    (contiguous) groups; strings, bytes and decimals go through Arrow's hash aggregation.
    """
    g = v.g
    dtype = v.table.column(name).type
    if not sel.any():
        return pa.nulls(len(g), dtype)
    values = v.values(name, sel)
    present, offsets = _segments(g, sel)
    if root in _NUMPY_EXTREME:
        if root in ("FLOAT", "DOUBLE"):
            fdt, idt = (np.float32, np.int32) if root == "FLOAT" else (np.float64, np.int64)
            x = values.to_numpy(zero_copy_only=False).astype(fdt)
            x = np.where(np.isnan(x), fdt(np.nan), x)  # canonical NaN, as floatToIntBits
            bits = x.view(idt)
            key = bits ^ ((bits >> (bits.dtype.itemsize * 8 - 1)) & idt(np.iinfo(idt).max))
            red = (np.minimum if how == "min" else np.maximum).reduceat(key, offsets)
            red = (red ^ ((red >> (red.dtype.itemsize * 8 - 1)) & idt(np.iinfo(idt).max))).view(fdt)
            result = pa.array(red, type=dtype)
        elif root == "BOOLEAN":
            x = values.to_numpy(zero_copy_only=False).astype(bool)
            result = pa.array((np.minimum if how == "min" else np.maximum).reduceat(x, offsets))
        else:
            width = pa.int32() if dtype.bit_width == 32 else pa.int64() if dtype.bit_width == 64 else None
            storage = values.view(width) if width is not None else values
            x = storage.to_numpy(zero_copy_only=False)
            red = (np.minimum if how == "min" else np.maximum).reduceat(x, offsets)
            result = pa.array(red, type=storage.type)
            result = result.view(dtype) if width is not None else result.cast(dtype)
    else:
        gids = pa.array(np.repeat(np.arange(len(present)), np.diff(np.append(offsets, len(values)))))
        out = pa.table({"g": gids, "v": values}).group_by("g", use_threads=False).aggregate([("v", how)])
        result = _scatter(len(present), _np(out.column("g")), out.column(f"v_{how}").combine_chunks())
    return _scatter(len(g), present, result)


def _listagg(v: _Versions, name: str, sel: np.ndarray, delimiter: str, distinct: bool = False) -> pa.Array:
    """FieldListaggAgg: non-blank values joined in sequence order; blank and null inputs are skipped
    (distinct: only tokens not yet held are added, listagg_distinct.py)."""
    g = v.g
    dtype = v.table.column(name).type
    if sel.any():
        values = v.values(name, sel)
        blank = _np(pc.match_substring_regex(values, _BLANK_RE)).astype(bool)
        if blank.any():
            sel = sel.copy()
            sel[np.flatnonzero(sel)[blank]] = False
            values = values.filter(pa.array(~blank))
    if not sel.any():
        return pa.nulls(len(g), dtype)
    present, offsets = _segments(g, sel)
    if distinct:
        values, offsets = distinct_tokens(values, offsets, _BLANK_RE, delimiter)
    # The selected values are grouped contiguously already: a list array over them, no hashing.
    lists = pa.ListArray.from_arrays(pa.array(np.append(offsets, len(values)).astype(np.int32)), values)
    return _scatter(len(g), present, pc.binary_join(lists, delimiter).cast(dtype))


def _nested(v: _Versions, name: str, sel: np.ndarray, merge) -> pa.Array:
    """collect / merge_map (nested_agg.py) over the selected (non-null) versions of each key."""
    g = v.g
    dtype = v.table.column(name).type
    if not sel.any():
        return pa.nulls(len(g), dtype)
    present, offsets = _segments(g, sel)
    return _scatter(len(g), present, merge(v.values(name, sel), offsets, dtype))


Step = Callable[[pa.Array, pa.Array, np.ndarray], pa.Array]


def _fold(starts: np.ndarray, lens: np.ndarray, v: _Versions, name: str, considered: np.ndarray,
          step: Step) -> pa.Array:
    """Apply `step(acc, input, is_retract)` over each group's versions in order, all groups at once.

    The loop runs over version depth (at most the number of files in the bucket), never over rows:
    at depth d the groups that still have a d-th version, which, with groups ordered longest first,
    are a prefix. Versions not `considered` (ignore-retract) are fed as null inputs: a no-op.
    """
    col = _array(v.table.column(name))
    order = np.argsort(-lens, kind="stable")
    starts, lens = starts[order], lens[order]
    count = len(order)
    acc = pa.nulls(count, col.type)
    for d in range(int(lens[0]) if count else 0):
        k = int(np.count_nonzero(lens > d))
        rows = starts[:k] + d
        x = col.take(pa.array(v.order[rows]))
        skip = ~considered[rows]
        if skip.any():
            x = pc.if_else(pa.array(skip), pa.scalar(None, x.type), x)
        new = step(acc.slice(0, k), x, v.retract[rows])
        acc = new if k == count else pa.concat_arrays([new, acc.slice(k)])
    inverse = np.empty_like(order)
    inverse[order] = np.arange(count)
    return acc.take(pa.array(inverse))


def _assemble(base: pa.Array, parts: list[tuple[np.ndarray, pa.Array]]) -> pa.Array:
    """base with positions idx replaced by the values of each (idx, values) part."""
    parts = [(i, v) for i, v in parts if len(i)]
    if not parts:
        return base
    changed = np.concatenate([i for i, _ in parts])
    keep = np.ones(len(base), dtype=bool)
    keep[changed] = False
    kept = np.flatnonzero(keep)
    at = np.concatenate((kept, changed))
    values = pa.concat_arrays([base.take(pa.array(kept))] + [v.cast(base.type) for _, v in parts])
    return values.take(pa.array(np.argsort(at, kind="stable")))


def _decimal_bound(dtype) -> pa.Scalar:
    return pa.scalar(Decimal(10) ** (dtype.precision - dtype.scale), pa.decimal256(dtype.precision + 1, dtype.scale))


def _decimal_fit(result: pa.Array, dtype, on_overflow: str, what: str) -> pa.Array:
    """Rescale a decimal result to DECIMAL(p, s); an overflow of p becomes null or an error."""
    p, s = dtype.precision, dtype.scale
    if result.type.scale != s:  # a product: Paimon rounds HALF_UP (away from zero) to the scale
        result = pc.round(result, ndigits=s, round_mode="half_towards_infinity")
        result = result.cast(pa.decimal256(min(76, result.type.precision), s))
    wide = result.cast(pa.decimal256(min(76, max(result.type.precision, p + 1)), s))
    over = pc.fill_null(pc.greater_equal(pc.abs(wide), _decimal_bound(dtype).cast(wide.type)), False)
    if pc.any(over).as_py():
        if on_overflow == "raise":
            raise PaimonError(f"{what} overflows DECIMAL({p}, {s})")
        wide = pc.if_else(over, pa.scalar(None, wide.type), wide)
    return wide.cast(pa.decimal128(p, s))


def _arithmetic_step(agg: Callable, retract: Callable, retract_into_null: Callable | None = None) -> Step:
    """The step FieldSumAgg and FieldProductAgg share: a null input leaves the accumulator as it is;
    a null accumulator takes the input (retracting: retract_into_null(input), or stays null without
    it); otherwise agg(acc, input), or retract(acc, input) for a retracting row."""
    def step(acc: pa.Array, x: pa.Array, r: np.ndarray) -> pa.Array:
        a_null, x_valid = ~_np_valid(acc), _np_valid(x)
        both = ~a_null & x_valid
        take_x = np.flatnonzero(a_null & x_valid & ~r)
        parts = [(take_x, x.take(pa.array(take_x)))]
        if retract_into_null is not None:
            neg = np.flatnonzero(a_null & x_valid & r)
            if len(neg):
                parts.append((neg, retract_into_null(x.take(pa.array(neg)))))
        for fn, mask in ((agg, both & ~r), (retract, both & r)):
            i = np.flatnonzero(mask)
            if len(i):
                ia = pa.array(i)
                parts.append((i, fn(acc.take(ia), x.take(ia))))
        return _assemble(acc, parts)

    return step


def _sum_step(f: FieldAgg) -> Step:
    """FieldSumAgg: agg/retract skip a null input; a null accumulator takes the input (negated when
    retracting); integer overflow raises (Math.addExact); a DECIMAL result beyond its precision is null
    (DecimalUtils.add, p > 18) or, for p <= 18, a value Paimon stores unchecked, which we refuse."""
    dtype = f.type
    is_dec = dtype.root == "DECIMAL"

    def op(a: pa.Array, x: pa.Array, subtract: bool) -> pa.Array:
        if is_dec:
            a, x = a.cast(pa.decimal256(dtype.precision, dtype.scale)), x.cast(pa.decimal256(dtype.precision,
                                                                                              dtype.scale))
            r = pc.subtract(a, x) if subtract else pc.add(a, x)
            return _decimal_fit(r, dtype, "raise" if dtype.precision <= 18 else "null", f"sum of {f.name!r}")
        return pc.subtract_checked(a, x) if subtract else pc.add_checked(a, x)

    return _arithmetic_step(lambda a, x: op(a, x, False), lambda a, x: op(a, x, True), pc.negate_checked)


def _product_step(f: FieldAgg) -> Step:
    """FieldProductAgg: agg skips nulls (a null accumulator takes the input) and multiplies with
    overflow checks (DECIMAL: HALF_UP to the scale, null beyond the precision); retract divides
    (integers truncate, x/0 raises) and leaves the accumulator alone when either side is null."""
    dtype = f.type
    is_dec = dtype.root == "DECIMAL"
    is_float = dtype.root in ("FLOAT", "DOUBLE")

    def multiply(a, x):
        if is_dec:
            if dtype.precision > 37:
                raise PaimonError(f"product of DECIMAL({dtype.precision}, {dtype.scale}) column {f.name!r} is not "
                                  "supported by dbt-paimon (precision above 37)")
            w = pa.decimal256(dtype.precision, dtype.scale)
            return _decimal_fit(pc.multiply(a.cast(w), x.cast(w)), dtype, "null", f"product of {f.name!r}")
        return pc.multiply(a, x) if is_float else pc.multiply_checked(a, x)

    def divide(a, x):
        if is_dec:
            raise PaimonError(f"retracting from product column {f.name!r} of type {dtype.sql()} is not supported by "
                              "dbt-paimon (exact BigDecimal division); set 'ignore-delete' or "
                              f"'fields.{f.name}.ignore-retract'")
        return pc.divide(a, x) if is_float else pc.divide_checked(a, x)

    return _arithmetic_step(multiply, divide)
