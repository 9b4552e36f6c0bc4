"""FileStoreScan: plan the live files of a snapshot as splits, one per (partition, bucket)."""

from __future__ import annotations

from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..common import binary_row
from ..schema import foreign_options
from ..index.deletion_vectors import bucket_indexes
from ..common.errors import PaimonError
from ..index.index import IndexFileMeta
from ..common.fileio import FileIO
from ..manifest.manifest import DataFileMeta, ManifestEntry, ManifestFile, ManifestList, merge_entries
from ..common.options import POSTPONE_BUCKET, MergeEngine
from ..common.paths import bucket_dir, partition_path
from ..schema.schema import TableSchema, check_index_layout
from ..snapshot.snapshot import Snapshot, SnapshotManager
from ..snapshot.tags import TagManager

PartitionFilter = Callable[[dict], bool] | Mapping[str, Any] | None


@dataclass
class DataSplit:
    snapshot_id: int
    partition: bytes
    partition_values: tuple
    bucket: int
    total_buckets: int
    bucket_path: str
    files: list[DataFileMeta] = field(default_factory=list)
    # the bucket's deletion vectors (deletion_vectors.py), on a table with deletion-vectors.enabled
    deletion_index: IndexFileMeta | None = None

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)

    @property
    def max_sequence_number(self) -> int:
        return max((f.max_sequence_number for f in self.files), default=-1)


def next_sequences(splits) -> dict[tuple[bytes, int], int]:
    """(partition, bucket) -> the bucket's next sequence number, from a plan's splits: where a
    writer of that bucket continues, as Paimon's writers restore it."""
    return {(s.partition, s.bucket): s.max_sequence_number + 1 for s in splits}


@dataclass
class Plan:
    snapshot: Snapshot | None
    splits: list[DataSplit]
    # a postpone-bucket table's rows waiting in bucket -2 for a postpone compaction, one split per
    # partition (bucket -2): batch readers leave them out (Paimon's onlyReadRealBuckets)
    parked: list[DataSplit] = field(default_factory=list)

    @property
    def postponed(self) -> int:
        """How many live files wait in bucket -2."""
        return sum(len(s.files) for s in self.parked)


def _matcher(partition_keys, flt: PartitionFilter) -> Callable[[tuple], bool]:
    if flt is None:
        return lambda values: True
    if callable(flt):
        return lambda values: bool(flt(dict(zip(partition_keys, values))))
    unknown = [k for k in flt if k not in partition_keys]
    if unknown:
        raise PaimonError(f"partition filter names {unknown}, which are not partition keys {list(partition_keys)}")
    wanted = {k: v for k, v in flt.items()}

    def match(values: tuple) -> bool:
        d = dict(zip(partition_keys, values))
        return all(d[k] == v or (v is not None and str(d[k]) == str(v)) for k, v in wanted.items())
    return match


def batch_scan_skip_level0(schema: TableSchema) -> bool:
    """Paimon's CoreOptions.batchScanSkipLevel0: a batch read of a first-row table, or of a table with
    deletion vectors (unless deletion-vectors.merge-on-read), leaves out its level-0 files (Java's
    batch scan and pypaimon's FileScanner both do), so rows written since the bucket's last
    compaction are not seen yet."""
    core = schema.core
    return core.merge_engine == MergeEngine.FIRST_ROW or (
        core.deletion_vectors and not core.deletion_vectors_merge_on_read)


class FileStoreScan:
    """Plans the live files of a snapshot. `skip_level0`: leave level-0 files out, as a batch read
    does for tables where batch_scan_skip_level0 holds; writers, compaction and the upsert
    bootstrap plan every file (pypaimon's plan_for_write)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, skip_level0: bool = False):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.skip_level0 = skip_level0
        check_index_layout(schema, self.table_path)
        foreign_options.check_readable(schema.options, self.table_path)
        self.snapshots = SnapshotManager(io, self.table_path, schema.branch)
        self.manifest_lists = ManifestList(io, self.table_path)
        self.manifests = ManifestFile(io, self.table_path, schema.partition_types, schema.id)

    def read_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        metas = self.manifest_lists.read(snapshot.base_manifest_list) + self.manifest_lists.read(
            snapshot.delta_manifest_list)
        # threads only where reading waits on the network: decoding holds the GIL, and each thread
        # started costs a switch interval when other threads run (~0.1 s per plan at 9 manifests)
        if len(metas) <= 1 or not self.io.is_object_store:
            return [e for m in metas for e in self.manifests.read(m.file_name, m.file_size)]
        with ThreadPoolExecutor(max_workers=min(8, len(metas))) as pool:
            parts = list(pool.map(lambda m: self.manifests.read(m.file_name, m.file_size), metas))
        return [e for p in parts for e in p]

    def plan(self, snapshot_id: int | None = None, partition_filter: PartitionFilter = None,
             tag: str | None = None) -> Plan:
        """Splits of the latest snapshot, of snapshot `snapshot_id`, or of the snapshot tag `tag` holds."""
        if tag is not None:
            if snapshot_id is not None:
                raise PaimonError("read as of a snapshot id or a tag, not both")
            snapshot = TagManager(self.io, self.table_path, self.schema.branch).get_or_throw(tag).snapshot
        else:
            snapshot = self.snapshots.travelled(snapshot_id) if snapshot_id is not None else self.snapshots.latest()
        return self.plan_snapshot(snapshot, partition_filter)

    def plan_snapshot(self, snapshot: Snapshot | None, partition_filter: PartitionFilter = None) -> Plan:
        if snapshot is None:
            return Plan(None, [])
        live = merge_entries(self.read_entries(snapshot))
        types = self.schema.partition_types
        keys = self.schema.partition_keys
        default = self.schema.core.partition_default_name
        match = _matcher(keys, partition_filter)
        groups: dict[tuple, list[ManifestEntry]] = defaultdict(list)
        for e in live.values():
            groups[(e.partition, e.bucket)].append(e)
        decoded: dict[bytes, tuple] = {}
        vectors = bucket_indexes(self.io, self.table_path, snapshot) if self.schema.core.deletion_vectors else {}
        splits, parked = [], []
        for (part, bucket), entries in groups.items():
            if self.skip_level0 and bucket != POSTPONE_BUCKET:
                entries = [e for e in entries if e.file.level > 0]
                if not entries:  # a bucket written since its last compaction only
                    continue
            if part not in decoded:
                decoded[part] = binary_row.deserialize(part, types)
            values = decoded[part]
            if not match(values):
                continue
            pdir = partition_path(values, types, keys, default)
            files = sorted((e.file for e in entries), key=lambda f: (f.level, f.min_sequence_number))
            # Paimon's readers read real buckets only: parked rows are a postpone compaction's input
            (parked if bucket == POSTPONE_BUCKET else splits).append(DataSplit(
                snapshot.id, part, values, bucket, entries[0].total_buckets, bucket_dir(self.table_path, pdir, bucket),
                files, vectors.get((part, bucket))))
        splits.sort(key=lambda s: (s.partition_values.__repr__(), s.bucket))
        parked.sort(key=lambda s: s.partition_values.__repr__())
        return Plan(snapshot, splits, parked)
