"""Paimon's dynamic-bucket HASH index: index files, the index manifest, and the per-partition key index.

In HASH_DYNAMIC mode (bucket = -1, primary key holding every partition field) each (partition,
bucket) has one HASH index file `<table>/index/index-<uuid>-<n>`: the bucket's key hashes (Java
`BinaryRow.hashCode()` of the trimmed primary key, `key_hash.key_hashes`) as headerless big-endian
int32s. A writer that adds keys to a bucket rewrites that bucket's file in full; the snapshot's
`indexManifest` (`manifest/index-manifest-<uuid>-<n>`, Avro) lists the live index files, ADD entries
only: a new HASH file replaces the previous one of its (partition, bucket) (Java's BucketedCombiner).
Writers (Java and pypaimon) refuse to append to a partition whose data buckets lack a HASH index.

Entries of other index types (deletion vectors, global indexes) are carried through unchanged.
"""

from __future__ import annotations

import itertools
import uuid
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import fastavro
import numpy as np

from ..common.errors import CorruptTableError
from ..common.fileio import FileIO
from ..manifest.manifest import ADD, DELETE, read_avro, write_avro
from ..snapshot.snapshot import Snapshot

HASH_INDEX = "HASH"
DELETION_VECTORS_INDEX = "DELETION_VECTORS"
INDEX_DIR = "index"
INDEX_PREFIX = "index-"
INDEX_MANIFEST_PREFIX = "index-manifest-"
_FORMAT_IDENTIFIER = 1  # `_VERSION` of IndexManifestEntrySerializer: an on-disk format id, always 1

# The Avro schema Java Paimon writes (AvroSchemaConverter over IndexManifestEntry.MANIFEST_ROW_TYPE):
# nullable Paimon fields are unions with null and default null; nested rows are named
# "<record>_<field>". Readers (Java and pypaimon) match fields by name, so names are cosmetic.
_RECORD = "org.apache.paimon.avro.generated.record"
INDEX_MANIFEST_ENTRY_SCHEMA = fastavro.parse_schema({
    "type": "record",
    "name": _RECORD,
    "fields": [
        {"name": "_VERSION", "type": "int"},
        {"name": "_KIND", "type": "int"},  # TINYINT in Paimon, an Avro int on disk
        {"name": "_PARTITION", "type": "bytes"},
        {"name": "_BUCKET", "type": "int"},
        {"name": "_INDEX_TYPE", "type": "string"},
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_DELETIONS_VECTORS_RANGES", "default": None, "type": ["null", {
            "type": "array",
            "items": ["null", {
                "type": "record",
                "name": f"{_RECORD}__DELETIONS_VECTORS_RANGES",
                "fields": [
                    {"name": "f0", "type": "string"},
                    {"name": "f1", "type": "int"},
                    {"name": "f2", "type": "int"},
                    {"name": "_CARDINALITY", "type": ["null", "long"], "default": None},
                ],
            }],
        }]},
        {"name": "_EXTERNAL_PATH", "type": ["null", "string"], "default": None},
        {"name": "_GLOBAL_INDEX", "default": None, "type": ["null", {
            "type": "record",
            "name": f"{_RECORD}__GLOBAL_INDEX",
            "fields": [
                {"name": "_ROW_RANGE_START", "type": "long"},
                {"name": "_ROW_RANGE_END", "type": "long"},
                {"name": "_INDEX_FIELD_ID", "type": "int"},
                {"name": "_EXTRA_FIELD_IDS", "type": ["null", {"type": "array", "items": "int"}], "default": None},
                {"name": "_INDEX_META", "type": ["null", "bytes"], "default": None},
                {"name": "_SOURCE_META", "type": ["null", "bytes"], "default": None},
            ],
        }]},
    ],
})


@dataclass(frozen=True)
class IndexFileMeta:
    """One index file. `dv_ranges` / `global_index` are the raw Avro values of the other index
    types (deletion vectors, global indexes), kept only so their entries round-trip unchanged."""
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    external_path: str | None = None
    dv_ranges: tuple | None = None
    global_index: tuple | None = None


