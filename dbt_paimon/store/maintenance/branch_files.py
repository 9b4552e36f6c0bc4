"""The files other branches hold: what expiration, tag deletion and rollback of one branch must keep.

Every branch's snapshots and tags name manifests and data files in the table's shared directories,
and a branch made from a snapshot starts with that very snapshot's manifest lists. Paimon's own
expiration does not look at other branches (only its orphan clean does); ours keeps every file any
snapshot, tag or long-lived changelog of another branch references, by file name (names hold UUIDs,
as orphan_files.py matches them). The set is read once per maintenance run, and only when that run
deletes something; a table without branches costs one listing.
"""

from __future__ import annotations

from ..common.branch import MAIN, normalize
from ..common.errors import CorruptTableError, PaimonError
from ..common.fileio import FileIO
from ..index.index import IndexManifestFile
from ..manifest.manifest import ManifestFile, ManifestList
from ..schema.schema import TableSchema
from ..snapshot.branches import BranchManager
from ..snapshot.snapshot import Snapshot, SnapshotManager
from ..snapshot.tags import TagManager

CHANGELOG_DIR = "changelog"


def branch_snapshots(io: FileIO, table_path: str, branch: str) -> list[Snapshot]:
    """Every snapshot, tagged snapshot and long-lived changelog of one branch (one per file)."""
    snapshots = SnapshotManager(io, table_path, branch)
    out = [s for s in (snapshots.try_snapshot(i) for i in snapshots.ids()) if s is not None]
    out += [t.snapshot for t in TagManager(io, table_path, branch).tags()]
    changelog_dir = snapshots.dir.rsplit("/", 1)[0] + f"/{CHANGELOG_DIR}"
    for name in io.list_names(changelog_dir):
        if name.startswith("changelog-"):
            try:
                out.append(Snapshot.from_json(io.read_text(f"{changelog_dir}/{name}"), f"{changelog_dir}/{name}"))
            except FileNotFoundError:
                continue
    return out


def other_branches(io: FileIO, table_path: str, branch: str) -> list[str]:
    """Every branch of the table but `branch`, main included when `branch` is not main. A branch
    directory without a schema (a creation killed early) is refused: its files are unknown."""
    manager = BranchManager(io, table_path)
    names = manager.names(with_schema=False)
    broken = [n for n in names if not manager.exists(n)]
    if broken:
        raise PaimonError(f"Branches {broken} have no schemas. Cleaning aborted, nothing deleted. Please check "
                          "these branches manually (delete their directories or create them again).")
    branch = normalize(branch)
    return [n for n in [MAIN, *names] if n != branch]


def held_names(io: FileIO, table_path: str, schema: TableSchema) -> set[str]:
    """The names of every file another branch than `schema.branch` references: manifest lists,
    manifests, data and extra files, changelog files, index manifests and index files, statistics."""
    held: set[str] = set()
    others = other_branches(io, table_path, schema.branch)
    if not others:
        return held
    lists = ManifestList(io, table_path)
    manifests = ManifestFile(io, table_path, schema.partition_types, schema.id)
    index_manifests = IndexManifestFile(io, table_path)
    for branch in others:
        for s in branch_snapshots(io, table_path, branch):
            for list_name in (s.base_manifest_list, s.delta_manifest_list, s.changelog_manifest_list):
                if not list_name or list_name in held:
                    continue
                held.add(list_name)
                for m in _or_empty(io, f"{lists.dir}/{list_name}", lists.read, list_name):
                    if m.file_name in held:
                        continue
                    held.add(m.file_name)
                    for e in _or_empty(io, f"{manifests.dir}/{m.file_name}", manifests.read,
                                       m.file_name, m.file_size):
                        held.add(e.file.file_name)
                        held.update(e.file.extra_files)
            if s.index_manifest and s.index_manifest not in held:
                held.add(s.index_manifest)
                held.update(e.file_name for e in _or_empty(io, f"{index_manifests.dir}/{s.index_manifest}",
                                                           index_manifests.read, s.index_manifest))
    return held


def _or_empty(io: FileIO, path: str, read, *args) -> list:
    """A file another branch names that is gone holds nothing (deleted before); one that is there
    but unreadable stops the caller before it deletes anything (its files are unknown)."""
    try:
        return read(*args)
    except (CorruptTableError, FileNotFoundError):
        if io.exists(path):
            raise
        return []
