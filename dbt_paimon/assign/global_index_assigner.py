"""GlobalIndexAssigner: one assigner's share of an upsert batch, decided in one vectorised pass.

Paimon's crosspartition.GlobalIndexAssigner handles one record at a time against a key index. Here
an assigner receives, after the shuffle by key hash, (a) the batch rows whose keys hash to it and
(b) the bootstrapped index entries of those same keys: (key, old partition, old bucket[, old
sequence_by value]). It joins them once and decides every row together:

- key not in the table          -> a new key: BucketAssigner picks its bucket in its partition
- key in the same partition     -> written to the bucket it lives in (an update in place)
- key in another partition      -> the merge engine's ExistingProcessor (existing_processor.py):
                                   delete (a -D row to the old partition and bucket, then the row as
                                   a new key), use-old (the row is rewritten into the old partition
                                   and bucket) or skip-new
Fixed-bucket tables take Paimon's bucket function instead of the BucketAssigner; their key holds
the partition, so a key never moves. Dynamic-bucket tables whose key holds the partition
(HASH_DYNAMIC) place a new key by its key hash (partition_index.py).

The rows it takes and gives are declared in rows.py.

Order does not matter inside a batch (each key appears once after de-duplication), so the batch is
processed as: all moves out first (freeing slots), then new keys in key order per partition. That
makes the result independent of the order rows arrived in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..store.common import key_order
from ..store.format.datafile import DELETE, INSERT
from ..store.common.errors import DataError, SchemaError
from ..store.common.key_hash import java_bucket, key_hashes
from ..store.common.options import BucketMode, MergeEngine
from ..store.write.postpone import PartitionBuckets
from ..store.schema.schema import TableSchema
from .bucket_assigner import BucketAssigner
from .delete_existing_processor import DeleteExistingProcessor
from .existing_processor import ExistingProcessor, Moves
from ..store.common.groups import group_codes, group_runs
from .partition_index import PartitionIndex
from .rows import BUCKET, HASH, KIND, OLD_BUCKET, OLD_SEQUENCE, old_column
from .skip_new_existing_processor import SkipNewExistingProcessor
from .use_old_existing_processor import UseOldExistingProcessor

# Paimon's ExistingProcessor.create: the strategy by merge engine
_EXISTING_PROCESSORS: dict[MergeEngine, type[ExistingProcessor]] = {
    MergeEngine.DEDUPLICATE: DeleteExistingProcessor,
    MergeEngine.PARTIAL_UPDATE: UseOldExistingProcessor,
    MergeEngine.AGGREGATION: UseOldExistingProcessor,
    MergeEngine.FIRST_ROW: SkipNewExistingProcessor,
}


def existing_processor(merge_engine: str) -> ExistingProcessor:
    try:
        return _EXISTING_PROCESSORS[MergeEngine(merge_engine)]()
    except (KeyError, ValueError):
        raise SchemaError(f"merge-engine {merge_engine!r} cannot be used on a cross-partition table") from None


COUNT_KINDS = ("inserted", "updated", "moved", "deleted", "skipped")


@dataclass
class AssignCounts:
    """What an upsert did to its rows; the one counts type from the assigners to a dbt run result."""

    inserted: int = 0
    updated: int = 0
    moved: int = 0
    deleted: int = 0
    skipped: int = 0

    def __iadd__(self, other: "AssignCounts") -> "AssignCounts":
        for name in COUNT_KINDS:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self

    def as_dict(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in COUNT_KINDS}

    @property
    def rows_affected(self) -> int:
        return self.inserted + self.updated + self.moved + self.deleted

    def summary(self) -> str:
        """`UPSERT 200000: 100000 inserted, 50000 updated, 50000 moved` (zero moves, deletes and
        skips left out)."""
        total = sum(self.as_dict().values())
        parts = [f"{self.inserted} inserted", f"{self.updated} updated"]
        parts += [f"{getattr(self, k)} {k}" for k in ("moved", "deleted", "skipped") if getattr(self, k)]
        return f"UPSERT {total}: " + ", ".join(parts)


@dataclass
class AssignResult:
    rows: pa.Table  # the table's columns + BUCKET (int32) + KIND (int8)
    counts: AssignCounts = field(default_factory=AssignCounts)
    # per row of `rows`: a +I written to the (partition, bucket) its key lived in (an update in
    # place); the key index's record of the commit counts every other +I as new to its bucket
    in_place: np.ndarray | None = None


def _eq_null_aware(a, b) -> np.ndarray:
    eq = pc.fill_null(pc.equal(a, b), False)
    both_null = pc.and_(pc.is_null(a), pc.is_null(b))
    return pc.or_(eq, both_null).to_numpy(zero_copy_only=False).astype(bool)


def _adjacent_equal(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """For a sorted table: out[i] is true when row i+1 equals row i on `columns` (nulls equal;
    FLOAT/DOUBLE as Paimon compares keys: NaN equals NaN, -0.0 differs from 0.0)."""
    n = table.num_rows
    same = np.ones(max(n - 1, 0), dtype=bool)
    for c in columns:
        col = key_order.order_surrogate(table.column(c))
        same &= _eq_null_aware(col.slice(1), col.slice(0, n - 1))
    return same


def _describe(rows: pa.Table, columns: Sequence[str], mask: np.ndarray, limit: int = 5) -> str:
    sample = rows.select(list(columns)).filter(pa.array(mask)).slice(0, limit).to_pylist()
    total = int(mask.sum())
    more = f" ({total} in all)" if total > limit else ""
    return ", ".join(str(s) for s in sample) + more


class GlobalIndexAssigner:
    def __init__(self, schema: TableSchema, num_assigners: int = 1, assign_id: int = 0,
                 sequence_by: str | None = None, not_null: Sequence[str] = (),
                 buckets: PartitionBuckets | None = None):
        """not_null: columns this run declares NOT NULL (dbt's not_null constraints), checked with
        the table's own NOT NULL columns. buckets (POSTPONE_MODE): each partition's bucket count as
        the job planned it; left out, every partition is taken as new."""
        self.schema = schema
        self.not_null = list(dict.fromkeys([f.name for f in schema.fields if not f.type.nullable and
                                            f.name not in schema.primary_keys] + list(not_null)))
        self.mode = schema.bucket_mode
        if self.mode == BucketMode.POSTPONE_MODE and buckets is None:
            buckets = PartitionBuckets.of_plan(schema, None)
        self.buckets = buckets
        self.keys = list(schema.primary_keys)
        self.partition_keys = list(schema.partition_keys)
        self.sequence_by = sequence_by
        self.engine = schema.core.merge_engine
        self.existing = existing_processor(self.engine) if self.mode == BucketMode.KEY_DYNAMIC else None
        self.assigner = BucketAssigner(schema.core.target_row_num, num_assigners, assign_id)

    # ---- input checks ----------------------------------------------------------------------
    def _check_keys(self, rows: pa.Table) -> None:
        for k in self.keys:
            nulls = rows.column(k).null_count
            if nulls:
                raise DataError(f"primary key column {k!r} is null in {nulls} input row(s); a key cannot be null")
        for c in self.not_null:
            nulls = rows.column(c).null_count
            if nulls:
                raise DataError(f"column {c!r} is NOT NULL (a not_null constraint, or the table's schema) but null "
                                f"in {nulls} input row(s); nothing was written")

    def deduplicate(self, rows: pa.Table) -> tuple[pa.Table, int, np.ndarray | None]:
        """One row per key: an error without sequence_by, else the highest sequence_by wins.
        Returns the rows, how many were superseded, and their key order (positions; None: the rows
        are in key order). Unique keys (the common case) leave the rows as they came: only the key
        columns are put in key order to find duplicates, not whole rows (W1's 200K: 20 ms)."""
        n = rows.num_rows
        if n <= 1:
            return rows, 0, None
        # Paimon's key order (key_order.py); a FLOAT/DOUBLE sequence_by orders the same way.
        order = key_order.sort_indices(rows, self.keys + ([self.sequence_by] if self.sequence_by else []),
                                       null_placement="at_start")
        same_key = _adjacent_equal(rows.select(self.keys).take(order), self.keys)
        if not same_key.any():
            return rows, 0, order.to_numpy()
        ordered = rows.take(order)
        if not self.sequence_by:
            followed = np.append(same_key, False)  # rows the next row repeats the key of
            first = followed & ~np.concatenate([[False], followed[:-1]])  # one row per repeated key
            raise DataError(f"the input holds {int(same_key.sum())} duplicate row(s) for key(s) "
                            f"{_describe(ordered, self.keys, first)}; make the key unique or "
                            f"set sequence_by to say which row wins")
        tie = same_key & _adjacent_equal(ordered, [self.sequence_by])
        if tie.any():
            identical = _adjacent_equal(ordered, ordered.column_names)
            conflict = tie & ~identical
            if conflict.any():
                raise DataError(f"rows with the same key and the same {self.sequence_by!r} differ, so neither wins: "
                                f"{_describe(ordered, self.keys + [self.sequence_by], np.append(conflict, False))}")
        last = np.append(~same_key, True)
        return ordered.filter(pa.array(last)), int(n - last.sum()), None

    # ---- the batch ---------------------------------------------------------------------------
    def process(self, rows: pa.Table, existing: pa.Table | None = None, index: pa.Table | None = None,
                bucket_counts: pa.Table | None = None) -> AssignResult:
        """rows: the table's columns (+ HASH in HASH_DYNAMIC mode); existing: key columns +
        old_column(p) per partition field + OLD_BUCKET (+ OLD_SEQUENCE with sequence_by) for the
        keys of this assigner; index (HASH_DYNAMIC): old_column(p)... + HASH + OLD_BUCKET.
        bucket_counts: old_column(p)... + OLD_BUCKET + "count": live rows per bucket, when the
        bootstrap shipped only the keys the batch may touch (then `existing` cannot be counted)."""
        counts = AssignCounts()
        self._check_keys(rows)
        rows, superseded, by_key = self.deduplicate(rows)
        counts.skipped += superseded
        n = rows.num_rows
        if existing is None or existing.num_rows == 0:
            existing = self._empty_existing()
        else:
            existing = self._unique_existing(existing)
        olds = [old_column(p) for p in self.partition_keys]
        partition_index = None
        if self.mode == BucketMode.HASH_DYNAMIC:
            partition_index = PartitionIndex(self.schema, self.assigner, index)
        elif self.mode == BucketMode.KEY_DYNAMIC and bucket_counts is not None:
            self.assigner.bootstrap_table(bucket_counts, olds, OLD_BUCKET, "count")
        elif self.mode == BucketMode.KEY_DYNAMIC:
            self.assigner.bootstrap_table(existing, olds, OLD_BUCKET)
        joined = self._with_existing(rows, existing, by_key)
        matched = joined.column(OLD_BUCKET).is_valid().to_numpy(zero_copy_only=False)
        same = matched.copy()
        for p in self.partition_keys:  # a FLOAT/DOUBLE partition -0.0 is not partition 0.0
            same &= _eq_null_aware(key_order.order_surrogate(joined.column(p)),
                                   key_order.order_surrogate(joined.column(old_column(p))))
        moved = matched & ~same

        skip = np.zeros(n, dtype=bool)
        if self.sequence_by:
            older = pc.fill_null(pc.less(key_order.order_surrogate(joined.column(self.sequence_by)),
                                         key_order.order_surrogate(joined.column(OLD_SEQUENCE))), False)
            # A null sequence_by is older than any value.
            older = pc.or_(older, pc.and_(pc.is_null(joined.column(self.sequence_by)),
                                         pc.is_valid(joined.column(OLD_SEQUENCE))))
            skip |= matched & older.to_numpy(zero_copy_only=False).astype(bool)
        if self.engine == MergeEngine.FIRST_ROW:
            skip |= matched  # the first version of a key wins; later ones need not be written
        retract = self._retracts(joined)
        skip |= retract & ~matched  # deleting a key that is not there changes nothing
        drop = retract & matched & ~skip  # keys this batch deletes, where they live
        active = ~skip & ~retract

        table_cols = self.schema.field_names
        buckets = np.full(n, -1, dtype=np.int32)
        old_bucket = joined.column(OLD_BUCKET).fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int32)
        deletes = [self._delete_rows(joined, drop, old_bucket)] if drop.any() else []
        if drop.any() and self.mode == BucketMode.KEY_DYNAMIC:
            self._decrement(joined, drop)
        new = ~matched & active
        if self.mode in (BucketMode.HASH_FIXED, BucketMode.POSTPONE_MODE):
            # a postpone-bucket table hashes as a fixed-bucket one, by its partition's count
            update = matched & active
            hk = self.schema.bucket_keys
            hashes = key_hashes([joined.column(k) for k in hk], [self.schema.field(k).type for k in hk])
            count = self.schema.core.bucket if self.buckets is None else self.buckets.of_rows(joined)
            buckets = java_bucket(hashes, count).astype(np.int32)
            out = joined.select(table_cols)
        elif self.mode == BucketMode.HASH_DYNAMIC:
            update = matched & active
            buckets[update] = old_bucket[update]
            out = joined.select(table_cols + [HASH])
            buckets = partition_index.assign(out, new, buckets)
        else:
            update = same & active
            buckets[update] = old_bucket[update]
            moves: Moves = self.existing.process(moved & active)
            if moves.retract_old.any():
                deletes.append(self._delete_rows(joined, moves.retract_old, old_bucket))
                self._decrement(joined, moves.retract_old)
            counts.moved += int(moves.place_new.sum())
            new = new | moves.place_new
            out = self._rewrite_partition(joined, moves.use_old)
            buckets[moves.use_old] = old_bucket[moves.use_old]
            update = update | moves.use_old
            skip |= moves.skip
            active &= ~moves.skip
            buckets = self._assign_new(out, new, buckets, by_key)
        counts.inserted += int((~matched & active).sum())
        counts.updated += int(update.sum())
        counts.deleted += int(drop.sum())
        counts.skipped += int(skip.sum())
        out = out.append_column(BUCKET, pa.array(buckets, pa.int32()))
        out = out.append_column(KIND, pa.array(np.full(n, INSERT, dtype=np.int8)))
        out = out.filter(pa.array(active))
        in_place = update[active]
        if deletes:
            # The batch carries Spark's session time zone on LTZ timestamps; the -D rows the
            # table's: same instants, so align the types before concatenating.
            out = pa.concat_tables([out] + [d.cast(out.schema) for d in deletes])
            in_place = np.concatenate([in_place, np.zeros(out.num_rows - len(in_place), np.bool_)])
        return AssignResult(out, counts, in_place)

    # ---- pieces ----------------------------------------------------------------------------
    def _empty_existing(self) -> pa.Table:
        fields = [pa.field(k, self.schema.field(k).type.to_arrow()) for k in self.keys]
        fields += [pa.field(old_column(p), self.schema.field(p).type.to_arrow()) for p in self.partition_keys]
        fields.append(pa.field(OLD_BUCKET, pa.int32()))
        if self.sequence_by:
            fields.append(pa.field(OLD_SEQUENCE, self.schema.field(self.sequence_by).type.to_arrow()))
        return pa.schema(fields).empty_table()

    def _with_existing(self, rows: pa.Table, existing: pa.Table, by_key: np.ndarray | None = None) -> pa.Table:
        """rows, each with its key's existing columns (old partition, OLD_BUCKET, ...; nulls for a
        key not found), in rows' order: the keys are matched (key_order.match: as Paimon compares
        them, a NaN key finds the stored NaN, -0.0 never finds 0.0) and the old columns taken by
        the match. Joining the rows whole and sorting them back into their order took four times
        as long (W1's 200K rows against 100K keys: 0.06 s)."""
        match = key_order.match(rows, existing, self.keys, by_key)
        at = pa.array(match, mask=match < 0)
        for name in existing.column_names:
            if name not in self.keys:
                rows = rows.append_column(existing.field(name), existing.column(name).take(at))
        return rows

    def _unique_existing(self, existing: pa.Table) -> pa.Table:
        """A key live in two places would be a broken table; keep one place deterministically.
        Their order does not matter to the match: checked by the keys alone first, kept as they come."""
        by_key = existing.select(self.keys).take(key_order.sort_indices(existing, self.keys))
        if not _adjacent_equal(by_key, self.keys).any():
            return existing
        ordered = existing.take(key_order.sort_indices(existing, self.keys + [OLD_BUCKET]))
        dup = _adjacent_equal(ordered, self.keys)
        if not dup.any():
            return ordered
        return ordered.filter(pa.array(np.append(~dup, True)))

    def _decrement(self, joined: pa.Table, move: np.ndarray) -> None:
        if not move.any():
            return
        cols = [old_column(p) for p in self.partition_keys] + [OLD_BUCKET]
        per_bucket = joined.select(cols).filter(pa.array(move)).group_by(cols, use_threads=False).aggregate(
            [([], "count_all")])
        for r in per_bucket.to_pylist():
            part = tuple(r[old_column(p)] for p in self.partition_keys)
            self.assigner.decrement(part, r[OLD_BUCKET], r["count_all"])

    def _retracts(self, rows: pa.Table) -> np.ndarray:
        """Rows the batch asks to delete through the `rowkind.field` column ('-D' or '-U')."""
        field = self.schema.core.get("rowkind.field")
        if not field:
            return np.zeros(rows.num_rows, dtype=bool)
        kinds = rows.column(field)
        valid = pc.is_in(kinds, value_set=pa.array(["+I", "-U", "+U", "-D"]))
        bad = pc.invert(pc.fill_null(valid, False)).to_numpy(zero_copy_only=False).astype(bool)
        if bad.any():
            raise DataError(f"rowkind.field column {field!r} must hold +I, -U, +U or -D; found "
                            f"{rows.column(field).filter(pa.array(bad)).unique().to_pylist()[:5]}")
        return pc.is_in(kinds, value_set=pa.array(["-U", "-D"])).to_numpy(zero_copy_only=False).astype(bool)

    def _delete_rows(self, joined: pa.Table, move: np.ndarray, old_bucket: np.ndarray) -> pa.Table:
        """-D rows for keys leaving (or deleted from) where they live: the batch row with the key's
        old partition values, as Paimon's ExistingProcessor builds them (so NOT NULL columns hold)."""
        carried = [old_column(f.name) if f.name in self.partition_keys else f.name for f in self.schema.fields]
        names = list(self.schema.field_names)
        if self.mode == BucketMode.HASH_DYNAMIC:
            carried.append(HASH)
            names.append(HASH)
        picked = joined.select(carried).filter(pa.array(move))  # only the columns a -D row carries
        arrays = picked.columns + [pa.array(old_bucket[move], pa.int32()),
                                   pa.array(np.full(picked.num_rows, DELETE, dtype=np.int8))]
        return pa.Table.from_arrays(arrays, names=names + [BUCKET, KIND])

    def _rewrite_partition(self, joined: pa.Table, use_old: np.ndarray) -> pa.Table:
        out = joined.select(self.schema.field_names)
        if not use_old.any():
            return out
        mask = pa.array(use_old)
        for p in self.partition_keys:
            idx = out.column_names.index(p)
            col = pc.if_else(mask, joined.column(old_column(p)), joined.column(p))
            out = out.set_column(idx, p, col)
        return out

    def _assign_new(self, rows: pa.Table, new: np.ndarray, buckets: np.ndarray,
                    by_key: np.ndarray | None) -> np.ndarray:
        """BucketAssigner over the new keys, partition by partition, in key order (by_key: the rows'
        key order, None when they are in it), as every assigner of either executor meets them."""
        if not new.any():
            return buckets
        idx = np.flatnonzero(new) if by_key is None else by_key[new[by_key]]
        codes, parts = group_codes(rows.select(self.partition_keys).take(pa.array(idx)), self.partition_keys)
        # a stable sort by partition keeps the key order within each partition
        order, runs = group_runs(codes)
        for start, end in runs:  # one iteration per partition
            buckets[idx[order[start:end]]] = self.assigner.assign(parts[codes[order[start]]], end - start)
        return buckets
