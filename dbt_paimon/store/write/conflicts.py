"""What the commits after a snapshot changed: for a writer whose commit lost the race to them, to
tell whether its files are still right on the newer snapshot (Paimon's FileStoreCommit checks
its conflicts the same way: against the commits since the snapshot the writer read).

    changes = changes_since(io, path, schema, base, latest)
    changes.rebuilt       # a reason nothing written on `base` can be kept (None: none)
    changes.keys()        # the primary keys the APPEND commits wrote (as +I/+U/-U/-D rows), Arrow
    changes.index_buckets # (partition, bucket) whose HASH index file changed

A COMPACT commit rewrites files and keeps every key's rows and sequence numbers, so it changes no
key; an APPEND commit changes exactly the keys of the rows in the files it adds; an OVERWRITE, a
schema change or a snapshot gone (expired, rolled back) is answered with `rebuilt`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from ..common import binary_row
from ..common.fileio import FileIO
from ..format.datafile import read_kv_file
from ..index.index import IndexManifestFile
from ..manifest.manifest import ADD, ManifestEntry, ManifestFile, ManifestList
from ..common.options import POSTPONE_BUCKET, BucketMode
from ..common.paths import bucket_dir, data_file_path, partition_path
from ..schema.schema import TableSchema
from ..snapshot.snapshot import APPEND, COMPACT, Snapshot, SnapshotManager


@dataclass
class Changes:
    """The commits after `base` up to `latest` (a newer snapshot)."""

    io: FileIO
    path: str
    schema: TableSchema
    latest: Snapshot
    rebuilt: str | None = None  # why files written on `base` cannot stand on `latest`
    appended: list[ManifestEntry] = field(default_factory=list)  # the data files APPEND commits added
    index_buckets: set = field(default_factory=set)  # (partition, bucket) whose HASH index file changed

    def keys(self) -> pa.Table:
        """The primary key of every row the APPEND commits wrote, deletes too (a key written
        twice appears twice): the keys whose values they changed. A data file holds the whole
        row, so the key's fields are read from the file's value columns (of the table's schema:
        a commit of another schema is `rebuilt`)."""
        schema = self.schema
        types, keys = schema.partition_types, list(schema.partition_keys)
        out = []
        for e in self.appended:
            values = binary_row.deserialize(e.partition, types)
            where = bucket_dir(self.path, partition_path(values, types, keys, schema.core.partition_default_name),
                               e.bucket)
            out.append(read_kv_file(self.io, data_file_path(where, e.file), list(schema.primary_keys),
                                    {k: schema.field(k).type.to_arrow() for k in schema.primary_keys}))
        if not out:
            return pa.table({k: pa.array([], schema.field(k).type.to_arrow()) for k in schema.primary_keys})
        return pa.concat_tables(out)


def changes_since(io: FileIO, path: str, schema: TableSchema, base: Snapshot, latest: Snapshot) -> Changes:
    """What the snapshots base.id+1 .. latest.id changed."""
    path = path.rstrip("/")
    changes = Changes(io, path, schema, latest)
    snapshots = SnapshotManager(io, path, schema.branch)
    lists = ManifestList(io, path)
    manifests = ManifestFile(io, path, schema.partition_types, schema.id)
    for sid in range(base.id + 1, latest.id + 1):
        snapshot = latest if sid == latest.id else snapshots.try_snapshot(sid)
        if snapshot is None:
            return _rebuilt(changes, f"snapshot {sid} is gone (expired or rolled back)")
        if snapshot.schema_id != schema.id:
            return _rebuilt(changes, f"snapshot {sid} has schema {snapshot.schema_id}, the job wrote {schema.id}")
        postpone = schema.bucket_mode == BucketMode.POSTPONE_MODE
        if snapshot.commit_kind == COMPACT and not postpone:
            continue  # rewrites files, keeps every key's rows
        if snapshot.commit_kind not in (APPEND, COMPACT):
            return _rebuilt(changes, f"snapshot {sid} is an {snapshot.commit_kind}")
        entries = [e for m in lists.read(snapshot.delta_manifest_list)
                   for e in manifests.read(m.file_name, m.file_size)]
        if snapshot.commit_kind == COMPACT:
            # Paimon's postpone compaction moves the rows parked in bucket -2 into buckets, with
            # sequence numbers the job's may not be above: a change of the keys it read
            if any(e.kind != ADD and e.bucket == POSTPONE_BUCKET for e in entries):
                return _rebuilt(changes, f"snapshot {sid} moved rows out of bucket -2 (postpone compaction)")
            continue
        if any(e.kind != ADD for e in entries):  # an APPEND that removes files rewrote something
            return _rebuilt(changes, f"snapshot {sid} appends and removes files")
        # rows parked in bucket -2 are read by no batch reader, nor by the job: they change nothing it read
        changes.appended += [e for e in entries if e.bucket != POSTPONE_BUCKET]
    changes.index_buckets = _index_changes(io, path, base.index_manifest, latest.index_manifest)
    return changes


def _rebuilt(changes: Changes, why: str) -> Changes:
    changes.rebuilt = why
    return changes


def _index_changes(io: FileIO, path: str, before: str | None, after: str | None) -> set:
    """(partition, bucket) whose HASH index file differs between two index manifests."""
    if before == after:
        return set()
    manifests = IndexManifestFile(io, path)
    old = {(e.partition, e.bucket, e.index_type): e.file_name for e in (manifests.read(before) if before else [])}
    new = {(e.partition, e.bucket, e.index_type): e.file_name for e in (manifests.read(after) if after else [])}
    return {(k[0], k[1]) for k in old.keys() | new.keys() if old.get(k) != new.get(k)}
