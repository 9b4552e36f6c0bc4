"""Clone a Paimon table: a new, independent table holding the source's latest snapshot.

The clone gets every schema file (data files name the schema they were written with), the live
data files of the latest snapshot and, for dynamic-bucket tables, the HASH index files, at the
same relative paths; then one APPEND snapshot of its own that lists them. History (older
snapshots, tags, changelog) is not cloned: the clone starts at snapshot 1.

Files are shared, not copied, where the store allows it (FileIO.copy_file): a hard link on a local
disk, a server-side copy on an object store. Sharing is safe because Paimon never rewrites a data
file: a later write to either table adds files, and an expiration or compaction in one deletes
only its own names. The clone is a plain Paimon table that any Paimon reader reads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .common import binary_row
from .write.commit import FileStoreCommit
from .common.branch import MAIN
from .common.errors import SchemaError
from .common.fileio import FileIO
from .index.index import HashIndexFile, IndexManifestFile
from .schema.schema import SchemaManager, check_index_layout
from .snapshot.snapshot import APPEND
from .table import FileStoreTable


@dataclass
class CloneResult:
    source_snapshot: int | None
    snapshot_id: int | None
    files: int
    bytes: int


def clone_table(io: FileIO, source: str, target: str, branch: str | None = None) -> CloneResult:
    """Clone the table at `source` (its `branch`, main by default) into `target` (which must hold no
    table); the clone is a table of its own, with no branches."""
    table = FileStoreTable.open(source, io, branch)
    check_index_layout(table.schema, source)  # before anything is copied
    if FileStoreTable.exists(target, io):
        raise SchemaError(f"cannot clone into {target}: a table is there already")
    snapshot = table.latest_snapshot()
    entries = list(FileStoreCommit(io, source, table.schema).live_entries(snapshot).values()) if snapshot else []
    external = [e.file.file_name for e in entries if e.file.external_path]
    if external:  # a clone would share them with the source (its entries keep the external path)
        raise SchemaError(f"cannot clone {source}: {len(external)} of its data files live in external paths "
                          "(data-file.external-paths), which dbt-paimon does not clone")
    schemas = SchemaManager(io, source, branch)
    for schema_id in schemas.list_ids():
        io.copy_file(schemas.schema_path(schema_id), SchemaManager(io, target).schema_path(schema_id))
    if snapshot is None:
        return CloneResult(None, None, 0, 0)
    clone = FileStoreTable(target, dataclasses.replace(table.schema, branch=MAIN), io)
    size = 0
    for entry in entries:  # per file (metadata), never per row
        values = entry_partition(table, entry)
        for name in (entry.file.file_name, *entry.file.extra_files):
            io.copy_file(f"{table.bucket_path(values, entry.bucket)}/{name}",
                         f"{clone.bucket_path(values, entry.bucket)}/{name}")
        size += entry.file.file_size
    index_manifest = None
    if snapshot.index_manifest:
        index = IndexManifestFile(io, source).read(snapshot.index_manifest)
        source_files, target_files = HashIndexFile(io, source), HashIndexFile(io, target)
        for e in index:
            io.copy_file(source_files.path(e), target_files.path(e))
        index_manifest = IndexManifestFile(io, target).write(index)
    result = clone.new_commit().commit(entries, APPEND, expected_latest=None, index_manifest=index_manifest)
    return CloneResult(snapshot.id, result.snapshot.id if result else None, len(entries), size)


def entry_partition(table: FileStoreTable, entry) -> tuple:
    return binary_row.deserialize(entry.partition, table.schema.partition_types)
