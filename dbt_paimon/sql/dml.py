"""INSERT, DELETE and TRUNCATE on a Paimon table, with Paimon's semantics, each one snapshot commit.

    INSERT INTO t ...                 a primary-key table: an upsert (engine/writes/upsert.py; a key that
                                      moves partition on a cross-partition table moves once); an
                                      append table: rows appended (engine/writes/append.py)
    INSERT OVERWRITE t ...            as Spark's spark.sql.sources.partitionOverwriteMode says: STATIC
                                      (its default) the whole table, or with PARTITION (p = v, ...)
                                      the partitions it names, rows or not; DYNAMIC the partitions
                                      the rows fall in (a PARTITION clause naming every partition
                                      column: that one, rows or not)
    INSERT INTO t REPLACE WHERE c ... the rows c holds for replaced by the query's (a key table: their
                                      keys the rows lack deleted, the rows upserted); REPLACE USING
                                      the partition columns: the partitions the rows fall in
    DELETE FROM t [WHERE c]           -D records of the matching rows (a key table), the files
                                      holding them written again without them (an append table)
    UPDATE t SET c = e [WHERE ...]    a deduplicate key table: the matching rows, updated, upserted
                                      (not the key's columns; a cross-partition table's partition
                                      column moves the row); an append table: the files holding
                                      matching rows written again with them updated
    TRUNCATE TABLE t [PARTITION (..)] an OVERWRITE commit without files, as Paimon's TRUNCATE

The rows an INSERT writes are the statement's own query, planned by Spark from the parsed plan
(not its text), and handed to the engine as a DataFrame: on a cluster the engine's Spark jobs write
them. The statement's columns map to the table's as Spark maps them: by position after the static
partition columns, by the column list given, or BY NAME.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from py4j.protocol import Py4JError
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..engine.writes import commit_loop, store_assignment
from ..engine.writes.append import APPEND_MODE, OVERWRITE_PARTITIONS, OVERWRITE_TABLE, REPLACE_WHERE
from ..engine.writes.append import write as append_write
from ..engine.writes.delete import delete, update_append
from ..engine.writes.replace import Replace
from ..engine.writes.rewrite import matched, resolved
from ..engine.spark_types import check_nested_values, to_spark
from ..engine.writes.upsert import upsert
from ..store.common.errors import SchemaError
from ..store.common.fileio import FileIO
from ..store.common.options import MergeEngine
from ..store.common.paths import partition_value_string
from ..store.schema.schema import SchemaManager, TableSchema, resolve_columns
from ..store.table import FileStoreTable
from .catalog import quote, sql_string
from ..engine.jvm import DATASET, jvm_class, scala_list, scala_map
from ..engine.qualified import named
from .statement import Statement, option, values_defaults
from .target import Target, names

KINDS = ("insert", "delete", "update", "truncate", "truncate partition")


def run(spark: SparkSession, statement: Statement, target: Target) -> Optional[dict[str, int]]:
    """Carry out a statement (kind in KINDS) on the Paimon table `target`; DELETE and UPDATE answer
    the rows they changed, as Delta's commands do ({"num_affected_rows": n})."""
    if statement.ctes is not None and statement.kind != "insert":
        # a WITH clause's queries are in scope of INSERT's rows (and MERGE's source); a condition
        # here is evaluated over the table's rows alone
        raise SchemaError(f"a WITH clause before {statement.kind.upper()} is not supported on a Paimon table; write "
                          f"its query into the statement's condition")
    if statement.kind == "insert":
        insert(spark, statement, target)
    elif statement.kind == "delete":
        condition = statement.source_text(statement.plan.condition()) if statement.plan.condition() else None
        done = delete(spark, target.path, condition or "true", settings=target.settings,
                      alias=names(statement, target))
        return {"num_affected_rows": done.deleted}
    elif statement.kind == "update":
        return {"num_affected_rows": update(spark, statement, target)}
    else:
        truncate(spark, statement, target)
    return None


_QUERY_COLUMN = "__dbt_paimon_q"


