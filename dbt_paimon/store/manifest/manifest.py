"""DataFileMeta, ManifestEntry and ManifestFileMeta, and their Avro files (codec zstandard).

A manifest holds ManifestEntry records (ADD/DELETE of one data file); a manifest list holds
ManifestFileMeta records (one per manifest, with partition stats). The Avro record layouts are
Paimon's (`_VERSION` 2).
"""

from __future__ import annotations

import datetime as dt
import io
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterable, Sequence

import fastavro

from ..common import binary_row
from ..common.errors import CorruptTableError
from ..common.fileio import FileIO
from ..common.types import DataType

ADD, DELETE = 0, 1
FILE_SOURCE_APPEND, FILE_SOURCE_COMPACT = 0, 1


def _stats_schema(name: str) -> dict:
    return {
        "type": "record",
        "name": name,
        "fields": [
            {"name": "_MIN_VALUES", "type": "bytes"},
            {"name": "_MAX_VALUES", "type": "bytes"},
            {"name": "_NULL_COUNTS", "type": ["null", {"type": "array", "items": ["null", "long"]}], "default": None},
        ],
    }


def _opt(name: str, t) -> dict:
    return {"name": name, "type": ["null", t], "default": None}


DATA_FILE_META_SCHEMA = {
    "type": "record",
    "name": "DataFileMeta",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_KEY_STATS", "type": _stats_schema("record_KEY_STATS")},
        {"name": "_VALUE_STATS", "type": _stats_schema("record_VALUE_STATS")},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_EXTRA_FILES", "type": {"type": "array", "items": "string"}},
        _opt("_CREATION_TIME", {"type": "long", "logicalType": "timestamp-millis"}),
        _opt("_DELETE_ROW_COUNT", "long"),
        _opt("_EMBEDDED_FILE_INDEX", "bytes"),
        _opt("_FILE_SOURCE", "int"),
        _opt("_VALUE_STATS_COLS", {"type": "array", "items": "string"}),
        _opt("_EXTERNAL_PATH", "string"),
        _opt("_FIRST_ROW_ID", "long"),
        _opt("_WRITE_COLS", {"type": "array", "items": "string"}),
        _opt("_WRITE_COLS_SEQUENCES", {"type": "array", "items": "long"}),
    ],
}

MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "ManifestEntry",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_TOTAL_BUCKETS", "type": "int"},
        {"name": "_FILE", "type": DATA_FILE_META_SCHEMA},
    ],
})

MANIFEST_FILE_META_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": "ManifestFileMeta",
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_NUM_ADDED_FILES", "type": "long"},
        {"name": "_NUM_DELETED_FILES", "type": "long"},
        {"name": "_PARTITION_STATS", "type": _stats_schema("record_PARTITION_STATS")},
        {"name": "_SCHEMA_ID", "type": "long"},
        _opt("_MIN_BUCKET", "int"),
        _opt("_MAX_BUCKET", "int"),
        _opt("_MIN_LEVEL", "int"),
        _opt("_MAX_LEVEL", "int"),
        _opt("_MIN_ROW_ID", "long"),
        _opt("_MAX_ROW_ID", "long"),
        _opt("_TOTAL_BUCKETS", "int"),
        _opt("_EXTRA_FILES", {"type": "array", "items": "string"}),
    ],
})

@dataclass(frozen=True)
class SimpleStats:
    min_values: bytes
    max_values: bytes
    null_counts: list | None

    @staticmethod
    def empty() -> "SimpleStats":
        return SimpleStats(binary_row.empty_row(), binary_row.empty_row(), [])

    def to_avro(self) -> dict:
        return {"_MIN_VALUES": self.min_values, "_MAX_VALUES": self.max_values, "_NULL_COUNTS": self.null_counts}

    @staticmethod
    def from_avro(d: dict) -> "SimpleStats":
        return SimpleStats(d["_MIN_VALUES"], d["_MAX_VALUES"], d.get("_NULL_COUNTS"))


