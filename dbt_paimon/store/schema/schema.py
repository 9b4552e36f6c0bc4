"""TableSchema (schema/schema-N JSON) and SchemaManager: create, load, evolve."""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import pyarrow as pa

from . import foreign_options
from ..common import options as opts
from ..common.branch import MAIN, branch_root, is_main, normalize
from .option_validation import check_file_index, check_partition_expiration, validate as validate_options
from ..common.errors import CorruptTableError, SchemaError, TableNotFoundError
from ..common.fileio import FileIO
from .merge_options import check_merge_options
from ..common.types import DataType, RowField, from_arrow, type_from_json, with_field_ids

SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
SYSTEM_FIELDS = ("_SEQUENCE_NUMBER", "_VALUE_KIND", "_LEVEL", "rowkind")
KEY_PREFIX = "_KEY_"


@dataclass(frozen=True)
class DataField:
    id: int
    name: str
    type: DataType
    description: str | None = None

    def to_json(self) -> dict:
        """As a ROW's field is written: the same DataField in Paimon."""
        return RowField(self.id, self.name, self.type, self.description).to_json()


@dataclass(frozen=True)
class TableSchema:
    id: int
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...]
    primary_keys: tuple[str, ...]
    options: Mapping[str, str]
    comment: str | None = None
    time_millis: int = field(default_factory=lambda: int(time.time() * 1000))
    version: int = 3
    # The branch this schema was read from: not stored (Paimon injects it into the options it reads),
    # it tells every manager built from the schema where the branch's snapshots, tags and schemas are.
    branch: str = field(default=MAIN, compare=False)

    # ---- derived views -------------------------------------------------------------------------
    @property
    def field_names(self) -> list[str]:
        return [f.name for f in self.fields]

    def field(self, name: str) -> DataField:
        for f in self.fields:
            if f.name == name:
                return f
        raise SchemaError(f"column {name!r} is not in the table (columns: {', '.join(self.field_names)})")

    @property
    def trimmed_primary_keys(self) -> list[str]:
        """Primary key minus partition fields: what `_KEY_*` columns and min/max keys hold."""
        trimmed = [k for k in self.primary_keys if k not in self.partition_keys]
        return trimmed or list(self.primary_keys)

    @property
    def key_types(self) -> list[DataType]:
        return [self.field(k).type for k in self.trimmed_primary_keys]

    @property
    def partition_types(self) -> list[DataType]:
        return [self.field(k).type for k in self.partition_keys]

    @property
    def value_types(self) -> list[DataType]:
        return [f.type for f in self.fields]

    @property
    def core(self) -> opts.CoreOptions:
        return opts.CoreOptions(self.options)

    @property
    def cross_partition_update(self) -> bool:
        """Paimon's rule: a primary key that lacks some partition field lets a key move partitions."""
        return bool(self.primary_keys) and bool(self.partition_keys) and not set(self.partition_keys) <= set(
            self.primary_keys
        )

    @property
    def is_append(self) -> bool:
        """Paimon's append table: no primary key, every row kept (append.py)."""
        return not self.primary_keys

    @property
    def bucket_mode(self) -> opts.BucketMode:
        b = self.core.bucket
        if b > 0:
            return opts.BucketMode.HASH_FIXED
        if b == opts.POSTPONE_BUCKET and not self.is_append:
            return opts.BucketMode.POSTPONE_MODE
        if self.is_append:
            return opts.BucketMode.BUCKET_UNAWARE
        return opts.BucketMode.KEY_DYNAMIC if self.cross_partition_update else opts.BucketMode.HASH_DYNAMIC

    @property
    def bucket_keys(self) -> list[str]:
        return self.core.bucket_key or self.trimmed_primary_keys

    def arrow_schema(self, nullable: bool = True) -> pa.Schema:
        return pa.schema([pa.field(f.name, f.type.to_arrow(), nullable or f.type.nullable) for f in self.fields])

    def to_json(self) -> str:
        out = {
            "version": self.version,
            "id": self.id,
            "fields": [f.to_json() for f in self.fields],
            "highestFieldId": self.highest_field_id,
            "partitionKeys": list(self.partition_keys),
            "primaryKeys": list(self.primary_keys),
            "options": dict(self.options),
            "comment": self.comment,
            "timeMillis": self.time_millis,
        }
        if self.comment is None:  # as Paimon writes it: a JSON null is read back as the text 'null'
            del out["comment"]
        return json.dumps(out, indent=2)

    @staticmethod
    def from_json(text: str, where: str = "schema") -> "TableSchema":
        try:
            d = json.loads(text)
        except ValueError as e:
            raise CorruptTableError(f"{where} is not valid JSON: {e}") from None
        version = d.get("version", 1)
        if version not in SUPPORTED_SCHEMA_VERSIONS:
            raise CorruptTableError(f"{where} has schema version {version}; dbt-paimon reads versions "
                                    f"{', '.join(map(str, SUPPORTED_SCHEMA_VERSIONS))}")
        try:
            fields = []
            for f in d["fields"]:
                try:
                    dtype = type_from_json(f["type"])
                except SchemaError as e:
                    raise SchemaError(f"column {f['name']!r}: {e}") from None
                fields.append(DataField(int(f["id"]), f["name"], dtype, f.get("description")))
            return TableSchema(
                id=int(d["id"]),
                fields=tuple(fields),
                highest_field_id=int(d["highestFieldId"]),
                partition_keys=tuple(d.get("partitionKeys") or ()),
                primary_keys=tuple(d.get("primaryKeys") or ()),
                options=dict(d.get("options") or {}),
                comment=d.get("comment"),
                time_millis=int(d.get("timeMillis") or 0),
                version=version,
            )
        except KeyError as e:
            raise CorruptTableError(f"{where} lacks the field {e}") from None


