"""A table built beside the one it replaces (a full refresh, `dbt clone --full-refresh`), then
swapped into place; and the removal of a table's files. A table's files here include the engine's
key index beside it (dbt_paimon/key_index): it goes, and moves, with its table.
"""

from __future__ import annotations

import os
import shutil
import uuid

from dbt.adapters.events.logging import AdapterLogger

from .. import key_index
from ..store import FileIO, FileStoreTable, copy_tree, fileio

log = AdapterLogger("Paimon")


def staged_path(path: str, purpose: str) -> str:
    """A hidden sibling of the table's directory where its replacement is built (`purpose`: refresh,
    clone); hidden names are skipped by our catalog and never listed by Paimon."""
    parent, base = path.rsplit("/", 1) if fileio.scheme_of(path) else os.path.split(path)
    return f"{parent}/.{base}.dbt-{purpose}-{uuid.uuid4().hex[:8]}"


def remove_tree(path: str) -> None:
    """Delete a table's (or database's) files: the directory tree, or every object under the prefix."""
    io = FileIO.get(path)
    if not io.is_object_store:
        shutil.rmtree(path, ignore_errors=True)
        return
    for status in list(io.list_status(path, recursive=True)):  # per file (a drop), not per row
        io.delete(status.path)


def discard(staged: str) -> None:
    """Delete whatever a failed staged build left: its files, complete or not, and its key index."""
    remove_tree(staged)
    remove_tree(key_index.index_dir(staged))


def remove_table(path: str) -> None:
    """Delete a Paimon table's files (a drop: a directory that holds no Paimon table is left alone)
    and its key index."""
    if FileStoreTable.exists(path):
        remove_tree(path)
        log.debug(f"dropped Paimon table {path}")
    remove_tree(key_index.index_dir(path))


def swap(staged: str, path: str) -> None:
    """Put a table built at `staged` in place of the one at `path`. On a filesystem the directories
    are renamed (readers see the old table or the new one). An object store has no rename: the old
    table's objects are deleted and the staged ones copied into place on the server (no data through
    this process); a reader during the swap may find no table, and a failure leaves the staged copy
    for the next full refresh to replace."""
    io = FileIO.get(path)
    # The old table's key index goes with it; the new table's follows it on a filesystem (its
    # manifest names files, not paths), and is rebuilt by the next upsert on an object store.
    # The staged upsert's background clean (KeyIndex.sweep) ends first: its index dir moves.
    key_index.join_sweeps()
    old_index, new_index = key_index.index_dir(path), key_index.index_dir(staged)
    if io.is_object_store:
        remove_tree(path)
        remove_tree(old_index)
        copy_tree(io, staged, path)
        remove_tree(staged)
        remove_tree(new_index)
        return
    backup = staged_path(path, "backup")
    os.rename(path, backup)
    try:
        os.rename(staged, path)
    except BaseException:
        os.rename(backup, path)
        raise
    shutil.rmtree(backup, ignore_errors=True)
    shutil.rmtree(old_index, ignore_errors=True)
    if os.path.isdir(new_index):
        os.rename(new_index, old_index)
