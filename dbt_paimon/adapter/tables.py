"""The Paimon tables of the warehouse as one dbt adapter sees them: where a relation's table lives,
Spark's catalog entry that follows it, and dbt's relation cache.

Every operation on a table (materializations, snapshots, maintenance) reaches paths and the catalog
through a `Tables`, never through the adapter object: the adapter builds one and hands it on, so
the modules that do the work do not import the adapter back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import DataFrame, SparkSession

from ..engine import RunSettings
from ..store import FileIO, FileStoreCommit, FileStoreTable, PaimonError, SchemaManager, TableSchema
from ..sql import catalog, read_branch
from . import staging
from .connections import error_message

log = AdapterLogger("Paimon")


@dataclass(frozen=True)
class Tables:
    """The warehouse's tables for one adapter: `spark` gives its session, `Relation` is its relation
    class, `cache_added` / `cache_dropped` keep dbt's relation cache in step."""

    warehouse: str
    default_schema: str
    spark: Callable[[], SparkSession]
    Relation: Any
    cache_added: Callable[[BaseRelation], None]
    cache_dropped: Callable[[BaseRelation], None]
    # the branch this build writes its Paimon tables on (wap.py: --vars '{paimon_branch: NAME}')
    branch: Optional[str] = None

    # ---- paths: every path of a relation is built here ---------------------------------------
    def path(self, relation: BaseRelation) -> str:
        """Where the Paimon table of a relation lives: <warehouse>/<schema>.db/<identifier>; a
        relation whose names would lead outside the warehouse is refused here, before any file
        is touched."""
        try:
            return catalog.table_path(self.warehouse, relation.schema or "", relation.identifier or "")
        except PaimonError as e:
            raise DbtRuntimeError(f"relation {relation}: {e}") from None

    def schema_path(self, relation: BaseRelation) -> str:
        try:
            return catalog.schema_dir(self.warehouse, relation.schema or "")
        except PaimonError as e:
            raise DbtRuntimeError(f"schema {relation.schema!r}: {e}") from None

    def check(self, relation: BaseRelation) -> None:
        """Refuse a relation whose schema or name could reach files outside the warehouse."""
        if relation.identifier:
            self.path(relation)
        elif relation.schema is not None:
            self.schema_path(relation)

    def exists(self, relation: BaseRelation) -> bool:
        return FileStoreTable.exists(self.path(relation))

    # ---- the build's branch (wap.py) --------------------------------------------------------------
    def on_branch(self, settings: RunSettings) -> RunSettings:
        """A write's settings, on the build's branch when it has one."""
        return dataclasses.replace(settings, branch=self.branch) if self.branch else settings

    def prepare_branch(self, path: str, io: FileIO) -> None:
        """The build's branch of an existing table, made from main's latest snapshot if missing (a
        table that does not exist yet gets it from the engine's first write: branches.py)."""
        if self.branch and FileStoreTable.exists(path, io):
            table = FileStoreTable.open(path, io)
            if not table.branches.exists(self.branch):
                table.create_branch(self.branch, snapshot_id=table.snapshots.latest_id(), ignore_if_exists=True)

    def read(self, relation: BaseRelation) -> DataFrame:
        """The Paimon table's rows as this build reads them (from its branch where the table has it),
        through the `paimon` source: one input partition per million rows, where the engine's plan
        (native.py) gives one per file group and the jobs built on it (a snapshot's change set,
        unions of four reads) a task each."""
        path, spark = self.path(relation), self.spark()
        branch = read_branch(spark, path)
        reader = spark.read.format("paimon")
        return (reader.option("branch", branch) if branch else reader).load(path)

    # ---- Spark's catalog and dbt's cache follow the table ---------------------------------------
    def expose(self, relation: BaseRelation, path: str) -> None:
        table = catalog.load(relation.schema, relation.identifier, path)
        if table is not None:
            catalog.expose(self.spark(), table)
            self.cache_added(self.Relation.create(schema=relation.schema, identifier=relation.identifier,
                                                  type="table", is_paimon=True))

    def resync(self, relation: BaseRelation, path: str) -> None:
        """After a commit: the catalog entry follows the table. The change is done whatever happens
        here, so a failure is a warning (the next connection's sync repairs the entry), never an
        error that would report a committed change as failed."""
        try:
            self.expose(relation, path)
        except Exception as e:  # noqa: BLE001 - the table is committed; Spark's entry is warned about
            log.warning(f"{relation.schema}.{relation.identifier}: the change was committed, but Spark's catalog "
                        f"entry could not be refreshed ({error_message(e)}); it is repaired on the next connection")

    def drop_table(self, relation: BaseRelation) -> None:
        """Drop the catalog entry and delete the Paimon table's files (and its key index)."""
        spark = self.spark()
        entry = catalog.catalog_entry(spark, relation.schema, relation.identifier)
        if entry is not None:
            catalog.drop_entry(spark, entry)
        path = self.path(relation)
        staging.remove_table(path)
        self.cache_dropped(relation)

    def drop_schema(self, relation: BaseRelation) -> None:
        """After `drop schema ... cascade`: delete the schema's Paimon tables too."""
        staging.remove_tree(self.schema_path(relation))

    def create_schema(self, relation: BaseRelation) -> None:
        path = self.schema_path(relation)
        FileIO.get(path).mkdirs(path)


def schema_id(path: str, branch: Optional[str] = None) -> Optional[int]:
    """The table's (or its branch's) latest schema id, for a run result only: a failure to read it
    back must not report a commit as failed."""
    try:
        return SchemaManager(FileIO.get(path), path, branch).latest().id
    except Exception:  # noqa: BLE001 - a schema that cannot be read is no schema id: the caller reports
        return None


def table_stats(path: str, schema: TableSchema, io: FileIO) -> Dict[str, Any]:
    """dbt's catalog stats of a Paimon table, from its latest snapshot's metadata (the snapshot's
    record count, its manifests' file sizes): no data file is read. Rows count every record of the
    live files (a key updated in a file not yet compacted counts once per version), as Paimon's
    own `totalRecordCount` does. A table that cannot be read gets none (docs never fail on it)."""
    try:
        snapshot = FileStoreTable(path, schema, io).latest_snapshot()
        if snapshot is None:
            return {}
        files = FileStoreCommit(io, path, schema).live_entries(snapshot).values()
        found = {"rows": snapshot.total_record_count, "files": len(files),
                 "bytes": sum(e.file.file_size for e in files), "snapshot": snapshot.id}
    except Exception as e:  # noqa: BLE001 - stats are optional
        log.debug(f"no catalog stats for {path}: {e}")
        return {}
    labels = {"rows": "Rows", "files": "Data files", "bytes": "Bytes", "snapshot": "Paimon snapshot"}
    out: Dict[str, Any] = {}
    for key, value in found.items():
        out.update({f"stats:{key}:label": labels[key], f"stats:{key}:value": value,
                    f"stats:{key}:description": f"{labels[key]} of the latest Paimon snapshot (from its metadata)",
                    f"stats:{key}:include": True})
    return out
