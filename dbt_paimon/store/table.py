"""FileStoreTable: one Paimon primary-key table on a filesystem, and its batch TableWrite."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .common import binary_row, key_order
from .common import options as opts
from .schema.option_validation import check_file_index, check_partition_expiration, validate as validate_options
from .write.commit import CommitResult, FileStoreCommit
from .write.append import AppendWrite
from .format.datafile import (CHANGELOG_FILE_PREFIX, VALUE_KIND, KeyValueFileWriter, check_unique, conform,
                              dictionary_columns, group_file_stats, int_array, kv_table)
from .common.errors import SchemaError
from .maintenance.expire import ExpireConfig, ExpireResult, SnapshotExpiration, expire_tags
from .maintenance.file_deletion import FileDeletion
from .common.fileio import FileIO
from .common.key_hash import java_bucket, key_hashes
from .manifest.manifest import ADD, ManifestEntry
from .maintenance.orphan_files import OrphanFilesClean, OrphanFilesResult, older_than_millis
from .common.paths import bucket_dir, partition_path
from .write.postpone import PartitionBuckets
from .read import audit_log
from .read import between
from .read.read_optimized import top_level
from .read.read import TableRead
from .maintenance.rollback import RollbackResult, rollback
from .read.scan import FileStoreScan, next_sequences, PartitionFilter, Plan, batch_scan_skip_level0
from .schema.schema import SchemaManager, TableSchema, build_schema, check_append_options, check_writable, latest_schema
from .snapshot.snapshot import APPEND, Snapshot, SnapshotManager
from .format.stats_collector import DataFileStatsCollector
from .snapshot.consumers import consumers, reset_consumer
from .snapshot.tags import Tag, TagManager

_BUCKET_COL = "__paimon_bucket"


class FileStoreTable:
    def __init__(self, path: str, schema: TableSchema, io: FileIO | None = None):
        self.path = path.rstrip("/")
        self.schema = schema
        self.io = io or FileIO.get(path)

    # ---- lifecycle -----------------------------------------------------------------------------
    @classmethod
    def create(cls, path: str, arrow_schema: pa.Schema, primary_keys: Sequence[str],
               partition_keys: Sequence[str] = (), options: Mapping[str, object] | None = None,
               io: FileIO | None = None) -> "FileStoreTable":
        io = io or FileIO.get(path)
        schema = build_schema(arrow_schema, primary_keys, partition_keys, options)
        SchemaManager(io, path).create(schema)
        return cls(path, schema, io)

    @classmethod
    def open(cls, path: str, io: FileIO | None = None) -> "FileStoreTable":
        io = io or FileIO.get(path)
        return cls(path, latest_schema(io, path), io)

    @staticmethod
    def exists(path: str, io: FileIO | None = None) -> bool:
        return bool(SchemaManager(io or FileIO.get(path), path).list_ids())

    # ---- metadata ------------------------------------------------------------------------------
    @property
    def snapshots(self) -> SnapshotManager:
        return SnapshotManager(self.io, self.path)

    def latest_snapshot(self) -> Snapshot | None:
        return self.snapshots.latest()

    @property
    def total_buckets(self) -> int:
        return self.schema.core.bucket if self.schema.core.bucket > 0 else -1

    def partition_bytes(self, values: Sequence) -> bytes:
        return binary_row.serialize(values, self.schema.partition_types)

    def bucket_path(self, partition_values: Sequence, bucket: int) -> str:
        pdir = partition_path(partition_values, self.schema.partition_types, self.schema.partition_keys,
                              self.schema.core.partition_default_name)
        return bucket_dir(self.path, pdir, bucket)

    # ---- read ----------------------------------------------------------------------------------
    def new_scan(self, batch_read: bool = False) -> FileStoreScan:
        """A scan of every live file; `batch_read=True`: of what a batch read sees, which for a
        first-row table leaves out level 0 (batch_scan_skip_level0), as Java and pypaimon read."""
        return FileStoreScan(self.io, self.path, self.schema,
                             skip_level0=batch_read and batch_scan_skip_level0(self.schema))

    def plan(self, snapshot_id: int | None = None, partition_filter: PartitionFilter = None,
             tag: str | None = None, batch_read: bool = False) -> Plan:
        return self.new_scan(batch_read).plan(snapshot_id, partition_filter, tag=tag)

    def new_read(self, projection: Sequence[str] | None = None) -> TableRead:
        return TableRead(self.io, self.path, self.schema, projection)

    def to_arrow(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None,
                 partition_filter: PartitionFilter = None, tag: str | None = None) -> pa.Table:
        plan = self.plan(snapshot_id, partition_filter, tag=tag, batch_read=True)
        schema = self.read_schema(plan.snapshot, snapshot_id is not None or tag is not None)
        return TableRead(self.io, self.path, schema, columns).read(plan.splits)

    def read_between(self, start: int, end: int, scan_mode: str | None = None,
                     columns: Sequence[str] | None = None) -> pa.Table:
        """Paimon's `incremental-between = 'start,end'` (start exclusive) with its
        `incremental-between-scan-mode` (auto, delta, changelog): the records those snapshots wrote,
        unmerged, each with its `rowkind` (read/incremental.py)."""
        return self.read_incremental({between.BETWEEN: f"{start},{end}", between.SCAN_MODE: scan_mode or "auto"},
                                     columns)

    def read_incremental(self, options: Mapping[str, str], columns: Sequence[str] | None = None) -> pa.Table:
        """An incremental read by Paimon's options (incremental-between with snapshot ids or tag names,
        incremental-between-timestamp, -scan-mode, -tag-to-snapshot: read/between.py), every record
        with its `rowkind`."""
        planned = between.plan(self.io, self.path, self.schema, options)
        return between.read_units(self.io, self.path, self.schema, planned, planned.units, columns)

    def read_optimized(self, snapshot_id: int | None = None, columns: Sequence[str] | None = None) -> pa.Table:
        """The `ro` system table: a key table's top-level files only, no merge (read/read_optimized.py)."""
        plan = self.plan(snapshot_id, batch_read=True)
        schema = self.read_schema(plan.snapshot, snapshot_id is not None)
        return TableRead(self.io, self.path, schema, columns).read(top_level(self.schema, plan.splits))

    def audit_log(self, snapshot_id: int | None = None, tag: str | None = None,
                  columns: Sequence[str] | None = None) -> pa.Table:
        """The `audit_log` system table as of the latest snapshot (or `snapshot_id`, or `tag`):
        each key's merged record with its `rowkind`, deleted keys as -D (read/audit_log.py)."""
        plan = self.plan(snapshot_id, tag=tag, batch_read=True)
        schema = self.read_schema(plan.snapshot, snapshot_id is not None or tag is not None)
        return audit_log.read_splits(TableRead(self.io, self.path, schema, columns), plan.splits)

    def consumers(self) -> dict[str, int]:
        """consumer id -> the snapshot it reads next (`<table>/consumer/`, snapshot/consumers.py)."""
        return consumers(self.io, self.path)

    def reset_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        """Record where a consumer reads next; snapshot expiration keeps that snapshot and later."""
        reset_consumer(self.io, self.path, consumer_id, next_snapshot)

    def read_schema(self, snapshot, travelled: bool) -> TableSchema:
        """The schema a read of `snapshot` returns: the table's, unless the read travelled in time
        (a snapshot id or a tag), which reads with the snapshot's schema (its columns as they were),
        as Java Paimon and pypaimon do."""
        if travelled and snapshot is not None and snapshot.schema_id != self.schema.id:
            return SchemaManager(self.io, self.path).schema(snapshot.schema_id)
        return self.schema

    # ---- maintenance: expiration, tags, rollback -----------------------------------------------
    def expire_snapshots(self, retain_max: int | None = None, retain_min: int | None = None,
                         time_retained_ms: int | None = None, max_deletes: int | None = None,
                         now_ms: int | None = None) -> ExpireResult:
        """Expire snapshots by the table's snapshot.* options (Paimon's defaults), each of them
        overridable (as Paimon's expire_snapshots procedure), and delete the files nothing retained
        references. Run it after a commit, as Paimon does."""
        config = ExpireConfig.from_options(self.schema)
        overrides = {k: v for k, v in (("retain_max", retain_max), ("retain_min", retain_min),
                                       ("time_retained_ms", time_retained_ms), ("max_deletes", max_deletes))
                     if v is not None}
        config = dataclasses.replace(config, **overrides)
        clock = None if now_ms is None else (lambda: now_ms)
        return SnapshotExpiration(self.io, self.path, self.schema, config, now_ms=clock).expire()

    @property
    def tags(self) -> TagManager:
        return TagManager(self.io, self.path)

    def create_tag(self, name: str, snapshot_id: int | None = None, time_retained=None,
                   ignore_if_exists: bool = False) -> Tag:
        """Tag a snapshot (default: the latest). time_retained: a datetime.timedelta or a duration
        such as '1d' (then the tag records its create time and expires by expire_tags())."""
        if isinstance(time_retained, str):
            time_retained = dt.timedelta(milliseconds=opts.parse_duration_ms("time_retained", time_retained))
        return self.tags.create(name, snapshot_id, time_retained, ignore_if_exists)

    def delete_tag(self, name: str) -> bool:
        return self.tags.delete(name, FileDeletion(self.io, self.path, self.schema))

    def list_tags(self) -> list[Tag]:
        return self.tags.tags()

    def expire_tags(self, now=None, older_than=None) -> list[str]:
        return expire_tags(self.io, self.path, self.schema, now, older_than)

    def rollback_to(self, target: int | str) -> RollbackResult:
        """Roll back to a snapshot id (int) or a tag name (str): later snapshots, tags of later
        snapshots and the files only they referenced are removed."""
        return rollback(self.io, self.path, self.schema, target)

    def remove_orphan_files(self, older_than=None, dry_run: bool = False) -> OrphanFilesResult:
        """Delete the files no snapshot, tag or changelog references and last modified longer ago
        than `older_than` (Paimon's remove_orphan_files; orphan_files.py). older_than: a duration
        ('1 d', '2 h', milliseconds, a timedelta) or a past point in time ('2024-05-01 12:00:00', a
        datetime); default 1 day, as Paimon. dry_run: only list what would be deleted."""
        return OrphanFilesClean(self.io, self.path, self.schema, older_than_millis(older_than), dry_run).clean()

    # ---- schema evolution ----------------------------------------------------------------------
    # Options that decide where rows live or how versions merge: changing them would misread the data.
    FIXED_OPTIONS = ("bucket", "bucket-key", "merge-engine", "rowkind.field", "sequence.field",
                     "partition.default-name", "file.format")

    def alter_options(self, set_options: Mapping[str, object] | None = None,
                      reset: Sequence[str] = ()) -> TableSchema:
        """ALTER TABLE ... SET / RESET options: a new schema-N, as Paimon writes it; data untouched."""
        changes = validate_options(set_options or {}, self.schema.field_names)
        fixed = [k for k in list(changes) + list(reset) if k in self.FIXED_OPTIONS or k.startswith("fields.")
                 and k.endswith(".aggregate-function")]
        if fixed:
            raise SchemaError(f"option(s) {fixed} cannot change on an existing table (rebuild it instead)")
        merged = {k: v for k, v in self.schema.options.items() if k not in reset}
        merged.update(changes)
        validate_options(merged, self.schema.field_names, stored=self.schema.options)
        check_file_index(merged, {f.name: f.type for f in self.schema.fields})
        check_partition_expiration(merged, self.schema.partition_keys)
        core = opts.CoreOptions(merged)
        if core.deletion_vectors != self.schema.core.deletion_vectors and not core.deletion_vectors_modifiable:
            # Paimon's SchemaManager: switching them without a full compaction may duplicate rows
            raise SchemaError("option 'deletion-vectors.enabled' cannot change on an existing table unless "
                              "'deletion-vectors.modifiable' is true (as in Paimon: without a full compaction first, "
                              "readers may see a key twice)")
        if self.schema.is_append:
            check_append_options(merged)
        evolved = dataclasses.replace(self.schema, id=self.schema.id + 1, options=merged,
                                      time_millis=int(time.time() * 1000))
        SchemaManager(self.io, self.path).commit(evolved)
        self.schema = evolved
        return evolved

    # ---- write ---------------------------------------------------------------------------------
    def new_write(self, next_sequence: Mapping[tuple[bytes, int], int] | None = None,
                  buckets: PartitionBuckets | None = None) -> "TableWrite | AppendWrite":
        """The table's batch writer: TableWrite (keyed) or AppendWrite (append.py). Without
        `next_sequence`, sequence numbers continue from the latest snapshot's files; without
        `buckets`, a postpone-bucket table's counts per partition are those of the latest snapshot."""
        check_writable(self.schema, self.path)
        if self.schema.is_append:
            if next_sequence is None:
                next_sequence = next_sequences(self.plan().splits)
            return AppendWrite(self.io, self.path, self.schema, next_sequence)
        return TableWrite(self, next_sequence, buckets)

    def new_commit(self, commit_user: str | None = None) -> FileStoreCommit:
        return FileStoreCommit(self.io, self.path, self.schema, commit_user)


