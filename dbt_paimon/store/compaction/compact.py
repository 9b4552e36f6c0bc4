"""Full compaction of one bucket: merge every live file of a (partition, bucket) into one sorted run.

As Paimon's MergeTreeCompactRewriter: the files are merged with the table's merge function
(ReducerMergeFunctionWrapper semantics, see merge.py), every KeyValue keeps the sequence number the
merge gives it (the winning version's; aggregation and partial-update: the latest one), the output
is written as rolling files (target-file-size) at `output_level` with file source COMPACT, and -D/-U
results are dropped only with drop_deletes (DropDeleteReader). The caller commits the returned
entries as a COMPACT snapshot: `table.new_commit().commit(entries, kind="COMPACT")`, which fails with
CommitConflictError if another writer removed one of the input files meanwhile.

Everything needed travels as plain data (a table path or FileStoreTable, a DataSplit), so this runs
as well on a Spark executor as in the driver.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..format.datafile import CHANGELOG_FILE_PREFIX, KeyValueFileWriter, key_column, kv_column_names, \
    kv_arrow_schema
from ..index.deletion_vectors import DeletionVectorsIndexFile, VectorsChange, changed_vectors, read_vectors
from ..common.errors import PaimonError
from .compaction_changelog import compaction_changelog, derives_changelog
from ..manifest.manifest import ADD, DELETE, FILE_SOURCE_COMPACT, DataFileMeta, ManifestEntry
from ..read.read import POSITION, TableRead
from ..read.scan import DataSplit
from ..schema.schema import TableSchema
from ..table import FileStoreTable


def max_level(schema: TableSchema) -> int:
    """The highest level of the table's LSM tree: num-levels - 1 (Paimon: num-levels defaults to
    num-sorted-run.compaction-trigger + 1, so 5 by default)."""
    return schema.core.num_levels - 1


def compact_bucket(table, split: DataSplit, output_level: int | None = None,
                   drop_deletes: bool | None = None,
                   bucket_files: Sequence[DataFileMeta] | None = None,
                   derive_changelog: bool = True, moved: pa.Table | None = None) -> list[ManifestEntry]:
    """Rewrite all files of one split as one sorted run; return DELETE + ADD entries to commit.

    table: a FileStoreTable or its path. output_level: 1 .. max_level (default max_level).
    drop_deletes: default True, as Paimon drops deletes when the output level is at or above the
    highest non-empty level, which always holds here since every file of the bucket is an input.
    bucket_files: every live file of the bucket, when split holds only some (a changelog-producer
    'lookup' table looks the keys of its level-0 files up in the others: compaction_changelog.py, whose
    changelog files come with the entries, at the output level; `derive_changelog=False`: none, for
    the files an OVERWRITE wrote, of which Paimon's changelog says nothing).

    A bucket that is already one file at `output_level` (with no delete rows to drop) needs nothing;
    a lone file elsewhere is moved up by metadata only (Paimon's upgrade: same file, new level).
    moved: KeyValue rows merged in beside the files (a postpone compaction's, postpone_compact.py).
    """
    if isinstance(table, str):
        table = FileStoreTable.open(table)
    schema = table.schema
    top = max_level(schema)
    level = top if output_level is None else int(output_level)
    if not 1 <= level <= top:
        raise PaimonError(f"compaction output level must be within 1 .. {top} (num-levels - 1), got {level}")
    drop = True if drop_deletes is None else bool(drop_deletes)
    files = list(split.files)
    if not files and moved is None:
        return []

    if schema.core.deletion_vectors:
        raise PaimonError("a table with deletion vectors is compacted by compact_bucket_dv")
    entry = _entry_of(split)
    changelog = _changelog(table, split, level, bucket_files, derive_changelog) if files else []
    deletes = [entry(DELETE, f) for f in files]
    if len(files) == 1 and moved is None and not (drop and files[0].has_deletes):
        f = files[0]
        if f.level == level:
            return changelog
        return deletes + [entry(ADD, dataclasses.replace(f, level=level))] + changelog

    writer = KeyValueFileWriter(table.io, schema, split.bucket_path, level=level, file_source=FILE_SOURCE_COMPACT)
    try:
        kv = _kv_layout(TableRead(table.io, table.path, schema).read_split_kv(split, drop_deletes=drop, extra=moved),
                        schema)
        # The rows are already KeyValues (sorted, one per key, sequence numbers kept), so they go to
        # the rolling writer as they are.
        metas = writer.write_kv(kv) if kv.num_rows else []
    except BaseException:
        writer.discard()
        abort_compaction(table, split, changelog)
        raise
    return deletes + [entry(ADD, m) for m in metas] + changelog


def compact_bucket_dv(table, split: DataSplit, output_level: int,
                      bucket_files: Sequence[DataFileMeta] | None = None,
                      derive_changelog: bool = True) -> tuple[list[ManifestEntry], list[VectorsChange]]:
    """compact_bucket on a table with deletion vectors (deletion_vectors.py): the entries to commit,
    and the bucket's new vectors when they change.

    As Paimon's lookup compaction: the files of `split` (read through their vectors) are merged with
    the live rows of their keys found in the bucket's other files (`bucket_files`, all above the
    output level), whose positions the vectors then delete; deletes are dropped (nothing live of the
    key is left below), and every file rewritten loses its vector. So each key keeps at most one live
    row in levels 1 and up, and a batch reader skipping level 0 needs no merge. Unlike Paimon, which
    keeps local lookup files, the other files are read whole."""
    if isinstance(table, str):
        table = FileStoreTable.open(table)
    schema = table.schema
    files = list(split.files)
    if not files:
        return [], []
    inputs = {f.file_name for f in files}
    others = [f for f in (bucket_files or files) if f.file_name not in inputs]
    reader = TableRead(table.io, table.path, schema)
    before = read_vectors(table.io, table.path, split.deletion_index) if split.deletion_index else {}
    unit = [reader.read_file_kv(split, f, before) for f in files]
    keys = [key_column(k) for k in schema.trimmed_primary_keys]
    unit_keys = pa.concat_tables([t.select(keys) for t in unit]).group_by(keys).aggregate([])
    found, deleted = [], {}
    for f in others:  # the live rows of the unit's keys above it, and where they are
        rows = reader.read_file_kv(split, f, before, positions=True).join(unit_keys, keys, join_type="left semi")
        if rows.num_rows:
            deleted[f.file_name] = np.sort(rows.column(POSITION).to_numpy())
            found.append(rows.drop_columns([POSITION]))
    changelog = _changelog(table, split, output_level, bucket_files, derive_changelog)
    writer = KeyValueFileWriter(table.io, schema, split.bucket_path, level=output_level,
                                file_source=FILE_SOURCE_COMPACT)
    vectors = changed_vectors(before, inputs, deleted)
    previous = split.deletion_index.file_name if split.deletion_index else None
    # always one change: the commit checks the bucket's vectors are still those read, even unchanged
    # (another compaction of the bucket may have deleted rows of the files this one rewrites)
    change = [VectorsChange(split.partition, split.bucket, previous, None, False, tuple(deleted))]
    try:
        kv = reader.merge_function.merge(found + unit, overlapping=True, drop_deletes=True)
        metas = writer.write_kv(_kv_layout(kv, schema)) if kv.num_rows else []
        if vectors is not None:
            new = DeletionVectorsIndexFile(table.io, table.path, schema.core.deletion_vectors_bitmap64).write(
                vectors) if vectors else None
            change = [VectorsChange(split.partition, split.bucket, previous, new, True, tuple(deleted))]
    except BaseException:
        writer.discard()
        abort_compaction(table, split, changelog)
        raise
    entry = _entry_of(split)
    return [entry(DELETE, f) for f in files] + [entry(ADD, m) for m in metas] + changelog, change


def _kv_layout(kv: pa.Table, schema: TableSchema) -> pa.Table:
    return pa.Table.from_arrays([kv.column(n) for n in kv_column_names(schema)], schema=kv_arrow_schema(schema))


def abort_compaction(table, split: DataSplit, entries: Sequence[ManifestEntry]) -> None:
    """Delete the files a compaction wrote when its commit will not happen (e.g. a conflict)."""
    if isinstance(table, str):
        table = FileStoreTable.open(table)
    inputs = {f.file_name for f in split.files}
    for e in entries:
        if e.kind == ADD and e.file.file_name not in inputs:  # an upgraded file is still the input
            for name in (e.file.file_name, *e.file.extra_files):  # its file index beside it
                table.io.delete(f"{split.bucket_path}/{name}")


def _entry_of(split: DataSplit):
    def entry(kind: int, meta: DataFileMeta, changelog: bool = False) -> ManifestEntry:
        return ManifestEntry(kind, split.partition, split.bucket, split.total_buckets, meta, changelog)
    return entry


def _changelog(table, split: DataSplit, level: int, bucket_files, derive: bool) -> list[ManifestEntry]:
    """The changelog files of a compaction on a changelog-producer 'lookup' or 'full-compaction'
    table (compaction_changelog.py)."""
    files = split.files
    if not (derive and derives_changelog(table.schema, files, level)):
        return []
    records = compaction_changelog(table, split, bucket_files if bucket_files is not None else files)
    if not records.num_rows:
        return []
    writer = KeyValueFileWriter(table.io, table.schema, split.bucket_path, level=level, prefix=CHANGELOG_FILE_PREFIX)
    entry = _entry_of(split)
    try:
        return [entry(ADD, m, changelog=True) for m in writer.write_kv(records)]
    except BaseException:
        writer.discard()
        raise