@dataclass(frozen=True)
class _Insert:
    """An INSERT's parts, whichever plan Spark's parser gave it: InsertIntoStatement, or (INSERT INTO
    t REPLACE WHERE before Spark 4.3) OverwriteByExpression."""
    query: Any  # the rows' plan
    columns: list[str]  # the column list given, if any
    by_name: bool
    overwrite: bool  # OVERWRITE, or REPLACE
    spec: dict  # PARTITION (k = v, k): the values (None: a dynamic one)
    replace_where: Any = None  # REPLACE WHERE's condition (a parsed expression)
    replace_using: Optional[list[str]] = None  # REPLACE USING's columns (Spark 4.3)
    replace_on: bool = False  # REPLACE ON (Spark 4.3)


def _insert_parts(spark: SparkSession, statement: Statement) -> _Insert:
    plan = statement.plan
    if str(plan.getClass().getSimpleName()) == "OverwriteByExpression":
        return _Insert(plan.query(), [], bool(plan.isByName()), True, {}, replace_where=plan.deleteExpr())
    if plan.ifPartitionNotExists():
        raise SchemaError(f"INSERT OVERWRITE {statement.written_name} ... IF NOT EXISTS is not supported")
    spec = {str(k): option(v) for k, v in scala_map(spark, plan.partitionSpec()).items()}
    parts = _Insert(plan.query(), [str(c) for c in scala_list(plan.userSpecifiedCols())], bool(plan.byName()),
                    bool(plan.overwrite()), spec)
    try:
        criteria = option(plan.replaceCriteriaOpt())  # REPLACE WHERE / USING / ON, from Spark 4.3
        evolve = bool(plan.withSchemaEvolution())  # INSERT WITH SCHEMA EVOLUTION, from Spark 4.3
    except Py4JError:  # Spark 4.0-4.2: no such fields (REPLACE WHERE is OverwriteByExpression there)
        criteria, evolve = None, False
    if evolve:
        raise SchemaError(f"INSERT WITH SCHEMA EVOLUTION INTO {statement.written_name} is not supported (ALTER TABLE "
                          f"ADD COLUMNS first)")
    if criteria is None:
        return parts
    kind = str(criteria.getClass().getSimpleName())
    if kind == "InsertReplaceWhere":
        return dataclasses.replace(parts, replace_where=criteria.cond())
    if kind == "InsertReplaceUsing":
        return dataclasses.replace(parts, replace_using=[str(c) for c in scala_list(criteria.cols())])
    return dataclasses.replace(parts, replace_on=True)


def _rows(spark: SparkSession, statement: Statement, parts: _Insert, schema: TableSchema,
          static: dict) -> DataFrame:
    """The statement's query as a DataFrame of the table's columns (static partition values added)."""
    jdf = jvm_class(spark, DATASET).ofRows(spark._jsparkSession,
                                           statement.with_ctes(values_defaults(spark, statement, parts.query)))
    query = DataFrame(jdf, spark)
    names = statement.written_name
    given = parts.columns
    repeated = sorted({c for c in given if [g.lower() for g in given].count(c.lower()) > 1})
    if repeated:  # Spark's own INSERT refuses it (COLUMN_ALREADY_EXISTS)
        raise SchemaError(f"INSERT into {names}: the column list names {repeated} more than once")
    if parts.by_name:
        given = resolve_columns("column", query.columns, schema.field_names)
    elif given:
        given = resolve_columns("column", given, schema.field_names)
    else:
        given = [f for f in schema.field_names if f not in static]
    if len(given) != len(query.columns):
        raise SchemaError(f"INSERT into {names}: the query gives {len(query.columns)} column(s) for "
                          f"{len(given)} ({given})")
    rule = store_assignment.policy(spark)
    for name, c in zip(given, query.schema.fields):
        store_assignment.check(spark, f"INSERT into {names}", name, c.dataType, to_spark(schema.field(name).type), rule)
    # by position from here, as Spark maps them: a query may give two columns one name (SELECT 1, 1)
    query = query.toDF(*[f"{_QUERY_COLUMN}{i}" for i in range(len(given))])
    columns = {name: F.col(f"{_QUERY_COLUMN}{i}") for i, name in enumerate(given)}
    for name, value in static.items():
        columns[name] = F.lit(value)
    missing = [f for f in schema.fields if f.name not in columns]
    for f in missing:
        if not f.type.nullable:
            raise SchemaError(f"INSERT into {names}: column {f.name!r} is NOT NULL and the statement gives no value")
    # the query is a DataFrame already: its expressions keep the session's mode, the casts are the
    # store assignment's
    with store_assignment.casting(spark, rule):
        return query.select(*[(columns[f.name] if f.name in columns else F.lit(None)).cast(to_spark(f.type))
                              .alias(f.name) for f in schema.fields])