@dataclass(frozen=True)
class IndexManifestEntry:
    kind: int
    partition: bytes
    bucket: int
    index_type: str
    file_name: str
    file_size: int
    row_count: int
    external_path: str | None = None
    dv_ranges: tuple | None = None
    global_index: tuple | None = None

    @staticmethod
    def of(kind: int, partition: bytes, bucket: int, meta: IndexFileMeta) -> "IndexManifestEntry":
        return IndexManifestEntry(kind, partition, bucket, meta.index_type, meta.file_name, meta.file_size,
                                  meta.row_count, meta.external_path, meta.dv_ranges, meta.global_index)

    @property
    def meta(self) -> IndexFileMeta:
        return IndexFileMeta(self.index_type, self.file_name, self.file_size, self.row_count,
                             self.external_path, self.dv_ranges, self.global_index)

    @property
    def bucket_id(self) -> tuple[bytes, int]:
        return (self.partition, self.bucket)

    def to_avro(self) -> dict:
        return {
            "_VERSION": _FORMAT_IDENTIFIER, "_KIND": self.kind, "_PARTITION": self.partition,
            "_BUCKET": self.bucket, "_INDEX_TYPE": self.index_type, "_FILE_NAME": self.file_name,
            "_FILE_SIZE": self.file_size, "_ROW_COUNT": self.row_count,
            "_DELETIONS_VECTORS_RANGES": None if self.dv_ranges is None else [
                None if r is None else _thawed(r) for r in self.dv_ranges],
            "_EXTERNAL_PATH": self.external_path,
            "_GLOBAL_INDEX": None if self.global_index is None else _thawed(self.global_index),
        }

    @staticmethod
    def from_avro(d: dict, where: str) -> "IndexManifestEntry":
        if d.get("_VERSION") != _FORMAT_IDENTIFIER:
            raise CorruptTableError(f"{where} has index manifest entry version {d.get('_VERSION')}; "
                                    f"dbt-paimon reads version {_FORMAT_IDENTIFIER}")
        dv = d.get("_DELETIONS_VECTORS_RANGES")
        gi = d.get("_GLOBAL_INDEX")
        return IndexManifestEntry(
            kind=d["_KIND"], partition=d["_PARTITION"], bucket=d["_BUCKET"], index_type=d["_INDEX_TYPE"],
            file_name=d["_FILE_NAME"], file_size=d["_FILE_SIZE"], row_count=d["_ROW_COUNT"],
            external_path=d.get("_EXTERNAL_PATH"),
            dv_ranges=None if dv is None else tuple(None if r is None else _frozen(r) for r in dv),
            global_index=None if gi is None else _frozen(gi),
        )


def _frozen(record: dict) -> tuple:
    """A nested Avro record as a hashable tuple of (field, value) (lists become tuples)."""
    return tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in record.items())


def _thawed(record: tuple) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in record}


class HashIndexFile:
    """Writes and reads `<table>/index/index-<uuid>-<n>`: big-endian int32 key hashes, no header."""

    def __init__(self, io: FileIO, table_path: str):
        self.io = io
        self.dir = f"{table_path.rstrip('/')}/{INDEX_DIR}"
        self._uuid = uuid.uuid4()
        self._count = itertools.count()

    def path(self, file: str | IndexFileMeta | IndexManifestEntry) -> str:
        if isinstance(file, str):
            return f"{self.dir}/{file}"
        return file.external_path or f"{self.dir}/{file.file_name}"

    def write(self, hashes: np.ndarray | Sequence[int]) -> IndexFileMeta:
        """Write the full hash set of one bucket (duplicates dropped, stored ascending)."""
        values = np.unique(np.asarray(hashes, dtype=np.int64))
        if values.size and (values[0] < -2**31 or values[-1] >= 2**31):
            raise ValueError("key hashes must be int32 values")
        data = values.astype(">i4").tobytes()
        name = f"{INDEX_PREFIX}{self._uuid}-{next(self._count)}"
        self.io.write_bytes(f"{self.dir}/{name}", data)
        return IndexFileMeta(HASH_INDEX, name, len(data), int(values.size))

    def read(self, file: str | IndexFileMeta | IndexManifestEntry) -> np.ndarray:
        """The hashes of one index file (int32, in file order)."""
        path = self.path(file)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptTableError(f"index file {path} is missing") from None
        if len(data) % 4:
            raise CorruptTableError(f"index file {path} holds {len(data)} bytes, not a whole number of int32 hashes")
        hashes = np.frombuffer(data, dtype=">i4").astype(np.int32)
        if not isinstance(file, str) and file.row_count != hashes.size:
            raise CorruptTableError(f"index file {path} holds {hashes.size} hashes but its manifest entry says "
                                    f"{file.row_count}")
        return hashes

    def delete(self, file: str | IndexFileMeta | IndexManifestEntry) -> None:
        self.io.delete(self.path(file))


