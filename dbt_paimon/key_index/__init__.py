"""The key index of a cross-partition table: key -> (partition, bucket), kept beside the table.

Paimon's cross-partition upsert (KEY_DYNAMIC) must learn where every incoming key lives; Paimon and
our full bootstrap read the keys of the whole table for every job. This index answers for a batch
at a cost that grows with the batch and with what changed since the index was last brought up to
date, not with the table (docs/architecture.md, "The key index").

An entry is (hash, key, partition, bucket, generation, live). A (partition, bucket)'s generation
changes whenever the index cannot carry a change of its files forward (files removed or rewritten by
someone else, deletes among the files added, a rollback, ...): its keys are then read again
(cost ∝ that bucket) under the new generation, and every older entry naming it becomes invalid. A
lookup takes, per key, the newest valid entry (a live one before a tombstone of the same run).

Staying right whatever else writes: `refresh(plan)` compares each (partition, bucket)'s data files
in the snapshot about to be used with those the index reflects: equal, nothing to do; only files
added and none holds a delete, their keys are live there (read ∝ the added files); anything else,
the bucket is re-read under a new generation; a bucket gone is dropped. A missing, unreadable or
foreign index is rebuilt from the whole table, once. Each manifest is correct for the files it
records, so a crash anywhere (runs written, manifest written, pointer not yet swapped) leaves a
state the next refresh starts from; concurrent writers swap the pointer between correct versions.

Layout, at `<warehouse>/<db>.db/.<table>.dbt-key-index/` (beside the table: Paimon's readers,
writers, expiration and orphan-file removal never list it; our catalog skips hidden names):

    LATEST                    {"manifest": name}: replaced atomically, last
    manifest-<uuid>.json      shards, each shard's runs newest first, per (partition, bucket)
                              the data files the index reflects, its generation and live-key count,
                              and the runs and manifests it retired (no longer names), with when
    run-<seq>-<uuid>.arrow    one sorted run of one shard: Arrow IPC, uncompressed, entries
                              sorted by (hash, key), in its metadata the hash at each page boundary
                              of the file's hashes ("fences"); memory-mapped, and a lookup reads
                              only the pages it needs.
                              Columns: _h, _loc (per entry int32s: the index of its partition
                              among the run's, in the metadata, bucket, generation, live, then a
                              fixed-width key's 32-bit words), and the key columns only for a key
                              with a string column: a key found costs a page of _loc (two with
                              key columns)
    branch-<name>/            a branch's LATEST and manifests: its versions, over the same runs
                              (a branch starts from main's version; versions.py)

Why not otherwise:
- Parquet runs with row-group statistics, or runs cut into blocks found through fences: a batch's keys
  spread over a run hit nearly every block, so a lookup read the whole run. A memory-mapped,
  uncompressed Arrow run searched in place touches a page or two per key; fences on page boundaries
  keep that true at any size.
- Reading the runs' hash columns whole: fast on a warm local disk, but it costs in proportion to the
  table, where the fenced lookup costs in proportion to the batch.
- A dense array or a single sorted file: one write rewrites it all; sharded runs make a write cost in
  proportion to the change and a read to the batch.
- Walking the snapshots since the one the index reflects: breaks on expiration and rollback;
  comparing file sets per bucket does not.
- The index among Paimon's own files (an index type in `index/`): Paimon's expiration and orphan
  removal would delete or misread it, and other Paimon readers would meet an unknown index type.
- A Bloom filter alone (what the full bootstrap uses): it prunes the shuffle, not the read.

Modules: layout (entries, run files' schema, hashing and sharding), versions (manifests, the pointer,
validity, cleaning), run_file (one run's file), lookup, merge_policy (each shard's LSM), build,
catch_up, record (our own commit), index (`KeyIndex`, what the engine uses), branches (a branch's
index at a fast-forward and a deletion).
"""

from .branches import drop_branch, publish_branch
from .index import KeyIndex
from .layout import (BLOCK_ROWS, BUCKET, FENCE_ROWS, FORMAT, GEN, H, KEYS_PER_SHARD, LATEST, LIVE, LOC, P,
                     PAGE_BYTES, READS_FORMATS, SEQ, exists, index_dir, supported)
from .merge_policy import MAX_RUNS, full_merge_due, merge_count
from .versions import ORPHAN_AGE_MS, BucketState, IndexState, join_sweeps

__all__ = [
    "KeyIndex", "IndexState", "BucketState",
    "index_dir", "exists", "publish_branch", "drop_branch", "supported", "join_sweeps", "full_merge_due", "merge_count",
    "H", "P", "BUCKET", "GEN", "LIVE", "SEQ", "LOC", "LATEST",
    "FORMAT", "READS_FORMATS", "BLOCK_ROWS", "PAGE_BYTES", "FENCE_ROWS", "KEYS_PER_SHARD", "MAX_RUNS",
    "ORPHAN_AGE_MS",
]