def build_schema(
    arrow_schema: pa.Schema,
    primary_keys: Sequence[str],
    partition_keys: Sequence[str] = (),
    options: Mapping[str, object] | None = None,
    comment: str | None = None,
) -> TableSchema:
    """A validated schema-0, as Paimon's SchemaValidation would accept it: a primary-key table, or
    without primary_keys an append table (append.py)."""
    names = list(arrow_schema.names)
    primary_keys, partition_keys = list(primary_keys), list(partition_keys)
    _check_names(names)
    for kind, keys in (("primary key", primary_keys), ("partition key", partition_keys)):
        if len(set(keys)) != len(keys):
            raise SchemaError(f"{kind} {keys} repeats a column")
        missing = [k for k in keys if k not in names]
        if missing:
            raise SchemaError(f"{kind} column(s) {missing} are not columns of the table (columns: {', '.join(names)})")
    if partition_keys and set(primary_keys) == set(partition_keys):
        raise SchemaError(f"primary key {primary_keys} must not equal the partition keys: every partition would "
                          "hold a single row")
    checked = validate_options(options or {}, names)
    if not primary_keys:
        check_append_options(checked)
    _check_bucket_options(checked, primary_keys, partition_keys)
    for key in ("sequence.field", "rowkind.field"):
        unknown = [c.strip() for c in checked.get(key, "").split(",") if c.strip() and c.strip() not in names]
        if unknown:
            raise SchemaError(f"option {key!r} names column(s) {unknown}, which the table does not have")
    if "sequence.field" in checked:
        _check_sequence_fields(checked)
    if "rowkind.field" in checked:
        checked_core = opts.CoreOptions(checked)
        engine = checked_core.merge_engine
        remove = checked_core.partial_update_remove_record_on_delete
        if engine in (opts.MergeEngine.AGGREGATION, opts.MergeEngine.FIRST_ROW) or (
                engine == opts.MergeEngine.PARTIAL_UPDATE and not remove):
            raise SchemaError(f"option 'rowkind.field' lets rows delete keys, which a {engine} table cannot take"
                              + (" without 'partial-update.remove-record-on-delete'"
                                 if engine == opts.MergeEngine.PARTIAL_UPDATE else ""))
        if checked["rowkind.field"] in primary_keys:
            raise SchemaError("option 'rowkind.field' must not name a primary key column")
    fields, highest = [], -1
    for f in arrow_schema:
        t = from_arrow(f.type, True, f.name)
        # As in Java Paimon, only primary-key fields become NOT NULL: a partition field outside the
        # key (a cross-partition table) may be null, stored under partition.default-name.
        if f.name in primary_keys or not f.nullable:
            t = t.not_null()
        if f.name in partition_keys and t.root == "BYTES":
            raise SchemaError(f"partition column {f.name!r} is BYTES, which cannot name a partition directory")
        highest += 1  # as Paimon's Schema.Builder: the column's id, then its ROW fields' ids
        column_id = highest
        t, highest = with_field_ids(t, highest)
        fields.append(DataField(column_id, f.name, t))
    check_nested(fields, primary_keys, partition_keys, checked)
    check_file_index(checked, {f.name: f.type for f in fields})
    check_partition_expiration(checked, partition_keys)
    schema = TableSchema(
        id=0,
        fields=tuple(fields),
        highest_field_id=highest,
        partition_keys=tuple(partition_keys),
        primary_keys=tuple(primary_keys),
        options=checked,
        comment=comment,
    )
    check_merge_options(schema)  # e.g. `sum` on a STRING column fails now, not at the first read
    return schema