class IndexManifestFile:
    """Writes and reads `manifest/index-manifest-<uuid>-<n>` (Avro, codec zstandard)."""

    def __init__(self, io: FileIO, table_path: str):
        self.io = io
        self.dir = f"{table_path.rstrip('/')}/manifest"

    def write(self, entries: Iterable[IndexManifestEntry]) -> str:
        name = f"{INDEX_MANIFEST_PREFIX}{uuid.uuid4()}-0"
        write_avro(self.io, f"{self.dir}/{name}", INDEX_MANIFEST_ENTRY_SCHEMA, (e.to_avro() for e in entries))
        return name

    def read(self, name: str) -> list[IndexManifestEntry]:
        path = f"{self.dir}/{name}"
        return [IndexManifestEntry.from_avro(d, path) for d in read_avro(self.io, path)]

    def combine(self, previous_name: str | None, new_files: Mapping[tuple[bytes, int], IndexFileMeta],
                removed: Iterable[tuple[bytes, int]] = (),
                deletion_vectors: Mapping[tuple[bytes, int], IndexFileMeta | None] | None = None) -> str | None:
        """Write the index manifest of a commit built on a snapshot whose index manifest is
        `previous_name`; unchanged (previous_name returned) when there is nothing to change.
        deletion_vectors: (partition, bucket) -> its new DELETION_VECTORS file (None: it has none)."""
        removed = list(removed)
        if not new_files and not removed and not deletion_vectors:
            return previous_name
        previous = self.read(previous_name) if previous_name else []
        return self.write(apply_changes(previous, new_files, removed, deletion_vectors))


def apply_changes(previous: Sequence[IndexManifestEntry], new_files: Mapping[tuple[bytes, int], IndexFileMeta],
                  removed: Iterable[tuple[bytes, int]] = (),
                  deletion_vectors: Mapping[tuple[bytes, int], IndexFileMeta | None] | None = None
                  ) -> list[IndexManifestEntry]:
    """The new full (ADD-only) list: each (partition, bucket) of `new_files` gets its new HASH file in
    place of the previous one; buckets in `removed` lose theirs; each of `deletion_vectors` gets its
    new DELETION_VECTORS file or none; other index types stay as they are."""
    if deletion_vectors:
        kept = [e for e in previous if not (e.index_type == DELETION_VECTORS_INDEX and e.bucket_id in deletion_vectors)]
        previous = kept + [IndexManifestEntry.of(ADD, p, b, meta) for (p, b), meta in deletion_vectors.items()
                           if meta is not None]
    for e in previous:
        if e.kind != ADD:
            raise CorruptTableError(f"index manifest lists {e.file_name} with kind {e.kind}; only ADD is allowed")
    for key, meta in new_files.items():
        if meta.index_type != HASH_INDEX:
            raise ValueError(f"bucket {key[1]} gets an index file of type {meta.index_type}, not {HASH_INDEX}")
    gone = set(removed)
    out: list[IndexManifestEntry] = []
    placed: set[tuple[bytes, int]] = set()
    for e in previous:
        if e.index_type != HASH_INDEX:
            out.append(e)
        elif e.bucket_id in new_files:
            if e.bucket_id not in placed:  # replace in place, keeping the previous order
                out.append(IndexManifestEntry.of(ADD, e.partition, e.bucket, new_files[e.bucket_id]))
                placed.add(e.bucket_id)
        elif e.bucket_id not in gone:
            out.append(e)
    for (partition, bucket), meta in new_files.items():
        if (partition, bucket) not in placed:
            out.append(IndexManifestEntry.of(ADD, partition, bucket, meta))
    return out