def verb(spark: SparkSession, statement: Statement) -> str:
    """The INSERT's own words, for messages."""
    try:
        parts = _insert_parts(spark, statement)
    except SchemaError:  # IF NOT EXISTS, refused
        return "INSERT OVERWRITE"
    replaces = parts.replace_where is not None or parts.replace_using is not None or parts.replace_on
    return "INSERT OVERWRITE" if parts.overwrite and not replaces else "INSERT INTO"


def insert(spark: SparkSession, statement: Statement, target: Target) -> None:
    parts = _insert_parts(spark, statement)
    schema = SchemaManager(FileIO.get(target.path), target.path, target.branch).latest()
    spec = parts.spec
    names = resolve_columns("partition column", list(spec), schema.field_names) if spec else []
    bad = [n for n in names if n not in schema.partition_keys]
    if bad:
        raise SchemaError(f"INSERT into {statement.written_name}: {bad} are not partition columns "
                          f"({list(schema.partition_keys)})")
    spec = dict(zip(names, spec.values()))
    static = {k: v for k, v in spec.items() if v is not None}
    using = _replace_using(statement, parts, schema)
    rows = _rows(spark, statement, parts, schema, static)
    overwrite = parts.overwrite
    # what an OVERWRITE replaces, by Spark's rule (spark.sql.sources.partitionOverwriteMode, STATIC
    # by default, as Paimon's Spark connector reads it): in dynamic mode with a partition column the
    # PARTITION clause leaves open, the partitions the rows fall in; else the partitions the clause
    # names, rows or not (no clause: the whole table). REPLACE WHERE: the rows its condition holds
    # for; REPLACE USING the partition columns: the partitions the rows fall in.
    mode_conf = str(spark.conf.get(_OVERWRITE_MODE, "STATIC")).upper()
    dynamic = overwrite and (using or mode_conf == "DYNAMIC" and any(k not in static for k in schema.partition_keys))
    where = None
    if parts.replace_where is not None:
        where = statement.source_text(parts.replace_where)
    elif overwrite and not dynamic:
        where = " AND ".join(f"{quote(k)} = CAST({sql_string(v)} AS {to_spark(schema.field(k).type).simpleString()})"
                             for k, v in static.items()) or "true"
    keys = dict(partition_keys=list(schema.partition_keys))
    if schema.is_append:
        if not overwrite:
            mode = APPEND_MODE
        elif dynamic:
            mode = OVERWRITE_PARTITIONS
        else:
            mode = OVERWRITE_TABLE if where == "true" else REPLACE_WHERE
        append_write(rows, target.path, mode=mode, where=None if where == "true" else where, settings=target.settings,
                     **keys)
        return
    replace = None
    if overwrite:
        if dynamic:
            replace = Replace(batch_partitions=True)
        elif where == "true":
            replace = Replace(where="true")
        elif parts.replace_where is not None:
            replace = Replace(where=where, what="REPLACE WHERE")
        elif schema.core.merge_engine != MergeEngine.DEDUPLICATE:
            # a table that merges rows is overwritten by the partitions its rows fall in (replace.py):
            # all in the named one(s) here, which a statement without rows leaves as they are
            replace = Replace(batch_partitions=True)
        else:
            replace = Replace(where=where, what=f"PARTITION ({', '.join(f'{k}={v}' for k, v in static.items())})")
    upsert(rows, target.path, primary_keys=list(schema.primary_keys), replace=replace, settings=target.settings,
           **keys)


_OVERWRITE_MODE = "spark.sql.sources.partitionOverwriteMode"


def _replace_using(statement: Statement, parts: _Insert, schema: TableSchema) -> bool:
    """Whether the INSERT replaces the partitions its rows fall in by REPLACE USING (the table's
    partition columns: Spark's dynamic partition overwrite). REPLACE ON, and REPLACE USING other
    columns, are refused: nothing here replaces rows by a join yet."""
    words = f"INSERT INTO {statement.written_name} REPLACE"
    if parts.replace_on:
        raise SchemaError(f"{words} ON is not supported on a Paimon table; use REPLACE WHERE, or MERGE INTO")
    if parts.replace_using is None:
        return False
    using = resolve_columns("column", parts.replace_using, schema.field_names)
    if not schema.partition_keys or sorted(using) != sorted(schema.partition_keys):
        raise SchemaError(f"{words} USING ({', '.join(parts.replace_using)}): only the table's partition columns "
                          f"({list(schema.partition_keys)}) are supported; use REPLACE WHERE, or MERGE INTO")
    return True


