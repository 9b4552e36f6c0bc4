"""Deletion vectors (`deletion-vectors.enabled`): per data file, the positions of its rows that are
deleted, so that a primary-key table reads without merging.

Each (partition, bucket) has at most one DV index file `<table>/index/index-<uuid>-<n>` (the HASH
index's naming), listed in the snapshot's index manifest with type DELETION_VECTORS and, per data file
that has a vector, (file name, offset, length, cardinality): Java's DeletionVectorsIndexFile.

    byte 0              version 1
    per data file:      int32 BE  length of magic + bitmap
                        magic     v1: int32 BE 1581511376, a portable 32-bit Roaring bitmap follows
                                  v2 (deletion-vectors.bitmap64): int32 LE 1681511377, a 64-bit one
                        bitmap    (Roaring's portable format, run-optimized as Java writes it)
                        int32 BE  CRC32 of magic + bitmap

An entry's offset is that of its length field (the first one is 1). Its recorded length is magic +
bitmap for v1 but includes the length and CRC fields (+ 8) for v2, as Java's two classes return them.
Positions are 0-based row ordinals in the physical file.

How the table stays readable without a merge (Paimon's "merge on write"): batch readers leave level-0
files out (scan.batch_scan_skip_level0) and drop each file's deleted rows, so at most one live row per
key may sit in levels 1 and up. A compaction keeps that true (dv_compact.py): every key it writes
deletes the live row of that key in the levels above its output, and a file it rewrites loses its
vector. An index file is immutable; a commit that changes a bucket's vectors adds a new one, which
replaces the old in the index manifest (Java's BucketedCombiner).
"""

from __future__ import annotations

import itertools
import struct
import uuid
import zlib
from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

from ..common.errors import CorruptTableError
from ..common.fileio import FileIO
from .index import DELETION_VECTORS_INDEX, INDEX_DIR, INDEX_PREFIX, IndexFileMeta, read_index_entries
from ..snapshot.snapshot import Snapshot

VERSION = 1
MAGIC_V1 = 1581511376  # BitmapDeletionVector, read and written big-endian
MAGIC_V2 = 1681511377  # Bitmap64DeletionVector, little-endian
_V1, _V2 = struct.pack(">i", MAGIC_V1), struct.pack("<i", MAGIC_V2)


@dataclass(frozen=True)
class DeletionRange:
    """Where one data file's vector sits in its bucket's index file."""
    offset: int
    length: int
    cardinality: int | None


def bucket_indexes(io: FileIO, table_path: str, snapshot: Snapshot | None) -> dict[tuple[bytes, int], IndexFileMeta]:
    """(partition, bucket) -> its DELETION_VECTORS index file, in a snapshot."""
    out = {}
    for e in read_index_entries(io, table_path, snapshot):
        if e.index_type == DELETION_VECTORS_INDEX:
            if e.bucket_id in out:
                raise CorruptTableError(f"index manifest {snapshot.index_manifest} has two deletion vector indexes "
                                        f"for bucket {e.bucket}: {out[e.bucket_id].file_name} and {e.file_name}")
            out[e.bucket_id] = e.meta
    return out


def ranges(meta: IndexFileMeta) -> dict[str, DeletionRange]:
    """Data file name -> its vector's range, from a DELETION_VECTORS index entry."""
    out = {}
    for record in meta.dv_ranges or ():
        if record is None:
            continue
        r = dict(record)
        out[r["f0"]] = DeletionRange(r["f1"], r["f2"], r.get("_CARDINALITY"))
    return out


def index_path(table_path: str, meta: IndexFileMeta) -> str:
    return meta.external_path or f"{table_path.rstrip('/')}/{INDEX_DIR}/{meta.file_name}"


def _parse(data: bytes, at: int, rng: DeletionRange, where: str) -> np.ndarray:
    if at + 8 > len(data):
        raise CorruptTableError(f"deletion vector index {where} ends before the entry at offset {at}")
    (size,), magic = struct.unpack_from(">i", data, at), data[at + 4:at + 8]
    if magic == _V1:
        if size != rng.length:
            raise CorruptTableError(f"deletion vector at {at} of {where} holds {size} bytes, "
                                    f"its entry says {rng.length}")
        bitmap = BitMap.deserialize(data[at + 8:at + 4 + size])
    elif magic == _V2:
        if size != rng.length - 8:
            raise CorruptTableError(f"deletion vector at {at} of {where} holds {size} bytes, its entry says "
                                    f"{rng.length - 8}")
        bitmap = BitMap64.deserialize(data[at + 8:at + 4 + size])
    else:
        raise CorruptTableError(f"deletion vector at {at} of {where} has an invalid magic number {magic.hex()}")
    return np.fromiter(bitmap, dtype=np.int64, count=len(bitmap))


