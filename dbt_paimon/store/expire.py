"""Snapshot expiration, and the file deletion shared with tag deletion and rollback.

Which snapshots expire is decided exactly as Paimon's ExpireSnapshotsImpl.expire() decides it:

    min          = max(latest - snapshot.num-retained.max + 1, earliest)
    maxExclusive = latest - snapshot.num-retained.min + 1
                   , capped by the smallest `nextSnapshot` of the table's consumers
                   , capped by earliest + snapshot.expire.limit
    for id in [min, maxExclusive): stop at the first id whose NEXT snapshot is younger than
                                   now - snapshot.time-retained; expire [earliest, id)
    otherwise expire [earliest, maxExclusive)

Expiring [begin, end) then deletes, in this order (ExpireSnapshotsImpl.expireUntil):
1. data files: for every snapshot in (begin, end], the files its delta manifest list DELETEs (and
   does not ADD again, as a level upgrade does), unless the nearest tag before that snapshot holds
   them. A file deleted by snapshot k is live in no snapshot >= k, so no retained snapshot (>= end)
   references it; and a file's life is one contiguous range of snapshots, so when any older tag
   holds it, the nearest one before k does. As an extra guard nothing live in snapshot `end` is
   deleted.
2. manifests, index files, index manifests, then manifest lists of the expired snapshots, unless
   referenced by snapshot `end` or a tag overlapping [begin, end) (the skipping set).
3. the snapshot files, oldest first; then the EARLIEST hint (= end).

A retained snapshot never references a deleted file at any point, so a process killed midway
leaves every retained snapshot readable. The expired snapshots whose files were partly deleted
still exist until step 3 finishes; a re-run finds them as the earliest ones, reads what is left of
them (a missing manifest counts as empty, as Paimon's tryReadManifestList does) and finishes.

Changelog files do not exist in dbt-paimon tables (no changelog-producer), so none are handled.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

from . import binary_row
from .errors import CorruptTableError, PaimonError
from .fileio import FileIO, local_path
from .index import HashIndexFile, IndexManifestEntry, IndexManifestFile
from .manifest import ADD, ManifestEntry, ManifestFile, ManifestFileMeta, ManifestList, merge_entries
from .options import parse_duration_ms
from .paths import bucket_dir, partition_path
from .schema import TableSchema
from .snapshot import Snapshot, SnapshotManager
from .tags import TagManager, snapshot_json_of_tag

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1

# Kinds of deleted files, in the order expiration deletes them (the hook sees these names).
DATA, MANIFEST, INDEX_FILE, INDEX_MANIFEST, MANIFEST_LIST, SNAPSHOT, EARLIEST_HINT = (
    "data", "manifest", "index", "index-manifest", "manifest-list", "snapshot", "earliest-hint")

Hook = Callable[[str, str], None]


@dataclass(frozen=True)
class ExpireConfig:
    """Paimon's ExpireConfig for snapshots. The builder defaults (no limits but at least one
    snapshot retained) apply to fields a caller leaves out; `from_options` uses the table options
    with CoreOptions' defaults."""
    retain_max: int = INT_MAX
    retain_min: int = 1
    time_retained_ms: int = LONG_MAX
    max_deletes: int = INT_MAX

    @staticmethod
    def from_options(schema: TableSchema) -> "ExpireConfig":
        o = schema.core
        return ExpireConfig(
            retain_max=int(o.get("snapshot.num-retained.max", str(INT_MAX))),
            retain_min=int(o.get("snapshot.num-retained.min", "10")),
            time_retained_ms=parse_duration_ms("snapshot.time-retained", o.get("snapshot.time-retained", "1h")),
            max_deletes=int(o.get("snapshot.expire.limit", "50")),
        )

    def check(self) -> None:
        if self.retain_min < 1:
            raise PaimonError(f"snapshot.num-retained.min should be at least 1, got {self.retain_min}")
        if self.retain_max < self.retain_min:
            raise PaimonError(f"retainMax ({self.retain_max}) must not be less than retainMin ({self.retain_min}).")
        if self.time_retained_ms < 0 or self.max_deletes < 0:
            raise PaimonError("snapshot.time-retained and snapshot.expire.limit must not be negative")


