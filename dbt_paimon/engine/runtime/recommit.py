"""A job whose commit lost the race: its files committed on the newer snapshot as they are, when
the commits that beat it changed nothing the job read or wrote; run again otherwise.

A job reads, for each key of its batch, where the key lives and what it holds (the bootstrap),
and writes its rows into buckets with sequence numbers above the bucket's (the plan's). Its
files are exactly what a run on the newer snapshot would write when, since the job's snapshot:

- no commit changed a key of the batch: the APPEND commits' rows (their +I/+U/-U/-D rows, read
  from the files they added) hold none of the batch's keys. Then every key's place and value,
  so the job's assignment, its merges, its skips and its counts, are the same on the newer
  snapshot. Compared by Paimon's hash of the whole primary key over the whole batch, skipped and
  unchanged keys included (a hash collision costs a re-run, never a wrong answer). A COMPACT
  commit changes no key: it rewrites files and keeps every row's sequence number, so the job's
  sequence numbers stay above its keys' rows in every bucket;
- nothing was rewritten: no OVERWRITE, no schema change, no snapshot gone between
  (store/write/conflicts.py); the job removes no file of its own;
- (HASH_DYNAMIC) no commit rewrote the HASH index file of a bucket whose index file the job
  rewrites: the commit's index manifest is the newer snapshot's with the job's buckets' files in
  place, so the two writers' new keys stay in the buckets each put them in;
- (POSTPONE_MODE) every partition the job writes has the bucket count the job hashed its rows by
  (store/write/postpone.py): another writer may have given a new partition its count first.

Fixed buckets and cross-partition tables need no more: a key that no commit touched is where the
job found it, and two writers' different keys may share a bucket (their order in it is by key;
sequence numbers only order a key's own rows). A bucket's row count target is soft, as it is for
Paimon's concurrent writers. The key index (key_index/) compares file sets per bucket, so the
job's record of its commit leaves the other commits' files to the next catch-up.

The check must be quick: a job whose check takes longer than the time between the other writers'
commits loses every race (a long job among a stream of short ones starves). So each executor
answers it from what it holds after the first check: the driver's batch, its keys' hashes; a
Spark batch, a digest of them (a bitmap of the hashes, one bit per hash modulo its size, built by one
pass over the batch at the first conflict), and only a hash the digest may hold costs a pass. And
the commits made during a check are checked at once after it (newest_right), so the commit is
attempted on the newest snapshot, its window only the commit itself.
"""

from __future__ import annotations

from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from ...store.write.conflicts import changes_since
from ...store.common.key_hash import key_hashes
from ...store.manifest.manifest import ADD
from ...store.common.options import BucketMode
from ...store.write.postpone import PartitionBuckets
from ...store.schema.schema import TableSchema
from ...store.snapshot.snapshot import Snapshot
from ...store.table import FileStoreTable
from .executor import JobOutput
from .tasks import payload


def why_not(table: FileStoreTable, base: Snapshot | None, latest: Snapshot | None, job: JobOutput,
            holds_any: Callable[[np.ndarray], bool]) -> str | None:
    """None when the job's files are right on `latest` as they were on `base`; else why they may
    not be. holds_any(hashes): whether the batch has a key of one of these hashes (key_hits)."""
    if base is None or latest is None:
        return "the table had no snapshot when the job read it"
    if any(e.kind != ADD for e in job.entries):
        return "the job removes files"
    if latest.id < base.id or not base.same_as(table.snapshots.try_snapshot(base.id)):
        return "the job's snapshot is gone or was rolled back"
    schema = table.schema
    changes = changes_since(table.io, table.path, schema, base, latest)
    if changes.rebuilt:
        return changes.rebuilt
    if schema.bucket_mode == BucketMode.HASH_DYNAMIC and changes.index_buckets & set(job.index_changes):
        return "another commit rewrote the hash index of a bucket the job adds keys to"
    if schema.bucket_mode == BucketMode.POSTPONE_MODE:
        counts = PartitionBuckets.of_plan(schema, table.plan(latest.id))
        if any(e.total_buckets != counts.of_partition(e.partition) for e in job.entries if e.bucket >= 0):
            return "another commit gave a partition the job writes another bucket count"
    if changes.appended:
        theirs = changes.keys()
        if theirs.num_rows and holds_any(np.unique(key_hash_of(theirs, schema))):
            return "another commit changed keys of the batch"
    return None


