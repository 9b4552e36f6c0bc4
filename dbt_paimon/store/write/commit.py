"""FileStoreCommit: turn written files into one new snapshot, atomically, with retries.

Order of writes: delta (and changelog) manifest -> base, delta (and changelog) manifest lists ->
snapshot-N (created only if absent) -> LATEST/EARLIEST hints. Until snapshot-N exists nothing is
visible, so a writer killed at any point leaves the table at the previous snapshot; its files are
unreferenced garbage.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Callable, Collection, Mapping, Sequence

from ..index.deletion_vectors import VectorsChange, bucket_indexes
from ..common.errors import CommitConflictError, CommitRetriesExhaustedError
from ..common.fileio import FileIO
from ..index.index import DELETION_VECTORS_INDEX, HASH_INDEX, IndexFileMeta, IndexManifestFile
from ..manifest.manifest import (ADD, DELETE, ManifestEntry, ManifestFile, ManifestFileMeta, ManifestList, data_entries,
                                 merge_entries)
from ..common.options import BucketMode
from ..maintenance.file_deletion import FileDeletion
from .postpone import check_counts_kept
from .retry import give_up_hint, wait_before_retry
from ..schema.schema import TableSchema
from ..snapshot.snapshot import APPEND, BATCH_COMMIT_IDENTIFIER, OVERWRITE, Snapshot, SnapshotManager


@dataclass
class CommitResult:
    snapshot: Snapshot
    attempts: int


class FileStoreCommit:
    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, commit_user: str | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.commit_user = commit_user or str(uuid.uuid4())
        self.snapshots = SnapshotManager(io, self.table_path, schema.branch)
        self.manifests = ManifestFile(io, self.table_path, schema.partition_types, schema.id)
        self.manifest_lists = ManifestList(io, self.table_path)
        # Test hook: called after data and manifests are written, before the snapshot (to simulate a kill).
        self.before_snapshot: Callable[[], None] | None = None
        # the snapshot this commit created, once created: from then on its files are the table's,
        # whatever fails after (a hint's write): no caller may delete them
        self.published: Snapshot | None = None

    def live_entries(self, snapshot: Snapshot | None) -> dict[tuple, ManifestEntry]:
        if snapshot is None:
            return {}
        metas = self.manifest_lists.read(snapshot.base_manifest_list) + self.manifest_lists.read(
            snapshot.delta_manifest_list)
        entries: list[ManifestEntry] = []
        for m in metas:
            entries.extend(self.manifests.read(m.file_name, m.file_size))
        return merge_entries(entries)

    def commit(self, entries: Sequence[ManifestEntry], kind: str = APPEND,
               expected_latest: int | None | type(...) = ..., index_manifest: str | None | type(...) = ...,
               vectors: Sequence[VectorsChange] = ()) -> CommitResult | None:
        """Commit ADD/DELETE entries as one snapshot of `kind`; the changelog files among them go to
        the snapshot's changelog manifest list (Paimon commits a snapshot for a changelog alone too).

        expected_latest: when given, fail with CommitConflictError if the latest snapshot id is not
        this one (a caller whose files depend on what it read, like the cross-partition upsert); a
        Snapshot: nor the same snapshot (a rollback, then a commit, reuse its id).
        vectors: a compaction's new deletion vectors per bucket, which fail the commit with
        CommitConflictError when another commit changed that bucket's vectors since they were read
        (their index files are then the caller's to delete).
        """
        if not entries and index_manifest is ... and not vectors:
            return None
        changelog = [e for e in entries if e.changelog]
        entries = data_entries(entries)
        if kind == OVERWRITE and changelog:  # as overwrite(): Paimon commits no changelog there
            self.abort(changelog)
            changelog = []
        delta_meta = self.manifests.write(list(entries)) if entries else None
        changelog_meta = self.manifests.write(changelog) if changelog else None
        deletes = [e for e in entries if e.kind == DELETE]
        if kind == APPEND and deletes:
            # Paimon's kind for a write that removes files (a copy-on-write DELETE, UPDATE or MERGE
            # rewrote them): readers of changes read an APPEND's new files as new rows, and skip an
            # OVERWRITE, which records no change per row
            kind = OVERWRITE
        max_retries = self.schema.core.commit_max_retries
        attempt = 0
        while True:
            attempt += 1
            latest = self.snapshots.latest()
            latest_id = latest.id if latest else None
            if expected_latest is not ... and not _as_expected(latest, expected_latest):
                self._discard([delta_meta, changelog_meta])
                raise CommitConflictError(
                    f"table {self.table_path} moved from snapshot {getattr(expected_latest, 'id', expected_latest)} to "
                    f"{latest_id} while this job ran")
            postpone = self.schema.bucket_mode == BucketMode.POSTPONE_MODE and kind != OVERWRITE
            live = self.live_entries(latest) if deletes or vectors or postpone else {}
            if postpone:
                try:
                    check_counts_kept(self.schema, entries, live.values())
                except CommitConflictError:
                    self._discard([delta_meta, changelog_meta])
                    raise
            if deletes:
                gone = [e for e in deletes if e.identifier not in live]
                if gone:
                    self._discard([delta_meta, changelog_meta])
                    raise CommitConflictError(
                        f"commit conflicts with snapshot {latest_id}: {len(gone)} file(s) it deletes are no longer "
                        f"live, e.g. {gone[0].file.file_name} in bucket {gone[0].bucket}")
            attempt_index = index_manifest
            if vectors:
                try:
                    attempt_index = self._with_vectors(latest, vectors, live)
                except CommitConflictError:
                    self._discard([delta_meta, changelog_meta])
                    raise
            snapshot, written = self._prepare(latest, delta_meta, entries, kind, attempt_index,
                                              changelog_meta, changelog)
            if self._publish(latest, snapshot):
                return CommitResult(snapshot, attempt)
            # Lost the race for snapshot-N: drop this attempt's lists and build on the new latest.
            for name in written:
                self.io.delete(f"{self.manifest_lists.dir}/{name}")
            if vectors and attempt_index not in (None, latest.index_manifest if latest else None):
                self.io.delete(f"{self.manifest_lists.dir}/{attempt_index}")
            if attempt > max_retries:
                self._discard([delta_meta, changelog_meta])
                raise CommitRetriesExhaustedError(
                    f"gave up committing to {self.table_path} after {attempt} attempts: other writers kept "
                    f"committing first ({give_up_hint(self.schema.core)})")
            wait_before_retry(self.schema.core, attempt)

    def overwrite(self, entries: Sequence[ManifestEntry], partitions: Collection[bytes] | None,
                  index_files: Mapping[tuple[bytes, int], IndexFileMeta] | None = None) -> CommitResult:
        """Paimon's OVERWRITE commit: the files live at commit time in `partitions` (serialized
        partition rows; None: the whole table) are deleted and `entries` added, as one snapshot.
        Files another writer committed there meanwhile are overwritten too, as in Paimon; a lost
        race for snapshot-N is retried on the new latest (commit.max-retries). On a dynamic-bucket
        table the overwritten partitions' HASH index files go too, replaced by `index_files`: those
        of the buckets `entries` wrote. Changelog files are not committed (Paimon: "Overwrite mode
        currently does not commit any changelog"): they are deleted."""
        self.abort([e for e in entries if e.changelog])
        entries = data_entries(entries)
        attempt = 0
        while True:
            attempt += 1
            latest = self.snapshots.latest()
            gone = [ManifestEntry(DELETE, e.partition, e.bucket, e.total_buckets, e.file)
                    for e in self.live_entries(latest).values() if partitions is None or e.partition in partitions]
            delta = gone + list(entries)
            delta_meta = self.manifests.write(delta) if delta else None
            # the overwritten partitions' index files go with their data files (unchanged when none)
            index_manifest = self._overwritten_index(latest, partitions, index_files or {})
            snapshot, written = self._prepare(latest, delta_meta, delta, OVERWRITE, index_manifest)
            if self._publish(latest, snapshot):
                return CommitResult(snapshot, attempt)
            for name in written:
                self.io.delete(f"{self.manifest_lists.dir}/{name}")
            if index_manifest not in (..., None, latest.index_manifest if latest else None):
                self.io.delete(f"{self.manifest_lists.dir}/{index_manifest}")
            self._discard([delta_meta])
            if attempt > self.schema.core.commit_max_retries:
                raise CommitRetriesExhaustedError(
                    f"gave up overwriting {self.table_path} after {attempt} attempts: other writers kept "
                    f"committing first ({give_up_hint(self.schema.core)})")
            wait_before_retry(self.schema.core, attempt)

    def _overwritten_index(self, latest: Snapshot | None, partitions: Collection[bytes] | None,
                           index_files: Mapping[tuple[bytes, int], IndexFileMeta]) -> str | None:
        """The index manifest of an overwrite on `latest`: the overwritten partitions' HASH files
        replaced by `index_files`, their deletion vectors gone with the files they named."""
        manifests = IndexManifestFile(self.io, self.table_path)
        previous = latest.index_manifest if latest else None
        entries = [e for e in (manifests.read(previous) if previous else [])
                   if partitions is None or e.partition in partitions]
        removed = [e.bucket_id for e in entries if e.index_type == HASH_INDEX and e.bucket_id not in index_files]
        vectors = {e.bucket_id: None for e in entries if e.index_type == DELETION_VECTORS_INDEX}
        return manifests.combine(previous, index_files, removed, vectors)

    def _with_vectors(self, latest: Snapshot | None, vectors: Sequence[VectorsChange], live: Mapping) -> str | None:
        """The index manifest of `latest` with the buckets' changed vectors replaced; CommitConflictError
        when one bucket's vectors are no longer those the compaction read, or a file whose rows it
        deleted is gone (another compaction rewrote it: its rows would be live twice)."""
        current = bucket_indexes(self.io, self.table_path, latest)
        names = {(e.partition, e.bucket, e.file.file_name) for e in live.values()}
        for v in vectors:
            now = current.get((v.partition, v.bucket))
            gone = [f for f in v.marked if (v.partition, v.bucket, f) not in names]
            if (now.file_name if now else None) != v.previous or gone:
                raise CommitConflictError(
                    f"commit conflicts with snapshot {latest.id if latest else None}: the deletion vectors of bucket "
                    f"{v.bucket} changed since this compaction read them")
        previous = latest.index_manifest if latest else None
        changed = {(v.partition, v.bucket): v.new for v in vectors if v.changed}
        return IndexManifestFile(self.io, self.table_path).combine(previous, {}, (), changed) if changed else previous

    def _publish(self, latest: Snapshot | None, snapshot: Snapshot) -> bool:
        """Create snapshot-N if absent, then the LATEST (and first time EARLIEST) hints; False when
        another writer created snapshot-N first."""
        if self.before_snapshot is not None:
            self.before_snapshot()
        if not self.snapshots.try_commit(snapshot):
            return False
        self.published = snapshot
        self.snapshots.commit_latest_hint(snapshot.id)
        if latest is None or not self.io.exists(f"{self.snapshots.dir}/EARLIEST"):
            self.snapshots.commit_earliest_hint(self.snapshots.earliest_id() or snapshot.id)
        return True

    def _prepare(self, latest: Snapshot | None, delta_meta: ManifestFileMeta | None,
                 entries: Sequence[ManifestEntry], kind: str, index_manifest,
                 changelog_meta: ManifestFileMeta | None = None,
                 changelog: Sequence[ManifestEntry] = ()) -> tuple[Snapshot, list[str]]:
        base: list[ManifestFileMeta] = []
        if latest is not None:
            base = self.manifest_lists.read(latest.base_manifest_list) + self.manifest_lists.read(
                latest.delta_manifest_list)
        if len(base) >= self.schema.core.manifest_merge_min_count or _mostly_cancelled(base):
            base = self._compact_manifests(base)
        list_id = uuid.uuid4()
        base_name, delta_name = f"manifest-list-{list_id}-0", f"manifest-list-{list_id}-1"
        base_size = self.manifest_lists.write(base, base_name)
        delta_size = self.manifest_lists.write([delta_meta] if delta_meta else [], delta_name)
        written = [base_name, delta_name]
        changelog_name = changelog_size = None
        if changelog_meta is not None:
            changelog_name = f"manifest-list-{list_id}-2"
            changelog_size = self.manifest_lists.write([changelog_meta], changelog_name)
            written.append(changelog_name)
        added = sum(e.file.row_count for e in entries if e.kind == ADD)
        removed = sum(e.file.row_count for e in entries if e.kind == DELETE)
        snapshot = Snapshot(
            id=(latest.id + 1) if latest else 1,
            schema_id=self.schema.id,
            base_manifest_list=base_name,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_name,
            delta_manifest_list_size=delta_size,
            changelog_manifest_list=changelog_name,
            changelog_manifest_list_size=changelog_size,
            changelog_record_count=sum(e.file.row_count for e in changelog) if changelog else None,
            index_manifest=(latest.index_manifest if latest else None) if index_manifest is ... else index_manifest,
            commit_user=self.commit_user,
            commit_identifier=BATCH_COMMIT_IDENTIFIER,
            commit_kind=kind,
            time_millis=int(time.time() * 1000),
            total_record_count=(latest.total_record_count if latest else 0) + added - removed,
            delta_record_count=added - removed,
        )
        return snapshot, written

    def _compact_manifests(self, metas: list[ManifestFileMeta]) -> list[ManifestFileMeta]:
        """Full manifest compaction: rewrite all live ADD entries into one manifest.

        The old manifest files stay on disk: earlier snapshots still reference them (expiration
        removes them later).
        """
        entries: list[ManifestEntry] = []
        for m in metas:
            entries.extend(self.manifests.read(m.file_name, m.file_size))
        live = list(merge_entries(entries).values())
        return [self.manifests.write(live)] if live else []

    def _discard(self, metas: list[ManifestFileMeta | None]) -> None:
        for m in metas:
            if m is not None:
                self.io.delete(f"{self.manifests.dir}/{m.file_name}")

    def commit_or_abort(self, entries: Sequence[ManifestEntry], kind: str = APPEND) -> CommitResult | None:
        """commit(), deleting the entries' data files when it fails (a writer's own commit)."""
        try:
            return self.commit(entries, kind)
        except Exception:
            if self.published is None:
                self.abort(entries)
            raise

    def abort(self, entries: Sequence[ManifestEntry]) -> None:
        """Delete the data files (with their file indexes beside them) of a commit that will not happen."""
        files = FileDeletion(self.io, self.table_path, self.schema)
        for e in entries:
            if e.kind == ADD:
                for path in files.data_file_paths(e):
                    self.io.delete(path)


def _mostly_cancelled(metas: Sequence[ManifestFileMeta]) -> bool:
    """Whether the manifests hold at least as many entries that cancel out (each DELETE and the
    ADD it removes) as live ones: a full compaction then at least halves what every plan decodes.
    Paimon waits for manifest.merge-min-count (30) manifests or 16 MB of them; after compactions a
    table's manifests are mostly such pairs well before either (W3-100M: 4,600 entries for 600
    live files, 0.15 s of each cold plan). Any Paimon reader reads the compacted manifests."""
    deleted = sum(m.num_deleted_files for m in metas)
    live = sum(m.num_added_files for m in metas) - deleted
    return deleted > 0 and 2 * deleted >= live



def _as_expected(latest: Snapshot | None, expected) -> bool:
    """Whether the latest snapshot is the one expected (an id, or a Snapshot: that very one)."""
    if isinstance(expected, Snapshot):
        return expected.same_as(latest)
    return (latest.id if latest else None) == expected