@dataclass
class ExpireResult:
    expired: list[int] = field(default_factory=list)  # snapshot ids whose files were deleted
    deleted: list[tuple[str, str]] = field(default_factory=list)  # (kind, path) of each deleted file

    def count(self, kind: str) -> int:
        return sum(1 for k, _ in self.deleted if k == kind)


def _file_key(e: ManifestEntry) -> tuple:
    """How Paimon tells data files apart when skipping (partition, bucket, file name: not level)."""
    return (e.partition, e.bucket, e.file.file_name)


class FileDeletion:
    """Reads what snapshots reference and deletes files no longer referenced (FileDeletionBase).

    `before_delete(kind, path)` is called before each deletion (a test hook to simulate a kill)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, before_delete: Hook | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.manifest_dir = f"{self.table_path}/manifest"
        self.manifest_lists = ManifestList(io, self.table_path)
        self.manifests = ManifestFile(io, self.table_path, schema.partition_types, schema.id)
        self.index_manifests = IndexManifestFile(io, self.table_path)
        self.index_files = HashIndexFile(io, self.table_path)
        self.before_delete = before_delete
        self.deleted: list[tuple[str, str]] = []
        self._bucket_dirs: dict[tuple[bytes, int], str] = {}

    # ---- deleting ------------------------------------------------------------------------------
    def delete(self, kind: str, path: str) -> None:
        if self.before_delete is not None:
            self.before_delete(kind, path)
        if self.io.delete(path):
            self.deleted.append((kind, path))

    def data_file_paths(self, e: ManifestEntry) -> list[str]:
        """The data file and its extra files (which sit beside it)."""
        if e.file.external_path:
            main = local_path(e.file.external_path)
            folder = os.path.dirname(main)
        else:
            key = (e.partition, e.bucket)
            folder = self._bucket_dirs.get(key)
            if folder is None:
                values = binary_row.deserialize(e.partition, self.schema.partition_types)
                pdir = partition_path(values, self.schema.partition_types, self.schema.partition_keys,
                                      self.schema.core.partition_default_name)
                folder = self._bucket_dirs[key] = bucket_dir(self.table_path, pdir, e.bucket)
            main = f"{folder}/{e.file.file_name}"
        return [main] + [f"{folder}/{x}" for x in e.file.extra_files]

    def delete_data_files(self, entries: Iterable[ManifestEntry]) -> None:
        done: set[str] = set()
        for e in entries:
            for path in self.data_file_paths(e):
                if path not in done:
                    done.add(path)
                    self.delete(DATA, path)

    def delete_metadata(self, manifests: Sequence[str], index_files: Sequence[IndexManifestEntry],
                        index_manifests: Sequence[str], manifest_lists: Sequence[str]) -> None:
        """Manifests before the lists naming them and index files before their index manifests, so
        that a re-run after a kill still finds whatever is left."""
        for name in manifests:
            self.delete(MANIFEST, f"{self.manifest_dir}/{name}")
        for e in index_files:
            self.delete(INDEX_FILE, self.index_files.path(e))
        for name in index_manifests:
            self.delete(INDEX_MANIFEST, f"{self.manifest_dir}/{name}")
        for name in manifest_lists:
            self.delete(MANIFEST_LIST, f"{self.manifest_dir}/{name}")

    # ---- reading -------------------------------------------------------------------------------
    def try_read_list(self, name: str | None) -> list[ManifestFileMeta]:
        """A manifest list, or nothing when it is gone or damaged (tryReadManifestList)."""
        if not name:
            return []
        try:
            return self.manifest_lists.read(name)
        except CorruptTableError:
            return []

    def data_manifests(self, snapshot: Snapshot) -> list[ManifestFileMeta]:
        """The data manifests of a snapshot (raises CorruptTableError when one is unreadable)."""
        return self.manifest_lists.read(snapshot.base_manifest_list) + self.manifest_lists.read(
            snapshot.delta_manifest_list)

    def live_entries(self, snapshot: Snapshot) -> dict[tuple, ManifestEntry]:
        """The merged live data files of a snapshot, strictly read."""
        entries: list[ManifestEntry] = []
        for m in self.data_manifests(snapshot):
            entries.extend(self.manifests.read(m.file_name))
        return merge_entries(entries)

    def data_file_keys(self, snapshots: Iterable[Snapshot]) -> set[tuple]:
        out: set[tuple] = set()
        for s in snapshots:
            out.update(_file_key(e) for e in self.live_entries(s).values())
        return out

    def index_entries(self, snapshot: Snapshot, strict: bool) -> list[IndexManifestEntry] | None:
        """The index manifest's entries; None when it is missing and not strict."""
        name = snapshot.index_manifest
        if not name:
            return []
        if not strict and not self.io.exists(f"{self.manifest_dir}/{name}"):
            return None
        return self.index_manifests.read(name)

    def manifest_skipping_set(self, snapshots: Iterable[Snapshot]) -> set[str]:
        """Every metadata file name these snapshots reference (manifest lists, manifests, index
        manifest, index files); raises CorruptTableError when one cannot be read."""
        out: set[str] = set()
        for s in snapshots:
            out.add(s.base_manifest_list)
            out.add(s.delta_manifest_list)
            out.update(m.file_name for m in self.data_manifests(s))
            if s.index_manifest:
                out.add(s.index_manifest)
                out.update(e.file_name for e in self.index_entries(s, strict=True))
        return out

    def plan_manifests(self, snapshot: Snapshot, skipping: set[str], manifests: list[str],
                       index_files: list[IndexManifestEntry], index_manifests: list[str],
                       manifest_lists: list[str]) -> None:
        """Add the metadata files of `snapshot` that are not in `skipping` (which grows, so a file
        shared by several expired snapshots is listed once) (planManifestsCleaner)."""
        for list_name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
            for m in self.try_read_list(list_name):
                if m.file_name not in skipping:
                    skipping.add(m.file_name)
                    manifests.append(m.file_name)
            if list_name and list_name not in skipping:
                skipping.add(list_name)
                manifest_lists.append(list_name)
        entries = self.index_entries(snapshot, strict=False)
        if entries is None:  # already deleted by an earlier (killed) run
            return
        for e in entries:
            if e.file_name not in skipping:
                skipping.add(e.file_name)
                index_files.append(e)
        if snapshot.index_manifest and snapshot.index_manifest not in skipping:
            skipping.add(snapshot.index_manifest)
            index_manifests.append(snapshot.index_manifest)

    def clean_manifests(self, snapshots: Iterable[Snapshot], skipping: set[str]) -> None:
        manifests: list[str] = []
        index_files: list[IndexManifestEntry] = []
        index_manifests: list[str] = []
        lists: list[str] = []
        for s in snapshots:
            self.plan_manifests(s, skipping, manifests, index_files, index_manifests, lists)
        self.delete_metadata(manifests, index_files, index_manifests, lists)

    def deleted_in_delta(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Data files the snapshot's delta DELETEs and does not ADD again (planDeletedInDeltaManifest);
        nothing when the delta cannot be read (Paimon cancels that snapshot's deletion)."""
        try:
            metas = self.manifest_lists.read(snapshot.delta_manifest_list)
            entries = [e for m in metas for e in self.manifests.read(m.file_name)]
        except CorruptTableError:
            return []
        deleted: dict[tuple, ManifestEntry] = {}
        added: set[tuple] = set()
        for e in entries:
            key = _file_key(e)
            if e.kind == ADD:
                added.add(key)
                deleted.pop(key, None)
            else:
                deleted[key] = e
        # A file ADDed again in the same delta (a level upgrade) stays, whatever the entry order.
        return [e for k, e in deleted.items() if k not in added]

    # ---- tag deletion (TagManager.doClean) ------------------------------------------------------
    def clean_tag(self, tagged: Snapshot, tagged_snapshots: Sequence[Snapshot], earliest: Snapshot | None) -> None:
        """Delete what only the deleted tag of an expired snapshot referenced: everything it
        references except what its left neighbour tag and its nearest right neighbour (the next tag
        or the earliest snapshot, whichever comes first) reference."""
        ids = [s.id for s in tagged_snapshots]
        if tagged.id not in ids:
            raise PaimonError(f"Didn't find tag with snapshot id '{tagged.id}'. This is unexpected.")
        i = ids.index(tagged.id)
        keep: list[Snapshot] = []
        if i > 0:
            keep.append(tagged_snapshots[i - 1])
        right = earliest
        if i + 1 < len(tagged_snapshots):
            right_tag = tagged_snapshots[i + 1]
            right = right if right is not None and right.id < right_tag.id else right_tag
        if right is not None:
            keep.append(right)
        try:
            keep_files = self.data_file_keys(keep)
            entries = []
            for m in self.try_read_list(tagged.base_manifest_list) + self.try_read_list(tagged.delta_manifest_list):
                entries.extend(self.manifests.read(m.file_name))
            candidates = merge_entries(entries).values()
        except CorruptTableError:
            candidates = None  # skip data files, as Paimon does when it cannot build the skipper
        if candidates is not None:
            self.delete_data_files(e for e in candidates if _file_key(e) not in keep_files)
        try:
            skipping = self.manifest_skipping_set(keep)
        except CorruptTableError:
            return
        self.clean_manifests([tagged], skipping)


def _previous(sorted_snapshots: Sequence[Snapshot], target: int, or_equal: bool) -> int:
    """Index of the last snapshot with id < target (<= with or_equal), -1 when none
    (SnapshotManager.findPreviousSnapshot / findPreviousOrEqualSnapshot)."""
    for i in range(len(sorted_snapshots) - 1, -1, -1):
        sid = sorted_snapshots[i].id
        if sid < target or (or_equal and sid == target):
            return i
    return -1


def consumer_min_next_snapshot(io: FileIO, table_path: str) -> int | None:
    """The smallest `nextSnapshot` of the table's consumers (`<table>/consumer/consumer-<id>`)."""
    folder = f"{table_path.rstrip('/')}/consumer"
    found = []
    for name in io.list_names(folder):
        if not name.startswith("consumer-"):
            continue
        try:
            found.append(int(json.loads(io.read_text(f"{folder}/{name}"))["nextSnapshot"]))
        except FileNotFoundError:
            continue
        except (ValueError, KeyError, TypeError) as e:
            raise CorruptTableError(f"consumer file {folder}/{name} is unreadable: {e}") from None
    return min(found) if found else None


class SnapshotExpiration:
    """ExpireSnapshotsImpl over one table."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, config: ExpireConfig | None = None,
                 now_ms: Callable[[], int] | None = None, before_delete: Hook | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.config = config or ExpireConfig.from_options(schema)
        self.snapshots = SnapshotManager(io, self.table_path)
        self.tags = TagManager(io, self.table_path)
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))
        self.deletion = FileDeletion(io, self.table_path, schema, before_delete)

    def expire(self) -> ExpireResult:
        c = self.config
        c.check()
        older_than = self.now_ms() - c.time_retained_ms
        latest = self.snapshots.latest_id()
        if latest is None:
            return ExpireResult()
        earliest = self.snapshots.earliest_id()
        if earliest is None:
            return ExpireResult()
        low = max(latest - c.retain_max + 1, earliest)
        max_exclusive = latest - c.retain_min + 1
        consumer = consumer_min_next_snapshot(self.io, self.table_path)
        if consumer is not None:
            max_exclusive = min(max_exclusive, consumer)
        max_exclusive = min(max_exclusive, earliest + c.max_deletes)
        for sid in range(low, max_exclusive):
            # a snapshot expires only once its NEXT snapshot is older than the time retained
            nxt = self.snapshots.try_snapshot(sid + 1)
            if nxt is not None and older_than <= nxt.time_millis:
                return self.expire_until(earliest, sid)
        return self.expire_until(earliest, max_exclusive)

    def expire_until(self, earliest: int, end_exclusive: int) -> ExpireResult:
        """Expire the snapshots in [earliest, end_exclusive)."""
        result = ExpireResult()
        if end_exclusive <= earliest:
            # Paimon writes the hint only when it is missing; a hint left pointing at a deleted
            # snapshot (a run killed before writing it) is repaired too.
            if self.snapshots.earliest_hint() != earliest:
                self._earliest_hint(earliest)
            return result
        end = self.snapshots.try_snapshot(end_exclusive)
        if end is None:
            # Paimon returns 0 here after deleting data files; nothing is deleted when the snapshot
            # that decides what stays is gone (a concurrent rollback or expiration).
            return result
        including_end = [s for s in (self.snapshots.try_snapshot(i) for i in range(earliest, end_exclusive))
                         if s is not None] + [end]
        excluding_end = including_end[:-1]
        begin = including_end[0].id
        tagged = self.tags.tagged_snapshots()
        d = self.deletion

        # 1. data files deleted by the snapshots in (begin, end], unless the previous tag holds them
        end_live = d.data_file_keys([end])
        tag_files: dict[int, set[tuple] | None] = {}
        for s in including_end:
            if s.id == begin:
                continue
            t = _previous(tagged, s.id, or_equal=False)
            skip: set[tuple] = set()
            if t >= 0:
                tag = tagged[t]
                if tag.id not in tag_files:
                    try:
                        tag_files[tag.id] = d.data_file_keys([tag])
                    except CorruptTableError:
                        tag_files[tag.id] = None  # cannot tell what the tag holds: keep everything
                if tag_files[tag.id] is None:
                    continue
                skip = tag_files[tag.id]
            d.delete_data_files(e for e in d.deleted_in_delta(s)
                                if _file_key(e) not in skip and _file_key(e) not in end_live)

        # 2. manifests, index files, index manifests and manifest lists
        skipping_snapshots = self._skipping_tags(tagged, begin, end_exclusive) + [end]
        try:
            skipping = d.manifest_skipping_set(skipping_snapshots)
        except CorruptTableError:
            skipping = None  # Paimon: skip cleaning manifests when the skipping set cannot be built
        if skipping is not None:
            d.clean_manifests(excluding_end, skipping)

        # 3. snapshot files, oldest first, then the EARLIEST hint
        for s in excluding_end:
            d.delete(SNAPSHOT, self.snapshots.path(s.id))
        self._earliest_hint(end_exclusive)
        result.expired = [s.id for s in excluding_end]
        result.deleted = list(d.deleted)
        d.deleted.clear()
        return result

    def _earliest_hint(self, snapshot_id: int) -> None:
        if self.deletion.before_delete is not None:
            self.deletion.before_delete(EARLIEST_HINT, f"{self.snapshots.dir}/EARLIEST")
        self.snapshots.commit_earliest_hint(snapshot_id)

    @staticmethod
    def _skipping_tags(sorted_tags: Sequence[Snapshot], begin: int, end_exclusive: int) -> list[Snapshot]:
        """Tags overlapping [begin, end_exclusive), including the last tag at or before begin
        (ExpireSnapshotsImpl.findSkippingTags)."""
        right = _previous(sorted_tags, end_exclusive, or_equal=False)
        if right < 0:
            return []
        left = max(_previous(sorted_tags, begin, or_equal=True), 0)
        return list(sorted_tags[left:right + 1])


# ---- rollback ------------------------------------------------------------------------------------------

@dataclass
class RollbackResult:
    snapshot: Snapshot
    removed_snapshots: list[int] = field(default_factory=list)
    removed_tags: list[str] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)


def rollback(io: FileIO, table_path: str, schema: TableSchema, target: int | str,
             before_delete: Hook | None = None) -> RollbackResult:
    """Roll the table back to a snapshot id or a tag name, as Paimon's Table.rollbackTo.

    Paimon (RollbackHelper.cleanLargerThan): the LATEST hint is set to the target, the snapshots
    after it are deleted newest first, then the tags of later snapshots; a tag whose snapshot has
    expired is written back as the snapshot file and becomes EARLIEST. Paimon >= 1.2 leaves the
    files of the removed snapshots to orphan-file cleaning; here they are deleted afterwards when
    neither the target nor a remaining tag references them. Those are read before any deletion and
    removed only after the snapshot files, so a reader never sees a snapshot with missing files;
    a kill after the snapshot files are gone leaves those files as orphans, never a broken table.
    """
    root = table_path.rstrip("/")
    snapshots = SnapshotManager(io, root)
    tags = TagManager(io, root)
    tag_text = None
    if isinstance(target, bool) or not isinstance(target, (int, str)):
        raise PaimonError(f"rollback target must be a snapshot id or a tag name, got {target!r}")
    if isinstance(target, int):
        retained = snapshots.try_snapshot(target)
        if retained is None:
            raise PaimonError(f"Rollback snapshot '{target}' doesn't exist.")
    else:
        tag_text = tags.read_text(target) if target.strip() else None
        if tag_text is None:
            raise PaimonError(f"Tag '{target}' doesn't exist.")
        retained = tags.parse(target, tag_text, tags.path(target)).snapshot
    earliest = snapshots.earliest_id()
    latest = snapshots.latest_id()
    result = RollbackResult(retained)
    deletion = FileDeletion(io, root, schema, before_delete)

    # What the removed snapshots and tags reference, read before anything is removed.
    start = max(earliest, retained.id + 1) if earliest is not None else None
    removed = [] if start is None else [
        s for s in (snapshots.try_snapshot(i) for i in range(start, (latest or 0) + 1)) if s is not None]
    removed_tags = [t for t in tags.tags() if t.snapshot.id > retained.id]
    kept_tags = {t.snapshot.id: t.snapshot for t in tags.tags() if t.snapshot.id <= retained.id}
    removed_ids = {s.id for s in removed}
    extra = {t.snapshot.id: t.snapshot for t in removed_tags if t.snapshot.id not in removed_ids}
    # Every data file a removed snapshot references is live in the first of them or added by a
    # later one's delta; removed tags of expired snapshots add their own live files. What cannot be
    # read is left alone (an orphan at worst).
    data: dict[tuple, ManifestEntry] = {}
    for i, s in enumerate(removed + list(extra.values())):
        try:
            if i == 0 or s.id in extra:
                entries = list(deletion.live_entries(s).values())
            else:
                entries = [e for m in deletion.manifest_lists.read(s.delta_manifest_list)
                           for e in deletion.manifests.read(m.file_name) if e.kind == ADD]
        except CorruptTableError:
            continue
        data.update({_file_key(e): e for e in entries})
    keep = [retained] + list(kept_tags.values())
    keep_files = deletion.data_file_keys(keep)
    skipping = deletion.manifest_skipping_set(keep)

    # Paimon's order: LATEST hint, snapshot files newest first, tags of later snapshots.
    snapshots.commit_latest_hint(retained.id)
    for s in reversed(removed):
        deletion.delete(SNAPSHOT, snapshots.path(s.id))
    for t in sorted(removed_tags, key=lambda t: (-t.snapshot.id, t.name)):
        io.delete(tags.path(t.name))
    result.removed_snapshots = [s.id for s in removed]
    result.removed_tags = [t.name for t in removed_tags]
    if tag_text is not None and not snapshots.exists(retained.id):
        # the tagged snapshot had expired: it becomes the only snapshot (createSnapshotFileIfNeeded)
        io.write_exclusive(snapshots.path(retained.id), snapshot_json_of_tag(tag_text))
        snapshots.commit_earliest_hint(retained.id)

    # Then the files nothing left references.
    deletion.delete_data_files(e for k, e in data.items() if k not in keep_files)
    deletion.clean_manifests(list(removed) + list(extra.values()), skipping)
    result.deleted = list(deletion.deleted)
    return result


def expire_tags(io: FileIO, table_path: str, schema: TableSchema, now=None, older_than=None,
                before_delete: Hook | None = None) -> list[str]:
    """Delete the tags past their retention (Paimon's TagTimeExpire): a tag with a create time and a
    time retained expires once now is after createTime + timeRetained; with `older_than` (a naive
    local datetime) any tag created before it expires too (a tag without create time counts as
    created when its file was last modified)."""
    import datetime as dt

    tags = TagManager(io, table_path)
    now = now or dt.datetime.now()
    deletion = FileDeletion(io, table_path, schema, before_delete)
    expired = []
    for tag in tags.tags():
        created = tag.create_time
        if created is None or tag.time_retained is None:
            if older_than is None:
                continue
            if created is None:
                try:
                    created = dt.datetime.fromtimestamp(io.mtime_ms(tags.path(tag.name)) / 1000)
                except FileNotFoundError:
                    continue
        reached = tag.expired(now)
        if reached or (older_than is not None and older_than > created):
            tags.delete(tag.name, deletion)
            expired.append(tag.name)
    return expired