# checks at most made in a row before a commit attempt, each of the commits landed during the last
CATCH_UPS = 20


def newest_right(table: FileStoreTable, base: Snapshot | None, job: JobOutput,
                 holds_any: Callable[[np.ndarray], bool]) -> tuple[Snapshot | None, str | None]:
    """(snapshot, None): the newest snapshot the job's files are right on, checked from `base`; or
    (snapshot, why) for the first that they may not be right on. The commits that land while the
    commits that beat the job are checked are checked in turn at once, without a commit attempt and
    its wait between: a check takes longest after a conflict (the first one makes the digest, a
    digest hit costs a pass over the batch), and a commit attempted on the snapshot the check began
    on would lose to any commit made meanwhile. Each later check covers only the commits made
    during the one before, so it is short; after CATCH_UPS the commit is tried as it stands."""
    checked = base
    for _ in range(CATCH_UPS):
        latest = table.snapshots.latest()
        if checked is not None and checked.same_as(latest):
            break
        why = why_not(table, checked, latest, job, holds_any)
        if why is not None:
            return latest, why
        checked = latest
    return checked, None


def key_hash_of(rows: pa.Table, schema: TableSchema) -> np.ndarray:
    """Paimon's hash of each row's whole primary key."""
    keys = list(schema.primary_keys)
    return key_hashes([rows.column(k) for k in keys], [schema.field(k).type for k in keys])


def key_hits(rows: pa.Table, schema: TableSchema, hashes: np.ndarray) -> int:
    """How many of the rows' keys hash to one of `hashes` (sorted, unique)."""
    if not rows.num_rows or not hashes.size:
        return 0
    return int(np.isin(key_hash_of(rows, schema), hashes, assume_unique=False).sum())


# 64 bits per key: a hash the batch does not hold is taken for one of its own under 3% of the time, so a
# stream of short commits seldom costs a pass over the batch (a pass is what a check that loses races is made of)
DIGEST_BITS_PER_KEY = 64
DIGEST_MIN_BITS, DIGEST_MAX_BITS = 1 << 16, 1 << 27  # 8 KB to 16 MB in the driver


def digest_bits(keys: int) -> int:
    """The digest's size in bits for a batch of `keys` keys: a power of two, so that a hash's bit is
    its low bits."""
    want = max(keys, 1) * DIGEST_BITS_PER_KEY
    return min(max(1 << (want - 1).bit_length(), DIGEST_MIN_BITS), DIGEST_MAX_BITS)


def key_digest(rows: pa.Table, schema: TableSchema, bits: int, out: np.ndarray | None = None) -> np.ndarray:
    """The rows' key hashes as a bitmap of `bits` bits (uint8, little bit order), set in `out` when
    given (a task's digest over its Arrow batches)."""
    out = np.zeros(bits // 8, dtype=np.uint8) if out is None else out
    if rows.num_rows:
        slots = key_hash_of(rows, schema).astype(np.int64) & (bits - 1)
        np.bitwise_or.at(out, slots >> 3, (1 << (slots & 7)).astype(np.uint8))
    return out


def digest_may_hold(digest: np.ndarray, hashes: np.ndarray) -> bool:
    """Whether a key of the batch may hash to one of `hashes`: False is certain."""
    if not hashes.size:
        return False
    slots = hashes.astype(np.int64) & (digest.size * 8 - 1)
    return bool(((digest[slots >> 3] >> (slots & 7)) & 1).any())


def digest_task(schema: TableSchema, bits: int):
    """Spark task over the batch's key columns: one payload, the digest of its rows' keys
    (DistributedExecutor.holds_any ORs them)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out = np.zeros(bits // 8, dtype=np.uint8)
        for batch in batches:
            key_digest(pa.Table.from_batches([batch]), schema, bits, out)
        yield payload(out.tobytes())
    return run


def hits_task(schema: TableSchema, hashes: np.ndarray):
    """Spark task over the batch's key columns: one payload, the count of its rows whose key hashes
    to one of `hashes` (DistributedExecutor.holds_any)."""
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        hits = 0
        for batch in batches:
            hits += key_hits(pa.Table.from_batches([batch]), schema, hashes)
        yield payload(hits)
    return run
