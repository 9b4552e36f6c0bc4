"""Branches: create, list, delete and fast-forward them, laid out as Paimon 2.0 lays them out.

A branch is `<table>/branch/branch-<name>/` holding its own `schema/`, `snapshot/`, `tag/` and
`consumer/` (common/branch.py); its snapshots name manifests and data files in the table's root, so
creating one copies a few small files and no data. A branch exists while it has a schema file.

Creation (Paimon's FileSystemBranchManager.createBranch): empty (the source's schemas 0..latest), or
from a tag (the tag, its snapshot, schemas 0..its schema id), or from a snapshot id (the snapshot and
its schemas; Paimon 2.0's Java API has no such overload, its layout is that of a tag's branch without
the tag). The snapshot is copied before the schemas, so a creation killed halfway either left no
branch or one whose missing schemas a second `create(..., ignore_if_exists=True)` copies.

Fast-forward makes the target (main) what the branch is. Paimon deletes the target's snapshots,
schemas and tags from the branch's first snapshot on and copies the branch's over them, which loses
whatever the target committed meanwhile and is visible halfway to readers. Here a fast-forward is a
fast-forward: the branch's history must extend the target's (every target snapshot from the branch's
first on is the branch's own, schemas likewise), else it is refused by name and nothing changes.
Then only the branch's newer snapshots are copied, highest first and the lowest last: readers find
the latest snapshot from the LATEST hint and look one past it (Paimon and us alike), so the target
reads as before until that last file exists and as after from then on; a kill in between leaves it
before, and running fast_forward again completes it. Schemas the branch added are copied first (a
reader meanwhile sees the new columns empty, as after an ALTER); tags the branch added come last.
"""

from __future__ import annotations

import datetime as dt

from ..common.branch import BRANCH_DIR, BRANCH_PREFIX, MAIN, BranchError, branch_root, check_name, is_main, normalize
from ..common.fileio import FileIO
from ..schema.schema import SchemaManager, TableSchema
from .snapshot import Snapshot, SnapshotManager
from .tags import TagManager, snapshot_json_of_tag


