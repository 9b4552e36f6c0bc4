"""The rows a native read leaves out, as one array of longs every row of Spark's scan is tested against.

A row of a data file is named by the file and its position (`_metadata.file_name`,
`_metadata.row_index`). The positions each file loses (deletions.py) become a bitmap, one bit per
row of the file, its words laid out file after file; in front of them a perfect hash of the files
tells each row, with no lookup of its file's name, where its file's words begin:

    h = xxhash64(file_size[, salt])                     Spark's hash; the same XXH64 here (bloom_filter)
    d = array[(h >>> 32) & (B - 1)]                     the displacement of h's group (CHD, hash and displace)
    start = array[B + ((h ^ d) & (M - 1))]              the file's first word
    lost = bit_get(array[start + (position >> 6)], position & 63)

Where the files' sizes differ by their remainders modulo some m of at most MAX_MODULUS (found by
trying m upward: 200 files of random sizes, m near 3,000, found in ~15 ms), the file's first word
needs neither hash nor displacement (a scan of 6M rows in 100 files that lose rows, medians of one
session taking turns: 0.86 s, against 0.96 s through the hash):

    start = array[pmod(file_size, m)]

The array reaches Spark as a one-row local relation read by a scalar subquery: each query takes
it into its tasks (no join, no stage of its own), and a plan prints its name, not its values.
A file is told by its size in bytes (`_metadata.file_size`, as the driver finds it on disk) where
no two files of the array have the same size, else by its name: hashing a long costs Spark a
fraction of hashing a name, row by row. Only the rows of files that lose rows are tested: the files
a read takes whole are scanned apart. The driver builds the array from the plan's metadata and the
lost positions (numpy; a step per file, none per row).
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ...store.index.bloom_filter import xxh64

# Spark's xxhash64 seeds a first column's hash with 42, each next column's with the hash before
_SPARK_SEED = 42
# a bitmap of more words than this (a 32 MB array, 268M rows) is cut in several, each read apart:
# every task of a query holds its array
MAX_WORDS = 1 << 22
# the largest modulus tried for the files' sizes (a table of that many longs in front of the bitmap;
# 512 KB) and the most files it is tried for: n sizes have distinct remainders modulo a given m with
# p ~ exp(-n^2 / 2m): 512 files, near the limit, with p ~ exp(-2) per modulus tried
MAX_MODULUS, MAX_MODULUS_FILES = 1 << 16, 512


class LostRows:
    """The lost positions of some files, as the array described above."""

    def __init__(self, rows: dict[str, int], lost: dict[str, np.ndarray], sizes: dict[str, int]):
        """rows: each file's row count; lost: file name -> positions lost (int64), of those files;
        sizes: each file's size in bytes on disk."""
        names = sorted(rows)
        self.names = names
        self.by_size = len({sizes[n] for n in names}) == len(names)
        counts = np.array([(rows[n] + 63) // 64 for n in names], np.int64)
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]])  # each file's first word in the bitmap
        size = np.array([sizes[n] for n in names], np.int64)
        self.modulus = _modulus(size) if self.by_size else None
        self.salt = None
        if self.modulus is not None:
            front = np.full(self.modulus, -1, np.int64)
            front[size % self.modulus] = self.modulus + offsets
        else:
            front = self._hashed(names, sizes, offsets)
        self.array = np.concatenate([front, _words(names, lost, counts, offsets).view(np.int64)])

    def _hashed(self, names: list[str], sizes: dict[str, int], offsets: np.ndarray) -> np.ndarray:
        """The displacements and the slots' first words, in front of the bitmap (the hashed layout)."""
        if self.by_size:
            base = xxh64(pa.array([np.int64(sizes[n]).tobytes() for n in names], pa.binary()), _SPARK_SEED)
        else:
            base = xxh64(pa.array(names, pa.string()), _SPARK_SEED)
        hashes = base
        while (displaced := _displace(hashes)) is None:
            # two files share a group and a slot's bits: hash them again, with a salt
            self.salt = 0 if self.salt is None else self.salt + 1
            hashes = xxh64(pa.array([np.int64(self.salt).tobytes()] * len(names), pa.binary()), base.view(np.int64))
        displacement, slot = displaced
        self.groups, self.slots = _sizes(len(names))
        table = np.full(self.slots, -1, np.int64)
        table[slot] = self.groups + self.slots + offsets
        return np.concatenate([displacement.view(np.int64), table])

    def relation(self, spark: SparkSession) -> DataFrame:
        """The array as a one-row local relation, handed to Spark as Arrow: its rows are held in
        the plan (no job reads them), and it costs a fraction of the array written as SQL text
        that Spark parses and casts (W2's 180K words: ~0.09 s against ~0.25 s once warm)."""
        return spark.createDataFrame(pa.table({"bits": pa.array([self.array], pa.list_(pa.int64()))}))

    def kept(self, bits: Column) -> Column:
        """True for a row of these files that the read keeps (`bits`: the array, a scalar subquery)."""
        if self.modulus is not None:
            start = F.get(bits, F.pmod(F.col("_metadata.file_size"), F.lit(self.modulus)).cast("int"))
        else:
            file = F.col("_metadata.file_size" if self.by_size else "_metadata.file_name")
            h = F.xxhash64(file) if self.salt is None else F.xxhash64(file, F.lit(self.salt).cast("bigint"))
            group = F.shiftrightunsigned(h, 32).bitwiseAND(F.lit(self.groups - 1))
            slot = h.bitwiseXOR(F.get(bits, group.cast("int"))).bitwiseAND(F.lit(self.slots - 1))
            start = F.get(bits, (slot + F.lit(self.groups)).cast("int"))
        position = F.col("_metadata.row_index")
        word = F.get(bits, (start + F.shiftright(position, 6)).cast("int"))
        return F.bit_get(word, position.bitwiseAND(F.lit(63)).cast("int")) == 0