def update(spark: SparkSession, statement: Statement, target: Target) -> int:
    """The rows the statement set (an append table's files holding them written again; a key
    table's rows upserted)."""
    schema = SchemaManager(FileIO.get(target.path), target.path, target.branch).latest()
    plan = statement.plan
    words = f"UPDATE {statement.written_name}"
    assigned = {}
    for assignment in scala_list(plan.assignments()):
        parts = [str(p) for p in scala_list(assignment.key().nameParts())]
        name = resolve_columns("column", [parts[-1]], schema.field_names)[0]
        if name in assigned:  # Spark's own UPDATE refuses it too
            raise SchemaError(f"{words}: SET gives column {name!r} two values")
        assigned[name] = statement.value_text(assignment.value(), schema.field_names)
    condition = statement.source_text(option(plan.condition())) if option(plan.condition()) is not None else None
    name = names(statement, target)
    rows = named(spark.read.format("paimon").options(**_branch_option(target)).load(target.path), name)
    values = {n: resolved(rows, e, f"{words}: SET {n} =") for n, e in assigned.items()}
    given = {f.name: f.dataType for f in rows.select(*[v.alias(n) for n, v in values.items()]).schema.fields}
    check_nested_values(given, schema, words)
    rule = store_assignment.policy(spark)
    for n, kind in given.items():
        store_assignment.check(spark, words, n, kind, to_spark(schema.field(n).type), rule)
    if schema.is_append:
        return update_append(spark, target.path, condition or "true", assigned, name, target.settings).updated
    if schema.core.merge_engine != MergeEngine.DEDUPLICATE:
        raise SchemaError(f"{words}: the table merges rows ({schema.core.merge_engine}), so an updated row would "
                          f"merge with the stored one; write the rows with INSERT INTO instead")
    keys = [k for k in assigned if k in schema.primary_keys]
    if keys:
        raise SchemaError(f"{words}: {keys} belong to the primary key, which UPDATE cannot change (DELETE the "
                          f"rows and INSERT them under the new key)")
    if condition is not None:
        rows = rows.filter(matched(rows, condition, f"{words}: WHERE"))
    # the statement's values first (in the session's mode), then their casts (store_assignment.py)
    values = rows.select(*[(values[f.name] if f.name in values else F.col(quote(f.name))).alias(f.name)
                           for f in schema.fields])
    with store_assignment.casting(spark, rule):
        changed = values.select(*[(F.col(quote(f.name)).cast(to_spark(f.type)) if f.name in assigned
                                   else F.col(quote(f.name))).alias(f.name) for f in schema.fields])
    done = upsert(changed, target.path, primary_keys=list(schema.primary_keys),
                  partition_keys=list(schema.partition_keys), settings=target.settings)
    return done.inserted + done.updated + done.moved


def truncate(spark: SparkSession, statement: Statement, target: Target) -> None:
    """Paimon's TRUNCATE: an OVERWRITE commit of the table (or the named partitions) without files."""
    table = FileStoreTable.open(target.path, branch=target.branch)
    schema = table.schema
    partitions = None
    if statement.kind == "truncate partition":
        spec = {str(k): str(v) for k, v in scala_map(spark, statement.plan.partitionSpec().spec()).items()}
        names = resolve_columns("partition column", list(spec), schema.field_names)
        if not set(names) <= set(schema.partition_keys):
            raise SchemaError(f"TRUNCATE TABLE {statement.written_name} PARTITION: {names} are not all partition "
                              f"columns ({list(schema.partition_keys)})")
        wanted = dict(zip(names, spec.values()))
        index = {k: i for i, k in enumerate(schema.partition_keys)}
        types = schema.partition_types
        partitions = {s.partition for s in table.plan().splits
                      if all(partition_value_string(s.partition_values[index[k]], types[index[k]]) == v
                             for k, v in wanted.items())}
        if not partitions:
            return
    commit_loop.run(table.path, table.io, f"TRUNCATE TABLE {statement.written_name}",
                    lambda at: at.overwrite([], partitions), branch=target.branch)


def _branch_option(target: Target) -> dict[str, str]:
    return {"branch": target.branch} if target.branch else {}
