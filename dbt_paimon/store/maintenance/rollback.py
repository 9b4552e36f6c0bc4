"""Rollback to a snapshot or a tag (Paimon's Table.rollbackTo, RollbackHelper)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..common.errors import CorruptTableError, PaimonError
from .file_deletion import SNAPSHOT, FileDeletion, Hook, file_key
from ..common.fileio import FileIO
from ..manifest.manifest import ADD, ManifestEntry
from ..schema.schema import TableSchema
from ..snapshot.snapshot import Snapshot, SnapshotManager
from ..snapshot.tags import TagManager, snapshot_json_of_tag


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
    snapshots = SnapshotManager(io, root, schema.branch)
    tags = TagManager(io, root, schema.branch)
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
        data.update({file_key(e): e for e in entries})
    for s in removed:  # their changelog files, which nothing else references
        data.update({file_key(e): e for e in deletion.changelog_files(s)})
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
    deletion.clean_manifests(removed, skipping, changelog=True)
    deletion.clean_manifests(list(extra.values()), skipping)
    result.deleted = list(deletion.deleted)
    return result
