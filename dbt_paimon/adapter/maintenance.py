"""Table maintenance from dbt: what the macros of macros/maintenance.sql call (through PaimonAdapter).

Each operation takes the relation as dbt gives it (a Relation, `schema.table` or `table`), works
on the Paimon table behind it with the engine or the store, re-syncs the table's catalog entry,
and returns a small dict (its `message` is what the macro logs). Errors are DbtRuntimeErrors that
name the table and its path; an operation that fails writes nothing.

Time travel and system tables are read through Spark temporary views over the `paimon` source,
with names derived from what they show (`paimon__<schema>__<table>__snapshot_3`), so a model or
`dbt show` selects from them; a view is (re)registered on every call, in this process's session.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from dbt.adapters.base.relation import BaseRelation
from dbt_common.exceptions import DbtRuntimeError

from ..engine import compact, delete
from ..store import FileStoreTable, PaimonError, SYSTEM_TABLES, older_than_millis, parse_duration_ms
from .connections import error_message
from .tables import Tables



# ---- the table behind a relation -------------------------------------------------------------------

def resolve(tables: Tables, relation: Any, operation: str) -> BaseRelation:
    """A Relation for `relation`: a Relation as is (its schema defaulting to the target's), or a
    string `schema.table` / `table` (then the target's schema)."""
    if relation is None or (isinstance(relation, str) and not relation.strip()):
        raise DbtRuntimeError(f"{operation}: give the table as relation (a ref(), 'schema.table' or 'table')")
    default_schema = tables.default_schema
    if isinstance(relation, BaseRelation):
        if not relation.identifier:
            raise DbtRuntimeError(f"{operation}: relation {relation} names no table")
        return tables.Relation.create(schema=relation.schema or default_schema, identifier=relation.identifier,
                                       type="table")
    if not isinstance(relation, str):
        raise DbtRuntimeError(f"{operation}: relation must be a ref(), 'schema.table' or 'table', got {relation!r}")
    parts = [p.strip().strip('`"') for p in relation.strip().split(".")]
    if len(parts) > 2 or not all(parts):
        raise DbtRuntimeError(f"{operation}: relation {relation!r} is not 'schema.table' or 'table'")
    schema, identifier = (default_schema, parts[0]) if len(parts) == 1 else parts
    return tables.Relation.create(schema=schema, identifier=identifier, type="table")


def _name(relation: BaseRelation) -> str:
    return f"{relation.schema}.{relation.identifier}"


def open_table(tables: Tables, relation: Any, operation: str) -> Tuple[BaseRelation, str, FileStoreTable]:
    """(relation, path, table) of an existing Paimon table; a clear error when there is none."""
    rel = resolve(tables, relation, operation)
    path = tables.path(rel)
    if not FileStoreTable.exists(path):
        raise DbtRuntimeError(f"{operation}: {_name(rel)} is not a Paimon table: there is no Paimon table at {path}")
    try:
        return rel, path, FileStoreTable.open(path)
    except PaimonError as e:
        raise DbtRuntimeError(f"{operation}: cannot open the Paimon table of {_name(rel)} at {path}: {e}") from e


def operation_failed(operation: str, rel: BaseRelation, e: Exception,
                     nothing: str = "nothing was written") -> DbtRuntimeError:
    """A run-operation's failure: the operation, the relation, what was left undone and why."""
    what = e.msg if isinstance(e, DbtRuntimeError) else str(e) if isinstance(e, PaimonError) else error_message(e)
    return DbtRuntimeError(f"{operation} on {_name(rel)} failed, {nothing}: {what}")


def int_arg(operation: str, name: str, value: Any, minimum: int = 0) -> Optional[int]:
    if value is None or value == "":
        return None
    try:
        number = int(value)
        if isinstance(value, bool) or (isinstance(value, float) and number != value):
            raise ValueError
    except (TypeError, ValueError):
        raise DbtRuntimeError(f"{operation}: {name} must be an integer, got {value!r}") from None
    if number < minimum:
        raise DbtRuntimeError(f"{operation}: {name} must be at least {minimum}, got {number}")
    return number


def _ids(ids: Iterable[int]) -> str:
    """[1, 2, 3, 7] -> '1-3, 7'."""
    out: List[str] = []
    for i in sorted(ids):
        if out and out[-1].split("-")[-1] == str(i - 1):
            out[-1] = f"{out[-1].split('-')[0]}-{i}"
        else:
            out.append(str(i))
    return ", ".join(out)


# ---- operations ------------------------------------------------------------------------------------

def delete_rows(tables: Tables, relation: Any, where: Any) -> Dict[str, Any]:
    op = "paimon_delete"
    if where is None or not str(where).strip():
        raise DbtRuntimeError(f"{op}: give the rows to delete as where (a Spark SQL predicate over the table's "
                              f"columns, e.g. \"dt >= '20230503'\"; where: 'true' deletes every row)")
    rel, path, table = open_table(tables, relation, op)
    before = table.snapshots.latest_id()
    try:
        result = delete(tables.spark(), path, str(where))
    except Exception as e:  # noqa: BLE001 - the engine writes nothing when it fails
        raise operation_failed(op, rel, e, "nothing was deleted") from e
    tables.resync(rel, path)
    written = result.snapshot_id if result.snapshot_id != before else None
    if written is None:
        message = f"DELETE 0 from {_name(rel)}: no row matched, no snapshot written"
    else:
        message = f"DELETE {result.deleted} from {_name(rel)} (snapshot {written})"
    if result.extra_snapshots:
        message += f"; then snapshot(s) {_ids(result.extra_snapshots)} (automatic compaction)"
    return {"operation": "delete", "relation": _name(rel), "table_path": path, "snapshot_id": written,
            "deleted": result.deleted, "extra_snapshots": list(result.extra_snapshots or []),
            "seconds": round(result.seconds, 3), "message": message}


def compact_table(tables: Tables, relation: Any) -> Dict[str, Any]:
    op = "paimon_compact"
    rel, path, table = open_table(tables, relation, op)
    files_before = sum(len(s.files) for s in table.plan().splits)
    try:
        sid = compact(tables.spark(), path)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e) from e
    tables.resync(rel, path)
    try:  # for the message only: the compaction is committed whatever happens here
        files_after: Optional[int] = sum(len(s.files) for s in FileStoreTable.open(path).plan().splits)
    except Exception:  # noqa: BLE001 - the count is for the message only
        files_after = None
    if sid is None:
        message = f"COMPACT {_name(rel)}: nothing to compact (every bucket is one file at the top level)"
    else:
        message = f"COMPACT {_name(rel)}: {files_before} files into {files_after} (snapshot {sid})"
    return {"operation": "compact", "relation": _name(rel), "table_path": path, "snapshot_id": sid,
            "files_before": files_before, "files_after": files_after, "message": message}


_KIND_WORDS = (("data", "data files"), ("manifest", "manifests"), ("index", "index files"),
               ("index-manifest", "index manifests"), ("manifest-list", "manifest lists"),
               ("snapshot", "snapshot files"))


def expire(tables: Tables, relation: Any, retain_max: Any = None, retain_min: Any = None,
           older_than: Any = None, max_deletes: Any = None) -> Dict[str, Any]:
    op = "paimon_expire"
    retain_max = int_arg(op, "retain_max", retain_max, 1)
    retain_min = int_arg(op, "retain_min", retain_min, 1)
    max_deletes = int_arg(op, "max_deletes", max_deletes, 1)
    time_retained_ms = None
    if older_than is not None and str(older_than).strip():
        try:
            time_retained_ms = parse_duration_ms("older_than", str(older_than))
        except PaimonError as e:
            raise DbtRuntimeError(f"{op}: {e}") from e
    rel, path, table = open_table(tables, relation, op)
    if retain_max is not None and retain_min is None:
        # "keep at most N": the table's snapshot.num-retained.min (Paimon's default 10) must not exceed it
        configured = table.schema.core.snapshot_num_retained_min
        retain_min = min(configured, retain_max)
    try:
        result = table.expire_snapshots(retain_max=retain_max, retain_min=retain_min,
                                        time_retained_ms=time_retained_ms, max_deletes=max_deletes)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "nothing was expired") from e
    tables.resync(rel, path)
    after = FileStoreTable.open(path).snapshots
    earliest, latest = after.earliest_id(), after.latest_id()
    counts = {kind: result.count(kind) for kind, _ in _KIND_WORDS}
    retained = f"snapshots {earliest}-{latest} retained" if earliest != latest else f"snapshot {latest} retained"
    if result.expired:
        files = ", ".join(f"{counts[k]} {words}" for k, words in _KIND_WORDS if counts[k])
        message = (f"EXPIRE {_name(rel)}: snapshot(s) {_ids(result.expired)} expired, deleted {files or 'no files'}; "
                   f"{retained}")
    else:
        message = f"EXPIRE {_name(rel)}: nothing to expire; {retained}"
    return {"operation": "expire", "relation": _name(rel), "table_path": path,
            "expired": list(result.expired), "deleted_files": counts, "earliest_snapshot": earliest,
            "latest_snapshot": latest, "message": message}