def resolve_columns(what: str, wanted: Sequence[str], columns: Sequence[str]) -> list[str]:
    """Column names as the columns spell them. Names match case-insensitively, as Spark and Paimon's
    catalogs match them: the one rule the engine and the dbt adapter share, so a model that only
    changes a column's casing is the same model. Duplicates are dropped, order kept."""
    lower = {c.lower(): c for c in columns}
    out: list[str] = []
    for w in wanted:
        c = lower.get(str(w).lower())
        if c is None:
            named = what if what.endswith("column") else f"{what} column"  # "column", "not_null column"
            raise SchemaError(f"{named} {w!r} is not a column (columns: {', '.join(columns)})")
        if c not in out:
            out.append(c)
    return out


def check_nested(fields: Sequence[DataField], primary_keys: Sequence[str], partition_keys: Sequence[str],
                 options: Mapping[str, str]) -> None:
    """Nested columns (ARRAY, MAP, ROW) hold values only: no key, partition or bucket-key field is
    one (Paimon's SchemaValidation), nor a sequence, sequence-group or rowkind field (nothing orders
    or compares nested values here); a ROW's field names are unique."""
    def named(option: str) -> list[str]:
        return [c.strip() for c in options.get(option, "").split(",") if c.strip()]
    grouping = [c for k in options if k.startswith("fields.") and k.endswith(".sequence-group")
                for c in k[len("fields."):-len(".sequence-group")].split(",")]
    keyed = {"primary key": primary_keys, "partition": partition_keys, "bucket-key": named("bucket-key"),
             "sequence": named("sequence.field") + grouping, "rowkind": named("rowkind.field")}
    for f in fields:
        for what, names in keyed.items():
            if f.name in names and f.type.is_nested:
                raise SchemaError(f"column {f.name!r} is {f.type.sql()}: a {what} field cannot be of a nested type "
                                  "(ARRAY, MAP and ROW columns hold values only)")
        _check_row_names(f.name, f.type)


def _check_row_names(column: str, t: DataType) -> None:
    for child in (t.element, t.key, t.value):
        if child is not None:
            _check_row_names(column, child)
    names = [f.name for f in t.fields]
    if len({n.lower() for n in names}) != len(names):
        raise SchemaError(f"column {column!r}: the fields of {t.sql()} must have unique names (case-insensitively)")
    for f in t.fields:
        _check_row_names(column, f.type)


def _check_names(names: list[str]) -> None:
    if len(set(n.lower() for n in names)) != len(names):
        raise SchemaError(f"column names must be unique (case-insensitively): {names}")
    for n in names:
        if n in SYSTEM_FIELDS or n.startswith(KEY_PREFIX):
            raise SchemaError(f"column name {n!r} is reserved by Paimon")


# Options that only mean something to a primary-key table: refused on an append table rather than
# stored and ignored (Paimon itself refuses changelog-producer there).
KEYED_OPTIONS = ("merge-engine", "sequence.field", "sequence.field.sort-order", "rowkind.field", "changelog-producer",
                 "ignore-delete", "partial-update.remove-record-on-delete", "first-row.ignore-delete")


