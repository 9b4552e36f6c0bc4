"""Primary-key data files: KeyValue Parquet files with `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`.

One file is one sorted run: rows sorted by the trimmed primary key, each key at most once. Stats
(min/max key, key and value stats) come from Arrow compute over whole columns, never from row loops.
"""

from __future__ import annotations

import datetime as dt
import dataclasses
import uuid
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..common import binary_row, key_order
from . import file_format
from ..index import file_index
from ..common.errors import DataError
from ..common.fileio import FileIO
from ..manifest.manifest import FILE_SOURCE_APPEND, DataFileMeta, SimpleStats
from ..schema.schema import KEY_PREFIX, TableSchema
from .stats_collector import DataFileStatsCollector
from ..common.types import cast_to

SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
# RowKind bytes as Paimon stores them in _VALUE_KIND.
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
ROW_KINDS = {"+I": INSERT, "-U": UPDATE_BEFORE, "+U": UPDATE_AFTER, "-D": DELETE}

# Rows per Parquet row group while rolling files: the first one, the fewest and the most.
_FIRST_CHUNK, _MIN_CHUNK, _CHUNK_ROWS = 64 * 1024, 1024, 1024 * 1024
_SMALL_FILE_ROWS = 1024  # files up to this many rows are written without dictionary encoding
# A column gets a dictionary when at most this share of a sample of its rows is distinct
_DICTIONARY_SAMPLE, _DICTIONARY_MAX_DISTINCT = 4096, 0.5


def creation_time() -> dt.datetime:
    """Now, as a data file's creation time: Paimon keeps it to the millisecond."""
    now = dt.datetime.now(dt.timezone.utc)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


def key_column(name: str) -> str:
    return KEY_PREFIX + name


def kv_column_names(schema: TableSchema) -> list[str]:
    """The columns of a KeyValue data file: _KEY_* (trimmed key), sequence number, value kind, the
    table's columns (what kv_arrow_schema names, without building it: a writer per bucket)."""
    return [key_column(k) for k in schema.trimmed_primary_keys] + [SEQUENCE_NUMBER, VALUE_KIND] + schema.field_names


def kv_arrow_schema(schema: TableSchema, value_columns: Sequence[str] | None = None) -> pa.Schema:
    """Arrow schema of a KeyValue data file (or of the projection of one)."""
    fields = [pa.field(key_column(k), schema.field(k).type.to_arrow(), False) for k in schema.trimmed_primary_keys]
    fields += [pa.field(SEQUENCE_NUMBER, pa.int64(), False), pa.field(VALUE_KIND, pa.int8(), False)]
    names = schema.field_names if value_columns is None else value_columns
    fields += [pa.field(n, schema.field(n).type.to_arrow(), schema.field(n).type.nullable) for n in names]
    return pa.schema(fields)