@dataclass(frozen=True)
class DataFileMeta:
    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    key_stats: SimpleStats
    value_stats: SimpleStats
    min_sequence_number: int
    max_sequence_number: int
    schema_id: int
    level: int = 0
    extra_files: tuple = ()
    creation_time: dt.datetime | None = None
    delete_row_count: int | None = 0
    file_source: int | None = FILE_SOURCE_APPEND
    value_stats_cols: tuple | None = None
    embedded_index: bytes | None = None
    external_path: str | None = None
    first_row_id: int | None = None
    write_cols: tuple | None = None

    @property
    def has_deletes(self) -> bool:
        # An unknown count (written by an old writer) must be taken as "may hold deletes".
        return self.delete_row_count is None or self.delete_row_count > 0

    def to_avro(self) -> dict:
        return {
            "_FILE_NAME": self.file_name,
            "_FILE_SIZE": self.file_size,
            "_ROW_COUNT": self.row_count,
            "_MIN_KEY": self.min_key,
            "_MAX_KEY": self.max_key,
            "_KEY_STATS": self.key_stats.to_avro(),
            "_VALUE_STATS": self.value_stats.to_avro(),
            "_MIN_SEQUENCE_NUMBER": self.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": self.max_sequence_number,
            "_SCHEMA_ID": self.schema_id,
            "_LEVEL": self.level,
            "_EXTRA_FILES": list(self.extra_files),
            "_CREATION_TIME": self.creation_time,
            "_DELETE_ROW_COUNT": self.delete_row_count,
            "_EMBEDDED_FILE_INDEX": self.embedded_index,
            "_FILE_SOURCE": self.file_source,
            "_VALUE_STATS_COLS": None if self.value_stats_cols is None else list(self.value_stats_cols),
            "_EXTERNAL_PATH": self.external_path,
            "_FIRST_ROW_ID": self.first_row_id,
            "_WRITE_COLS": None if self.write_cols is None else list(self.write_cols),
            "_WRITE_COLS_SEQUENCES": None,
        }

    @staticmethod
    def from_avro(d: dict) -> "DataFileMeta":
        return DataFileMeta(
            file_name=d["_FILE_NAME"],
            file_size=d["_FILE_SIZE"],
            row_count=d["_ROW_COUNT"],
            min_key=d["_MIN_KEY"],
            max_key=d["_MAX_KEY"],
            key_stats=SimpleStats.from_avro(d["_KEY_STATS"]),
            value_stats=SimpleStats.from_avro(d["_VALUE_STATS"]),
            min_sequence_number=d["_MIN_SEQUENCE_NUMBER"],
            max_sequence_number=d["_MAX_SEQUENCE_NUMBER"],
            schema_id=d["_SCHEMA_ID"],
            level=d["_LEVEL"],
            extra_files=tuple(d.get("_EXTRA_FILES") or ()),
            creation_time=d.get("_CREATION_TIME"),
            delete_row_count=d.get("_DELETE_ROW_COUNT"),
            file_source=d.get("_FILE_SOURCE"),
            value_stats_cols=None if d.get("_VALUE_STATS_COLS") is None else tuple(d["_VALUE_STATS_COLS"]),
            embedded_index=d.get("_EMBEDDED_FILE_INDEX"),
            external_path=d.get("_EXTERNAL_PATH"),
            first_row_id=d.get("_FIRST_ROW_ID"),
            write_cols=None if d.get("_WRITE_COLS") is None else tuple(d["_WRITE_COLS"]),
        )


@dataclass(frozen=True)
class ManifestEntry:
    kind: int
    partition: bytes
    bucket: int
    total_buckets: int
    file: DataFileMeta
    # A changelog file (changelog-producer): a writer or compaction hands it to the commit with its
    # data files, and the commit lists it in the snapshot's changelog manifests, not its data ones.
    # Consumers of a job's entries that mean its data take data_entries(). The flag itself is not
    # stored in a manifest.
    changelog: bool = False

    @property
    def identifier(self) -> tuple:
        return (self.partition, self.bucket, self.file.level, self.file.file_name)

    def to_avro(self) -> dict:
        return {"_VERSION": 2, "_KIND": self.kind, "_PARTITION": self.partition, "_BUCKET": self.bucket,
                "_TOTAL_BUCKETS": self.total_buckets, "_FILE": self.file.to_avro()}

    @staticmethod
    def from_avro(d: dict) -> "ManifestEntry":
        return ManifestEntry(d["_KIND"], d["_PARTITION"], d["_BUCKET"], d["_TOTAL_BUCKETS"],
                             DataFileMeta.from_avro(d["_FILE"]))