def read_vectors(io: FileIO, table_path: str, meta: IndexFileMeta, names=None) -> dict[str, np.ndarray]:
    """Data file name -> its deleted positions (sorted int64), of the files in `names` (all: None)."""
    where = index_path(table_path, meta)
    wanted = {n: r for n, r in ranges(meta).items() if names is None or n in names}
    if not wanted:
        return {}
    try:
        data = io.read_bytes(where)
    except FileNotFoundError:
        raise CorruptTableError(f"deletion vector index {where} is missing") from None
    if not data or data[0] != VERSION:
        raise CorruptTableError(f"deletion vector index {where} has version {data[:1].hex() or 'none'}; "
                                f"dbt-paimon reads version {VERSION}")
    return {name: _parse(data, r.offset, r, where) for name, r in wanted.items()}


def live_mask(num_rows: int, deleted: np.ndarray | None) -> pa.Array | None:
    """The rows of a file its vector keeps (None: all of them)."""
    if deleted is None or not deleted.size:
        return None
    if deleted[-1] >= num_rows:
        raise CorruptTableError(f"a deletion vector names row {int(deleted[-1])} of a file of {num_rows} rows")
    mask = np.ones(num_rows, dtype=bool)
    mask[deleted] = False
    return pa.array(mask)


class DeletionVectorsIndexFile:
    """Writes one bucket's vectors as one index file (Java's DeletionFileWriter)."""

    def __init__(self, io: FileIO, table_path: str, bitmap64: bool = False):
        self.io, self.table_path, self.bitmap64 = io, table_path.rstrip("/"), bitmap64
        self._uuid, self._count = uuid.uuid4(), itertools.count()

    def write(self, vectors: Mapping[str, np.ndarray]) -> IndexFileMeta:
        """The index file of `vectors` (data file name -> deleted positions; empty ones left out)."""
        out, dv_ranges = bytearray([VERSION]), []
        for name in sorted(vectors):
            positions = np.asarray(vectors[name], dtype=np.int64)
            if not positions.size:
                continue
            if not self.bitmap64 and positions.max() > 2**31 - 1:
                raise ValueError(f"{name} has rows past 2^31 - 1, which a 32-bit deletion vector cannot name "
                                 "(set deletion-vectors.bitmap64)")
            bitmap = (BitMap64 if self.bitmap64 else BitMap)(positions.tolist())
            bitmap.run_optimize()  # as Java's serialization does
            body = (_V2 if self.bitmap64 else _V1) + bitmap.serialize()
            offset = len(out)
            out += struct.pack(">i", len(body)) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
            length = len(body) + 8 if self.bitmap64 else len(body)
            dv_ranges.append((("f0", name), ("f1", offset), ("f2", length), ("_CARDINALITY", int(positions.size))))
        name = f"{INDEX_PREFIX}{self._uuid}-{next(self._count)}"
        self.io.write_bytes(f"{self.table_path}/{INDEX_DIR}/{name}", bytes(out))
        return IndexFileMeta(DELETION_VECTORS_INDEX, name, len(out), len(dv_ranges), dv_ranges=tuple(dv_ranges))

    def delete(self, meta: IndexFileMeta) -> None:
        self.io.delete(index_path(self.table_path, meta))


@dataclass(frozen=True)
class VectorsChange:
    """What a compaction of one bucket did to its vectors, checked at commit against what another
    commit did meanwhile: `previous` is the index file it read (None: the bucket had none), `marked`
    the files whose rows it deleted (they must still be live). With `changed`, `new` replaces
    `previous` (None: the bucket keeps no vectors); else the bucket's vectors stay as they were."""
    partition: bytes
    bucket: int
    previous: str | None
    new: IndexFileMeta | None
    changed: bool = True
    marked: tuple = ()


def changed_vectors(before: Mapping[str, np.ndarray], rewritten, deleted: Mapping[str, np.ndarray]
                    ) -> dict[str, np.ndarray] | None:
    """A bucket's vectors after a compaction: those of the files it did not rewrite, with the rows it
    `deleted` (file name -> positions) added; None when that is what `before` holds."""
    gone = set(rewritten)
    after = {n: v for n, v in before.items() if n not in gone}
    for name, positions in deleted.items():
        if positions.size:
            after[name] = np.union1d(after.get(name, np.zeros(0, np.int64)), positions)
    if after.keys() == before.keys() and all(np.array_equal(after[n], before[n]) for n in after):
        return None
    return after
