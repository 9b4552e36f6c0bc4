"""The key index across a table's branches: what a fast-forward and a branch's deletion do to it.

A branch's index is its own line of versions (layout.versions_dir) over the runs all share; it starts
from main's version (versions.Versions.load). After a fast-forward, main's snapshot is the branch's, so
the branch's current version describes main exactly: `publish_branch` makes it main's, and main's next
upsert finds its index caught up, where it would otherwise re-read every bucket the branch rewrote (a
write-audit-publish build does that on every publish). `drop_branch` removes a deleted branch's
versions; the runs only it named go with main's next clean, as any retired run.
"""

from __future__ import annotations

import logging

from ..store.common.branch import MAIN
from ..store.common.fileio import FileIO
from ..store.schema.schema import TableSchema
from .layout import LATEST, Layout, index_dir, supported, versions_dir
from .versions import Versions

log = logging.getLogger(__name__)


def publish_branch(io: FileIO, table_path: str, schema: TableSchema, branch: str) -> bool:
    """Make the current version of `branch`'s index main's (call right after main was fast-forwarded
    to the branch; `schema`: main's, now the branch's). False when the branch has no index of its own.
    A version describes the data files it reflects, not a snapshot: whatever main committed since,
    main's next refresh catches up from it, so a race costs time, never a wrong answer."""
    if branch == MAIN or not supported(schema):
        return False
    root = index_dir(table_path)
    layout = Layout(schema)
    state = Versions(io, versions_dir(table_path, branch), layout, table_path, runs_dir=root).load()
    if state is None:
        return False
    state.manifest, state.manifest_runs, state.retired = None, frozenset(), {}  # a new version of main's
    Versions(io, root, layout, table_path).save(state)
    log.info("key index of %s: main takes branch '%s''s version (snapshot %s)", table_path, branch,
             state.snapshot_id)
    return True


def drop_branch(io: FileIO, table_path: str, branch: str) -> int:
    """Delete the versions of a deleted branch's index (its pointer first: no reader loads a version
    half deleted). Returns the files deleted."""
    if branch == MAIN:
        raise ValueError("main's index is not a branch's")
    where = versions_dir(table_path, branch)
    names = io.list_names(where)
    deleted = 0
    for name in sorted(names, key=lambda n: n != LATEST):
        deleted += bool(io.delete(f"{where}/{name}"))
    io.delete_empty_directory(where)
    return deleted