def create_tag(tables: Tables, relation: Any, tag: Any, snapshot_id: Any = None,
               time_retained: Any = None, ignore_if_exists: bool = False) -> Dict[str, Any]:
    op = "paimon_create_tag"
    if tag is None or not str(tag).strip():
        raise DbtRuntimeError(f"{op}: give the tag's name as tag")
    sid = int_arg(op, "snapshot_id", snapshot_id, 1)
    rel, path, table = open_table(tables, relation, op)
    try:
        created = table.create_tag(str(tag), sid, time_retained=str(time_retained) if time_retained else None,
                                   ignore_if_exists=bool(ignore_if_exists))
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "no tag was created") from e
    tables.resync(rel, path)
    kept = f", retained for {time_retained}" if created.time_retained is not None else ""
    return {"operation": "create_tag", "relation": _name(rel), "table_path": path, "tag": created.name,
            "snapshot_id": created.snapshot_id,
            "message": f"TAG {_name(rel)}: tag '{created.name}' on snapshot {created.snapshot_id}{kept}"}


def delete_tag(tables: Tables, relation: Any, tag: Any) -> Dict[str, Any]:
    op = "paimon_delete_tag"
    if tag is None or not str(tag).strip():
        raise DbtRuntimeError(f"{op}: give the tag's name as tag")
    rel, path, table = open_table(tables, relation, op)
    try:
        deleted = table.delete_tag(str(tag))
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "no tag was deleted") from e
    tables.resync(rel, path)
    message = (f"DELETE TAG {_name(rel)}: tag '{tag}' deleted" if deleted
               else f"DELETE TAG {_name(rel)}: there is no tag '{tag}', nothing deleted")
    return {"operation": "delete_tag", "relation": _name(rel), "table_path": path, "tag": str(tag),
            "deleted": deleted, "message": message}