def sort_by_key(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Rows in Paimon's key order (FLOAT/DOUBLE keys as Float.compare/Double.compare, key_order.py)."""
    if table.num_rows <= 1:
        return table
    return table.take(key_order.sort_indices(table, keys))


def boundaries(table: pa.Table, keys: Sequence[str]) -> np.ndarray:
    """Boolean mask, true on the last row of each run of equal keys in a key-sorted table.

    Keys are equal as Paimon compares them: NaN equals NaN, -0.0 differs from 0.0 (key_order.py)."""
    n = table.num_rows
    last = np.zeros(n, dtype=bool)
    if n == 0:
        return last
    last[-1] = True
    if n == 1:
        return last
    diff = np.zeros(n - 1, dtype=bool)
    for k in keys:
        col = key_order.order_surrogate(table.column(k))
        a, b = col.slice(1), col.slice(0, n - 1)
        ne = pc.not_equal(a, b)
        if col.null_count:
            # null == null, null != value: rows with a null partition value group together
            ne = pc.fill_null(ne, pc.xor(pc.is_null(a), pc.is_null(b)))
        diff |= ne.to_numpy(zero_copy_only=False).astype(bool, copy=False)
    last[:-1] = diff
    return last


def dictionary_columns(kv: pa.Table, columns: Sequence[str]) -> list[str]:
    """Of `columns`, those a dictionary pays for: at most half the values distinct in a sample of
    kv's rows. parquet-mr (Java Paimon's writer) falls back to plain encoding when a column's
    dictionary does not compress it; Arrow's writer only when the dictionary outgrows its page, so
    a column of (nearly) unique values is encoded twice and stored with its dictionary. 20K rows
    of W1's batch (dt and active repeat; the name, quantity, price and time mostly do not): 10.0 ms
    and 752 KB as a file with a dictionary for every value column, 6.9 ms and 639 KB with one for
    the two this picks (2K rows: 1.33 ms and 77 KB, 1.01 ms and 66 KB). The sample: up to 4096
    rows spread over kv (its key order), 1.6-6.6 ms for 2K-200K rows of six columns."""
    n = kv.num_rows
    if n == 0 or not columns:
        return list(columns)
    m = min(n, _DICTIONARY_SAMPLE)
    sample = kv.select(list(columns)).take(pa.array(np.linspace(0, n - 1, m).astype(np.int64)))
    return [c for c in columns if pc.count_distinct(sample.column(c)).as_py() <= _DICTIONARY_MAX_DISTINCT * m]


# Paimon's data-file.prefix and changelog-file.prefix (their defaults: we refuse other values)
DATA_FILE_PREFIX, CHANGELOG_FILE_PREFIX = "data-", "changelog-"


@dataclass
class KeyValueFileWriter:
    """Writes the data files of one (partition, bucket) of one table."""

    io: FileIO
    schema: TableSchema
    bucket_dir: str
    level: int = 0
    file_source: int = FILE_SOURCE_APPEND
    prefix: str = DATA_FILE_PREFIX  # CHANGELOG_FILE_PREFIX: the writer of a bucket's changelog files

    def __post_init__(self):
        self._prefix = f"{self.prefix}{uuid.uuid4()}-"
        self._count = 0
        core = self.schema.core
        self._target_size = core.target_file_size
        codec = core.file_compression
        self._compression = None if codec in ("none", "uncompressed") else codec
        self._level_opt = core.zstd_level if codec == "zstd" else None
        # Keys and sequence numbers are unique per file: dictionary encoding them is wasted work.
        unique = {key_column(k) for k in self.schema.trimmed_primary_keys} | {SEQUENCE_NUMBER}
        unique |= set(self.schema.trimmed_primary_keys)
        unique |= {f.name for f in self.schema.fields if f.type.is_nested}  # (no distinct count of a nested value)
        self.dictionary_candidates = [n for n in kv_column_names(self.schema) if n not in unique]
        self._stats = DataFileStatsCollector(self.schema)  # metadata.stats-mode and friends

    def write(self, rows: pa.Table, row_kinds: pa.Array | np.ndarray | None, start_sequence: int) -> list[DataFileMeta]:
        """Write rows (all table columns, schema order) as sorted files; keys must be unique.

        `row_kinds` holds a RowKind byte per row (None: all +I). Sequence numbers are
        start_sequence, start_sequence + 1, ... in key order.
        """
        n = rows.num_rows
        if n == 0:
            return []
        keys = self.schema.trimmed_primary_keys
        kinds = pa.array(np.zeros(n, dtype=np.int8)) if row_kinds is None else int_array(row_kinds, pa.int8())
        tagged = sort_by_key(rows.append_column(VALUE_KIND, kinds), keys)
        check_unique(tagged, keys)
        seq = np.arange(start_sequence, start_sequence + n, dtype=np.int64)
        return self.write_kv(kv_table(self.schema, tagged, seq))

    def write_kv(self, kv: pa.Table, stats: FileStats | None = None,
                 dictionary: Sequence[str] | None = None) -> list[DataFileMeta]:
        """Write KeyValue rows (kv_arrow_schema, key-sorted) as files, rolling to a new file once one
        reaches target-file-size. The size is checked between row groups, whose length comes from
        the bytes per row measured so far (at least _MIN_CHUNK). stats: those of all of kv, when
        the caller has them (used when kv fits in one file). dictionary: the columns to dictionary-
        encode (dictionary_columns over rows like these, when the caller has them; else over kv)."""
        metas, start, n = [], 0, kv.num_rows
        if dictionary is None:
            dictionary = dictionary_columns(kv, self.dictionary_candidates) if n > _SMALL_FILE_ROWS else []
        while start < n:
            name = f"{self._prefix}{self._count}.parquet"
            self._count += 1
            path = f"{self.bucket_dir}/{name}"
            end, size = start, 0
            # A dictionary costs more than it saves in a small file (an upsert touching many buckets)
            encoded = list(dictionary) if n - start > _SMALL_FILE_ROWS and dictionary else False
            with self.io.output(path) as sink, pq.ParquetWriter(
                    sink, kv.schema, compression=self._compression, compression_level=self._level_opt,
                    store_decimal_as_integer=True, use_dictionary=encoded) as w:
                while end < n and size < self._target_size:
                    if n - end <= _MIN_CHUNK:  # the rest in one chunk whatever its size (as below)
                        take = n - end
                    elif end == start:  # guess from the in-memory size; compressed is smaller
                        take = min(_FIRST_CHUNK, int(self._target_size / max(kv.nbytes / n, 1)) + 1)
                    else:
                        per_row = max(size / (end - start), 1e-3)
                        take = int((self._target_size - size) / per_row) + 1
                    take = max(_MIN_CHUNK, min(take, _CHUNK_ROWS))
                    chunk = kv.slice(end, take)
                    w.write_table(chunk, row_group_size=take)
                    end += chunk.num_rows
                    size = sink.tell()
                w.close()  # the footer: the file's size is known once it is written
                size = sink.tell()
            whole = start == 0 and end == n
            meta = self.file_meta(name, size, kv.slice(start, end - start), stats if whole else None)
            metas.append(self._indexed(meta, kv.slice(start, end - start)))
            start = end
        return metas

    def discard(self) -> None:
        """Delete every file this writer wrote (its files' indexes too), for a write that will not
        be committed."""
        for i in range(self._count):
            name = f"{self._prefix}{i}.parquet"
            self.io.delete(f"{self.bucket_dir}/{name}")
            self.io.delete(f"{self.bucket_dir}/{name}{file_index.INDEX_SUFFIX}")

    def _indexed(self, meta: DataFileMeta, rows: pa.Table) -> DataFileMeta:
        """The meta with the file's index (file_index.py): embedded when small, else its own file."""
        container = file_index.write_container(self.schema, rows) if self.prefix == DATA_FILE_PREFIX else None
        if container is None:
            return meta
        if len(container) <= file_index.threshold(self.schema):
            return dataclasses.replace(meta, embedded_index=container)
        name = meta.file_name + file_index.INDEX_SUFFIX
        self.io.write_bytes(f"{self.bucket_dir}/{name}", container)
        return dataclasses.replace(meta, extra_files=(name,))

    def file_meta(self, name: str, size: int, kv: pa.Table, stats: FileStats | None) -> DataFileMeta:
        """The meta of one written file of kv's rows (stats: theirs, when the caller has them)."""
        keys = self.schema.trimmed_primary_keys
        key_arrays = [kv.column(key_column(k)) for k in keys]
        if stats is None:
            stats = file_stats(kv, self._stats)
        key_types = self.schema.key_types
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=kv.num_rows,
            min_key=binary_row.serialize(binary_row.row_of(key_arrays, 0), key_types),
            max_key=binary_row.serialize(binary_row.row_of(key_arrays, kv.num_rows - 1), key_types),
            key_stats=stats.key_stats,
            value_stats=stats.value_stats,
            min_sequence_number=stats.min_sequence,
            max_sequence_number=stats.max_sequence,
            schema_id=self.schema.id,
            level=self.level,
            creation_time=creation_time(),
            delete_row_count=stats.deletes,
            file_source=self.file_source,
            value_stats_cols=stats.value_stats_cols,
        )