def check_append_options(o: Mapping[str, str]) -> None:
    """An append table's options, at create and at every ALTER (Paimon: "Can not set changelog-producer
    on table without primary keys")."""
    keyed = [k for k in o if k in KEYED_OPTIONS or (k.startswith("fields.") and (
        k.endswith(".aggregate-function") or k.endswith(".sequence-group") or k.endswith(".ignore-retract")))]
    keyed = [k for k in keyed if not (k == "merge-engine" and o[k] == opts.MergeEngine.DEDUPLICATE.value)
             and not (k == "changelog-producer" and o[k].lower() == "none")]
    if keyed:
        raise SchemaError(f"option(s) {keyed} need a primary key; a table without unique_key is a Paimon append "
                          "table, which keeps every row it is given")
    if opts.CoreOptions(o).deletion_vectors:
        raise SchemaError("option 'deletion-vectors.enabled' on an append table (no unique_key): dbt-paimon keeps "
                          "deletion vectors on primary-key tables only")
    if opts.CoreOptions(o).bucket > 0 and "bucket-key" not in o:
        raise SchemaError("an append table with a fixed 'bucket' needs 'bucket-key' (the columns whose hash picks "
                          "a row's bucket), as in Paimon")


def _check_sequence_fields(o: Mapping[str, str]) -> None:
    """Paimon's SchemaValidation.validateSequenceField (its messages' facts)."""
    core = opts.CoreOptions(o)
    fields = core.sequence_fields
    if len(fields) != len(o["sequence.field"].split(",")):
        raise SchemaError(f"option 'sequence.field' {o['sequence.field']!r} names an empty column")
    repeated = sorted({f for f in fields if fields.count(f) > 1})
    if repeated:
        raise SchemaError(f"option 'sequence.field' names {repeated} more than once")
    if core.merge_engine == opts.MergeEngine.FIRST_ROW:
        raise SchemaError("option 'sequence.field' cannot be used with merge-engine 'first-row' (Paimon forbids it: "
                          "the first row of a key wins, whatever its sequence)")
    aggregated = [f for f in fields if f"fields.{f}.aggregate-function" in o]
    if aggregated:
        raise SchemaError(f"sequence field(s) {aggregated} must not have an aggregate function "
                          "(Paimon keeps the last value of a sequence field)")


def check_writable(schema: "TableSchema", path: str) -> None:
    """Refuse a write we cannot do right into a table another writer made (creating one is refused
    by build_schema): rows hashed by a bucket function other than Paimon's default, or a
    postpone-bucket table whose primary key lacks partition fields; options it does not follow
    (foreign_options.py)."""
    foreign_options.check_writable(schema.options, path)
    function = (schema.options.get("bucket-function.type") or "default").lower()
    if function != "default" and schema.bucket_mode in (opts.BucketMode.HASH_FIXED, opts.BucketMode.POSTPONE_MODE):
        raise SchemaError(f"table {path}: option 'bucket-function.type' = {function!r}: dbt-paimon puts rows in "
                          "buckets by Paimon's default bucket function only, so Paimon's readers would look for "
                          "them in other buckets")
    if schema.bucket_mode == opts.BucketMode.POSTPONE_MODE and schema.cross_partition_update:
        raise SchemaError(f"table {path}: option 'bucket' = -2 (postpone bucket mode) with a primary key that lacks "
                          "partition fields: Paimon keeps no key index there, so dbt-paimon does not upsert into "
                          "it (a key moving partition would be kept twice)")


def check_index_layout(schema: "TableSchema", path: str) -> None:
    """Refuse a table (made by another writer) whose index files live in its bucket directories
    (`index-file-in-data-file-dir`, immutable in Paimon) when it has any: deletion vectors, or a
    dynamic-bucket HASH index. dbt-paimon looks for them under `index/` and writes them there."""
    if (schema.options.get("index-file-in-data-file-dir") or "false").lower() != "true":
        return
    if schema.core.deletion_vectors or schema.bucket_mode == opts.BucketMode.HASH_DYNAMIC:
        kind = "deletion vector" if schema.core.deletion_vectors else "dynamic-bucket HASH index"
        raise SchemaError(f"table {path}: option 'index-file-in-data-file-dir' = true puts its {kind} files in its "
                          "bucket directories, which dbt-paimon does not read or write (it keeps index files under "
                          "index/, Paimon's default)")