class TableWrite:
    """Batch writer: splits rows by (partition, bucket), writes sorted files, returns commit entries.

    Sequence numbers of a bucket continue from the highest of its live files in the latest
    snapshot, as Paimon's writers restore them. A caller that planned the snapshot already (the
    Spark engine, whose tasks must not each re-read the manifests) passes `next_sequence`:
    (partition bytes, bucket) -> the bucket's next sequence number. On a postpone-bucket table
    (postpone.py) a row's bucket count is its partition's; a caller that planned passes `buckets`.
    """

    def __init__(self, table: FileStoreTable, next_sequence: Mapping[tuple[bytes, int], int] | None = None,
                 buckets: PartitionBuckets | None = None):
        self.table = table
        self.schema = table.schema
        self._next_seq: dict[tuple[bytes, int], int] | None = (
            dict(next_sequence) if next_sequence is not None else None)
        self._postpone = self.schema.bucket_mode == opts.BucketMode.POSTPONE_MODE
        if self._postpone and buckets is None:  # one plan gives the counts and the sequence numbers
            plan = table.plan()
            buckets = PartitionBuckets.of_plan(self.schema, plan)
            if self._next_seq is None:
                self._next_seq = next_sequences(plan.splits)
        self._buckets = buckets
        self._writers: dict[tuple[bytes, int], KeyValueFileWriter] = {}
        self._changelog_writers: dict[tuple[bytes, int], KeyValueFileWriter] = {}
        # changelog-producer 'input': every row written is also written to the bucket's changelog
        # files, as written (Paimon's MergeTreeWriter writes its input buffer there, then merges it)
        self._input_changelog = self.schema.core.changelog_producer == "input"
        self.entries: list[ManifestEntry] = []

    def _restore(self) -> dict[tuple[bytes, int], int]:
        if self._next_seq is None:
            plan = self.table.plan()
            self._next_seq = next_sequences(plan.splits)
        return self._next_seq

    def write(self, rows: pa.Table, buckets: int | Sequence[int] | np.ndarray | pa.Array | None = None,
              row_kinds: Sequence[int] | np.ndarray | pa.Array | None = None,
              at: np.ndarray | None = None) -> list[ManifestEntry]:
        """Write rows; keys must be unique per bucket.

        `buckets`: one bucket for all rows or one per row. Left out on a fixed-bucket table, each
        row goes where Paimon puts it (hash of the bucket key); dynamic modes need it given.
        `at`: write only the rows at these positions (buckets and row_kinds are per row of `rows`):
        a writer's share of a batch, taken once, in file order, instead of copied out first.
        """
        rows = conform(rows, self.schema)
        positions = None if at is None else pa.array(at, pa.int64())

        def share(table: pa.Table) -> pa.Table:  # the columns of the rows written
            return table if positions is None else table.take(positions)
        if positions is not None:
            if buckets is not None and not isinstance(buckets, (int, np.integer)):
                buckets = int_array(buckets, pa.int32()).take(positions)
            if row_kinds is not None:
                row_kinds = int_array(row_kinds, pa.int8()).take(positions)
        n = rows.num_rows if at is None else len(at)
        if n == 0:
            return []
        fixed = self.schema.core.bucket
        if self._postpone:  # each row's partition's count
            fixed = self._buckets.of_rows(share(rows.select(list(self.schema.partition_keys))))
        if buckets is None:
            if not self._postpone and fixed <= 0:
                raise SchemaError(f"table {self.table.path} is in {self.schema.bucket_mode} mode: buckets must be "
                                  "assigned by the caller (the upsert engine does)")
            keys = self.schema.bucket_keys
            picked = share(rows.select(keys))
            hashes = key_hashes([picked.column(k) for k in keys], [self.schema.field(k).type for k in keys])
            buckets = java_bucket(hashes, fixed)
        bucket_arr = (pa.array(np.full(n, buckets, dtype=np.int32)) if isinstance(buckets, (int, np.integer))
                      else int_array(buckets, pa.int32()))
        if self._postpone or fixed > 0:
            given = bucket_arr.to_numpy(zero_copy_only=False)
            if (given >= fixed).any() or (given < 0).any():
                raise SchemaError(f"bucket out of range for a table with bucket = {self.schema.core.bucket}"
                                  + (" (its partitions' counts)" if self._postpone else ""))
        kinds = pa.array(np.zeros(n, dtype=np.int8)) if row_kinds is None else int_array(row_kinds, pa.int8())
        keys = self.schema.trimmed_primary_keys
        # the columns that decide the order, of the rows written
        ordering = share(rows.select(list(dict.fromkeys(list(self.schema.partition_keys) + keys))))
        # Group rows by (partition, bucket) through one integer: sorting on it (then the key) is far
        # cheaper than sorting on partition strings, and groups only need to be contiguous.
        group = self._group_ids(ordering, bucket_arr)
        # Within a group, Paimon's key order (FLOAT/DOUBLE keys by Float.compare/Double.compare).
        order = key_order.sort_indices(ordering.append_column("__group", pa.array(group)),
                                       ["__group"] + list(keys)).to_numpy()
        sorted_group = group[order]
        # the rows taken once, in file order
        tagged = rows.take(pa.array(order if at is None else np.asarray(at)[order]))
        tagged = tagged.append_column(_BUCKET_COL, bucket_arr.take(pa.array(order)))
        tagged = tagged.append_column(VALUE_KIND, kinds.take(pa.array(order)))
        tagged = tagged.append_column("__group", pa.array(sorted_group))
        check_unique(tagged, keys, group="__group")
        offsets = np.concatenate([[0], np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1, [n]])
        # Each group's bucket, writer and first sequence number; then every row's KeyValue form
        # at once, and (many groups: an upsert touching many buckets) every file's stats at once.
        next_seq = self._restore()
        slots, writers, first_seq = [], [], np.zeros(len(offsets) - 1, dtype=np.int64)
        partition_cols = [tagged.column(k) for k in self.schema.partition_keys]
        bucket_col = tagged.column(_BUCKET_COL)
        for i, (start, end) in enumerate(zip(offsets[:-1], offsets[1:])):  # per group, not per row
            pbytes = self.table.partition_bytes(binary_row.row_of(partition_cols, int(start)))
            bucket = bucket_col[int(start)].as_py()
            slot = (pbytes, bucket)
            writer = self._writers.get(slot)
            if writer is None:
                # Decode the bytes again so the directory is named exactly as a scan will name it.
                pvals = binary_row.deserialize(pbytes, self.schema.partition_types)
                writer = KeyValueFileWriter(self.table.io, self.schema, self.table.bucket_path(pvals, bucket))
                self._writers[slot] = writer
            first_seq[i] = next_seq.get(slot, 0)
            next_seq[slot] = int(first_seq[i]) + int(end - start)
            slots.append(slot)
            writers.append(writer)
        sizes = np.diff(offsets)
        group_of_row = np.repeat(np.arange(len(sizes)), sizes)
        sequence = first_seq[group_of_row] + (np.arange(n, dtype=np.int64) - offsets[:-1][group_of_row])
        kv = kv_table(self.schema, tagged, sequence)
        stats = (group_file_stats(kv, DataFileStatsCollector(self.schema), offsets) if len(sizes) > 1
                 else [None])
        # which columns a dictionary pays for, judged once over all the groups' rows
        dictionary = dictionary_columns(kv, writers[0].dictionary_candidates) if len(sizes) > 1 else None
        written: list[ManifestEntry] = []
        for (pbytes, bucket), writer, start, size, file_stats in zip(slots, writers, offsets, sizes, stats):
            rows_kv = kv.slice(int(start), int(size))
            metas = writer.write_kv(rows_kv, file_stats, dictionary)
            total = self._buckets.of_partition(pbytes) if self._postpone else self.table.total_buckets
            written += [ManifestEntry(ADD, pbytes, bucket, total, m) for m in metas]
            if self._input_changelog:
                metas = self._changelog_writer((pbytes, bucket), writer).write_kv(rows_kv, file_stats, dictionary)
                written += [ManifestEntry(ADD, pbytes, bucket, total, m, changelog=True) for m in metas]
        self.entries += written
        return written

    def _changelog_writer(self, slot: tuple[bytes, int], data_writer: KeyValueFileWriter) -> KeyValueFileWriter:
        writer = self._changelog_writers.get(slot)
        if writer is None:
            writer = KeyValueFileWriter(self.table.io, self.schema, data_writer.bucket_dir,
                                        prefix=CHANGELOG_FILE_PREFIX)
            self._changelog_writers[slot] = writer
        return writer

    def _group_ids(self, rows: pa.Table, buckets: pa.Array) -> np.ndarray:
        gid = buckets.to_numpy(zero_copy_only=False).astype(np.int64)
        width = int(gid.max()) + 1
        for k in self.schema.partition_keys:
            enc = pc.dictionary_encode(rows.column(k).combine_chunks(), null_encoding="encode")
            codes = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
            gid = gid + codes * width
            width *= len(enc.dictionary)
        return gid

    def prepare_commit(self) -> list[ManifestEntry]:
        entries, self.entries = self.entries, []
        return entries

    def commit(self, kind: str = APPEND, commit_user: str | None = None) -> CommitResult | None:
        return self.table.new_commit(commit_user).commit_or_abort(self.prepare_commit(), kind)
