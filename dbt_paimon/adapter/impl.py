"""PaimonAdapter: dbt-spark's adapter plus the Paimon tables of one warehouse.

The Jinja side (macros/) orchestrates a model as dbt-spark's materializations do (hooks, relations,
temporary view, grants, docs); the work on Paimon tables is done by the adapter's modules, one per
dbt role, through the engine and the store, and reported back to dbt as an adapter response:

- connections.py, credentials.py, session.py: the connection (the in-process SparkSession);
- tables.py, catalog.py, spark_relations.py, relation.py: relations, paths and Spark's catalog;
- materializations.py (with incremental.py, evolution.py, constraints.py, staging.py), snapshots.py,
  python_models.py: the materializations' entry points;
- maintenance.py: run-operations on tables (delete, compact, expire, tags, rollback, time travel).

This class is dbt's surface: each `@available` method hands its call to the module of its role,
with a `Tables` (tables.py) rather than the adapter, so no module imports the adapter back.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

from dbt.adapters.base import available
from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.contracts.connection import AdapterResponse
from dbt.adapters.spark.impl import SparkAdapter
from pyspark.sql import SparkSession

from ..engine import spark_schema
from ..store import FileIO, FileStoreTable, SchemaManager
from ..sql import catalog, set_session_branch
from . import changes, incremental, maintenance, materializations, python_models, seeds, snapshots, wap
from .configs import PaimonConfig
from .connections import PaimonConnectionManager
from .credentials import PaimonCredentials
from .materializations import MATERIALIZATION, PaimonAdapterResponse
from .relation import PaimonRelation
from .session import spark_for
from .tables import Tables, table_stats

__all__ = ["PaimonAdapter", "PaimonConfig", "PaimonAdapterResponse"]


class PaimonAdapter(SparkAdapter):
    Relation = PaimonRelation  # type: ignore[assignment]
    ConnectionManager = PaimonConnectionManager  # type: ignore[assignment]
    AdapterSpecificConfigs = PaimonConfig  # type: ignore[assignment]

    # ---- plumbing ------------------------------------------------------------------------------
    @property
    def credentials(self) -> PaimonCredentials:
        return self.config.credentials  # type: ignore[return-value]

    def spark(self) -> SparkSession:
        spark = spark_for(self.credentials)
        set_session_branch(spark, self.build_branch)  # every query of the build reads its branch (wap.py)
        return spark

    @property
    def build_branch(self) -> Optional[str]:
        """The branch this build writes on: `--vars '{paimon_branch: NAME}'` (wap.py)."""
        return wap.build_branch(getattr(self.config, "cli_vars", None))

    @property
    def tables(self) -> Tables:
        """The warehouse's tables, for the modules that do the work (tables.py)."""
        return Tables(self.credentials.warehouse, self.credentials.schema, self.spark, self.Relation,
                      self.cache_added, self.cache_dropped, self.build_branch)

    def execute(self, *args: Any, **kwargs: Any):  # type: ignore[override]
        # dbt's SQL (tests, run_query) reads the build's branch too; the connection is opened first,
        # so that a Spark that cannot start is reported as the connection reports it
        self.connections.get_thread_connection().handle  # noqa: B018 - opens a lazily opened connection
        self.spark()
        return super().execute(*args, **kwargs)

    def cleanup_connections(self) -> None:
        """At the end of a dbt invocation: the session reads main again (a later invocation in this
        process, without paimon_branch, must not read the branch)."""
        current = getattr(SparkSession, "_instantiatedSession", None)
        if current is not None and current._sc._jsc is not None:
            set_session_branch(current, None)
        super().cleanup_connections()

    def list_relations_without_caching(self, schema_relation: BaseRelation):  # type: ignore[override]
        # dbt lists every schema of the project before a run: a schema name that leads out of the
        # warehouse is refused here in words, not by Spark's SQL parser
        self.paimon_check_relation(schema_relation)
        return super().list_relations_without_caching(schema_relation)

    def _build_spark_relation_list(self, row_list, relation_info_func):  # type: ignore[override]
        relations = super()._build_spark_relation_list(row_list, relation_info_func)
        # Spark lists the session's temporary views with every schema; they belong to none
        return [r.incorporate(is_paimon=f"Provider: {catalog.PROVIDER_PREFIX}" in (r.information or ""))
                for r in relations if r.schema]

    def _get_columns_for_catalog(self, relation: BaseRelation):  # type: ignore[override]
        """Catalog rows of a Paimon table from its Paimon schema: Spark SQL types as `describe`
        shows them, and the table's and columns' comments (dbt-spark's parsing has neither)."""
        path = self.paimon_table_path(relation) if getattr(relation, "is_paimon", False) else None
        if not path or not FileStoreTable.exists(path):
            yield from super()._get_columns_for_catalog(relation)
            return
        io = FileIO.get(path)
        schema = SchemaManager(io, path).latest()
        owner = re.search(r"^Owner: (.*)$", getattr(relation, "information", None) or "", re.MULTILINE)
        types = spark_schema(schema)
        stats = table_stats(path, schema, io)
        for index, (field, spark_field) in enumerate(zip(schema.fields, types.fields)):
            yield {
                **stats,
                "table_database": None,
                "table_schema": relation.schema,
                "table_name": relation.identifier,
                "table_type": relation.type,
                "table_owner": owner.group(1).strip() if owner else None,
                "table_comment": schema.comment,
                "column_name": field.name,
                "column_index": index,
                "column_type": spark_field.dataType.simpleString(),
                "column_comment": field.description,
            }

    # ---- Python models (python_models.py): run in this process's SparkSession ----------------------
    @property
    def default_python_submission_method(self) -> str:
        return python_models.SUBMISSION_METHOD

    @property
    def python_submission_helpers(self) -> Dict[str, Any]:
        return {python_models.SUBMISSION_METHOD: python_models.SessionPythonJobHelper}

    def generate_python_submission_response(self, submission_result: Any) -> AdapterResponse:
        return AdapterResponse(_message="OK")

    @available
    def paimon_run_python_model(self, model: Dict[str, Any], compiled_code: str) -> AdapterResponse:
        """A Paimon materialization's Python model step (dbt lets `statement(language='python')`
        run only directly inside a materialization; ours runs inside its shared macro)."""
        return self.submit_python_job(model, compiled_code)

    def valid_incremental_strategies(self) -> List[str]:
        return ["append", "merge", "insert_overwrite", "microbatch", MATERIALIZATION]

    @classmethod
    def _get_adapter_specific_run_info(cls, config: Any) -> Dict[str, Any]:
        return {"adapter_type": "paimon", "table_format": "paimon"}

    # ---- relations and paths (tables.py) ---------------------------------------------------------
    @available
    def paimon_table_path(self, relation: BaseRelation) -> str:
        """Where the Paimon table of a relation lives (every path of a relation is built there)."""
        return self.tables.path(relation)

    @available
    def paimon_check_relation(self, relation: BaseRelation) -> str:
        """Refuse a relation whose schema or name could reach files outside the warehouse; called
        first by every relation macro (drop, create schema, rename), also before dbt-spark's SQL."""
        self.tables.check(relation)
        return ""

    @available
    def paimon_table_exists(self, relation: BaseRelation) -> bool:
        return self.tables.exists(relation)

    @available
    def paimon_drop_table(self, relation: BaseRelation) -> None:
        self.tables.drop_table(relation)

    @available
    def paimon_drop_schema(self, relation: BaseRelation) -> None:
        self.tables.drop_schema(relation)

    @available
    def paimon_create_schema(self, relation: BaseRelation) -> None:
        self.tables.create_schema(relation)

    # ---- materializations (materializations.py) ----------------------------------------------------
    @available
    def paimon_table_format(self, materialization: str, file_format: Optional[str] = None,
                            strategy: Optional[str] = None) -> str:
        """'paimon' when the model is kept in a Paimon table, else 'spark' (incremental.py)."""
        return incremental.table_format(materialization, file_format, strategy)

    @available
    def paimon_warn_unsupported(self, config: Mapping[str, Any], materialization: str = MATERIALIZATION) -> List[str]:
        return materializations.warn_unsupported(config, materialization)

    @available
    def paimon_warn_grants(self, relation: BaseRelation, grant_config: Optional[Mapping[str, Any]]) -> bool:
        return materializations.warn_grants(relation, grant_config)

    @available
    def paimon_upsert(self, relation: BaseRelation, source: BaseRelation, config: Mapping[str, Any],
                      on_schema_change: Optional[str] = "ignore", full_refresh: bool = False,
                      contract: Optional[Mapping[str, Any]] = None, sql: Optional[str] = None) -> PaimonAdapterResponse:
        if sql is not None:  # run by spark.sql, not the cursor: the locks the cursor would take
            self.connections.hold_reads(sql)
        return materializations.upsert_model(self.tables, relation, source, config, on_schema_change,
                                             full_refresh, contract, sql)

    @available
    def paimon_seed(self, relation: BaseRelation, agate_table, column_types: List[str],
                    config: Mapping[str, Any]) -> PaimonAdapterResponse:
        return seeds.seed(self.tables, relation, agate_table, column_types, config)

    @available
    def paimon_clone(self, relation: BaseRelation, source: BaseRelation, replace: bool = False) -> AdapterResponse:
        return materializations.clone(self.tables, relation, source, replace)

    @available
    def paimon_persist_docs(self, relation: BaseRelation, model: Mapping[str, Any], for_relation: bool,
                            for_columns: bool) -> bool:
        return materializations.persist_docs(self.tables, relation, model, for_relation, for_columns)

    # ---- snapshots (macros/materializations/snapshot.sql; the work is in snapshots.py) ---------
    @available
    def paimon_snapshot_check(self, relation: BaseRelation, config: Mapping[str, Any], columns: Mapping[str, str],
                              sql: Optional[str] = None) -> str:
        if sql is not None:
            self.connections.hold_reads(sql)
        # dbt's own reading of hard_deletes (it also refuses invalidate_hard_deletes with hard_deletes)
        snapshots.check(self.tables, relation, config, columns, self.get_hard_deletes_behavior, sql)
        return ""

    @available
    def paimon_snapshot_stored(self, relation: BaseRelation) -> BaseRelation:
        return snapshots.stored_view(self.tables, relation)

    @available
    def paimon_snapshot(self, relation: BaseRelation, source: BaseRelation, columns: Mapping[str, str],
                        created: bool = False, stored: Optional[BaseRelation] = None, partition_by: Any = None,
                        options: Optional[Mapping[str, Any]] = None, execution: Optional[str] = None,
                        valid_to_current: Optional[str] = None) -> AdapterResponse:
        return snapshots.apply(self.tables, relation, source, columns, created=created, stored=stored,
                               partition_by=partition_by, options=options, execution=execution,
                               valid_to_current=valid_to_current)

    # ---- maintenance (macros/maintenance.sql; the work is in maintenance.py) -------------------
    @available
    def paimon_delete(self, relation: Any, where: Any = None) -> Dict[str, Any]:
        return maintenance.delete_rows(self.tables, relation, where)

    @available
    def paimon_compact(self, relation: Any) -> Dict[str, Any]:
        return maintenance.compact_table(self.tables, relation)

    @available
    def paimon_expire(self, relation: Any, retain_max: Any = None, retain_min: Any = None, older_than: Any = None,
                      max_deletes: Any = None) -> Dict[str, Any]:
        return maintenance.expire(self.tables, relation, retain_max, retain_min, older_than, max_deletes)

    @available
    def paimon_create_tag(self, relation: Any, tag: Any = None, snapshot_id: Any = None, time_retained: Any = None,
                          ignore_if_exists: bool = False) -> Dict[str, Any]:
        return maintenance.create_tag(self.tables, relation, tag, snapshot_id, time_retained, ignore_if_exists)

    @available
    def paimon_delete_tag(self, relation: Any, tag: Any = None) -> Dict[str, Any]:
        return maintenance.delete_tag(self.tables, relation, tag)

    @available
    def paimon_rollback(self, relation: Any, snapshot_id: Any = None, tag: Any = None) -> Dict[str, Any]:
        return maintenance.rollback(self.tables, relation, snapshot_id, tag)

    @available
    def paimon_remove_orphan_files(self, relation: Any, older_than: Any = "1 d",
                                   dry_run: Any = False) -> Dict[str, Any]:
        return maintenance.remove_orphan_files(self.tables, relation, older_than, dry_run)

    @available
    def paimon_create_branch(self, relation: Any, branch: Any = None, tag: Any = None,
                             snapshot_id: Any = None) -> Dict[str, Any]:
        return wap.create_branch(self.tables, relation, branch, tag, snapshot_id)

    @available
    def paimon_fast_forward(self, relation: Any, branch: Any = None) -> Dict[str, Any]:
        return wap.fast_forward(self.tables, relation, branch)

    @available
    def paimon_delete_branch(self, relation: Any, branch: Any = None) -> Dict[str, Any]:
        return wap.delete_branch(self.tables, relation, branch)

    @available
    def paimon_publish(self, branch: Any = None, written: Optional[List[str]] = None,
                       failed: Optional[List[str]] = None) -> Dict[str, Any]:
        self.spark()  # the session is up (a run-operation may publish before any query)
        return wap.publish(self.tables, branch or self.build_branch, written, failed or [])

    @available
    def paimon_as_of(self, relation: Any, snapshot_id: Any = None, tag: Any = None) -> BaseRelation:
        return maintenance.as_of(self.tables, relation, snapshot_id, tag)

    @available
    def paimon_system_table(self, relation: Any, name: Any) -> BaseRelation:
        return maintenance.system_table(self.tables, relation, name)

    # ---- changes as input (changes.py) -----------------------------------------------------------
    @available
    def paimon_changes(self, upstream: Any, model: BaseRelation, config: Mapping[str, Any],
                       consumer_id: Optional[str] = None, full_refresh: bool = False) -> BaseRelation:
        materialized = str(config.get("materialized") or "")
        table_format = incremental.table_format(materialized, config.get("file_format"),
                                                config.get("incremental_strategy"))
        return changes.changes_view(self.tables, upstream, model, materialized, table_format, consumer_id,
                                    full_refresh)

    @available
    def paimon_consume_changes(self, model: BaseRelation) -> str:
        changes.consume(self.tables, model)
        return ""