def _check_bucket_options(o: Mapping[str, str], pk: list[str], part: list[str]) -> None:
    bucket = opts.CoreOptions(o).bucket
    if bucket == opts.POSTPONE_BUCKET:
        if not pk:
            raise SchemaError("option 'bucket' = -2 (postpone bucket mode) needs a primary key (Paimon allows it on "
                              "primary-key tables only)")
        if part and not set(part) <= set(pk):
            raise SchemaError("option 'bucket' = -2 (postpone bucket mode) on a table whose primary key lacks "
                              f"partition field(s) {sorted(set(part) - set(pk))}: Paimon keeps no key index there, "
                              "so a key moving partition would be kept twice; use bucket = -1 (cross-partition "
                              "upsert) or put the partition fields in the key")
    elif bucket == 0 or bucket < -1:
        raise SchemaError(f"option 'bucket' must be -1 (dynamic) or a positive number of buckets, got {bucket}")
    bucket_key = [s.strip() for s in o["bucket-key"].split(",")] if "bucket-key" in o else []
    if bucket_key:
        if bucket == -1:
            raise SchemaError("option 'bucket-key' cannot be used with bucket = -1 (dynamic bucket mode)")
        if pk and not set(bucket_key) <= set(pk):
            raise SchemaError(f"bucket-key {bucket_key} must be a subset of the primary key {pk}")
        if set(bucket_key) & set(part):
            raise SchemaError(f"bucket-key {bucket_key} must not contain partition fields {part}")
    for key in ("dynamic-bucket.target-row-num", "commit.max-retries", "num-sorted-run.compaction-trigger"):
        if key in o and int(o[key]) <= 0 and not (key == "commit.max-retries" and int(o[key]) == 0):
            raise SchemaError(f"option {key!r} must be positive, got {o[key]}")
    if "sequence.field" in o and bucket == -1 and not set(part) <= set(pk):
        raise SchemaError("option 'sequence.field' is not allowed on a cross-partition table (Paimon forbids it); "
                          "use the materialization's sequence_by instead")


def latest_schema(io: FileIO, table_path: str, branch: str | None = None) -> TableSchema:
    """The current schema of the table at `table_path` (what opening the table reads), of `branch`
    when given; TableNotFoundError when there is no table (or no such branch) there."""
    if not io.is_object_store and not io.exists(table_path):  # (an object store has no directories)
        raise TableNotFoundError(f"{table_path} does not exist")
    return SchemaManager(io, table_path, branch).latest()


class SchemaManager:
    """Reads and writes `schema/schema-N` of one table's branch (main unless given)."""

    def __init__(self, io: FileIO, table_path: str, branch: str | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.branch = normalize(branch)
        self.dir = f"{branch_root(self.table_path, self.branch)}/schema"

    def schema_path(self, schema_id: int) -> str:
        return f"{self.dir}/schema-{schema_id}"

    def list_ids(self) -> list[int]:
        ids = []
        for name in self.io.list_names(self.dir):
            if name.startswith("schema-") and name[7:].isdigit():
                ids.append(int(name[7:]))
        return sorted(ids)

    def latest(self) -> TableSchema:
        ids = self.list_ids()
        if not ids:
            if not is_main(self.branch) and SchemaManager(self.io, self.table_path).list_ids():
                raise TableNotFoundError(f"branch '{self.branch}' of {self.table_path} does not exist")
            raise TableNotFoundError(f"{self.table_path} is not a Paimon table (no schema/schema-N file)")
        return self.schema(ids[-1])

    def schema(self, schema_id: int) -> TableSchema:
        path = self.schema_path(schema_id)
        try:
            text = self.io.read_text(path)
        except FileNotFoundError:
            raise CorruptTableError(f"schema file {path} is missing") from None
        schema = TableSchema.from_json(text, where=path)
        return schema if is_main(self.branch) else dataclasses.replace(schema, branch=self.branch)

    def create(self, schema: TableSchema) -> TableSchema:
        """Write schema-0; fails if the table exists."""
        if self.list_ids():
            raise SchemaError(f"a Paimon table already exists at {self.table_path}")
        if not self.io.write_exclusive(self.schema_path(schema.id), schema.to_json()):
            raise SchemaError(f"a Paimon table was created concurrently at {self.table_path}")
        return schema

    def commit(self, schema: TableSchema) -> TableSchema:
        """Write schema-N for an evolved schema; fails if another writer took that id."""
        if not self.io.write_exclusive(self.schema_path(schema.id), schema.to_json()):
            raise SchemaError(f"schema-{schema.id} of {self.table_path} was written concurrently; retry")
        return schema