def _one_target(op: str, snapshot_id: Any, tag: Any) -> Tuple[Optional[int], Optional[str]]:
    sid = int_arg(op, "snapshot_id", snapshot_id, 1)
    name = str(tag).strip() if tag is not None and str(tag).strip() else None
    if (sid is None) == (name is None):
        raise DbtRuntimeError(f"{op}: give exactly one of snapshot_id and tag"
                              f"{' (both were given)' if sid is not None else ''}")
    return sid, name


def rollback(tables: Tables, relation: Any, snapshot_id: Any = None, tag: Any = None) -> Dict[str, Any]:
    op = "paimon_rollback"
    sid, name = _one_target(op, snapshot_id, tag)
    rel, path, table = open_table(tables, relation, op)
    try:
        result = table.rollback_to(sid if sid is not None else name)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "nothing was rolled back") from e
    tables.resync(rel, path)
    target = f"snapshot {sid}" if sid is not None else f"tag '{name}' (snapshot {result.snapshot.id})"
    removed = [f"snapshot(s) {_ids(result.removed_snapshots)}"] if result.removed_snapshots else []
    removed += [f"tag(s) {', '.join(result.removed_tags)}"] if result.removed_tags else []
    removed += [f"{len(result.deleted)} file(s)"] if result.deleted else []
    return {"operation": "rollback", "relation": _name(rel), "table_path": path,
            "snapshot_id": result.snapshot.id, "removed_snapshots": list(result.removed_snapshots),
            "removed_tags": list(result.removed_tags), "deleted_files": len(result.deleted),
            "message": f"ROLLBACK {_name(rel)} to {target}: removed {', '.join(removed) or 'nothing'}"}