def read_index_entries(io: FileIO, table_path: str, snapshot: Snapshot | None) -> list[IndexManifestEntry]:
    """Every live index entry of a snapshot (empty when it has no index manifest)."""
    if snapshot is None or not snapshot.index_manifest:
        return []
    return IndexManifestFile(io, table_path).read(snapshot.index_manifest)


def read_hash_index(io: FileIO, table_path: str, snapshot: Snapshot | None
                    ) -> dict[tuple[bytes, int], IndexManifestEntry]:
    """The HASH index entry of each (partition, bucket) of a snapshot."""
    out: dict[tuple[bytes, int], IndexManifestEntry] = {}
    for e in read_index_entries(io, table_path, snapshot):
        if e.index_type != HASH_INDEX:
            continue
        if e.kind == DELETE:
            raise CorruptTableError(f"index manifest {snapshot.index_manifest} holds a DELETE entry "
                                    f"({e.file_name}); it must list live files only")
        if e.bucket_id in out:
            raise CorruptTableError(f"index manifest {snapshot.index_manifest} has two HASH indexes for bucket "
                                    f"{e.bucket}: {out[e.bucket_id].file_name} and {e.file_name}")
        out[e.bucket_id] = e
    return out


@dataclass(frozen=True)
class PartitionHashIndex:
    """The key index of one partition: which bucket holds each known key hash (Paimon's
    PartitionIndex as loaded from the HASH files), plus each bucket's hash count in index order."""
    hashes: np.ndarray  # int32, ascending, unique
    buckets: np.ndarray  # int32, the bucket of hashes[i]
    row_counts: dict[int, int]

    @staticmethod
    def empty() -> "PartitionHashIndex":
        return PartitionHashIndex(np.zeros(0, np.int32), np.zeros(0, np.int32), {})

    @staticmethod
    def load(index_file: HashIndexFile, entries: Iterable[IndexManifestEntry]) -> "PartitionHashIndex":
        """From the HASH entries of one partition. A hash listed in two buckets (never written by
        Paimon) maps to the later entry's bucket, as Paimon's loader overwrites it."""
        parts, owners, counts = [], [], {}
        for e in entries:
            h = index_file.read(e)
            parts.append(h)
            owners.append(np.full(h.size, e.bucket, dtype=np.int32))
            counts[e.bucket] = counts.get(e.bucket, 0) + int(h.size)
        if not parts:
            return PartitionHashIndex(np.zeros(0, np.int32), np.zeros(0, np.int32), counts)
        # Reverse so that np.unique's first occurrence is the last one written.
        all_h = np.concatenate(parts)[::-1]
        all_b = np.concatenate(owners)[::-1]
        hashes, first = np.unique(all_h, return_index=True)
        return PartitionHashIndex(hashes.astype(np.int32), all_b[first], counts)

    def lookup(self, query: np.ndarray) -> np.ndarray:
        """Bucket of each queried hash, -1 for a hash the partition does not know."""
        q = np.asarray(query, dtype=np.int32)
        if self.hashes.size == 0:
            return np.full(q.size, -1, dtype=np.int32)
        pos = np.searchsorted(self.hashes, q)
        pos_c = np.minimum(pos, self.hashes.size - 1)
        found = self.hashes[pos_c] == q
        return np.where(found, self.buckets[pos_c], -1).astype(np.int32)

    def bucket_hashes(self, bucket: int) -> np.ndarray:
        return self.hashes[self.buckets == bucket]


def load_partition_indexes(io: FileIO, table_path: str, snapshot: Snapshot | None,
                           partitions: Iterable[bytes] | None = None) -> dict[bytes, PartitionHashIndex]:
    """PartitionHashIndex of each partition with HASH entries (or only of `partitions`)."""
    wanted = None if partitions is None else set(partitions)
    by_partition: dict[bytes, list[IndexManifestEntry]] = {}
    for (part, _), e in read_hash_index(io, table_path, snapshot).items():
        if wanted is None or part in wanted:
            by_partition.setdefault(part, []).append(e)
    files = HashIndexFile(io, table_path)
    return {part: PartitionHashIndex.load(files, entries) for part, entries in by_partition.items()}

