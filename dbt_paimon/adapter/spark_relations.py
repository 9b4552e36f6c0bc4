"""Spark's own relations (seeds, `table` and `view` models, tables made by hooks), shared by every dbt
process of a project.

Spark's catalog is in memory, one per process (`spark.sql.catalogImplementation=in-memory`): no
metastore to start, to share or to lock. Hive's embedded Derby metastore, which dbt-spark's session
method uses, admits one process at a time, so a second dbt command on a project failed to connect.
Paimon tables need nothing kept here: the warehouse is their truth, and every process registers
them from it when it opens (catalog.sync). What Spark itself writes is kept here, one small file
per relation, so that every process rebuilds the same catalog when it opens and follows what the
others commit:

    <spark_dir>/catalog/<schema>/              a schema Spark created
    <spark_dir>/catalog/<schema>/<name>.json   a table or view: Spark's DDL for it (SHOW CREATE TABLE,
                                               plus its location), written to a temp file and renamed
                                               (a reader finds the old record or the new one)
    <spark_dir>/tables/<schema>.db/<name>/     a table's Parquet files (spark.sql.warehouse.dir)
    <spark_dir>/locks/<schema>/<name>.lock     held by the process writing the relation (locks.py)

Writes: the session cursor (connections.py) says which relation each statement wrote; after it ran,
the relation's record is written from the session's catalog, or removed. Reads: before each
statement the cursor asks for records changed since this process last looked. A directory's
mtime changes when a record is renamed into it or removed, so this is a few stat calls unless
something changed; then only that schema is read again. A changed record is applied to this
process's catalog: re-declared when its DDL changed, else just refreshed (new files).

Tables are re-declared with their location and then made managed again, as in the process that
created them, so that dropping one deletes its files wherever it happens (Spark's SQL cannot
declare a managed table over files that exist, so the catalog entry is switched through Spark's
catalog API). Views are re-created from their SQL text once what they read exists.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import unquote, urlparse

from dbt.adapters.events.logging import AdapterLogger
from pyspark.sql import SparkSession

from ..sql import catalog
from .locks import name_of, safe_name
from .statements import Statement, qualified_names

log = AdapterLogger("Paimon")

RECORD_SUFFIX = ".json"
# A directory changed within this many seconds before we read it may change again within the same
# mtime tick: read it again next time (as git treats "racily clean" index entries).
_RACY_SECONDS = 2.0


@dataclass(frozen=True)
class Record:
    schema: str
    name: str
    kind: str  # table | view
    ddl: str  # runs as is to declare the relation (a table's includes its LOCATION)
    location: Optional[str] = None
    managed: bool = False

    def to_json(self) -> str:
        return json.dumps({"schema": self.schema, "name": self.name, "kind": self.kind, "ddl": self.ddl,
                           "location": self.location, "managed": self.managed,
                           "written_by": {"pid": os.getpid(), "at": time.strftime("%Y-%m-%dT%H:%M:%S")}},
                          indent=1)

    @staticmethod
    def from_json(text: str) -> "Record":
        d = json.loads(text)
        return Record(d["schema"], d["name"], d["kind"], d["ddl"], d.get("location"), bool(d.get("managed")))


def _fingerprint(st: os.stat_result) -> tuple:
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _local_path(location: Optional[str]) -> Optional[str]:
    if not location:
        return None
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return os.path.normpath(unquote(parsed.path))
    return None


class RelationStore:
    """The persisted catalog of one spark_dir, as one process sees and applies it."""

    def __init__(self, spark_dir: str, tables_dir: str):
        self.spark_dir = spark_dir
        self.root = os.path.join(spark_dir, "catalog")
        self.locks_root = os.path.join(spark_dir, "locks")
        self.tables_dir = os.path.normpath(tables_dir)
        self._mutex = threading.RLock()
        self._seen_dirs: dict[str, tuple[int, float]] = {}  # directory -> (mtime_ns, when it was read)
        self._applied: dict[tuple[str, str], tuple[tuple, str]] = {}  # relation -> (record fingerprint, ddl)
        self._records: dict[tuple[str, str], Record] = {}  # what is declared here, for tables_read()
        self._waiting: dict[tuple[str, str], tuple[tuple, Record]] = {}  # views whose inputs are missing
        self._warned: set[tuple[str, str, tuple]] = set()

    # ---- paths ---------------------------------------------------------------------------------
    def schema_dir(self, schema: str) -> str:
        return os.path.join(self.root, safe_name(schema))

    def record_path(self, schema: str, name: str) -> str:
        return os.path.join(self.root, safe_name(schema), safe_name(name) + RECORD_SUFFIX)

    def lock_root(self) -> str:
        return self.locks_root

    # ---- reading: restore at open, refresh before each statement -------------------------------
    def restore(self, spark: SparkSession) -> dict[str, int]:
        """Declare every recorded schema, table and view in this process's catalog."""
        with self._mutex:
            counts = {"schemas": 0, "tables": 0, "views": 0, "skipped": 0}
            for schema in self._list_schemas():
                self._ensure_schema(spark, schema)
                counts["schemas"] += 1
            self._seen_dirs[self.root] = self._dir_state(self.root)
            changed = []
            for schema in self._list_schemas():
                changed += self._changed_records(schema)
            self._apply_all(spark, changed, counts)
            return counts

    def refresh(self, spark: SparkSession) -> None:
        """Apply what other processes committed since this process last looked."""
        with self._mutex:
            if self._dirty(self.root):
                self._seen_dirs[self.root] = self._dir_state(self.root)
                for schema in self._list_schemas():
                    if self.schema_dir(schema) not in self._seen_dirs:
                        self._ensure_schema(spark, schema)
                gone = {s for s, _ in self._applied} - set(self._list_schemas())
                for schema in gone:  # a schema dropped elsewhere: its relations went with it
                    for key in [k for k in self._applied if k[0] == schema]:
                        self._forget(spark, *key)
                    self._seen_dirs.pop(self.schema_dir(schema), None)
            changed = []
            for schema in self._list_schemas():
                if self._dirty(self.schema_dir(schema)):
                    changed += self._changed_records(schema)
            if changed:
                self._apply_all(spark, changed, {"schemas": 0, "tables": 0, "views": 0, "skipped": 0})

    def retry_waiting(self, spark: SparkSession) -> None:
        """Try again the recorded views that could not be declared yet (what they read has come)."""
        with self._mutex:
            if self._waiting:
                self._apply_all(spark, [], {"schemas": 0, "tables": 0, "views": 0, "skipped": 0})

    def _list_schemas(self) -> list[str]:
        try:
            return sorted(name_of(e.name) for e in os.scandir(self.root) if e.is_dir() and not e.name.startswith("."))
        except FileNotFoundError:
            return []

    def _dir_state(self, path: str) -> tuple[int, float]:
        try:
            return os.stat(path).st_mtime_ns, time.time()
        except FileNotFoundError:
            return -1, time.time()

    def _dirty(self, path: str) -> bool:
        seen = self._seen_dirs.get(path)
        if seen is None:
            return True
        try:
            mtime_ns = os.stat(path).st_mtime_ns
        except FileNotFoundError:
            mtime_ns = -1
        return mtime_ns != seen[0] or seen[1] - mtime_ns / 1e9 < _RACY_SECONDS

    def _changed_records(self, schema: str) -> list[tuple[tuple[str, str], Optional[tuple], Optional[Record]]]:
        """(relation, fingerprint, record) for every record of the schema that is new or changed,
        and (relation, None, None) for every relation applied here whose record is gone."""
        directory = self.schema_dir(schema)
        state = self._dir_state(directory)
        present: dict[tuple[str, str], tuple] = {}
        try:
            entries = list(os.scandir(directory))
        except FileNotFoundError:
            entries = []
        for entry in entries:
            if not entry.name.endswith(RECORD_SUFFIX) or entry.name.startswith("."):
                continue
            try:
                present[(schema, name_of(entry.name[: -len(RECORD_SUFFIX)]))] = _fingerprint(entry.stat())
            except FileNotFoundError:
                continue
        self._seen_dirs[directory] = state
        changed: list = []
        for key, fingerprint in sorted(present.items()):
            applied = self._applied.get(key)
            waiting = self._waiting.get(key)
            if (applied and applied[0] == fingerprint) or (waiting and waiting[0] == fingerprint):
                continue
            try:
                with open(self.record_path(*key)) as f:
                    changed.append((key, fingerprint, Record.from_json(f.read())))
            except FileNotFoundError:
                continue
            except (OSError, ValueError, KeyError) as e:
                self._warn_once(key, fingerprint, f"skipping {self.record_path(*key)}: unreadable ({e})")
        for key in [k for k in list(self._applied) + list(self._waiting) if k[0] == schema and k not in present]:
            changed.append((key, None, None))
        return changed

    def _apply_all(self, spark: SparkSession, changed: list, counts: dict[str, int]) -> None:
        """Tables first, then views, in rounds until no more view can be created (a view needs
        what it reads, which may be another view)."""
        for key, fingerprint, record in changed:
            if record is None:
                self._forget(spark, *key)
                self._waiting.pop(key, None)
            elif record.kind == "view":
                self._waiting[key] = (fingerprint, record)
            elif self._apply(spark, key, fingerprint, record):
                counts["tables"] += 1
            else:
                counts["skipped"] += 1
        progress = True
        errors: dict[tuple[str, str], str] = {}
        while self._waiting and progress:
            progress = False
            for key, (fingerprint, record) in sorted(self._waiting.items()):
                try:
                    applied = self._apply(spark, key, fingerprint, record, raise_errors=True)
                except Exception as e:  # noqa: BLE001 - what it reads may come in a later round
                    errors[key] = str(e).split("\n", 1)[0]
                    continue
                del self._waiting[key]
                progress = True
                counts["views" if applied else "skipped"] += 1
        for key, (fingerprint, _record) in self._waiting.items():
            # left out until what it reads appears (it is tried again whenever a record changes)
            self._warn_once(key, fingerprint, f"view {key[0]}.{key[1]} recorded in {self.record_path(*key)} cannot be "
                                              f"declared yet: {errors.get(key, 'it reads a relation that is missing')}",
                            debug=True)

    def _apply(self, spark: SparkSession, key: tuple[str, str], fingerprint: tuple, record: Record,
               raise_errors: bool = False) -> bool:
        applied = self._applied.get(key)
        entry = _entry(spark, *key)
        if entry is not None and entry["paimon"]:
            # Paimon tables are the warehouse's truth: a Spark relation of the same name is not declared
            self._warn_once(key, fingerprint, f"{key[0]}.{key[1]}: the Paimon table of this name is used; the Spark "
                                              f"{record.kind} recorded in {self.record_path(*key)} is not declared")
            self._applied[key] = (fingerprint, record.ddl)
            return False
        try:
            if applied is not None and entry is not None and applied[1] == record.ddl and record.kind == "table":
                # the same table, new files (an insert elsewhere): forget cached file listings
                spark.sql(f"REFRESH TABLE {catalog.quote(key[0])}.{catalog.quote(key[1])}")
            else:
                if entry is not None:
                    self._forget(spark, *key)
                self._ensure_schema(spark, key[0])
                spark.sql(record.ddl)
                fields: dict[str, Any] = {"owner": spark.sparkContext.sparkUser()}  # catalog.OWNER_NOTE
                if record.kind == "table" and record.managed:
                    # declared over files that exist, which Spark's SQL allows only for an external table
                    fields["tableType"] = catalog.table_type(spark, "MANAGED")
                catalog.alter_entry(spark, key[0], key[1], **fields)
        except Exception as e:  # noqa: BLE001 - one bad record must not stop dbt from opening
            if raise_errors:
                raise
            self._warn_once(key, fingerprint, f"{key[0]}.{key[1]} recorded in {self.record_path(*key)} could not be "
                                              f"declared: {str(e).splitlines()[0] if str(e) else e!r}")
            return False
        self._applied[key] = (fingerprint, record.ddl)
        self._records[key] = record
        return True

    def _forget(self, spark: SparkSession, schema: str, name: str) -> None:
        """Take a relation out of this process's catalog without touching its files."""
        self._applied.pop((schema, name), None)
        self._records.pop((schema, name), None)
        entry = _entry(spark, schema, name)
        if entry is None or entry["paimon"]:
            return
        ident = f"{catalog.quote(schema)}.{catalog.quote(name)}"
        if entry["kind"] == "VIEW":
            spark.sql(f"DROP VIEW IF EXISTS {ident}")
            return
        if entry["kind"] == "MANAGED" and not catalog.set_managed(spark, schema, name, False):
            log.debug(f"{schema}.{name}: kept in this process's catalog (it cannot be made external to be forgotten)")
            return
        spark.sql(f"DROP TABLE IF EXISTS {ident}")

    def _ensure_schema(self, spark: SparkSession, schema: str) -> None:
        if not spark._jsparkSession.sessionState().catalog().externalCatalog().databaseExists(schema):
            spark.sql(f"CREATE SCHEMA IF NOT EXISTS {catalog.quote(schema)}")

    def _warn_once(self, key: tuple[str, str], fingerprint: Optional[tuple], message: str, debug: bool = False) -> None:
        marker = (key[0], key[1], fingerprint or ())
        if marker in self._warned:
            return
        self._warned.add(marker)
        (log.debug if debug else log.warning)(message)

    def tables_read(self, sql: str) -> set[tuple[str, str]]:
        """The Spark tables (with files) a statement may read: those its text names, and those the
        views it names read, by the views' recorded SQL. A name in a string literal counts too:
        a lock too many costs a wait, a lock missing costs a failed read."""
        with self._mutex:
            if not self._records:
                return set()
            found: set[tuple[str, str]] = set()
            todo = [sql]
            seen_views: set[tuple[str, str]] = set()
            schemas = {schema for schema, _ in self._records}
            while todo:
                for key in qualified_names(todo.pop()):
                    record = self._records.get(key)
                    if record is None:
                        # no record: maybe a table another process is rebuilding right now (dropped,
                        # not yet created); its writer holds the lock, so wait for it like for any
                        if key[0] in schemas:
                            found.add(key)
                        continue
                    if record.kind == "table":
                        found.add(key)
                    elif key not in seen_views:
                        seen_views.add(key)
                        todo.append(record.ddl)
            return found

    # ---- writing: after each statement of the session cursor ------------------------------------
    def written(self, spark: SparkSession, statement: Statement) -> None:
        """Record what a statement that ran changed."""
        with self._mutex:
            if statement.schema_change:
                op, schema = statement.schema_change
                if op == "create":
                    os.makedirs(self.schema_dir(schema), exist_ok=True)
                else:
                    self._drop_schema(spark, schema)
            for schema, name in statement.relations:
                # a renamed table's files moved with it (or stay where the new name reads them)
                self._record(spark, schema, name, data_only=statement.kind == "data",
                             renamed=statement.kind == "rename")
            if statement.unknown:
                self._record_all(spark)

    def record(self, spark: SparkSession, schema: str, name: str) -> None:
        """Record a relation written other than through the session cursor (a Python model's
        DataFrame written with saveAsTable): as the cursor does after a statement."""
        with self._mutex:
            self._record(spark, schema.lower(), name.lower())

    def _record(self, spark: SparkSession, schema: str, name: str, data_only: bool = False,
                renamed: bool = False) -> None:
        key = (schema, name)
        path = self.record_path(schema, name)
        entry = _entry(spark, schema, name)
        if entry is None or entry["paimon"]:
            previous = self._read(path)
            self._remove(path)
            self._applied.pop(key, None)
            self._records.pop(key, None)
            if previous is not None and entry is None and not renamed:
                self._delete_files(previous)
            return
        if not entry["owner"]:  # catalog.OWNER_NOTE
            catalog.alter_entry(spark, schema, name, owner=spark.sparkContext.sparkUser())
        if data_only and key in self._applied:
            # the same DDL, new files: a new record version tells the other processes to refresh
            ddl = self._applied[key][1]
        else:
            ddl = spark.sql(f"SHOW CREATE TABLE {catalog.quote(schema)}.{catalog.quote(name)}").first()[0]
            if entry["kind"] == "MANAGED" and entry["location"]:
                ddl = ddl.rstrip() + f"\nLOCATION {catalog.sql_string(entry['location'])}"
        record = Record(schema, name, "view" if entry["kind"] == "VIEW" else "table", ddl, entry["location"],
                        entry["kind"] == "MANAGED")
        self._applied[key] = (self._write(path, record.to_json()), ddl)
        self._records[key] = record
        self._waiting.pop(key, None)

    def _record_all(self, spark: SparkSession) -> None:
        """After a statement whose target could not be read: compare the whole catalog with the records."""
        ext = spark._jsparkSession.sessionState().catalog().externalCatalog()
        recorded = {(s, name_of(n[: -len(RECORD_SUFFIX)])) for s in self._list_schemas()
                    for n in os.listdir(self.schema_dir(s)) if n.endswith(RECORD_SUFFIX) and not n.startswith(".")}
        current = set()
        for schema in catalog.scala_list(ext.listDatabases()):
            for name in catalog.scala_list(ext.listTables(schema)):
                entry = _entry(spark, schema, name)
                if entry is not None and not entry["paimon"]:
                    current.add((schema, name))
        for schema, name in sorted(current | recorded):
            self._record(spark, schema, name)

    def _drop_schema(self, spark: SparkSession, schema: str) -> None:
        directory = self.schema_dir(schema)
        if spark._jsparkSession.sessionState().catalog().externalCatalog().databaseExists(schema):
            return  # the drop did not happen (a schema that is not empty, without cascade)
        for key in [k for k in self._applied if k[0] == schema]:
            self._applied.pop(key, None)
            self._records.pop(key, None)
        try:
            names = [n for n in os.listdir(directory) if n.endswith(RECORD_SUFFIX)]
        except FileNotFoundError:
            return
        for n in names:
            record = self._read(os.path.join(directory, n))
            if record is not None:
                self._delete_files(record)
        shutil.rmtree(directory, ignore_errors=True)

    def _delete_files(self, record: Record) -> None:
        """A managed table dropped in this process whose files are still there (its catalog entry was
        external here): delete them, as Spark does for a managed table; only inside our tables dir."""
        path = _local_path(record.location) if record.managed else None
        if path and path.startswith(self.tables_dir + os.sep) and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)

    @staticmethod
    def _read(path: str) -> Optional[Record]:
        try:
            with open(path) as f:
                return Record.from_json(f.read())
        except (OSError, ValueError, KeyError):
            return None

    @staticmethod
    def _remove(path: str) -> None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass

    @staticmethod
    def _write(path: str, text: str) -> tuple:
        """Write a record whole (temp file + rename); its fingerprint."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        return _fingerprint(os.stat(path))


# ---- Spark's catalog, through its API (no SQL analysis) -----------------------------------------
def _entry(spark: SparkSession, schema: str, name: str) -> Optional[dict[str, Any]]:
    """kind (MANAGED, EXTERNAL, VIEW), location and whether it is one of our Paimon entries; None if absent."""
    ext = spark._jsparkSession.sessionState().catalog().externalCatalog()
    if not ext.databaseExists(schema) or not ext.tableExists(schema, name):
        return None
    table = ext.getTable(schema, name)
    provider = table.provider()
    location = table.storage().locationUri()
    return {"kind": table.tableType().name(),
            "paimon": bool(provider.isDefined() and str(provider.get()).startswith(catalog.PROVIDER_PREFIX)),
            "location": str(location.get().toString()) if location.isDefined() else None,
            "owner": str(table.owner() or "")}
