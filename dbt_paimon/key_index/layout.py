"""What the index's entries and files look like, derived from the table's schema.

The on-disk format's constants and column names, where the index lives, which tables can have one,
and `Layout`: the entry schema (what the index's code passes around), the run file's schema (what
it stores), hashing and sharding of keys, and the packing of fixed-width keys into 32-bit words.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ..store.common import binary_row
from ..store.common.branch import MAIN
from ..store.common.fileio import FileIO
from ..store.common.key_hash import key_hashes
from ..store.common.options import BucketMode
from ..store.schema.schema import TableSchema

FORMAT = 6  # 2: partition columns dictionary-encoded in runs; 3: runs carry fences; 4: one _loc column;
#             5: fixed-width keys inside _loc; 6: fences on the page boundaries of the hashes
READS_FORMATS = (4, 5, 6)  # each run's file says its layout (key columns, where its fences sit)
BLOCK_ROWS = 1 << 22         # entries per record batch of a run (a lookup searches each in place;
                             # a shard's run is one batch, whose header a cold lookup reads first)
PAGE_BYTES = 4096
FENCE_ROWS = PAGE_BYTES // 4  # a fence on each page of (int32) hashes: a key's window is one page
KEYS_PER_SHARD = 2_000_000   # a shard's runs merged are about this many keys (S = a power of two)

H, P, BUCKET, GEN, LIVE, SEQ = "_h", "_p", "_bucket", "_gen", "_live", "_seq"
LOC = "_loc"  # in a run's file: (partition index, bucket, generation, live) per entry
LATEST = "LATEST"


BRANCH_PREFIX = "branch-"  # a branch's versions: `<index_dir>/branch-<name>/`


def index_dir(table_path: str) -> str:
    """The table's index: every run (main's and its branches'), and main's versions."""
    parent, name = table_path.rstrip("/").rsplit("/", 1)
    return f"{parent}/.{name}.dbt-key-index"


def versions_dir(table_path: str, branch: str = MAIN) -> str:
    """Where the versions (manifests and LATEST) of one branch's index live. A branch's runs stay in
    index_dir beside main's: a branch starts from main's version, naming main's runs, not copying them
    (branch names are checked: no '/', no leading '.')."""
    root = index_dir(table_path)
    return root if branch == MAIN else f"{root}/{BRANCH_PREFIX}{branch}"


def exists(io: FileIO, table_path: str, branch: str = MAIN) -> bool:
    """Whether an upsert on `branch` finds an index: its own, or main's it starts from."""
    return (branch != MAIN and io.exists(f"{versions_dir(table_path, branch)}/{LATEST}")) \
        or io.exists(f"{index_dir(table_path)}/{LATEST}")


def supported(schema: TableSchema) -> bool:
    """Cross-partition tables whose key can be hashed and compared exactly (no float key: NaN and
    -0.0 compare unlike Java's; no DECIMAL above 18 digits: not hashed here)."""
    if schema.bucket_mode != BucketMode.KEY_DYNAMIC:
        return False
    for k in schema.primary_keys:
        t = schema.field(k).type
        if t.root in ("FLOAT", "DOUBLE") or (t.root == "DECIMAL" and t.precision > 18):
            return False
    return True


