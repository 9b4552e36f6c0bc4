"""FileStoreTable: one Paimon primary-key table on a filesystem, and its batch TableWrite."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from typing import Mapping, Sequence

import pyarrow as pa

from .common import binary_row
from .common import options as opts
from .schema.option_validation import check_file_index, check_partition_expiration, validate as validate_options
from .write.commit import FileStoreCommit
from .write.append import AppendWrite
from .write.table_write import TableWrite
from .common.errors import SchemaError
from .maintenance.expire import ExpireConfig, ExpireResult, SnapshotExpiration, expire_tags
from .maintenance.file_deletion import FileDeletion
from .common.fileio import FileIO
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
from .snapshot.snapshot import Snapshot, SnapshotManager
from .snapshot.consumers import consumers, reset_consumer
from .snapshot.tags import Tag, TagManager
from .snapshot.branches import BranchManager



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
    def open(cls, path: str, io: FileIO | None = None, branch: str | None = None) -> "FileStoreTable":
        """The table at `path`, at its latest schema; of `branch` when given (Paimon's `branch` option)."""
        io = io or FileIO.get(path)
        return cls(path, latest_schema(io, path, branch), io)

    @staticmethod
    def exists(path: str, io: FileIO | None = None) -> bool:
        return bool(SchemaManager(io or FileIO.get(path), path).list_ids())

    # ---- metadata ------------------------------------------------------------------------------
    @property
    def branch(self) -> str:
        """The branch this table reads and writes: 'main', or the one it was opened on."""
        return self.schema.branch

    @property
    def snapshots(self) -> SnapshotManager:
        return SnapshotManager(self.io, self.path, self.branch)

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
        return consumers(self.io, self.path, self.branch)

    def reset_consumer(self, consumer_id: str, next_snapshot: int) -> None:
        """Record where a consumer reads next; snapshot expiration keeps that snapshot and later."""
        reset_consumer(self.io, self.path, consumer_id, next_snapshot, self.branch)

    def read_schema(self, snapshot, travelled: bool) -> TableSchema:
        """The schema a read of `snapshot` returns: the table's, unless the read travelled in time
        (a snapshot id or a tag), which reads with the snapshot's schema (its columns as they were),
        as Java Paimon and pypaimon do."""
        if travelled and snapshot is not None and snapshot.schema_id != self.schema.id:
            return SchemaManager(self.io, self.path, self.branch).schema(snapshot.schema_id)
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
        return TagManager(self.io, self.path, self.branch)

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

    # ---- branches (snapshot/branches.py) --------------------------------------------------------
    @property
    def branches(self) -> BranchManager:
        return BranchManager(self.io, self.path)

    def create_branch(self, name: str, tag: str | None = None, snapshot_id: int | None = None,
                      ignore_if_exists: bool = False) -> "FileStoreTable":
        """A branch of this table's branch: empty, from a tag, or from a snapshot; returns it opened."""
        self.branches.create(name, tag, snapshot_id, ignore_if_exists, source=self.branch)
        return FileStoreTable.open(self.path, self.io, name)

    def fast_forward(self, name: str) -> list[int]:
        """Make this table's branch (main) the branch `name`; the snapshot ids it gained."""
        copied = self.branches.fast_forward(name, target=self.branch)
        self.schema = latest_schema(self.io, self.path, self.branch)
        return copied

    def delete_branch(self, name: str) -> None:
        self.branches.delete(name, fallback=self.schema.options.get("scan.fallback-branch"))

    def list_branches(self) -> list[str]:
        return self.branches.names()

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
        SchemaManager(self.io, self.path, self.branch).commit(evolved)
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
