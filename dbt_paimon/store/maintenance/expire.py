"""Snapshot expiration and tag expiration; the file deletion they share with tag deletion and
rollback is file_deletion.py.

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

A snapshot's changelog (changelog-producer) lives as long as the snapshot: the changelog files of
the expired snapshots go after step 1, their changelog manifests and lists in step 2 (Paimon's
coupled changelog; options that keep it longer are refused, option_validation.py).
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

from ..common.errors import CorruptTableError, PaimonError
from .file_deletion import EARLIEST_HINT, SNAPSHOT, FileDeletion, Hook, file_key
from ..common.fileio import FileIO
from ..common.options import INT_MAX
from ..schema.schema import TableSchema
from ..snapshot.consumers import consumers
from ..snapshot.snapshot import Snapshot, SnapshotManager
from ..snapshot.tags import TagManager


LONG_MAX = 2**63 - 1


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
            retain_max=o.snapshot_num_retained_max,
            retain_min=o.snapshot_num_retained_min,
            time_retained_ms=o.snapshot_time_retained_ms,
            max_deletes=o.snapshot_expire_limit,
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


def _previous(sorted_snapshots: Sequence[Snapshot], target: int, or_equal: bool) -> int:
    """Index of the last snapshot with id < target (<= with or_equal), -1 when none
    (SnapshotManager.findPreviousSnapshot / findPreviousOrEqualSnapshot)."""
    for i in range(len(sorted_snapshots) - 1, -1, -1):
        sid = sorted_snapshots[i].id
        if sid < target or (or_equal and sid == target):
            return i
    return -1


def consumer_min_next_snapshot(io: FileIO, table_path: str, branch: str | None = None) -> int | None:
    """The smallest `nextSnapshot` of the consumers of the table's branch (`consumer/consumer-<id>`)."""
    return min(consumers(io, table_path, branch).values(), default=None)


class SnapshotExpiration:
    """ExpireSnapshotsImpl over one table."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, config: ExpireConfig | None = None,
                 now_ms: Callable[[], int] | None = None, before_delete: Hook | None = None):
        self.io = io
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.config = config or ExpireConfig.from_options(schema)
        self.snapshots = SnapshotManager(io, self.table_path, schema.branch)
        self.tags = TagManager(io, self.table_path, schema.branch)
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
        consumer = consumer_min_next_snapshot(self.io, self.table_path, self.schema.branch)
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
                                if file_key(e) not in skip and file_key(e) not in end_live)
        for s in excluding_end:  # their changelog files, which nothing else references
            d.delete_data_files(d.changelog_files(s))

        # 2. manifests, index files, index manifests and manifest lists
        skipping_snapshots = self._skipping_tags(tagged, begin, end_exclusive) + [end]
        try:
            skipping = d.manifest_skipping_set(skipping_snapshots)
        except CorruptTableError:
            skipping = None  # Paimon: skip cleaning manifests when the skipping set cannot be built
        if skipping is not None:
            d.clean_manifests(excluding_end, skipping, changelog=True)

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


def expire_tags(io: FileIO, table_path: str, schema: TableSchema, now=None, older_than=None,
                before_delete: Hook | None = None) -> list[str]:
    """Delete the tags past their retention (Paimon's TagTimeExpire): a tag with a create time and a
    time retained expires once now is after createTime + timeRetained; with `older_than` (a naive
    local datetime) any tag created before it expires too (a tag without create time counts as
    created when its file was last modified)."""
    tags = TagManager(io, table_path, schema.branch)
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
