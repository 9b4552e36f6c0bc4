"""System tables, as Paimon names and shapes them (`t$snapshots`, `t$files`, `t$buckets`, `t$partitions`,
`t$tags`, `t$options`, `t$schemas`, `t$manifests`, `t$consumers`, `t$branches`): metadata of one table as Arrow
tables. Built from snapshot, schema and consumer JSON and manifests only, never data files (the
`audit_log`, which reads rows, is read/audit_log.py).

A partition is shown as Paimon shows it: `{v1, v2}` (partition values in key order), `{}` for an
unpartitioned table; in `$partitions` as its path, `k1=v1/k2=v2` (stats_text.py). The columns are
Paimon 2.0's; `$partitions` and `$buckets` sum every manifest entry of the snapshot as Paimon does.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Callable

import pyarrow as pa

from . import stats_text
from .common import binary_row
from .common.errors import PaimonError
from .common.options import POSTPONE_BUCKET
from .common.paths import data_file_path
from .read.audit_log import AUDIT_LOG, BINLOG
from .read.read_optimized import READ_OPTIMIZED
from .index.deletion_vectors import bucket_indexes, ranges
from .manifest.manifest import ADD, ManifestFile, ManifestList
from .schema.schema import SchemaManager
from .snapshot.consumers import consumers
from .snapshot.tags import TagManager

# audit_log, binlog and ro are read apart: their rows are the table's (read/audit_log.py, read_optimized.py)
SYSTEM_TABLES = ("snapshots", "files", "buckets", "partitions", "tags", "options", "schemas", "manifests",
                 "consumers", "branches", AUDIT_LOG, BINLOG, READ_OPTIMIZED)
DATA_TABLES = (AUDIT_LOG, BINLOG, READ_OPTIMIZED)


BRANCH_PREFIX = "branch_"


def split_name(path: str) -> tuple[str, str | None, str | None]:
    """A table's path and what follows it, as Paimon's Identifier splits an object name on '$':
    `…/t` -> (`…/t`, None, None); `…/t$files` -> (`…/t`, None, "files"); `…/t$branch_b` -> (`…/t`, "b",
    None); `…/t$branch_b$files` -> (`…/t`, "b", "files")."""
    head, _, name = path.rstrip("/").rpartition("/")
    parts = name.split("$")
    folder = f"{head}/" if head else ""
    if len(parts) == 1:
        return path.rstrip("/"), None, None
    branch = parts[1][len(BRANCH_PREFIX):] if parts[1].startswith(BRANCH_PREFIX) else None
    if len(parts) > 3 or (len(parts) == 3 and branch is None):
        raise PaimonError(f"{name!r}: a table name takes '$branch_<name>', then '$<system table>', no more")
    system = parts[-1] if branch is None or len(parts) == 3 else None
    if system is not None and system not in SYSTEM_TABLES:
        raise PaimonError(f"unknown system table ${system} (known: {', '.join('$' + s for s in SYSTEM_TABLES)})")
    if branch is not None and not branch:
        raise PaimonError(f"{name!r}: '$branch_' needs a branch name after it")
    return folder + parts[0], branch, system


def _partition_text(values: tuple) -> str:
    return "{" + ", ".join("null" if v is None else str(v) for v in values) + "}"


def _millis(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).replace(tzinfo=None)


SNAPSHOTS = pa.schema([
    ("snapshot_id", pa.int64()), ("schema_id", pa.int64()), ("commit_user", pa.string()),
    ("commit_identifier", pa.int64()), ("commit_kind", pa.string()), ("commit_time", pa.timestamp("us")),
    ("base_manifest_list", pa.string()), ("delta_manifest_list", pa.string()), ("changelog_manifest_list", pa.string()),
    ("total_record_count", pa.int64()), ("delta_record_count", pa.int64()), ("changelog_record_count", pa.int64()),
    ("watermark", pa.int64()), ("next_row_id", pa.int64()), ("operation", pa.string()),
])
FILES = pa.schema([
    ("partition", pa.string()), ("bucket", pa.int32()), ("file_path", pa.string()), ("file_format", pa.string()),
    ("schema_id", pa.int64()), ("level", pa.int32()), ("record_count", pa.int64()),
    ("file_size_in_bytes", pa.int64()), ("min_key", pa.string()), ("max_key", pa.string()),
    ("null_value_counts", pa.string()), ("min_value_stats", pa.string()), ("max_value_stats", pa.string()),
    ("min_sequence_number", pa.int64()), ("max_sequence_number", pa.int64()), ("creation_time", pa.timestamp("us")),
    ("deleteRowCount", pa.int64()), ("file_source", pa.string()), ("first_row_id", pa.int64()),
    ("write_cols", pa.list_(pa.string())),
])
BUCKETS = pa.schema([
    ("partition", pa.string()), ("bucket", pa.int32()), ("record_count", pa.int64()),
    ("file_size_in_bytes", pa.int64()), ("file_count", pa.int64()), ("last_update_time", pa.timestamp("us")),
])
PARTITIONS = pa.schema([
    ("partition", pa.string()), ("record_count", pa.int64()), ("file_size_in_bytes", pa.int64()),
    ("file_count", pa.int64()), ("last_update_time", pa.timestamp("us")), ("created_at", pa.timestamp("us")),
    ("created_by", pa.string()), ("updated_by", pa.string()), ("options", pa.string()),
    ("total_buckets", pa.int32()), ("done", pa.bool_()), ("deleted_record_count", pa.int64()),
])
TAGS = pa.schema([
    ("tag_name", pa.string()), ("snapshot_id", pa.int64()), ("schema_id", pa.int64()),
    ("commit_time", pa.timestamp("us")), ("record_count", pa.int64()), ("create_time", pa.timestamp("us")),
    ("time_retained", pa.string()),
])
OPTIONS = pa.schema([pa.field("key", pa.string(), False), pa.field("value", pa.string(), False)])
TABLE_SCHEMAS = pa.schema([
    pa.field("schema_id", pa.int64(), False), pa.field("fields", pa.string(), False),
    pa.field("partition_keys", pa.string(), False), pa.field("primary_keys", pa.string(), False),
    pa.field("options", pa.string(), False), ("comment", pa.string()),
    pa.field("update_time", pa.timestamp("us"), False),
])
MANIFESTS = pa.schema([
    pa.field("file_name", pa.string(), False), pa.field("file_size", pa.int64(), False),
    pa.field("num_added_files", pa.int64(), False), pa.field("num_deleted_files", pa.int64(), False),
    pa.field("schema_id", pa.int64(), False), ("min_partition_stats", pa.string()),
    ("max_partition_stats", pa.string()), ("min_row_id", pa.int64()), ("max_row_id", pa.int64()),
])
CONSUMERS = pa.schema([pa.field("consumer_id", pa.string(), False), pa.field("next_snapshot_id", pa.int64(), False)])
BRANCHES = pa.schema([pa.field("branch_name", pa.string(), False), pa.field("create_time", pa.timestamp("us"), False)])
SCHEMAS = {"snapshots": SNAPSHOTS, "files": FILES, "buckets": BUCKETS, "partitions": PARTITIONS, "tags": TAGS,
           "options": OPTIONS, "schemas": TABLE_SCHEMAS, "manifests": MANIFESTS, "consumers": CONSUMERS,
           "branches": BRANCHES}


def snapshots(table) -> pa.Table:
    mgr = table.snapshots
    earliest, latest = mgr.earliest_id(), mgr.latest_id()
    rows = []
    if latest is not None:
        for sid in range(earliest or 1, latest + 1):  # per snapshot (metadata), not per row
            s = mgr.try_snapshot(sid)  # one read; None when expired meanwhile
            if s is None:
                continue
            rows.append({"snapshot_id": s.id, "schema_id": s.schema_id, "commit_user": s.commit_user,
                         "commit_identifier": s.commit_identifier, "commit_kind": s.commit_kind,
                         "commit_time": _millis(s.time_millis), "base_manifest_list": s.base_manifest_list,
                         "delta_manifest_list": s.delta_manifest_list,
                         "changelog_manifest_list": s.changelog_manifest_list,
                         "total_record_count": s.total_record_count, "delta_record_count": s.delta_record_count,
                         "changelog_record_count": s.changelog_record_count, "watermark": s.watermark,
                         "next_row_id": s.next_row_id, "operation": s.operation})
    return pa.Table.from_pylist(rows, SNAPSHOTS)


def _splits(table, snapshot_id):
    return table.plan(snapshot_id).splits


def files(table, snapshot_id: int | None = None) -> pa.Table:
    """The data files of a snapshot, each with its keys and statistics as Paimon prints them (stats_text.py)."""
    rows = []
    manager = SchemaManager(table.io, table.path, table.branch)
    schemas = {table.schema.id: table.schema}  # each file's schema read once, not once per file
    for s in _splits(table, snapshot_id):
        part = _partition_text(s.partition_values)
        for f in s.files:
            if f.schema_id not in schemas:
                schemas[f.schema_id] = manager.schema(f.schema_id)
            then = schemas[f.schema_id]
            nulls, lows, highs = stats_text.value_stats_text(f, then, table.schema)
            rows.append({"partition": part, "bucket": s.bucket, "file_path": data_file_path(s.bucket_path, f),
                         "file_format": f.file_name.rsplit(".", 1)[-1], "schema_id": f.schema_id, "level": f.level,
                         "record_count": f.row_count, "file_size_in_bytes": f.file_size,
                         "min_key": stats_text.key_text(f, then, f.min_key),
                         "max_key": stats_text.key_text(f, then, f.max_key),
                         "null_value_counts": nulls, "min_value_stats": lows, "max_value_stats": highs,
                         "min_sequence_number": f.min_sequence_number, "max_sequence_number": f.max_sequence_number,
                         "creation_time": f.creation_time.replace(tzinfo=None) if f.creation_time else None,
                         "deleteRowCount": f.delete_row_count,
                         "file_source": {0: "APPEND", 1: "COMPACT"}.get(f.file_source, None),
                         "first_row_id": f.first_row_id,
                         "write_cols": list(f.write_cols) if f.write_cols is not None else None})
    return pa.Table.from_pylist(rows, FILES)


def _entries_by(table, snapshot_id: int | None, real_buckets_only: bool, by) -> dict:
    """Every manifest entry of the snapshot summed per by(entry), as Paimon's PartitionEntry /
    BucketEntry do: a DELETE entry takes its file's rows, bytes and count away, and its creation
    time still counts (the last update is the latest file's, removed or not, until a manifest merge
    drops both entries)."""
    snapshot = table.snapshots.travelled(snapshot_id) if snapshot_id is not None else table.snapshots.latest()
    out: dict = {}
    if snapshot is None:
        return out
    lists = ManifestList(table.io, table.path)
    manifests = ManifestFile(table.io, table.path, table.schema.partition_types, table.schema.id)
    for meta in lists.read(snapshot.base_manifest_list) + lists.read(snapshot.delta_manifest_list):
        for e in manifests.read(meta.file_name, meta.file_size):
            if real_buckets_only and e.bucket == POSTPONE_BUCKET:
                continue  # bucket -2 (postpone): read by no batch reader, not counted as Paimon's scan counts
            sign = 1 if e.kind == ADD else -1
            total = out.setdefault(by(e), {"records": 0, "bytes": 0, "files": 0, "last": None, "buckets": 0})
            total["records"] += sign * e.file.row_count
            total["bytes"] += sign * e.file.file_size
            total["files"] += sign
            total["buckets"] = e.total_buckets
            made = e.file.creation_time.replace(tzinfo=None) if e.file.creation_time else None
            if made is not None and (total["last"] is None or made > total["last"]):
                total["last"] = made
    return {k: v for k, v in out.items() if v["files"] > 0}


def buckets(table, snapshot_id: int | None = None) -> pa.Table:
    types = table.schema.partition_types
    per = _entries_by(table, snapshot_id, False, lambda e: (e.partition, e.bucket))
    rows = [{"partition": _partition_text(binary_row.deserialize(p, types)), "bucket": b, "record_count": t["records"],
             "file_size_in_bytes": t["bytes"], "file_count": t["files"], "last_update_time": t["last"]}
            for (p, b), t in per.items()]
    return pa.Table.from_pylist(sorted(rows, key=lambda r: (r["partition"], r["bucket"])), BUCKETS)


def partitions(table, snapshot_id: int | None = None) -> pa.Table:
    """Paimon's PartitionsTable from a filesystem catalog: a catalog's own metadata (created_at, ...)
    NULL, `done` false; deleted_record_count the rows its deletion vectors mark."""
    schema = table.schema
    per = _entries_by(table, snapshot_id, True, lambda e: e.partition)
    marked: dict[bytes, int | None] = {}
    if schema.core.deletion_vectors:
        snapshot = table.snapshots.travelled(snapshot_id) if snapshot_id is not None else table.snapshots.latest()
        for (partition, _), meta in bucket_indexes(table.io, table.path, snapshot).items():
            for r in ranges(meta).values():
                known = marked.get(partition, 0)
                marked[partition] = None if known is None or r.cardinality is None else known + r.cardinality
    rows = []
    for p, t in per.items():
        text = stats_text.partition_path_text(binary_row.deserialize(p, schema.partition_types),
                                              schema.partition_types, schema.partition_keys,
                                              schema.core.partition_default_name)
        rows.append({"partition": text, "record_count": t["records"], "file_size_in_bytes": t["bytes"],
                     "file_count": t["files"], "last_update_time": t["last"], "created_at": None,
                     "created_by": None, "updated_by": None, "options": None, "total_buckets": t["buckets"],
                     "done": False, "deleted_record_count": marked.get(p, 0)})
    return pa.Table.from_pylist(sorted(rows, key=lambda r: r["partition"]), PARTITIONS)


def tags(table) -> pa.Table:
    rows = []
    for tag in TagManager(table.io, table.path, table.branch).tags():
        s = tag.snapshot
        rows.append({"tag_name": tag.name, "snapshot_id": s.id, "schema_id": s.schema_id,
                     "commit_time": _millis(s.time_millis), "record_count": s.total_record_count,
                     "create_time": tag.create_time,
                     "time_retained": str(tag.time_retained) if tag.time_retained is not None else None})
    return pa.Table.from_pylist(rows, TAGS)


def options(table) -> pa.Table:
    """The table's options, as its latest schema holds them."""
    return pa.Table.from_pylist([{"key": k, "value": str(v)} for k, v in table.schema.options.items()], OPTIONS)