def groups_of(rows: dict[str, int], limit: int = MAX_WORDS) -> list[list[str]]:
    """The files in groups whose bitmaps stay within `limit` words (the files' plan order kept)."""
    out, words = [[]], 0
    for name, count in rows.items():
        need = (count + 63) // 64
        if out[-1] and words + need > limit:
            out.append([])
            words = 0
        out[-1].append(name)
        words += need
    return [g for g in out if g]


def _words(names: list[str], lost: dict[str, np.ndarray], counts: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The files' bitmaps, file after file (`offsets`: each file's first word among them)."""
    words = np.zeros(int(counts.sum()), np.uint64)
    for name, offset in zip(names, offsets):  # per file: its positions set at once
        at = lost.get(name)
        if at is not None and at.size:
            at = at.astype(np.int64)
            np.bitwise_or.at(words, offset + (at >> 6), np.uint64(1) << (at & 63).astype(np.uint64))
    return words


def _modulus(sizes: np.ndarray, limit: int = MAX_MODULUS) -> Optional[int]:
    """The least m (from the file count up, at most `limit`) modulo which the sizes differ, or None;
    the moduli tried a block at a time (a row of remainders per modulus, sorted, no two equal)."""
    n = sizes.size
    if n > MAX_MODULUS_FILES:
        return None
    block = max(1, (1 << 20) // max(n, 1))   # ~1M remainders at a time
    for low in range(max(n, 1), limit + 1, block):
        moduli = np.arange(low, min(low + block, limit + 1), dtype=np.int64)
        remainders = np.sort(sizes[None, :] % moduli[:, None], axis=1)
        distinct = (np.diff(remainders, axis=1) != 0).all(axis=1)
        if distinct.any():
            return int(moduli[int(np.argmax(distinct))])
    return None


_TRIES = 1024  # displacements tried per group: at load 1/2 a group of one fails all with p = 2^-1024


def _sizes(n: int) -> tuple[int, int]:
    """Groups (about two names each) and slots (at most half taken) for n names, powers of two."""
    return 1 << max(n // 2 - 1, 0).bit_length(), 1 << max(2 * n - 1, 1).bit_length()


def _displace(hashes: np.ndarray) -> Optional[tuple[np.ndarray, np.ndarray]]:
    """CHD: the names in groups by their hash's upper half, each group given the displacement (xor)
    that puts its names in free slots, largest group first. Returns the displacements (one per
    group) and each name's slot, or None when two names share a group and a slot's bits (no
    displacement tells them apart)."""
    n = hashes.size
    groups, slots = _sizes(n)
    group = ((hashes >> np.uint64(32)) & np.uint64(groups - 1)).astype(np.int64)
    low = (hashes & np.uint64(slots - 1)).astype(np.int64)
    displacement = np.zeros(groups, np.uint64)
    slot = np.zeros(n, np.int64)
    taken = np.zeros(slots, bool)
    order = np.argsort(group, kind="stable")
    members = np.split(order, np.cumsum(np.bincount(group, minlength=groups))[:-1])
    for g in sorted(range(groups), key=lambda g: -members[g].size):  # per group of files
        mine = low[members[g]]
        if mine.size == 0:
            break
        if np.unique(mine).size < mine.size:
            return None
        # every displacement at once: the first whose slots are all free
        candidates = np.arange(min(slots, _TRIES), dtype=np.int64)
        placed = mine[None, :] ^ candidates[:, None]
        free = ~taken[placed].any(axis=1)
        if not free.any():
            return None
        d = int(np.argmax(free))
        displacement[g] = np.uint64(d)
        slot[members[g]] = placed[d]
        taken[placed[d]] = True
    return displacement, slot