@dataclass(frozen=True)
class ManifestFileMeta:
    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    partition_stats: SimpleStats
    schema_id: int
    min_bucket: int | None = None
    max_bucket: int | None = None
    min_level: int | None = None
    max_level: int | None = None
    total_buckets: int | None = None

    def to_avro(self) -> dict:
        return {"_VERSION": 2, "_FILE_NAME": self.file_name, "_FILE_SIZE": self.file_size,
                "_NUM_ADDED_FILES": self.num_added_files, "_NUM_DELETED_FILES": self.num_deleted_files,
                "_PARTITION_STATS": self.partition_stats.to_avro(), "_SCHEMA_ID": self.schema_id,
                "_MIN_BUCKET": self.min_bucket, "_MAX_BUCKET": self.max_bucket, "_MIN_LEVEL": self.min_level,
                "_MAX_LEVEL": self.max_level, "_MIN_ROW_ID": None, "_MAX_ROW_ID": None,
                "_TOTAL_BUCKETS": self.total_buckets, "_EXTRA_FILES": None}

    @staticmethod
    def from_avro(d: dict) -> "ManifestFileMeta":
        return ManifestFileMeta(d["_FILE_NAME"], d["_FILE_SIZE"], d["_NUM_ADDED_FILES"], d["_NUM_DELETED_FILES"],
                                SimpleStats.from_avro(d["_PARTITION_STATS"]), d["_SCHEMA_ID"],
                                d.get("_MIN_BUCKET"), d.get("_MAX_BUCKET"), d.get("_MIN_LEVEL"),
                                d.get("_MAX_LEVEL"), d.get("_TOTAL_BUCKETS"))


def write_avro(io_: FileIO, path: str, schema, records: Iterable[dict]) -> int:
    buf = io.BytesIO()
    fastavro.writer(buf, schema, records, codec="zstandard")
    data = buf.getvalue()
    io_.write_bytes(path, data)
    return len(data)


def read_avro(io_: FileIO, path: str) -> list[dict]:
    try:
        data = io_.read_bytes(path)
    except FileNotFoundError:
        raise CorruptTableError(f"manifest file {path} is missing") from None
    try:
        return list(fastavro.reader(io.BytesIO(data)))
    except Exception as e:  # noqa: BLE001 - fastavro raises several unrelated types for a damaged file
        raise CorruptTableError(f"manifest file {path} is unreadable: {e}") from None


def partition_stats(partitions: Sequence[bytes], types: Sequence[DataType]) -> SimpleStats:
    """Min/max/null counts over the distinct partitions of one manifest (a handful per commit)."""
    if not types:
        return SimpleStats(binary_row.empty_row(), binary_row.empty_row(), [])
    rows = [binary_row.deserialize(p, types) for p in set(partitions)]
    mins, maxs, nulls = [], [], []
    for i in range(len(types)):
        present = [r[i] for r in rows if r[i] is not None]
        mins.append(min(present) if present else None)
        maxs.append(max(present) if present else None)
        nulls.append(len(rows) - len(present))
    return SimpleStats(binary_row.serialize(mins, types), binary_row.serialize(maxs, types), nulls)


