"""The changelog a compaction derives: changelog-producer 'lookup' (Paimon's
LookupChangelogMergeFunctionWrapper; FirstRowMergeFunctionWrapper for first-row) and 'full-compaction'
(FullChangelogMergeFunctionWrapper).

Per key, from `before` (its stored state) and `after` (what the compaction leaves):

    before absent or a retraction, after an addition   ->  +I(after)
    before an addition, after a retraction             ->  -D(before)
    both additions                                     ->  -U(before), +U(after)

(first-row: +I(after) only for a key no level above 0 holds). Each record keeps the key, sequence
number and values of the version it comes from, in key order. The compaction writes them as
changelog files at its output level (file source APPEND, as Paimon's) and commits them with its
COMPACT snapshot.

lookup: the keys of the level-0 files compacted; `before` is their state in the levels above 0
(Paimon takes the lowest such level, which holds the newest, and looks the key up when the
compaction does not read it), `after` their level-0 versions merged onto it. Paimon's writers with
this producer compact every level-0 file up after each write (compact_strategy.py's ForceUpLevel0),
so every write's changes reach the changelog at once. Only deduplicate and first-row tables have it
here (option_validation.py): there the merge of every stored version equals Paimon's
LookupMergeFunction (the level-0 rows over the newest stored version alone), which partial-update and
aggregation tables would tell apart. Unlike Paimon, which keeps local lookup files, each derivation
reads the bucket's files above level 0.

full-compaction: a compaction whose output is the top level (num-levels - 1: every file of the
bucket is an input); `before` is a key's row in the top-level files (the previous full
compaction's), `after` the merge of all its versions, for the keys the other files hold (a key only
at the top level has not changed). Writers trigger it with full-compaction.delta-commits.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..common import key_order
from ..format.datafile import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE, VALUE_KIND, key_column, kv_column_names, \
    kv_arrow_schema
from ..manifest.manifest import DataFileMeta
from ..common.options import MergeEngine
from ..read.read import TableRead
from ..read.scan import DataSplit

_BEFORE = "__before_"


def derives_changelog(schema, files: Sequence[DataFileMeta], output_level: int) -> bool:
    """Whether a compaction of `files` to `output_level` derives a changelog."""
    producer = schema.core.changelog_producer
    if producer == "lookup":
        return any(f.level == 0 for f in files)
    return producer == "full-compaction" and output_level == schema.core.num_levels - 1


def compaction_changelog(table, split: DataSplit, bucket_files: Sequence[DataFileMeta]) -> pa.Table:
    """The changelog records (KeyValue rows, kv_arrow_schema) of a compaction of split's files
    (`bucket_files`: every live file of its bucket), by the table's producer."""
    schema = table.schema
    reader = TableRead(table.io, table.path, schema)
    keys = [key_column(k) for k in schema.trimmed_primary_keys]
    names = kv_column_names(schema)
    arrow = kv_arrow_schema(schema)

    def kv(rows: pa.Table) -> pa.Table:  # in the KeyValue layout (a join or merge loses its order)
        return pa.Table.from_arrays([rows.column(n) for n in names], schema=arrow)

    def merged(files: list[DataFileMeta]) -> pa.Table:
        if not files:
            return arrow.empty_table()
        return kv(reader.read_split_kv(dataclasses.replace(split, files=files), drop_deletes=False))

    if schema.core.changelog_producer == "full-compaction":
        top = schema.core.num_levels - 1
        changed = merged([f for f in split.files if f.level < top])
        # the previous full compaction's rows of the keys the newer files hold, and the merge of all
        before = kv(merged([f for f in split.files if f.level == top]).join(changed.select(keys), keys,
                                                                              join_type="left semi"))
    else:
        changed = merged([f for f in bucket_files if f.level == 0])
        # the stored versions of the level-0 keys (the bucket's other files read once)
        before = kv(merged([f for f in bucket_files if f.level > 0]).join(changed.select(keys), keys,
                                                                           join_type="left semi"))
    after = kv(reader.merge_function.merge([before, changed], drop_deletes=False))
    before = before.rename_columns([_BEFORE + n for n in names])
    joined = after.join(before, keys, right_keys=[_BEFORE + k for k in keys], join_type="left outer")
    had = pc.is_valid(joined.column(_BEFORE + VALUE_KIND))
    b_add = pc.fill_null(_is_add(joined.column(_BEFORE + VALUE_KIND)), False)  # absent: not an addition
    a_add = _is_add(joined.column(VALUE_KIND))
    if schema.core.merge_engine == MergeEngine.FIRST_ROW:
        inserted, updated, deleted = pc.and_(a_add, pc.invert(had)), _none(joined), _none(joined)
    else:
        inserted = pc.and_(a_add, pc.invert(b_add))
        updated = pc.and_(a_add, b_add)
        deleted = pc.and_(pc.invert(a_add), b_add)
    before_side = pa.Table.from_arrays([joined.column(n if n in keys else _BEFORE + n) for n in names],
                                       schema=arrow)
    after_side = pa.Table.from_arrays([joined.column(n) for n in names], schema=arrow)
    parts = [  # (rows, their kind, their place among one key's records)
        (before_side.filter(updated), UPDATE_BEFORE, 0), (after_side.filter(updated), UPDATE_AFTER, 1),
        (after_side.filter(inserted), INSERT, 1), (before_side.filter(deleted), DELETE, 0)]
    out = pa.concat_tables([_with_kind(t, kind).append_column("__place", pa.array(np.full(t.num_rows, place, np.int8)))
                            for t, kind, place in parts])
    order = key_order.sort_indices(out, keys + ["__place"])
    return out.take(order).drop_columns(["__place"])


def _is_add(kinds: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.or_(pc.equal(kinds, INSERT), pc.equal(kinds, UPDATE_AFTER))


def _none(table: pa.Table) -> pa.Array:
    return pa.array(np.zeros(table.num_rows, dtype=bool))


def _with_kind(table: pa.Table, kind: int) -> pa.Table:
    i = table.schema.get_field_index(VALUE_KIND)
    return table.set_column(i, table.schema.field(i), pa.array(np.full(table.num_rows, kind, np.int8)))