class BranchManager:
    """The branches of the table at `table_path`."""

    def __init__(self, io: FileIO, table_path: str):
        self.io = io
        self.table_path = table_path.rstrip("/")

    # ---- listing -------------------------------------------------------------------------------
    def names(self, with_schema: bool = True) -> list[str]:
        """Every branch (main is not one), by name; `with_schema=False`: every branch directory,
        a creation that was killed before its schemas included."""
        found = []
        for entry in self.io.list_names(f"{self.table_path}/{BRANCH_DIR}"):
            name = entry[len(BRANCH_PREFIX):]
            if entry.startswith(BRANCH_PREFIX) and name and (not with_schema or self.exists(name)):
                found.append(name)
        return sorted(found)

    def exists(self, name: str) -> bool:
        if is_main(name):
            return False
        try:
            return bool(SchemaManager(self.io, self.table_path, name).list_ids())
        except BranchError:
            return False  # not a name that could be a branch directory

    def create_time(self, name: str) -> dt.datetime:
        """When the branch was made: the time of its first schema file (Paimon: of its directory,
        which an object store does not have)."""
        schemas = SchemaManager(self.io, self.table_path, name)
        first = schemas.list_ids()[0]
        return dt.datetime.fromtimestamp(self.io.mtime_ms(schemas.schema_path(first)) / 1000)

    def _check_exists(self, name: str) -> str:
        if not self.exists(name):
            raise BranchError(f"Branch name '{name}' doesn't exist.")
        return name

    # ---- create --------------------------------------------------------------------------------
    def create(self, name: str, tag: str | None = None, snapshot_id: int | None = None,
               ignore_if_exists: bool = False, source: str = MAIN) -> None:
        """A new branch of `source` (main): empty, from `tag` or from `snapshot_id`."""
        check_name(name)
        if tag is not None and snapshot_id is not None:
            raise BranchError(f"Branch '{name}': give a tag or a snapshot id to create it from, not both")
        if self.exists(name):
            if not ignore_if_exists:
                raise BranchError(f"Branch name '{name}' already exists.")
            self._complete_schemas(name, source)
            return
        snapshots = SnapshotManager(self.io, self.table_path, source)
        target_snapshots = SnapshotManager(self.io, self.table_path, name)
        schemas = SchemaManager(self.io, self.table_path, source)
        if tag is None and snapshot_id is None:
            last_schema = schemas.latest().id
        elif tag is not None:
            tags = TagManager(self.io, self.table_path, source)
            text = tags.read_text(tag) if tags.exists(tag) else None
            if text is None:
                raise BranchError(f"Tag '{tag}' doesn't exist.")
            snapshot = Snapshot.from_json(text, tags.path(tag))
            self.io.overwrite_text(TagManager(self.io, self.table_path, name).path(tag), text)
            # the tag's snapshot, from main when main still has it, else as the tag holds it
            snapshot_text = self._read(snapshots.path(snapshot.id)) or snapshot_json_of_tag(text)
            self.io.overwrite_text(target_snapshots.path(snapshot.id), snapshot_text)
            last_schema = snapshot.schema_id
        else:
            snapshot_text = self._read(snapshots.path(int(snapshot_id)))
            if snapshot_text is None:
                raise BranchError(f"Cannot create branch '{name}' from snapshot {snapshot_id} of {source}: it does "
                                  f"not exist (snapshots {self._range(snapshots)})")
            snapshot = Snapshot.from_json(snapshot_text, snapshots.path(int(snapshot_id)))
            self.io.overwrite_text(target_snapshots.path(snapshot.id), snapshot_text)
            last_schema = snapshot.schema_id
        self._copy_schemas(schemas, SchemaManager(self.io, self.table_path, name), last_schema)

    def _complete_schemas(self, name: str, source: str) -> None:
        """Schemas a killed creation did not copy yet: those up to the branch's first snapshot's."""
        snapshots = SnapshotManager(self.io, self.table_path, name)
        ids = snapshots.ids()
        if ids:
            self._copy_schemas(SchemaManager(self.io, self.table_path, source),
                               SchemaManager(self.io, self.table_path, name), snapshots.snapshot(ids[0]).schema_id)

    def _copy_schemas(self, source: SchemaManager, target: SchemaManager, last: int) -> None:
        have = set(target.list_ids())
        for schema_id in source.list_ids():  # ascending: a later schema is never there without the earlier
            if schema_id <= last and schema_id not in have:
                self.io.overwrite_text(target.schema_path(schema_id), self.io.read_text(source.schema_path(schema_id)))

    def _read(self, path: str) -> str | None:
        try:
            return self.io.read_text(path)
        except FileNotFoundError:
            return None

    @staticmethod
    def _range(snapshots: SnapshotManager) -> str:
        earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
        return "none" if latest is None else f"{earliest}..{latest}"

    # ---- delete --------------------------------------------------------------------------------
    def delete(self, name: str, fallback: str | None = None) -> None:
        """Delete the branch's metadata (its data files stay until remove_orphan_files, as in Paimon).
        `fallback`: the table's `scan.fallback-branch`, which cannot be deleted."""
        self._check_exists(name)
        if fallback is not None and fallback == name:
            raise BranchError(f"Cannot delete branch '{name}' because it is configured as 'scan.fallback-branch'. "
                              "Unset 'scan.fallback-branch' first.")
        root = branch_root(self.table_path, name)
        schema_dir = f"{root}/schema"
        files = sorted(self.io.list_status(root, recursive=True), key=lambda f: f.path.startswith(schema_dir + "/"))
        for f in files:  # the schemas last: until they go, the branch exists and a re-run finishes
            self.io.delete(f.path)
        self._remove_empty_dirs(root)

    def _remove_empty_dirs(self, root: str) -> None:
        for entry in list(self.io.list_status(root)):
            if entry.is_dir:
                self._remove_empty_dirs(entry.path)
        self.io.delete_empty_directory(root)

    # ---- fast-forward --------------------------------------------------------------------------
    def fast_forward(self, name: str, target: str = MAIN) -> list[int]:
        """Make `target` (main) the branch `name`; returns the snapshot ids copied (none when the
        target is there already). Refused, with nothing changed, unless the branch extends the target."""
        target = normalize(target)
        if name == MAIN:
            raise BranchError(f"Branch name '{name}' do not use in fast-forward.")
        if name == target:
            raise BranchError(f"Fast-forward from the current branch '{name}' is not allowed.")
        self._check_exists(name)
        src, dst = SnapshotManager(self.io, self.table_path, name), SnapshotManager(self.io, self.table_path, target)
        ids = src.ids()
        if not ids:
            raise BranchError(f"Cannot fast forward branch {name}, because it does not have snapshot.")
        first, last = ids[0], ids[-1]
        if ids != list(range(first, last + 1)):
            raise BranchError(f"Cannot fast forward branch {name}: its snapshots {first}..{last} have gaps")
        have = dst.latest_id() or 0
        self._check_extends(name, target, src, dst, first, last, have)
        schemas = self._schemas_to_copy(name, target)
        tags = self._tags_to_copy(name, target)
        for source, path in schemas:
            self.io.overwrite_text(path, self.io.read_text(source))
        copied = list(range(have + 1, last + 1))
        for sid in reversed(copied):  # the lowest last: it is the moment readers move (see the docstring)
            text = self.io.read_text(src.path(sid))
            if not self.io.write_exclusive(dst.path(sid), text):
                self._raced(name, target, src, dst, sid, copied, [path for _, path in schemas])
        if copied:
            dst.commit_latest_hint(last)
        for source, path in tags:
            self.io.overwrite_text(path, self.io.read_text(source))
        return copied

    def _check_extends(self, name: str, target: str, src: SnapshotManager, dst: SnapshotManager,
                       first: int, last: int, have: int) -> None:
        if have > last:
            raise BranchError(f"Cannot fast forward {target} to branch '{name}': {target} is at snapshot {have}, "
                              f"past the branch's latest {last}; it would drop {target}'s snapshots {last + 1}..{have}")
        if have < first - 1:
            raise BranchError(f"Cannot fast forward {target} to branch '{name}': the branch starts at snapshot "
                              f"{first}, {target} is at {have or 'none'}; snapshots between would be missing")
        for sid in range(first, have + 1):
            mine, theirs = dst.try_snapshot(sid), src.try_snapshot(sid)
            if mine is not None and not mine.same_as(theirs):
                raise BranchError(
                    f"Cannot fast forward {target} to branch '{name}': {target} committed snapshot {sid} after the "
                    f"branch was made from it (at snapshot {first}); a fast-forward would drop {target}'s snapshots "
                    f"{sid}..{have}. Nothing was changed; make the branch again from {target}'s latest snapshot")

    def _schemas_to_copy(self, name: str, target: str) -> list[tuple[str, str]]:
        src, dst = SchemaManager(self.io, self.table_path, name), SchemaManager(self.io, self.table_path, target)
        theirs, mine = src.list_ids(), dst.list_ids()
        out = []
        for schema_id in theirs:
            if schema_id in mine:  # a copy made when the branch was: the same bytes
                if self.io.read_text(src.schema_path(schema_id)) != self.io.read_text(dst.schema_path(schema_id)):
                    raise BranchError(f"Cannot fast forward {target} to branch '{name}': schema {schema_id} differs "
                                      f"between them ({target}'s schema changed after the branch was made)")
            else:
                out.append((src.schema_path(schema_id), dst.schema_path(schema_id)))
        if mine and theirs and mine[-1] > theirs[-1]:
            raise BranchError(f"Cannot fast forward {target} to branch '{name}': {target} has schema {mine[-1]}, "
                              f"newer than the branch's {theirs[-1]}")
        return out

    def _tags_to_copy(self, name: str, target: str) -> list[tuple[str, str]]:
        src, dst = TagManager(self.io, self.table_path, name), TagManager(self.io, self.table_path, target)
        out = []
        for tag in src.tags():
            there = dst.get(tag.name)
            if there is None:
                out.append((src.path(tag.name), dst.path(tag.name)))
            elif there.snapshot.id != tag.snapshot.id:
                raise BranchError(f"Cannot fast forward {target} to branch '{name}': tag '{tag.name}' is snapshot "
                                  f"{there.snapshot.id} on {target} and {tag.snapshot.id} on the branch")
        return out

    def _raced(self, name: str, target: str, src: SnapshotManager, dst: SnapshotManager, sid: int,
               copied: list[int], schema_paths: list[str]) -> None:
        """snapshot-`sid` of the target exists already: ours from an interrupted run (go on), or a
        commit to the target that raced this fast-forward (take back what this run wrote, refuse)."""
        theirs = dst.try_snapshot(sid)
        if src.snapshot(sid).same_as(theirs):
            return
        for higher in copied:
            if higher > sid and src.snapshot(higher).same_as(dst.try_snapshot(higher)):
                dst.delete(higher)
        for path in schema_paths:  # unless the racing commit already used one
            if theirs is None or int(path.rsplit("-", 1)[1]) > theirs.schema_id:
                self.io.delete(path)
        raise BranchError(f"Cannot fast forward {target} to branch '{name}': {target} committed snapshot {sid} "
                          "while fast-forwarding; nothing was published")


def branch_of_new_table(io: FileIO, table_path: str, schema: TableSchema, branch: str) -> TableSchema:
    """A write to a branch of a table that does not exist yet: the table is made on main with its
    schema and no rows, and the branch empty beside it; the write then goes to the branch (a
    fast-forward later gives main its rows). Returns the branch's schema."""
    SchemaManager(io, table_path).create(schema)
    BranchManager(io, table_path).create(branch, ignore_if_exists=True)
    return SchemaManager(io, table_path, branch).latest()