@dataclass(frozen=True)
class FileStats:
    """What a data file's meta says of its rows besides keys and count."""
    key_stats: SimpleStats
    value_stats_cols: tuple[str, ...] | None
    value_stats: SimpleStats
    min_sequence: int
    max_sequence: int
    deletes: int


def _is_delete(kinds) -> pa.Array:
    return pc.or_(pc.equal(kinds, DELETE), pc.equal(kinds, UPDATE_BEFORE))


def file_stats(kv: pa.Table, collector: DataFileStatsCollector) -> FileStats:
    """The FileStats of one file's KeyValue rows."""
    schema_names = collector.value_names
    seq = pc.min_max(kv.column(SEQUENCE_NUMBER))
    cols, values = collector.value_stats([kv.column(n) for n in schema_names])
    keys = collector.key_stats([kv.column(n) for n in kv.column_names if n.startswith(KEY_PREFIX)])
    return FileStats(keys, cols, values, seq["min"].as_py(), seq["max"].as_py(),
                     pc.sum(_is_delete(kv.column(VALUE_KIND))).as_py() or 0)


def file_stats_of_rows(rows: pa.Table, collector: DataFileStatsCollector) -> tuple[tuple[str, ...] | None, SimpleStats]:
    """(`_VALUE_STATS_COLS`, `_VALUE_STATS`) of an append file's rows (the table's columns)."""
    return collector.value_stats([rows.column(n) for n in collector.value_names])


