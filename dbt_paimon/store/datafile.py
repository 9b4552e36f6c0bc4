"""Primary-key data files: KeyValue Parquet files with `_KEY_*`, `_SEQUENCE_NUMBER`, `_VALUE_KIND`.

One file is one sorted run: rows sorted by the trimmed primary key, each key at most once. Stats
(min/max key, key and value stats) come from Arrow compute over whole columns, never from row loops.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import binary_row, key_order
from .errors import CorruptTableError, DataError
from .fileio import FileIO
from .manifest import FILE_SOURCE_APPEND, DataFileMeta
from .schema import KEY_PREFIX, TableSchema
from .stats_collector import DataFileStatsCollector

SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
# RowKind bytes as Paimon stores them in _VALUE_KIND.
INSERT, UPDATE_BEFORE, UPDATE_AFTER, DELETE = 0, 1, 2, 3
ROW_KINDS = {"+I": INSERT, "-U": UPDATE_BEFORE, "+U": UPDATE_AFTER, "-D": DELETE}

# Rows per Parquet row group while rolling files: the first one, the fewest and the most.
_FIRST_CHUNK, _MIN_CHUNK, _CHUNK_ROWS = 64 * 1024, 1024, 1024 * 1024


def key_column(name: str) -> str:
    return KEY_PREFIX + name


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


@dataclass
class KeyValueFileWriter:
    """Writes the data files of one (partition, bucket) of one table."""

    io: FileIO
    schema: TableSchema
    bucket_dir: str
    level: int = 0
    file_source: int = FILE_SOURCE_APPEND

    def __post_init__(self):
        self._prefix = f"data-{uuid.uuid4()}-"
        self._count = 0
        core = self.schema.core
        self._target_size = core.target_file_size
        codec = core.file_compression
        self._compression = None if codec in ("none", "uncompressed") else codec
        self._level_opt = core.zstd_level if codec == "zstd" else None
        # Keys and sequence numbers are unique per file: dictionary encoding them is wasted work.
        unique = {key_column(k) for k in self.schema.trimmed_primary_keys} | {SEQUENCE_NUMBER}
        unique |= set(self.schema.trimmed_primary_keys)
        self._dictionary = [n for n in kv_arrow_schema(self.schema).names if n not in unique]
        self._stats = DataFileStatsCollector(self.schema)  # metadata.stats-mode and friends

    def write(self, rows: pa.Table, row_kinds: pa.Array | np.ndarray | None, start_sequence: int,
              presorted: bool = False) -> list[DataFileMeta]:
        """Write rows (all table columns, schema order) as sorted files; keys must be unique.

        `row_kinds` holds a RowKind byte per row (None: all +I). Sequence numbers are
        start_sequence, start_sequence + 1, ... in key order.
        """
        n = rows.num_rows
        if n == 0:
            return []
        keys = self.schema.trimmed_primary_keys
        kinds = pa.array(np.zeros(n, dtype=np.int8)) if row_kinds is None else int_array(row_kinds, pa.int8())
        tagged = rows.append_column(VALUE_KIND, kinds)
        if not presorted:
            tagged = sort_by_key(tagged, keys)
        last = boundaries(tagged, keys)
        if not last.all():
            dup = tagged.select(keys).filter(pa.array(~last)).slice(0, 5).to_pylist()
            raise DataError(f"a data file cannot hold a key twice; duplicate keys such as {dup}")
        seq = pa.array(np.arange(start_sequence, start_sequence + n, dtype=np.int64))
        arrays = [tagged.column(k) for k in keys] + [seq, tagged.column(VALUE_KIND)]
        arrays += [tagged.column(name) for name in self.schema.field_names]
        kv = pa.Table.from_arrays(arrays, schema=kv_arrow_schema(self.schema))
        return self._write_rolling(kv)

    def _write_rolling(self, kv: pa.Table) -> list[DataFileMeta]:
        """Roll to a new file once one reaches target-file-size. The size is checked between row
        groups, whose length comes from the bytes per row measured so far (at least _MIN_CHUNK)."""
        metas, start, n = [], 0, kv.num_rows
        while start < n:
            name = f"{self._prefix}{self._count}.parquet"
            self._count += 1
            path = f"{self.bucket_dir}/{name}"
            self.io.mkdirs(self.bucket_dir)
            end, size = start, 0
            with self.io.output(path) as sink, pq.ParquetWriter(
                    sink, kv.schema, compression=self._compression, compression_level=self._level_opt,
                    store_decimal_as_integer=True, use_dictionary=self._dictionary) as w:
                while end < n and size < self._target_size:
                    if end == start:  # guess from the in-memory size; compressed is smaller
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
            metas.append(self._meta(name, size, kv.slice(start, end - start)))
            start = end
        return metas

    def _meta(self, name: str, size: int, kv: pa.Table) -> DataFileMeta:
        keys = self.schema.trimmed_primary_keys
        key_cols = [key_column(k) for k in keys]
        seq = pc.min_max(kv.column(SEQUENCE_NUMBER))
        kinds = kv.column(VALUE_KIND)
        deletes = pc.sum(pc.or_(pc.equal(kinds, DELETE), pc.equal(kinds, UPDATE_BEFORE))).as_py() or 0
        key_arrays = [kv.column(c) for c in key_cols]
        now = dt.datetime.now(dt.timezone.utc)
        key_types = self.schema.key_types
        value_stats_cols, value_stats = self._stats.value_stats([kv.column(n) for n in self.schema.field_names])
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=kv.num_rows,
            min_key=binary_row.serialize(binary_row.row_of(key_arrays, 0), key_types),
            max_key=binary_row.serialize(binary_row.row_of(key_arrays, kv.num_rows - 1), key_types),
            key_stats=self._stats.key_stats(key_arrays),
            value_stats=value_stats,
            min_sequence_number=seq["min"].as_py(),
            max_sequence_number=seq["max"].as_py(),
            schema_id=self.schema.id,
            level=self.level,
            creation_time=now.replace(microsecond=now.microsecond // 1000 * 1000),
            delete_row_count=deletes,
            file_source=self.file_source,
            value_stats_cols=value_stats_cols,
        )


def read_kv_file(io: FileIO, path: str, columns: Sequence[str] | None = None) -> pa.Table:
    """Read (a projection of) one KeyValue file."""
    # ParquetFile, not read_table: the latter would take `dt=...` directories as hive partitions.
    try:
        with pq.ParquetFile(io.open_input(path), pre_buffer=True) as f:
            return f.read(columns=list(columns) if columns is not None else None, use_threads=True)
    except FileNotFoundError:
        raise CorruptTableError(f"data file {path} is missing") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptTableError(f"data file {path} is unreadable: {e}") from None


def int_array(values, arrow_type: pa.DataType) -> pa.Array:
    """One contiguous array of `values` (a list, numpy array or Arrow array, chunked or not).
    pa.array() of a ChunkedArray walks its values one by one in Python (38 ms for 125K rows, with
    the GIL held: the writer threads of an upsert queued behind each other on it)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if isinstance(values, pa.Array):
        return values.cast(arrow_type)
    return pa.array(values, arrow_type)
