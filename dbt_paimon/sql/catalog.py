"""Paimon tables in Spark's catalog, so that SQL (`ref()`, `dbt test`, `dbt show`, docs) reads them.

A Paimon table lives at `<warehouse>/<schema>.db/<table>/`. Spark sees it as a catalog table
`schema.table` whose provider is a Python data source made for that one table: a subclass of the
engine's `paimon` source with the table's path built in (options given to `CREATE TABLE ... USING`
never reach a Python data source's reader). Every read goes through it: merge-on-read of the latest
snapshot, never a copy.

The provider's name encodes the table's path and Paimon schema, so a catalog entry that no longer
matches its table (schema evolved elsewhere, table moved or deleted) is recognised by name alone
(`SHOW TABLE EXTENDED`), without resolving the provider. Sources exist only in the Python process
that registered them, so `sync()` runs when a connection first opens in a process: it registers a
source for every Paimon table of the warehouse and creates, replaces or drops catalog entries.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import threading
from dataclasses import dataclass
from typing import Iterable, Optional

from pyspark.sql import SparkSession

from ..engine.read.source import PaimonDataSource
from ..engine.jvm import jvm_class, scala_list
from ..engine.spark_types import spark_ddl, spark_schema
from ..store.common.errors import PaimonError
from ..store.common import fileio
from ..store.common.fileio import FileIO
from ..store.schema.schema import SchemaManager, TableSchema
from ..store.table import FileStoreTable
from ..store import warehouse as layout

log = logging.getLogger(__name__)

PROVIDER_PREFIX = "dbt_paimon__"
_lock = threading.RLock()
_registered: dict[str, str] = {}  # provider name -> table path, in this process


def quote(identifier: str) -> str:
    return "`" + identifier.replace("`", "``") + "`"


def sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def table_path(warehouse: str, schema: str, table: str) -> str:
    """Where the Paimon table of `schema.table` lives (Paimon's filesystem catalog layout); an
    InvalidNameError when the names would lead anywhere but a table directory of the warehouse."""
    return layout.table_path(warehouse, schema, table)


def schema_dir(warehouse: str, schema: str) -> str:
    return layout.database_path(warehouse, schema)


def provider_name(schema: str, table: str, path: str, table_schema: TableSchema) -> str:
    """A name that changes whenever the catalog entry must: another path, or another Paimon schema
    (columns, types, comments; a rebuilt table's schema-0 differs by its creation time)."""
    clean = re.sub(r"[^a-z0-9_]", "_", f"{schema}__{table}".lower())
    digest = hashlib.sha1(f"{path if fileio.scheme_of(path) else os.path.abspath(path)}|"
                          f"{table_schema.to_json()}".encode()).hexdigest()[:12]
    return f"{PROVIDER_PREFIX}{clean}__{digest}"


def source_class(name: str, path: str) -> type:
    """The `paimon` data source with one table's path built in, under its own name, and the
    process's store settings with it (Spark's Python workers know nothing of them)."""
    settings = fileio.configured()

    class PaimonTableSource(PaimonDataSource):
        """Exactly `spark.read.format("paimon").load(path)`: the path is the only option it adds."""

        @classmethod
        def name(cls) -> str:
            return name

        def __init__(self, options):
            super().__init__({**settings, **dict(options or {}), "path": path})

    PaimonTableSource.__qualname__ = PaimonTableSource.__name__ = f"PaimonTableSource_{name}"
    return PaimonTableSource


def register_source(spark: SparkSession, name: str, path: str) -> None:
    with _lock:
        if _registered.get(name) == path:
            return
        spark.dataSource.register(source_class(name, path))
        _registered[name] = path


def forget_sources() -> None:
    """Sources belong to a SparkSession: forget them when a new session starts."""
    with _lock:
        _registered.clear()


@dataclass(frozen=True)
class PaimonTable:
    schema: str  # catalog schema (database) name, lower case
    name: str  # catalog table name, lower case
    path: str
    table_schema: TableSchema

    @property
    def provider(self) -> str:
        return provider_name(self.schema, self.name, self.path, self.table_schema)

    @property
    def identifier(self) -> str:
        return f"{quote(self.schema)}.{quote(self.name)}"


def load(schema: str, name: str, path: str) -> Optional[PaimonTable]:
    io = FileIO.get(path)
    if not FileStoreTable.exists(path, io):
        return None
    return PaimonTable(schema.lower(), name.lower(), path, SchemaManager(io, path).latest())


def discover(warehouse: str, only: Optional[str] = None) -> list[PaimonTable]:
    """Every Paimon table of the warehouse (`<schema>.db/<table>/schema/schema-N`), or of one schema.

    Anything else found there is skipped with a warning, so that one foreign or damaged entry
    (a stray file, an unreadable directory, a table whose metadata cannot be read, a name that is
    no table name) never stops dbt from reaching the other tables."""
    if fileio.scheme_of(warehouse):
        return _discover_on_object_store(warehouse, only)
    found = []
    try:
        databases = sorted(os.listdir(warehouse)) if only is None else [only.lower() + layout.DATABASE_SUFFIX]
    except FileNotFoundError:
        return []
    if only is not None and not os.path.isdir(os.path.join(warehouse, databases[0])):
        return []  # a schema without Paimon tables
    for db in databases:
        db_path = os.path.join(warehouse, db)
        if not db.endswith(layout.DATABASE_SUFFIX) or db.startswith(".") or not os.path.isdir(db_path):
            continue
        try:
            names = sorted(os.listdir(db_path))
            database = layout.check_name("database", db[: -len(layout.DATABASE_SUFFIX)])
        except (OSError, PaimonError) as e:
            log.warning(f"skipping {db_path}: {e}")
            continue
        for name in names:
            if name.startswith("."):  # our staging directories, Spark's files, editors' droppings
                continue
            path = os.path.join(db_path, name)
            try:
                if not os.path.isdir(path):
                    log.warning(f"skipping {path}: a file, not a Paimon table directory")
                    continue
                table = load(database, layout.check_name("table", name), layout.table_path(warehouse, database, name))
            except (OSError, ValueError, PaimonError) as e:  # a damaged table must not stop dbt from starting
                log.warning(f"skipping {path}: {e}")
                continue
            if table is None:
                log.warning(f"skipping {path}: not a Paimon table (no schema/schema-N)")
                continue
            found.append(table)
    return found


def _discover_on_object_store(warehouse: str, only: Optional[str] = None) -> list[PaimonTable]:
    """discover() on an object store: prefixes instead of directories (two LISTs per database)."""
    io = FileIO.get(warehouse)
    found = []
    for db in sorted(io.list_status(warehouse), key=lambda s: s.path):
        name = db.path.rsplit("/", 1)[-1]
        if not db.is_dir or not name.endswith(layout.DATABASE_SUFFIX):
            continue
        if only is not None and name != only.lower() + layout.DATABASE_SUFFIX:
            continue
        try:
            database = layout.check_name("database", name[: -len(layout.DATABASE_SUFFIX)])
        except PaimonError as e:
            log.warning(f"skipping {db.path}: {e}")
            continue
        for entry in sorted(io.list_status(db.path), key=lambda s: s.path):
            table_name = entry.path.rsplit("/", 1)[-1]
            if table_name.startswith("."):
                continue
            try:
                if not entry.is_dir:
                    raise PaimonError("an object, not a Paimon table")
                table = load(database, layout.check_name("table", table_name),
                             layout.table_path(warehouse, database, table_name))
                if table is None:
                    raise PaimonError("not a Paimon table (no schema/schema-N)")
            except (OSError, ValueError, PaimonError) as e:
                log.warning(f"skipping {entry.path}: {e}")
                continue
            found.append(table)
    return found


def create_table_sql(table: PaimonTable) -> str:
    schema = table.table_schema
    struct = spark_schema(schema)
    columns = []
    for field, spark_field in zip(schema.fields, struct.fields):
        column = f"{quote(field.name)} {spark_ddl(spark_field.dataType)}"
        if field.description:
            column += f" COMMENT {sql_string(field.description)}"
        columns.append(column)
    properties = {
        "paimon.path": table.path,
        "paimon.primary-key": ",".join(schema.primary_keys),
        "paimon.partition": ",".join(schema.partition_keys),
        "paimon.schema-id": str(schema.id),
    }
    props = ", ".join(f"{sql_string(k)} = {sql_string(v)}" for k, v in properties.items())
    comment = f"\nCOMMENT {sql_string(schema.comment)}" if schema.comment else ""
    # An external entry at the table's own directory (the source reads its path, not this): dropping
    # the entry never deletes a file, and no empty directory appears under Spark's warehouse dir. Spark
    # has no filesystem for an object store's URI, so there the entry stays where Spark puts it.
    location = "" if fileio.scheme_of(table.path) else f"\nLOCATION {sql_string(os.path.abspath(table.path))}"
    return (f"CREATE TABLE {table.identifier} (\n  " + ",\n  ".join(columns) + f"\n) USING {table.provider}"
            f"{comment}{location}\nTBLPROPERTIES ({props})")


@dataclass(frozen=True)
class CatalogEntry:
    schema: str
    name: str
    provider: Optional[str]
    is_view: bool
    path: Optional[str] = None  # the Paimon table an entry of ours reads (its `paimon.path` property)

    @property
    def ours(self) -> bool:
        return (self.provider or "").startswith(PROVIDER_PREFIX)


def _external_catalog(spark: SparkSession):
    return spark._jsparkSession.sessionState().catalog().externalCatalog()


def _entry_of(schema: str, table) -> CatalogEntry:
    """A CatalogEntry from Spark's CatalogTable: read through the catalog's API, which neither
    analyses SQL nor resolves the provider (SHOW TABLE EXTENDED formats every table's details)."""
    provider = table.provider()
    path = table.properties().get("paimon.path")
    return CatalogEntry(schema, str(table.identifier().table()).lower(),
                        str(provider.get()) if provider.isDefined() else None,
                        str(table.tableType().name()) == "VIEW", str(path.get()) if path.isDefined() else None)


def catalog_entries(spark: SparkSession, schema: str) -> dict[str, CatalogEntry]:
    """The tables and views of one catalog schema (none if it does not exist)."""
    ext = _external_catalog(spark)
    if not ext.databaseExists(schema):
        return {}
    names = scala_list(ext.listTables(schema))
    if not names:
        return {}
    entries = [_entry_of(schema, t)
               for t in scala_list(ext.getTablesByName(schema, spark._jvm.PythonUtils.toSeq(names)))]
    return {e.name: e for e in entries}


def catalog_entry(spark: SparkSession, schema: str, name: str) -> Optional[CatalogEntry]:
    ext = _external_catalog(spark)
    if not ext.databaseExists(schema) or not ext.tableExists(schema, name.lower()):
        return None
    return _entry_of(schema, ext.getTable(schema, name.lower()))


def drop_entry(spark: SparkSession, entry: CatalogEntry, path: str = "") -> None:
    """Drop a catalog entry; one of ours needs its provider registered (any path will do)."""
    ident = f"{quote(entry.schema)}.{quote(entry.name)}"
    if entry.is_view:
        spark.sql(f"DROP VIEW IF EXISTS {ident}")
        return
    if entry.ours and entry.provider not in _registered:
        register_source(spark, entry.provider, path or "/nonexistent")
    spark.sql(f"DROP TABLE IF EXISTS {ident}")


def ensure_schema(spark: SparkSession, schema: str) -> None:
    if not spark.catalog.databaseExists(schema):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote(schema)}")


def expose(spark: SparkSession, table: PaimonTable, entry: Optional[CatalogEntry] | bool = False) -> bool:
    """Make `schema.table` in Spark's catalog read this Paimon table; True when the entry changed.

    entry: the current catalog entry if known (None: there is none), False: look it up."""
    with _lock:
        register_source(spark, table.provider, table.path)
        if entry is False:
            entry = catalog_entry(spark, table.schema, table.name)
        if entry is not None and entry.provider == table.provider:
            return False
        if entry is not None:
            if not entry.ours:
                raise PaimonError(
                    f"{table.schema}.{table.name} is a {'view' if entry.is_view else 'table'} in Spark's catalog "
                    f"that is not the Paimon table at {table.path}; drop one of the two")
            drop_entry(spark, entry, table.path)
        ensure_schema(spark, table.schema)
        spark.sql(create_table_sql(table))
        fields = {"owner": spark.sparkContext.sparkUser()}  # see OWNER_NOTE
        if fileio.scheme_of(table.path):
            # a managed entry's drop deletes its directory under Spark's warehouse dir, which a Spark
            # table of the same name may use by then (a model that became a `table`)
            fields["tableType"] = table_type(spark, "EXTERNAL")
        alter_entry(spark, table.schema, table.name, **fields)
        return True


# OWNER_NOTE: Hive's metastore records who made a table or view, and dbt docs shows it; Spark's
# in-memory catalog leaves the owner empty. Every entry dbt-paimon makes or records gets the user
# Spark runs as, so that what dbt docs shows does not depend on the catalog.


def alter_entry(spark: SparkSession, schema: str, name: str, **fields) -> bool:
    """Change fields of a catalog entry (Spark's CatalogTable) through the catalog's API, for what its
    SQL cannot say: a managed table over files that exist, a view's owner. False when Spark's API
    differs from what this expects (then the entry stays as it is)."""
    try:
        ext = spark._jsparkSession.sessionState().catalog().externalCatalog()
        table = ext.getTable(schema, name)
        names = [table.productElementName(i) for i in range(table.productArity())]
        values = [table.productElement(i) for i in range(table.productArity())]
        for field, value in fields.items():
            values[names.index(field)] = value
        ext.alterTable(table.copy(*values))
        table_identifier = jvm_class(spark, "org.apache.spark.sql.catalyst.TableIdentifier")
        spark._jsparkSession.sessionState().catalog().invalidateCachedTable(
            table_identifier.apply(name, jvm_class(spark, "scala.Some").apply(schema)))
        return True
    except Exception as e:  # noqa: BLE001 - the entry is a convenience: Paimon's table holds the change
        log.debug(f"{schema}.{name}: could not change {', '.join(fields)} of the catalog entry: {e}")
        return False


def set_managed(spark: SparkSession, schema: str, name: str, managed: bool) -> bool:
    """Switch a table's catalog entry between managed (dropping it deletes its files) and external."""
    return alter_entry(spark, schema, name, tableType=table_type(spark, "MANAGED" if managed else "EXTERNAL"))


def table_type(spark: SparkSession, kind: str):
    """Spark's CatalogTableType of this name (MANAGED, EXTERNAL, VIEW), for alter_entry."""
    return getattr(jvm_class(spark, "org.apache.spark.sql.catalyst.catalog.CatalogTableType"), kind)()


def _inside(path: str, warehouse: str) -> bool:
    if fileio.scheme_of(warehouse):
        return path.startswith(warehouse.rstrip("/") + "/")
    return os.path.abspath(path).startswith(os.path.abspath(warehouse).rstrip(os.sep) + os.sep)


def sync(spark: SparkSession, warehouse: str, schemas: Iterable[str] = (),
         only: Optional[str] = None) -> dict[str, int]:
    """Bring Spark's catalog in line with the warehouse (or one schema of it): every Paimon table
    readable as `schema.table`, no entry left for a table that is gone. Returns counts for the log."""
    counts = {"tables": 0, "created": 0, "dropped": 0, "conflicts": 0}
    with _lock:
        tables = discover(warehouse, only)
        by_schema: dict[str, list[PaimonTable]] = {}
        for t in tables:
            by_schema.setdefault(t.schema, []).append(t)
        names = {str(n).lower() for n in scala_list(_external_catalog(spark).listDatabases())}
        wanted_schemas = names | set(by_schema) | {s.lower() for s in schemas}
        if only is not None:
            wanted_schemas = {only.lower()}
        for schema in sorted(wanted_schemas):
            entries = catalog_entries(spark, schema) if schema in names else {}
            wanted = {t.name: t for t in by_schema.get(schema, [])}
            for name, table in wanted.items():
                counts["tables"] += 1
                try:
                    counts["created"] += expose(spark, table, entries.get(name))
                except PaimonError as e:
                    counts["conflicts"] += 1
                    log.warning(str(e))
            for name, entry in entries.items():
                # an entry of ours whose table is gone from this warehouse (an entry of a table in
                # another warehouse sharing the catalog is left alone)
                if name not in wanted and entry.ours and entry.path and _inside(entry.path, warehouse):
                    drop_entry(spark, entry)
                    counts["dropped"] += 1
    return counts