class ManifestFile:
    """Writes and reads `manifest/manifest-<uuid>-<n>` files."""

    def __init__(self, io_: FileIO, table_path: str, partition_types: Sequence[DataType], schema_id: int):
        self.io = io_
        self.dir = f"{table_path}/manifest"
        self.partition_types = list(partition_types)
        self.schema_id = schema_id

    def write(self, entries: Sequence[ManifestEntry]) -> ManifestFileMeta:
        name = f"manifest-{uuid.uuid4()}-0"
        size = write_avro(self.io, f"{self.dir}/{name}", MANIFEST_ENTRY_SCHEMA, (e.to_avro() for e in entries))
        return ManifestFileMeta(
            file_name=name,
            file_size=size,
            num_added_files=sum(1 for e in entries if e.kind == ADD),
            num_deleted_files=sum(1 for e in entries if e.kind == DELETE),
            partition_stats=partition_stats([e.partition for e in entries], self.partition_types),
            schema_id=self.schema_id,
            min_bucket=min((e.bucket for e in entries), default=None),
            max_bucket=max((e.bucket for e in entries), default=None),
            min_level=min((e.file.level for e in entries), default=None),
            max_level=max((e.file.level for e in entries), default=None),
            total_buckets=entries[0].total_buckets if entries else None,
        )

    def read(self, file_name: str, size: int | None = None) -> list[ManifestEntry]:
        """A manifest's entries. With `size` (the manifest list's record of the file), decoded
        entries are kept in this process's manifest cache, as Paimon's readers keep theirs: a
        manifest is never rewritten (its name is unique), and one upsert reads the same manifests
        for its plan, its commit's conflict check, post-commit compaction and expiration."""
        path = f"{self.dir}/{file_name}"
        if size is not None:
            cached = _MANIFEST_CACHE.get((path, size))
            if cached is not None:
                return list(cached)
        entries = [ManifestEntry.from_avro(d) for d in read_avro(self.io, path)]
        if size is not None:
            _MANIFEST_CACHE.put((path, size), tuple(entries))
        return entries


class _ManifestCache:
    """Decoded manifests, least recently used dropped first beyond MAX_ENTRIES entries in all
    (~1 KB each as Python objects)."""

    MAX_ENTRIES = 200_000

    def __init__(self) -> None:
        self._files: OrderedDict[tuple[str, int], tuple[ManifestEntry, ...]] = OrderedDict()
        self._entries = 0
        self._lock = threading.Lock()  # the object-store scan reads manifests in threads

    def get(self, key: tuple[str, int]) -> tuple[ManifestEntry, ...] | None:
        with self._lock:
            found = self._files.get(key)
            if found is not None:
                self._files.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], entries: tuple[ManifestEntry, ...]) -> None:
        if len(entries) > self.MAX_ENTRIES:
            return
        with self._lock:
            if key in self._files:
                return
            self._files[key] = entries
            self._entries += len(entries)
            while self._entries > self.MAX_ENTRIES:
                _, dropped = self._files.popitem(last=False)
                self._entries -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._entries = 0


_MANIFEST_CACHE = _ManifestCache()


class ManifestList:
    """Writes and reads `manifest/manifest-list-<uuid>-<n>` files."""

    def __init__(self, io_: FileIO, table_path: str):
        self.io = io_
        self.dir = f"{table_path}/manifest"

    def write(self, metas: Sequence[ManifestFileMeta], name: str) -> int:
        return write_avro(self.io, f"{self.dir}/{name}", MANIFEST_FILE_META_SCHEMA, (m.to_avro() for m in metas))

    def read(self, name: str) -> list[ManifestFileMeta]:
        return [ManifestFileMeta.from_avro(d) for d in read_avro(self.io, f"{self.dir}/{name}")]


def data_entries(entries: Iterable[ManifestEntry]) -> list[ManifestEntry]:
    """A writer's entries without its changelog files: what its commit does to the table's data."""
    return [e for e in entries if not e.changelog]


def merge_entries(entries: Iterable[ManifestEntry]) -> dict[tuple, ManifestEntry]:
    """Live files after applying ADD/DELETE in order, keyed by file identifier."""
    live: dict[tuple, ManifestEntry] = {}
    for e in entries:
        if e.kind == ADD:
            live[e.identifier] = e
        else:
            live.pop(e.identifier, None)
    return live

