"""The rows of a snapshot's data files that a read leaves out, by file and position.

Two kinds: the positions a bucket's deletion vectors delete (Paimon's own), and, in a bucket whose
files must be merged, every version of a key but the one the merge keeps. The second is how Spark's
Parquet reader reads a deduplicate or first-row table that was written since its last compaction:
those engines keep one stored row of each key as it is (the newest, or the first), so a merge
decides only *which* row, from the key, the sequence number, the row kind and any sequence fields;
the store's merge function (store/merge/merge.py) decides it here on those columns alone, and Spark reads
the value columns of every file, without the other rows. Engines that make a new row from several
versions (partial-update, aggregation) are merged by the `paimon` source instead.

Only the keys of a bucket's newer files can have versions elsewhere: in the bucket's largest file
(typically its compacted base), the rows of other keys pass without a merge, so the merge sees the
newer files and the base rows of their keys, not the whole bucket.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa

from ...store.format.datafile import key_column
from ...store.index.deletion_vectors import read_vectors
from ...store.common.options import MergeEngine
from ...store.read.read import POSITION, TableRead
from ...store.read.scan import DataSplit
from ...store.schema.schema import TableSchema

_FILE = "__file"  # a file's place in its split, carried through the merge


def merges_by_position(schema: TableSchema) -> bool:
    """Whether the table's merge keeps one stored row of each key as it is (so a merged bucket is
    its files less some positions)."""
    return not schema.is_append and schema.core.merge_engine in (MergeEngine.DEDUPLICATE, MergeEngine.FIRST_ROW)


def vectors(io, table_path: str, split: DataSplit) -> dict[str, np.ndarray]:
    """File name -> deleted positions (sorted int64) of the split's deletion vectors."""
    if split.deletion_index is None:
        return {}
    found = read_vectors(io, table_path, split.deletion_index, {f.file_name for f in split.files})
    return {name: rows for name, rows in found.items() if rows.size}


def merged_away(io, table_path: str, schema: TableSchema, split: DataSplit) -> dict[str, np.ndarray]:
    """File name -> the positions (sorted int64) a merge of the split leaves out: deleted by a
    vector, or a version of its key that the merge does not keep, or a retraction it keeps."""
    reader = TableRead(io, table_path, schema, projection=[])
    dvs = vectors(io, table_path, split)
    files = sorted(split.files, key=lambda f: -f.row_count)
    base, newer = files[0], files[1:]
    tables = [_with_file(reader.read_file_kv(split, f, dvs, positions=True), i + 1) for i, f in enumerate(newer)]
    keys = [key_column(k) for k in schema.trimmed_primary_keys]
    base_rows = _with_file(reader.read_file_kv(split, base, dvs, positions=True), 0)
    if not base.has_deletes and tables and not _float_keys(schema):
        # the base's rows whose key no newer file holds have one version: kept as they are
        contested = _contested(base_rows, tables, keys)
    else:
        contested = base_rows
    kept = reader.merge_function.merge([contested] + tables, overlapping=True, drop_deletes=True)
    kept_file = kept.column(_FILE).to_numpy()
    kept_position = kept.column(POSITION).to_numpy()
    out = {}
    for i, f in enumerate(files):
        # a mask per file, not numpy's set operations: those hash every position, holding the GIL
        # (half of this function's time at W2's 10M rows, and the threads of of_splits waiting)
        keep = kept_position[kept_file == i]
        if i == 0 and contested is not base_rows:
            # the base's contested rows are out unless kept; its uncontested ones are in, less its vectors'
            lost = np.zeros(f.row_count, np.bool_)
            lost[contested.column(POSITION).to_numpy()] = True
            lost[keep] = False
            lost[dvs.get(f.file_name, np.empty(0, np.int64))] = True
        else:
            lost = np.ones(f.row_count, np.bool_)
            lost[keep] = False
        gone = np.flatnonzero(lost)
        if gone.size:
            out[f.file_name] = gone
    return out


def _contested(base_rows: pa.Table, tables: list[pa.Table], keys: list[str]) -> pa.Table:
    """The base's rows whose key a newer file holds. A data file is sorted by its key (unique in it):
    one integer key is looked up by binary search (numpy; a hash join and a grouping took a third of
    each bucket's planning on W2's upserted table, 14 -> 10 ms); other keys, or a base found
    unsorted, by the join."""
    if len(keys) == 1 and pa.types.is_integer(base_rows.schema.field(keys[0]).type):
        held = base_rows.column(keys[0]).to_numpy()
        if held.size < 2 or bool(np.all(held[1:] > held[:-1])):
            wanted = np.concatenate([t.column(keys[0]).to_numpy() for t in tables])
            at = np.searchsorted(held, wanted)
            found = at < held.size
            hit = np.zeros(held.size, np.bool_)  # a mask, not np.unique: that hashes every position
            hit[at[found][held[at[found]] == wanted[found]]] = True
            return base_rows.take(np.flatnonzero(hit))
    newer_keys = pa.concat_tables([t.select(keys) for t in tables]).group_by(keys).aggregate([])
    return base_rows.join(newer_keys, keys=keys, join_type="left semi")


def _with_file(table: pa.Table, ordinal: int) -> pa.Table:
    return table.append_column(_FILE, pa.array(np.full(table.num_rows, ordinal, dtype=np.int32)))


def _float_keys(schema: TableSchema) -> bool:
    # NaN and -0.0 keys compare as Paimon compares them in the merge, not in a hash join
    return any(schema.field(k).type.root in ("FLOAT", "DOUBLE") for k in schema.trimmed_primary_keys)


def of_splits(io, table_path: str, schema: TableSchema, splits: Iterable[DataSplit],
              merged: Callable[[DataSplit], bool], threads: int = 4) -> dict[str, np.ndarray]:
    """File name -> positions a read leaves out, for every file of `splits`; the splits `merged`
    holds for are merged (merged_away), the others lose their deletion vectors' rows."""
    splits = list(splits)

    def one(split: DataSplit) -> dict[str, np.ndarray]:
        if merged(split):
            return merged_away(io, table_path, schema, split)
        return vectors(io, table_path, split)

    out: dict[str, np.ndarray] = {}
    if len(splits) > 1 and threads > 1:
        with ThreadPoolExecutor(max_workers=threads) as pool:  # pyarrow reads and sorts without the GIL
            for part in pool.map(one, splits):
                out.update(part)
    else:
        for split in splits:
            out.update(one(split))
    return out