def group_file_stats(kv: pa.Table, collector: DataFileStatsCollector, offsets: np.ndarray) -> list[FileStats]:
    """file_stats of each group of rows kv.slice(offsets[i], offsets[i + 1]), in one pass over kv:
    a file per group, when an upsert touches many buckets (stats_collector.collect_groups)."""
    sizes = np.diff(offsets)
    groups = pa.array(np.repeat(np.arange(len(sizes), dtype=np.int32), sizes))
    key_cols = [kv.column(n) for n in kv.column_names if n.startswith(KEY_PREFIX)]
    stats = collector.group_stats(key_cols, [kv.column(n) for n in collector.value_names], groups, offsets)
    seq = np.asarray(kv.column(SEQUENCE_NUMBER).to_numpy(), dtype=np.int64)
    deletes = np.add.reduceat(_is_delete(kv.column(VALUE_KIND)).to_numpy(zero_copy_only=False).astype(np.int64),
                              offsets[:-1])
    low, high = np.minimum.reduceat(seq, offsets[:-1]), np.maximum.reduceat(seq, offsets[:-1])
    return [FileStats(k, cols, v, int(a), int(b), int(d))
            for (k, (cols, v)), a, b, d in zip(stats, low, high, deletes)]  # per group, not per row


def kv_table(schema: TableSchema, tagged: pa.Table, sequence: np.ndarray) -> pa.Table:
    """KeyValue rows (kv_arrow_schema) from key-sorted table rows with their VALUE_KIND column."""
    keys = schema.trimmed_primary_keys
    arrays = [tagged.column(k) for k in keys] + [pa.array(sequence, pa.int64()), tagged.column(VALUE_KIND)]
    arrays += [tagged.column(name) for name in schema.field_names]
    return pa.Table.from_arrays(arrays, schema=kv_arrow_schema(schema))