class Layout:
    """The entries and run files of one table's index (schema: the table's latest)."""

    def __init__(self, schema: TableSchema):
        self.schema = schema
        self.keys = list(schema.primary_keys)
        self.parts = list(schema.partition_keys)
        self.parts_only = [p for p in self.parts if p not in self.keys]  # partition fields outside the key
        self.key_types = [schema.field(k).type for k in self.keys]
        self.part_types = schema.partition_types
        self.entry_schema = pa.schema(
            [pa.field(H, pa.int32())]
            + [pa.field(k, schema.field(k).type.to_arrow()) for k in self.keys]
            + [pa.field(p, schema.field(p).type.to_arrow()) for p in self.parts_only]
            + [pa.field(P, pa.binary()), pa.field(BUCKET, pa.int32()), pa.field(GEN, pa.int32()),
               pa.field(LIVE, pa.bool_())])
        # In a run's file, where an entry lives is one fixed-width column (_loc): the partition as an
        # index into the run's partitions (kept in its metadata, values derived from the binary
        # row), bucket, generation and live. A lookup reads a page per column of each key it finds:
        # two with the key in a column of its own, six with a column each (W3-100M: 27K of a cold
        # lookup's 45K pages). A key of fixed-width columns only (integers, dates, timestamps,
        # decimals) rides in _loc too, as its values' 32-bit words after the four: one page per key
        # found. A run's file says which layout it has (its key columns are there or not).
        self.key_words = _key_words([schema.field(k).type.to_arrow() for k in self.keys])
        inline = self.key_words is not None
        width = 4 + (sum(self.key_words) if inline else 0)
        self.file_schema = pa.schema([pa.field(H, pa.int32())]
                                     + ([] if inline
                                        else [pa.field(k, schema.field(k).type.to_arrow()) for k in self.keys])
                                     + [pa.field(LOC, pa.list_(pa.field("item", pa.int32(), False), width), False)])

    def described(self) -> dict:
        """The key and partition a manifest is for: one of another key or partition is not read."""
        return {"key": [f"{k}:{t.sql()}" for k, t in zip(self.keys, self.key_types)],
                "partition": [f"{p}:{t.sql()}" for p, t in zip(self.parts, self.part_types)]}

    def hashes(self, keys: pa.Table) -> np.ndarray:
        return key_hashes([keys.column(k) for k in self.keys], self.key_types)

    @staticmethod
    def shard_of(hashes: np.ndarray, shards: int) -> np.ndarray:
        return np.bitwise_and(hashes.astype(np.int64), shards - 1)

    def run_order(self) -> list[tuple[str, str]]:
        return [(H, "ascending")] + [(k, "ascending") for k in self.keys]

    def entries(self, live: pa.Table, partition: bytes, bucket: int, gen: int, is_live: bool = True) -> pa.Table:
        """Entries for the keys of `live` (key columns [+ partition fields]) in (partition, bucket)."""
        n = live.num_rows
        constant = np.zeros(n, np.int64)  # one partition, bucket and generation for every row
        values = dict(zip(self.parts, binary_row.deserialize(partition, self.part_types)))
        rows = live.select(self.keys)
        for name in self.parts_only:
            rows = rows.append_column(name, pa.array([values[name]],
                                                     self.schema.field(name).type.to_arrow()).take(constant))
        rows = rows.append_column(P, pa.array([partition], pa.binary()).take(constant))
        rows = rows.append_column(BUCKET, pa.array(np.full(n, bucket, np.int32)))
        rows = rows.append_column(GEN, pa.array(np.full(n, gen, np.int32)))
        return self.entries_of(rows, is_live)

    def entries_of(self, rows: pa.Table, is_live: bool) -> pa.Table:
        """Entries for rows that carry the key columns, the partition fields outside the key, P,
        BUCKET and GEN already (our own commit's placements and retractions)."""
        n = rows.num_rows
        cols = {H: pa.array(self.hashes(rows), pa.int32())}
        for name in self.keys + self.parts_only + [P, BUCKET, GEN]:
            cols[name] = rows.column(name)
        cols[LIVE] = pa.array(np.full(n, is_live, np.bool_))
        return pa.table(cols).cast(self.entry_schema)

    def located(self, entries: pa.Table) -> pa.Table:
        """A lookup's answer from the entries it kept: the key columns, the partition fields, P and
        BUCKET."""
        cols = self.keys + self.parts_only + [P, BUCKET]
        if entries.num_rows == 0:
            return self.entry_schema.empty_table().select(cols)
        return entries.select(cols)


# ---- fixed-width keys as 32-bit words in _loc ---------------------------------------------------------

def _words_of(t: pa.DataType) -> int | None:
    """How many 32-bit words a value of t takes in _loc; None when t is not fixed-width bytes
    (strings, binary, booleans: bit-packed)."""
    if not (pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t)
            or pa.types.is_decimal(t) or pa.types.is_duration(t)):
        return None
    try:
        width = t.bit_width
    except ValueError:
        return None
    return -(-width // 32) if width % 8 == 0 else None


def _key_words(types: Sequence[pa.DataType]) -> list[int] | None:
    """Per key column its words in _loc, when every key column is fixed-width; else None."""
    words = [_words_of(t) for t in types]
    return None if any(w is None for w in words) else words


def as_words(column: pa.Array, words: int) -> np.ndarray:
    """A fixed-width column (no nulls: a primary key) as `words` int32 per value: its bytes,
    zero-padded to whole words."""
    width = column.type.bit_width // 8
    data = np.frombuffer(column.buffers()[1], np.uint8)[column.offset * width:(column.offset + len(column)) * width]
    out = np.zeros((len(column), words * 4), np.uint8)
    out[:, :width] = data.reshape(-1, width)
    return out.view(np.int32)


def from_words(words: np.ndarray, t: pa.DataType) -> pa.Array:
    """The column `as_words` packed, back in its type."""
    width = t.bit_width // 8
    data = np.ascontiguousarray(np.ascontiguousarray(words).view(np.uint8)[:, :width])
    return pa.Array.from_buffers(t, len(words), [None, pa.py_buffer(data)])