def _json(value) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def schemas(table) -> pa.Table:
    """Every schema of the table, its fields, keys and options as the JSON text Paimon shows."""
    manager = SchemaManager(table.io, table.path, table.branch)
    rows = []
    for sid in manager.list_ids():  # per schema (metadata)
        s = manager.schema(sid)
        rows.append({"schema_id": s.id, "fields": _json([f.to_json() for f in s.fields]),
                     "partition_keys": _json(list(s.partition_keys)), "primary_keys": _json(list(s.primary_keys)),
                     "options": _json(dict(s.options)), "comment": s.comment,
                     "update_time": _millis(s.time_millis)})
    return pa.Table.from_pylist(rows, TABLE_SCHEMAS)


def manifests(table, snapshot_id: int | None = None) -> pa.Table:
    """The manifests of the snapshot (its base, delta and changelog lists), each with the partitions it
    spans."""
    snapshot = table.snapshots.snapshot(snapshot_id) if snapshot_id is not None else table.snapshots.latest()
    rows = []
    if snapshot is not None:
        lists = ManifestList(table.io, table.path)
        types = table.schema.partition_types
        names = [snapshot.base_manifest_list, snapshot.delta_manifest_list, snapshot.changelog_manifest_list]
        for m in [m for name in names if name for m in lists.read(name)]:
            empty = not m.partition_stats.min_values or not types
            rows.append({"file_name": m.file_name, "file_size": m.file_size, "num_added_files": m.num_added_files,
                         "num_deleted_files": m.num_deleted_files, "schema_id": m.schema_id,
                         "min_partition_stats": None if empty else _partition_text(
                             binary_row.deserialize(m.partition_stats.min_values, types)),
                         "max_partition_stats": None if empty else _partition_text(
                             binary_row.deserialize(m.partition_stats.max_values, types)),
                         "min_row_id": None, "max_row_id": None})
    return pa.Table.from_pylist(rows, MANIFESTS)


def consumers_table(table) -> pa.Table:
    return pa.Table.from_pylist([{"consumer_id": c, "next_snapshot_id": n}
                                 for c, n in consumers(table.io, table.path, table.branch).items()], CONSUMERS)


def branches(table) -> pa.Table:
    """The table's branches (main is not one), each with when it was made (snapshot/branches.py)."""
    manager = table.branches
    return pa.Table.from_pylist([{"branch_name": b, "create_time": manager.create_time(b)} for b in manager.names()],
                                BRANCHES)


_BUILDERS: dict[str, Callable] = {"snapshots": snapshots, "files": files, "buckets": buckets,
                                  "partitions": partitions, "tags": tags, "options": options, "schemas": schemas,
                                  "manifests": manifests, "consumers": consumers_table, "branches": branches}


def read(table, name: str, snapshot_id: int | None = None) -> pa.Table:
    """The system table `name` of `table` (as of snapshot_id where that applies)."""
    if name in ("snapshots", "tags", "options", "schemas", "consumers", "branches"):
        return _BUILDERS[name](table)
    return _BUILDERS[name](table, snapshot_id)
