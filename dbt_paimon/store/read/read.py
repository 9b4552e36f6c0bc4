"""TableRead: the table's current rows (Arrow) from splits: merged on read for a primary-key table,
file after file for an append table (append.py)."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

import numpy as np
import pyarrow as pa

from ..index import file_index
from ..merge import merge
from ..format.datafile import SEQUENCE_NUMBER, VALUE_KIND, key_column, read_kv_file
from ..index.deletion_vectors import live_mask, read_vectors
from ..common.errors import PaimonError
from ..common.fileio import FileIO
from ..index.file_index import Condition
from ..schema.merge_options import sequence_groups
from ..common.paths import data_file_path
from .scan import DataSplit
from ..schema.schema import SchemaManager, TableSchema
from ..common.types import cast_to

POSITION = "_POSITION"  # a row's position in its data file (read_file_kv)


def raw_convertible(split: DataSplit) -> bool:
    """Whether a primary-key split's rows are its file's rows as they are: one file (its keys are
    unique) holding no -D/-U rows, as Paimon's MergeTreeSplitGenerator has a one-file section (an
    unknown delete count, from an old writer, may hide deletes)."""
    return len(split.files) == 1 and not split.files[0].has_deletes


class TableRead:
    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, projection: Sequence[str] | None = None,
                 conditions: Sequence[Condition] = ()):
        """conditions: what the rows read must meet (the caller still filters by them): files their
        indexes rule out are skipped where files are read unmerged (file_index.py)."""
        self.io = io
        core = schema.core
        unmerged = schema.is_append or (core.deletion_vectors and not core.deletion_vectors_merge_on_read)
        self.conditions = tuple(conditions) if unmerged and \
            core.get("file-index.read.enabled").lower() == "true" else ()
        self.table_path = table_path
        self.schema = schema
        self.schemas = SchemaManager(io, table_path, schema.branch)
        self._file_schemas: dict[int, TableSchema] = {schema.id: schema}
        self.projection = list(projection) if projection is not None else schema.field_names
        for name in self.projection:
            schema.field(name)  # a clear error for an unknown column
        self.key_cols = [key_column(k) for k in schema.trimmed_primary_keys]
        self.key_types = [schema.field(k).type.to_arrow() for k in schema.trimmed_primary_keys]
        self.output_schema = pa.schema(
            [pa.field(n, schema.field(n).type.to_arrow(), True) for n in self.projection])
        # the columns read: the projection, and the sequence fields that order a key's versions
        ordering = [] if schema.is_append else list(schema.core.sequence_fields) + [
            f for g in sequence_groups(schema) for f in g.sequence]
        extra = list(dict.fromkeys(f for f in ordering if f not in self.projection))
        self.columns = self.projection + extra
        self.merge_function = None if schema.is_append else merge.merge_function(schema, self.columns)

    def _file_schema(self, schema_id: int) -> TableSchema:
        if schema_id not in self._file_schemas:
            self._file_schemas[schema_id] = self.schemas.schema(schema_id)
        return self._file_schemas[schema_id]

    def _file_field_name(self, file_schema: TableSchema, name: str) -> str:
        fid = self.schema.field(name).id
        return next(f.name for f in file_schema.fields if f.id == fid)

    def _projected(self, file, names: Sequence[str] | None = None) -> list[str | None]:
        """The file's name of each of `names` (default: the columns read), matched by field id
        (None: added since)."""
        by_id = {f.id: f for f in self._file_schema(file.schema_id).fields}
        names = self.columns if names is None else names
        olds = [by_id.get(self.schema.field(name).id) for name in names]
        for name, old in zip(names, olds):
            # a ROW's fields would be matched by name here, where Paimon matches them by id
            if old is not None and old.type.is_nested and old.type != self.schema.field(name).type:
                raise PaimonError(f"column {name!r} of {self.table_path} was {old.type.sql()} "
                                  f"in schema {file.schema_id} and "
                                  f"is {self.schema.field(name).type.sql()} now: another writer changed the fields "
                                  "of a nested column, which dbt-paimon does not read")
        return [old.name if old is not None else None for old in olds]

    def _as_current(self, raw: pa.Table, wanted: Sequence[str | None], names: Sequence[str] | None = None) -> list:
        arrays = []
        for name, old in zip(self.columns if names is None else names, wanted):
            target = self.schema.field(name).type.to_arrow()
            if old is None:
                arrays.append(pa.nulls(raw.num_rows, target))
            else:
                arrays.append(cast_to(raw.column(old), target))
        return arrays

    def read_files(self, split: DataSplit, files) -> pa.Table:
        """An append table's rows of `files` of one split, file after file, in the current schema."""
        parts = []
        for file in files:
            wanted = self._projected(file)
            raw = read_kv_file(self.io, data_file_path(split.bucket_path, file), [w for w in wanted if w is not None])
            parts.append(pa.Table.from_arrays(self._as_current(raw, wanted), schema=self.output_schema))
        return pa.concat_tables(parts) if parts else self.output_schema.empty_table()

    def read_raw(self, split: DataSplit, file) -> pa.Table:
        """The projected rows of a file that needs no merge (raw_convertible): its value columns only,
        without the rows its deletion vector deletes."""
        wanted = self._projected(file, self.projection)
        raw = read_kv_file(self.io, data_file_path(split.bucket_path, file), [w for w in wanted if w is not None])
        return self._live(split, file, pa.Table.from_arrays(self._as_current(raw, wanted, self.projection),
                                                           schema=self.output_schema))

    def _live(self, split: DataSplit, file, table: pa.Table, vectors: dict | None = None) -> pa.Table:
        """A file's rows without those its deletion vector deletes (`vectors`: the split's, if read)."""
        if split.deletion_index is None:
            return table
        if vectors is None:
            vectors = read_vectors(self.io, self.table_path, split.deletion_index, {file.file_name})
        mask = live_mask(table.num_rows, vectors.get(file.file_name))
        return table if mask is None else table.filter(mask)

    def _read_file(self, split: DataSplit, file) -> pa.Table:
        """Read one file projected to the current schema: columns matched by field id, so renamed,
        added (null-filled) and widened columns read as the current schema says."""
        fs = self._file_schema(file.schema_id)
        wanted = self._projected(file)
        values = [w for w in wanted if w is not None]
        path = data_file_path(split.bucket_path, file)
        system = {SEQUENCE_NUMBER: pa.int64(), VALUE_KIND: pa.int8()}
        try:
            raw = read_kv_file(self.io, path, self.key_cols + [SEQUENCE_NUMBER, VALUE_KIND] + values,
                               {**dict(zip(self.key_cols, self.key_types)), **system})
            arrays = [raw.column(c) for c in self.key_cols + [SEQUENCE_NUMBER, VALUE_KIND]]
        except KeyError:
            # Paimon's data-file.thin-mode (pypaimon-rust writes it): no _KEY_* copies, the key
            # fields are read from their value columns.
            key_fields = [self._file_field_name(fs, k) for k in self.schema.trimmed_primary_keys]
            raw = read_kv_file(self.io, path, list(dict.fromkeys(key_fields + [SEQUENCE_NUMBER, VALUE_KIND] + values)),
                               {**dict(zip(key_fields, self.key_types)), **system})
            arrays = [raw.column(c) for c in key_fields + [SEQUENCE_NUMBER, VALUE_KIND]]
        arrays += self._as_current(raw, wanted)
        names = self.key_cols + [SEQUENCE_NUMBER, VALUE_KIND] + self.columns
        return pa.Table.from_arrays(arrays, names=names)

    def read_file_kv(self, split: DataSplit, file, vectors: dict | None = None, positions: bool = False) -> pa.Table:
        """One file's KeyValue rows (in file order) without the rows its deletion vector deletes;
        `vectors`: the split's, when already read (deletion_vectors.read_vectors); `positions`: with
        each row's position in the file (POSITION)."""
        table = self._read_file(split, file)
        if positions:
            table = table.append_column(POSITION, pa.array(np.arange(table.num_rows, dtype=np.int64)))
        return self._live(split, file, table, vectors)

    def read_split_kv(self, split: DataSplit, drop_deletes: bool = True, extra: pa.Table | None = None) -> pa.Table:
        """The merged KeyValue rows of one split (system columns kept), sorted by key; each file read
        through its deletion vector.

        drop_deletes=False keeps merged -D/-U rows (for a compaction that keeps deletes). extra:
        KeyValue rows merged with the files' (in read_file_kv's layout; a key may repeat in them)."""
        if self.merge_function is None:
            raise PaimonError("an append table has no KeyValue rows: read it with read_split")
        vectors = None
        if split.deletion_index is not None:
            vectors = read_vectors(self.io, self.table_path, split.deletion_index, {f.file_name for f in split.files})
        tables = [self.read_file_kv(split, f, vectors) for f in split.files] + ([extra] if extra is not None else [])
        single = len(tables) == 1 and extra is None
        return self.merge_function.merge(tables, overlapping=not single, drop_deletes=drop_deletes)

    def may_match(self, split: DataSplit, file) -> bool:
        """Whether the file may hold rows meeting the conditions, as its index says."""
        if not self.conditions or file.schema_id != self.schema.id:  # a renamed column: no conclusion
            return True
        data = file.embedded_index
        if data is None:
            names = [x for x in file.extra_files if x.endswith(file_index.INDEX_SUFFIX)]
            if len(names) != 1:
                return True
            data = self.io.read_bytes(f"{data_file_path(split.bucket_path, file).rsplit('/', 1)[0]}/{names[0]}")
        container = file_index.read_container(data)
        return container is None or file_index.may_match(container, self.conditions, self.schema)

    def read_split(self, split: DataSplit) -> pa.Table:
        if self.conditions:  # a key table's level-0 file may hold a key's newest version: always read
            split = dataclasses.replace(split, files=[f for f in split.files if (
                not self.schema.is_append and f.level == 0) or self.may_match(split, f)])
            if not split.files:
                return self.output_schema.empty_table()
        if self.merge_function is None:
            return self.read_files(split, split.files)
        if raw_convertible(split):
            return self.read_raw(split, split.files[0])
        kv = self.read_split_kv(split)
        return pa.Table.from_arrays([kv.column(n) for n in self.projection], schema=self.output_schema)

    def read(self, splits: Sequence[DataSplit], threads: int = 4) -> pa.Table:
        if not splits:
            return self.output_schema.empty_table()
        if len(splits) == 1 or threads <= 1:
            parts = [self.read_split(s) for s in splits]
        else:
            with ThreadPoolExecutor(max_workers=threads) as pool:
                parts = list(pool.map(self.read_split, splits))
        return pa.concat_tables(parts)