def _bool_arg(operation: str, name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return True
    if text in ("false", "no", "0", "", "none"):
        return False
    raise DbtRuntimeError(f"{operation}: {name} must be true or false, got {value!r}")


def remove_orphan_files(tables: Tables, relation: Any, older_than: Any = "1 d",
                        dry_run: Any = False) -> Dict[str, Any]:
    """Paimon's remove_orphan_files: delete files of the table that no snapshot or tag references
    and that are older than `older_than` (default 1 day, as Paimon: a younger file may belong to a
    write that has not committed yet); dry_run lists them and deletes nothing."""
    op = "paimon_remove_orphan_files"
    dry = _bool_arg(op, "dry_run", dry_run)
    text = str(older_than).strip() if older_than is not None and str(older_than).strip() else "1 d"
    try:
        older_than_millis(text)  # checked before the table is touched; the cutoff is taken again below
    except PaimonError as e:
        raise DbtRuntimeError(f"{op}: {e}") from e
    rel, path, table = open_table(tables, relation, op)
    try:
        result = table.remove_orphan_files(older_than=text, dry_run=dry)
    except Exception as e:  # noqa: BLE001 - any failure: the run-operation's error names the relation
        raise operation_failed(op, rel, e, "nothing was deleted") from e
    files = sorted(result.paths)
    verb = "would delete" if dry else "deleted"
    message = (f"REMOVE ORPHAN FILES {_name(rel)}: {verb} {len(files)} file(s), {result.total_bytes} bytes, "
               f"older than {text}"
               + ("".join(f"\n  {f}" for f in files[:50]) if dry else "")
               + (f"\n  ... and {len(files) - 50} more" if dry and len(files) > 50 else ""))
    return {"operation": "remove_orphan_files", "relation": _name(rel), "table_path": path, "dry_run": dry,
            "files": files, "bytes": result.total_bytes, "message": message}


# ---- reads as temporary views ---------------------------------------------------------------------

def _clean(text: str) -> str:
    clean = re.sub(r"[^a-z0-9_]", "_", text.lower())
    if clean != text:  # two names cleaned alike must still get two views
        clean += "_" + hashlib.sha1(text.encode()).hexdigest()[:8]
    return clean


def view_name(rel: BaseRelation, what: str) -> str:
    return f"paimon__{_clean(rel.schema)}__{_clean(rel.identifier)}__{what}"


def _view(tables: Tables, name: str, df) -> BaseRelation:
    df.createOrReplaceTempView(name)
    return tables.Relation.create(identifier=name, type="view")


def _tag_names(table: FileStoreTable) -> List[str]:
    return sorted(table.tags.names())


def as_of(tables: Tables, relation: Any, snapshot_id: Any = None, tag: Any = None) -> BaseRelation:
    """A temporary view of the table as of a snapshot or a tag."""
    op = "paimon_as_of"
    sid, name = _one_target(op, snapshot_id, tag)
    rel, path, table = open_table(tables, relation, op)
    reader = tables.spark().read.format("paimon")
    if sid is not None:
        if table.snapshots.try_snapshot(sid) is None:
            earliest, latest = table.snapshots.earliest_id(), table.snapshots.latest_id()
            have = f"snapshots {earliest}-{latest}" if latest is not None else "no snapshot"
            tags = _tag_names(table)
            raise DbtRuntimeError(f"{op}: {_name(rel)} has no snapshot {sid} (the table at {path} has {have}"
                                  f"{'; tags: ' + ', '.join(tags) if tags else ''}); an expired snapshot is "
                                  f"readable through a tag created before it expired")
        reader, what = reader.option("snapshot-id", str(sid)), f"snapshot_{sid}"
    else:
        if table.tags.get(name) is None:
            tags = _tag_names(table)
            raise DbtRuntimeError(f"{op}: {_name(rel)} has no tag '{name}' (tags of {path}: "
                                  f"{', '.join(tags) if tags else 'none'})")
        reader, what = reader.option("tag", name), f"tag_{_clean(name)}"
    try:
        return _view(tables, view_name(rel, what), reader.load(path))
    except Exception as e:  # noqa: BLE001 - any failure to read: an error naming the relation
        raise DbtRuntimeError(f"{op}: cannot read {_name(rel)} at {path} as of {what}: {error_message(e)}") from e


def check_system_table(name: Any) -> str:
    text = str(name or "").strip().lstrip("$").lower()
    if text not in SYSTEM_TABLES:
        raise DbtRuntimeError(f"paimon_system_table: unknown system table {name!r}; "
                              f"the system tables are {', '.join(SYSTEM_TABLES)}")
    return text


def system_table(tables: Tables, relation: Any, name: Any) -> BaseRelation:
    """A temporary view of one of the table's system tables (snapshots, files, ...)."""
    op = "paimon_system_table"
    system = check_system_table(name)
    rel, path, _ = open_table(tables, relation, op)
    try:
        return _view(tables, view_name(rel, f"sys_{system}"),
                     tables.spark().read.format("paimon").load(f"{path}${system}"))
    except Exception as e:  # noqa: BLE001 - any failure to read: an error naming the relation
        raise DbtRuntimeError(f"{op}: cannot read ${system} of {_name(rel)} at {path}: {error_message(e)}") from e
