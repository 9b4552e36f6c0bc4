"""Remove orphan files: files in a table's directories that no snapshot, tag or changelog references
(Paimon's OrphanFilesClean / LocalOrphanFilesClean, the `remove_orphan_files` procedure).

Writers killed before their commit leave data files (and, killed later, a manifest and two manifest
lists) that nothing will ever reference; rollbacks and killed expirations leave more. As in Paimon:

1. Candidates: every file older than `older_than` (default 1 day) in `manifest/`, `index/`,
   `statistics/` and the bucket directories (`bucket-*` under `k=v` partition directories, one
   level per partition key), hidden temp files included. In `snapshot/` (and `changelog/`) every
   file that is not a snapshot (changelog) file or a hint is a candidate too; that is where a writer
   killed mid-commit leaves its temp file. Beyond Paimon, the temp files our FileIO leaves in
   `schema/` and `tag/` (`.<name>.<uuid>.tmp`) are candidates; schema, snapshot and tag files
   themselves never are.
2. Used files, by file name as Paimon matches them (names hold UUIDs): for every snapshot, every
   tag and every changelog, its manifest lists (base, delta, changelog), the manifests they list,
   the data files and extra files those manifests name (ADD and DELETE entries alike), the index
   manifest and its index files, and the statistics file.
3. The snapshot, tag and changelog lists are read again right before deleting, and what a newly
   appeared one references is added: a long job that commits during the scan keeps its files.
4. Each candidate not used is deleted, after checking again that it is still older than the cutoff.
   Then empty bucket and partition directories whose modification time was older than the cutoff
   when listed are removed (bottom-up), as Paimon's tryCleanDataDirectory does after a clean.

Safety against concurrent writers is Paimon's: a file younger than `older_than` is never deleted, so
`older_than` must exceed the longest a write job takes between writing a file and committing it.
Reading a snapshot's metadata that has vanished meanwhile (a concurrent expiration) skips it; a
metadata file that exists but cannot be read aborts the whole clean before anything is deleted.

Every branch counts (Paimon's validBranches): the used files are those of every branch's
snapshots, tags and changelogs, and each branch's own metadata directories are cleaned of temp files
like main's. A branch directory without a schema aborts the clean (its files are unknown), as in
Paimon. The data of a deleted branch is what this clean reclaims.

The dry run lists exactly what a real run would delete and deletes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..common.branch import MAIN, branch_root
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO
from ..index.index import INDEX_DIR, IndexManifestFile
from ..manifest.manifest import ManifestFile, ManifestList
from ..common.options import parse_duration_ms
from ..schema.schema import TableSchema, check_index_layout, latest_schema
from ..snapshot.snapshot import SnapshotManager
from ..snapshot.tags import TAG_DIR, TagManager
from .branch_files import other_branches

DEFAULT_OLDER_THAN_MS = 86_400_000  # Paimon: System.currentTimeMillis() - 1 day
MANIFEST_DIR, STATISTICS_DIR, SCHEMA_DIR, CHANGELOG_DIR = "manifest", "statistics", "schema", "changelog"
_HINTS = ("EARLIEST", "LATEST")
# FileIO's temp files (`.<name>.<uuid hex>.tmp`) and Java Paimon's (`.<name>.<uuid>.tmp`).
_TEMP_FILE = re.compile(r"^\..+\.[0-9a-fA-F-]{32,36}\.tmp$")


@dataclass
class OrphanFilesResult:
    """What a clean deleted (or, in a dry run, would delete)."""
    dry_run: bool
    older_than_millis: int  # the cutoff: files modified before this epoch millisecond were candidates
    paths: list[str] = field(default_factory=list)
    total_bytes: int = 0
    directories: list[str] = field(default_factory=list)  # empty data directories removed

    @property
    def count(self) -> int:
        return len(self.paths)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        cutoff = dt.datetime.fromtimestamp(self.older_than_millis / 1000).isoformat(sep=" ", timespec="seconds")
        dirs = f" and {len(self.directories)} empty director{'y' if len(self.directories) == 1 else 'ies'}" \
            if self.directories else ""
        return f"remove_orphan_files {verb} {self.count} file(s), {self.total_bytes} bytes{dirs} (older than {cutoff})"

    def as_dict(self) -> dict:
        """Plain values, for a dbt run-operation to log or return."""
        return {"dry_run": self.dry_run, "older_than_millis": self.older_than_millis, "deleted_file_count": self.count,
                "deleted_file_total_bytes": self.total_bytes, "deleted_files": list(self.paths),
                "deleted_directories": list(self.directories)}


def older_than_millis(older_than=None, now_ms: int | None = None) -> int:
    """The cutoff (epoch millis) for `older_than`: None (1 day, Paimon's default), a duration
    (milliseconds as int, datetime.timedelta, or a string such as '1 d', '2 h', '30 min'), or a
    point in time (datetime, or a string such as '2024-05-01 12:00:00' in local time, as Paimon's
    procedure takes it). A point in time must lie in the past, as Paimon requires."""
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    if older_than is None or (isinstance(older_than, str) and not older_than.strip()):
        return now - DEFAULT_OLDER_THAN_MS
    if isinstance(older_than, bool):
        raise PaimonError(f"older_than must be a duration or a timestamp, got {older_than!r}")
    if isinstance(older_than, dt.timedelta):
        duration = int(older_than.total_seconds() * 1000)
    elif isinstance(older_than, (int, float)):
        duration = int(older_than)
    elif isinstance(older_than, dt.datetime):
        return _point_in_time(older_than, now)
    elif isinstance(older_than, str):
        try:
            duration = parse_duration_ms("older_than", older_than)
        except PaimonError:
            try:
                point = dt.datetime.fromisoformat(older_than.strip())
            except ValueError:
                raise PaimonError(f"older_than must be a duration such as '1 d' or a timestamp such as "
                                  f"'2024-05-01 12:00:00', got {older_than!r}") from None
            return _point_in_time(point, now)
    else:
        raise PaimonError(f"older_than must be a duration or a timestamp, got {older_than!r}")
    if duration < 0:
        raise PaimonError(f"older_than must not be negative, got {older_than!r}")
    return now - duration


def _point_in_time(point: dt.datetime, now: int) -> int:
    millis = int(point.timestamp() * 1000)  # naive: local time, as Paimon's TimeZone.getDefault()
    if millis >= now:
        raise PaimonError("The arg olderThan must be less than now, because dataFiles that are currently being "
                          "written and not referenced by snapshots will be mistakenly cleaned up.")
    return millis


@dataclass
class _Candidate:
    path: str
    size: int


@dataclass
class _DataDir:
    path: str
    parent: str | None  # the data directory above (None: the table directory)
    old: bool  # modification time older than the cutoff when listed
    entries: int  # entries when listed


class OrphanFilesClean:
    """One clean of one table. `after_collect` is a test hook called once the used files have been
    collected the first time (to let a concurrent commit land there)."""

    def __init__(self, io: FileIO, table_path: str, schema: TableSchema, older_than_millis: int,
                 dry_run: bool = False):
        self.io = io
        self.root = table_path.rstrip("/")
        self.table_path = table_path.rstrip("/")
        self.schema = schema
        self.cutoff = int(older_than_millis)
        self.dry_run = dry_run
        self.manifest_lists = ManifestList(io, self.table_path)
        self.manifests = ManifestFile(io, self.table_path, schema.partition_types, schema.id)
        self.index_manifests = IndexManifestFile(io, self.table_path)
        self.after_collect: Callable[[], None] | None = None

    # ---- the clean -----------------------------------------------------------------------------
    def clean(self) -> OrphanFilesResult:
        branches = [MAIN, *other_branches(self.io, self.table_path, MAIN)]
        check_index_layout(self.schema, self.table_path)  # its index files would look like orphans
        result = OrphanFilesResult(self.dry_run, self.cutoff)
        by_name: dict[str, list[_Candidate]] = {}
        plain: list[_Candidate] = []  # candidates by name pattern alone (snapshot/, schema/ ... temp files)
        data_dirs: list[_DataDir] = []
        for directory in (MANIFEST_DIR, INDEX_DIR, STATISTICS_DIR):
            for c in self._old_files(f"{self.root}/{directory}"):
                by_name.setdefault(c.path.rsplit("/", 1)[-1], []).append(c)
        for d in self._data_dirs(data_dirs):
            for c in self._old_files(d):
                by_name.setdefault(c.path.rsplit("/", 1)[-1], []).append(c)
        for root in (branch_root(self.root, b) for b in branches):
            plain += self._old_files(f"{root}/snapshot", lambda n: not n.startswith("snapshot-") and n not in _HINTS)
            plain += self._old_files(f"{root}/{CHANGELOG_DIR}",
                                     lambda n: not n.startswith("changelog-") and n not in _HINTS)
            for directory in (SCHEMA_DIR, TAG_DIR):
                plain += self._old_files(f"{root}/{directory}", _TEMP_FILE.match)

        used: set[str] = set()
        seen: set[tuple[str, str, str]] = set()
        if by_name:
            self._collect_used(branches, used, seen)
            if self.after_collect is not None:
                self.after_collect()
            # again, right before deleting: a commit (or tag, or branch) that appeared meanwhile keeps its files
            self._collect_used([MAIN, *other_branches(self.io, self.table_path, MAIN)], used, seen)

        orphans = plain + [c for name, cs in by_name.items() if name not in used for c in cs]
        orphans.sort(key=lambda c: c.path)
        for c in orphans:
            if self.dry_run or self._delete(c.path):
                result.paths.append(c.path)
                result.total_bytes += c.size
        result.directories = self._clean_data_dirs(data_dirs, set(result.paths))
        return result

    # ---- candidates ----------------------------------------------------------------------------
    def _old_files(self, directory: str, name_filter: Callable[[str], object] | None = None) -> list[_Candidate]:
        """Regular files of one directory modified before the cutoff (none if it is missing)."""
        out = []
        for st in self.io.list_status(directory):
            if st.is_dir or (name_filter is not None and not name_filter(st.path.rsplit("/", 1)[-1])):
                continue
            if st.mtime_ms < self.cutoff:
                out.append(_Candidate(st.path, st.size))
        return out

    def _data_dirs(self, into: list[_DataDir]) -> list[str]:
        """The bucket directories (listFileDirs): `k=v` directories, one level per partition key,
        then `bucket-*`. Every directory visited is recorded in `into` for the empty-directory pass."""
        level_dirs = [self.root]
        for depth in range(len(self.schema.partition_keys) + 1):
            last = depth == len(self.schema.partition_keys)
            nxt: list[str] = []
            for path in level_dirs:
                for st in self.io.list_status(path):
                    name = st.path.rsplit("/", 1)[-1]
                    wanted = name.startswith("bucket-") if last else "=" in name
                    if not wanted or not st.is_dir:
                        continue
                    count = sum(1 for _ in self.io.list_status(st.path))
                    parent = None if path == self.root else path
                    into.append(_DataDir(st.path, parent, st.mtime_ms < self.cutoff, count))
                    nxt.append(st.path)
            level_dirs = nxt
        return level_dirs

    # ---- used files ----------------------------------------------------------------------------
    def _collect_used(self, branches: list[str], used: set[str], seen: set[tuple[str, ...]]) -> None:
        """Add the files referenced by every snapshot, tag and changelog of every branch not collected
        before (by content too: a rollback and a new commit can put a new snapshot under an old id)."""
        for branch in branches:
            snapshots, tags = SnapshotManager(self.io, self.root, branch), TagManager(self.io, self.root, branch)
            for sid in snapshots.ids():
                self._collect_json((branch, "snapshot", str(sid)), snapshots.path(sid), used, seen)
            for name in tags.names():
                self._collect_json((branch, "tag", name), tags.path(name), used, seen)
            changelog_dir = f"{branch_root(self.root, branch)}/{CHANGELOG_DIR}"
            for name in self.io.list_names(changelog_dir):
                if name.startswith("changelog-"):
                    self._collect_json((branch, "changelog", name), f"{changelog_dir}/{name}", used, seen)

    def _collect_json(self, key: tuple[str, ...], path: str, used: set[str], seen: set[tuple[str, ...]]) -> None:
        try:
            text = self.io.read_text(path)
        except FileNotFoundError:
            return  # expired, deleted or rolled back meanwhile: its files are someone else's to delete
        if key + (text,) in seen:
            return
        try:
            meta = json.loads(text)
        except ValueError as e:
            raise CorruptTableError(f"{path} is not valid JSON ({e}); orphan files clean aborted") from None
        seen.add(key + (text,))
        for list_key in ("changelogManifestList", "deltaManifestList", "baseManifestList"):
            name = meta.get(list_key)
            if not name:
                continue
            used.add(name)
            for m in self._read_or_empty(self.manifest_lists.read, f"{self.manifest_lists.dir}/{name}", name):
                if m.file_name not in used:
                    used.add(m.file_name)
                    for e in self._read_or_empty(self.manifests.read, f"{self.manifests.dir}/{m.file_name}",
                                                 m.file_name):
                        used.add(e.file.file_name)
                        used.update(e.file.extra_files)
        index_manifest = meta.get("indexManifest")
        if index_manifest:
            used.add(index_manifest)
            for e in self._read_or_empty(self.index_manifests.read, f"{self.index_manifests.dir}/{index_manifest}",
                                         index_manifest):
                used.add(e.file_name)
        if meta.get("statistics"):
            used.add(meta["statistics"])

    def _read_or_empty(self, read: Callable[[str], list], path: str, name: str) -> Iterable:
        """Paimon's retryReadingFiles: a file gone is read as empty (its snapshot is being expired),
        one present but unreadable aborts the clean (a file in use could otherwise be deleted)."""
        try:
            return read(name)
        except CorruptTableError:
            if self.io.exists(path):
                raise
            return []

    # ---- deleting ------------------------------------------------------------------------------
    def _delete(self, path: str) -> bool:
        try:
            if self.io.mtime_ms(path) >= self.cutoff:  # rewritten since it was listed: not an orphan
                return False
            return self.io.delete(path)
        except FileNotFoundError:
            return False

    def _clean_data_dirs(self, dirs: list[_DataDir], deleted: set[str]) -> list[str]:
        """Remove the data directories left empty (deepest first): old when listed, and every entry
        they held then is gone. os.rmdir refuses a directory a writer has put a file in meanwhile."""
        gone_in: dict[str, int] = {}
        for path in deleted:
            parent = path.rsplit("/", 1)[0]
            gone_in[parent] = gone_in.get(parent, 0) + 1
        removed: list[str] = []
        for d in sorted(dirs, key=lambda d: d.path.count("/"), reverse=True):
            if not d.old or gone_in.get(d.path, 0) < d.entries:
                continue
            if not self.dry_run and not self.io.delete_empty_directory(d.path):
                continue  # not empty (a concurrent writer), already gone, or an object store's prefix
            removed.append(d.path)
            if d.parent is not None:
                gone_in[d.parent] = gone_in.get(d.parent, 0) + 1
        return sorted(removed)


def remove_orphan_files(table, older_than_ms: int = DEFAULT_OLDER_THAN_MS, dry_run: bool = False,
                        now_ms: int | None = None) -> OrphanFilesResult:
    """Delete (or with dry_run only list) the files of `table` (a FileStoreTable or its path) that
    no snapshot, tag or changelog references and that were last modified more than `older_than_ms`
    milliseconds before now (`now_ms`, default the clock)."""
    if isinstance(table, str):
        io = FileIO.get(table)
        path, schema = table, latest_schema(io, table)
    else:
        io, path, schema = table.io, table.path, table.schema
    if older_than_ms < 0:
        raise PaimonError(f"older_than must not be negative, got {older_than_ms} ms")
    now = int(time.time() * 1000) if now_ms is None else int(now_ms)
    return OrphanFilesClean(io, path, schema, now - older_than_ms, dry_run).clean()
