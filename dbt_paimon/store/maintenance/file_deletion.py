"""The file deletion that snapshot expiration (expire.py), tag deletion (tags.py) and rollback
(rollback.py) share: Paimon's FileDeletionBase, and the file part of TagManager.doClean.

It reads what snapshots reference (a manifest list that is gone or damaged reads as empty, as
Paimon's tryReadManifestList) and deletes the files nothing kept references: data files with their
extra files, then manifests, index files, index manifests and manifest lists, in that order, so a
re-run after a kill still finds whatever is left. A hook sees each deletion before it happens. A file
another branch references is never deleted (branch_files.py).
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

from ..common import binary_row
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO
from ..index.index import HashIndexFile, IndexManifestEntry, IndexManifestFile
from ..manifest.manifest import ADD, ManifestEntry, ManifestFile, ManifestFileMeta, ManifestList, merge_entries
from ..common.paths import bucket_dir, data_file_path, partition_path
from ..schema.schema import TableSchema
from ..snapshot.snapshot import Snapshot
from .branch_files import held_names

# Kinds of deleted files, in the order expiration deletes them (the hook sees these names).
DATA, MANIFEST, INDEX_FILE, INDEX_MANIFEST, MANIFEST_LIST, SNAPSHOT, EARLIEST_HINT = (
    "data", "manifest", "index", "index-manifest", "manifest-list", "snapshot", "earliest-hint")

Hook = Callable[[str, str], None]
# the kinds that live in the table's shared directories, which every branch's snapshots name
_SHARED = (DATA, MANIFEST, INDEX_FILE, INDEX_MANIFEST, MANIFEST_LIST)


def file_key(e: ManifestEntry) -> tuple:
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
        self.kept: list[tuple[str, str]] = []  # files another branch still references
        self._bucket_dirs: dict[tuple[bytes, int], str] = {}
        self._held: set[str] | None = None

    # ---- deleting ------------------------------------------------------------------------------
    def delete(self, kind: str, path: str) -> None:
        if kind in _SHARED and path.rsplit("/", 1)[-1] in self.held():
            self.kept.append((kind, path))
            return
        if self.before_delete is not None:
            self.before_delete(kind, path)
        if self.io.delete(path):
            self.deleted.append((kind, path))

    def held(self) -> set[str]:
        """Names of the files other branches reference (branch_files.py), read at the first deletion."""
        if self._held is None:
            self._held = held_names(self.io, self.table_path, self.schema)
        return self._held

    def data_file_paths(self, e: ManifestEntry) -> list[str]:
        """The data file and its extra files (which sit beside it)."""
        key = (e.partition, e.bucket)
        folder = self._bucket_dirs.get(key)
        if folder is None:
            values = binary_row.deserialize(e.partition, self.schema.partition_types)
            pdir = partition_path(values, self.schema.partition_types, self.schema.partition_keys,
                                  self.schema.core.partition_default_name)
            folder = self._bucket_dirs[key] = bucket_dir(self.table_path, pdir, e.bucket)
        main = data_file_path(folder, e.file)
        folder = main.rsplit("/", 1)[0]  # extra files sit beside it, an external one too
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
            entries.extend(self.manifests.read(m.file_name, m.file_size))
        return merge_entries(entries)

    def data_file_keys(self, snapshots: Iterable[Snapshot]) -> set[tuple]:
        out: set[tuple] = set()
        for s in snapshots:
            out.update(file_key(e) for e in self.live_entries(s).values())
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
                       manifest_lists: list[str], changelog: bool = False) -> None:
        """Add the metadata files of `snapshot` that are not in `skipping` (which grows, so a file
        shared by several expired snapshots is listed once) (planManifestsCleaner); with
        `changelog`, its changelog manifests and list too (an expired or rolled back snapshot's,
        not a deleted tag's)."""
        lists = [snapshot.base_manifest_list, snapshot.delta_manifest_list]
        if changelog:
            lists.append(snapshot.changelog_manifest_list)
        for list_name in lists:
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

    def clean_manifests(self, snapshots: Iterable[Snapshot], skipping: set[str], changelog: bool = False) -> None:
        manifests: list[str] = []
        index_files: list[IndexManifestEntry] = []
        index_manifests: list[str] = []
        lists: list[str] = []
        for s in snapshots:
            self.plan_manifests(s, skipping, manifests, index_files, index_manifests, lists, changelog)
        self.delete_metadata(manifests, index_files, index_manifests, lists)

    def changelog_files(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The changelog files of a snapshot (its changelog manifests' ADDs); nothing when they are
        gone or damaged (an earlier, killed run deleted them)."""
        try:
            return [e for m in self.try_read_list(snapshot.changelog_manifest_list)
                    for e in self.manifests.read(m.file_name, m.file_size) if e.kind == ADD]
        except CorruptTableError:
            return []

    def deleted_in_delta(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """Data files the snapshot's delta DELETEs and does not ADD again (planDeletedInDeltaManifest);
        nothing when the delta cannot be read (Paimon cancels that snapshot's deletion)."""
        try:
            metas = self.manifest_lists.read(snapshot.delta_manifest_list)
            entries = [e for m in metas for e in self.manifests.read(m.file_name, m.file_size)]
        except CorruptTableError:
            return []
        deleted: dict[tuple, ManifestEntry] = {}
        added: set[tuple] = set()
        for e in entries:
            key = file_key(e)
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
                entries.extend(self.manifests.read(m.file_name, m.file_size))
            candidates = merge_entries(entries).values()
        except CorruptTableError:
            candidates = None  # skip data files, as Paimon does when it cannot build the skipper
        if candidates is not None:
            self.delete_data_files(e for e in candidates if file_key(e) not in keep_files)
        try:
            skipping = self.manifest_skipping_set(keep)
        except CorruptTableError:
            return
        self.clean_manifests([tagged], skipping)