def check_unique(table: pa.Table, keys: Sequence[str], group: str | None = None) -> None:
    """Raise DataError when a key-sorted table (sorted by its group column first, when it has
    one: a file per group) holds a key twice in a group (a data file cannot)."""
    last = boundaries(table, ([group] if group else []) + list(keys))
    if not last.all():
        dup = table.select(list(keys)).filter(pa.array(~last)).slice(0, 5).to_pylist()
        raise DataError(f"a data file cannot hold a key twice; duplicate keys such as {dup}")


def conform(rows: pa.Table, schema: TableSchema) -> pa.Table:
    """Rows with exactly the table's columns and types; a clear DataError otherwise."""
    names = schema.field_names
    missing = [n for n in names if n not in rows.column_names]
    extra = [n for n in rows.column_names if n not in names]
    if missing or extra:
        raise DataError(f"rows do not match the table's columns: missing {missing}, unexpected {extra}")
    arrays = []
    for f in schema.fields:
        col = rows.column(f.name)
        target = f.type.to_arrow()
        if col.type != target:
            try:
                col = cast_to(col, target)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                raise DataError(f"column {f.name!r} has type {col.type}, which cannot be stored as "
                                f"{f.type.sql()}: {e}") from None
        if not f.type.nullable and col.null_count and f.name not in schema.partition_keys:
            raise DataError(f"column {f.name!r} is NOT NULL but {col.null_count} row(s) hold null")
        if f.type.is_nested:
            _check_nested_nulls(col, f.type, f.name)
        arrays.append(col)
    return pa.Table.from_arrays(arrays, schema=schema.arrow_schema(nullable=True))


def _check_nested_nulls(col, dtype, where: str) -> None:
    """DataError when a value inside a nested column is null where its type says NOT NULL (a
    Parquet writer would refuse the file half-way); vectorised: one flatten per level."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if dtype.root == "ROW":
        for f, child in zip(dtype.fields, col.flatten()):  # the parent's nulls applied to each field
            inner = child.null_count - col.null_count
            if not f.type.nullable and inner:
                raise DataError(f"column {where!r}: field {f.name!r} is NOT NULL but {inner} value(s) hold null")
            if f.type.is_nested:
                _check_nested_nulls(child, f.type, f"{where}.{f.name}")
        return
    if dtype.root == "MAP":  # as the list of its entries, which flattens (a map does not)
        col = col.cast(pa.list_(pa.struct([col.type.key_field, col.type.item_field])))
    inner = col.flatten()  # the values of the non-null lists (a map's entries)
    children = [("element", dtype.element, inner)] if dtype.root == "ARRAY" else [
        ("value", dtype.value, inner.field("value"))]
    for what, child_type, child in children:
        if not child_type.nullable and child.null_count:
            raise DataError(f"column {where!r}: its {what}s are NOT NULL but {child.null_count} of them are null")
        if child_type.is_nested:
            _check_nested_nulls(child, child_type, f"{where} {what}")


def read_kv_file(io: FileIO, path: str, columns: Sequence[str] | None = None,
                 types: Mapping[str, pa.DataType] | None = None) -> pa.Table:
    """Read (a projection of) one KeyValue file, of any format Paimon writes (file_format.py);
    `types`: the Arrow type some columns must have (an Avro file reads TINYINT and _VALUE_KIND as
    int, an ORC file timestamps as nanoseconds)."""
    table = file_format.read_file(io, path, columns)
    if not types:
        return table
    return pa.Table.from_arrays([c.cast(types[n]) if n in types and c.type != types[n] else c
                                 for n, c in zip(table.column_names, table.columns)], names=table.column_names)


def int_array(values, arrow_type: pa.DataType) -> pa.Array:
    """One contiguous array of `values` (a list, numpy array or Arrow array, chunked or not).
    pa.array() of a ChunkedArray walks its values one by one in Python (38 ms for 125K rows, with
    the GIL held: the writer threads of an upsert queued behind each other on it)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values.cast(arrow_type)
    return pa.array(values, arrow_type)
