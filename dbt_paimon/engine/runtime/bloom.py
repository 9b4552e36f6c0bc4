"""A Bloom filter of the batch's keys, so the bootstrap ships only the stored keys the batch may touch.

Built on the executors (one partial filter per task, tasks.digest_task, OR-ed on the driver: a
bounded bit array, never the keys themselves) and handed to the bootstrap tasks. A false positive only ships a key the
assigner then finds unmatched, so the filter affects speed, never results.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from ...store.common.key_hash import key_hashes
from ...store.common.key_order import canonical_nan
from ...store.schema.schema import TableSchema

_K = 3  # probes per key: near-optimal at ~16 bits per key


def supports(schema: TableSchema) -> bool:
    """Whether the key can be hashed here (DECIMAL above 18 digits cannot)."""
    return not any(schema.field(k).type.root == "DECIMAL" and schema.field(k).type.precision > 18
                   for k in schema.primary_keys)


def size_bits(expected_keys: int) -> int:
    """~16 bits per expected key (under 1% false positives), a power of two in [2^20, 2^27]."""
    want = max(expected_keys, 1) * 16
    bits = 1 << 20
    while bits < want and bits < (1 << 27):
        bits <<= 1
    return bits


def _positions(table: pa.Table, keys: Sequence[str], schema: TableSchema, bits: int) -> np.ndarray:
    # Keys equal under Paimon's Double.compare must probe the same bits: NaNs of any bit pattern are
    # one key, so they are hashed as the canonical NaN (-0.0 and 0.0 are two keys and hash apart).
    cols = [canonical_nan(table.column(k)) for k in keys]
    h1 = key_hashes(cols, [schema.field(k).type for k in keys]).view(np.uint32)
    h1 = h1.astype(np.uint64)
    # A second hash by mixing the first (fmix64): independent enough for double hashing.
    h2 = h1 * np.uint64(0x9E3779B97F4A7C15)
    h2 ^= h2 >> np.uint64(29)
    h2 |= np.uint64(1)
    mask = np.uint64(bits - 1)
    with np.errstate(over="ignore"):
        return np.stack([(h1 + np.uint64(i) * h2) & mask for i in range(_K)])


def add(bitset: np.ndarray, table: pa.Table, keys: Sequence[str], schema: TableSchema) -> None:
    pos = _positions(table, keys, schema, bitset.size * 8).ravel()
    np.bitwise_or.at(bitset, (pos >> np.uint64(3)).astype(np.int64),
                     (np.uint8(1) << (pos & np.uint64(7)).astype(np.uint8)))


def might_contain(bitset: np.ndarray, table: pa.Table, keys: Sequence[str], schema: TableSchema) -> np.ndarray:
    pos = _positions(table, keys, schema, bitset.size * 8)
    hit = np.ones(table.num_rows, dtype=bool)
    for p in pos:
        byte = bitset[(p >> np.uint64(3)).astype(np.int64)]
        hit &= (byte >> (p & np.uint64(7)).astype(np.uint8)) & np.uint8(1) == 1
    return hit
