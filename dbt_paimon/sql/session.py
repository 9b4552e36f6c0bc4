"""Spark SQL on Paimon tables in a SparkSession: the statements that write one run on the table.

`install(spark)` puts a `sql` of its own on the session object: a statement that writes a Paimon
table of Spark's catalog (statement.py reads it with Spark's parser, target.py finds the table) is
carried out on the table (ddl.py: ALTER TABLE; dml.py: INSERT, DELETE, UPDATE, TRUNCATE; merge.py:
MERGE INTO) and answered as Spark and Delta answer such statements: DELETE, UPDATE and MERGE with
one row of the rows they changed (`num_affected_rows`; MERGE by kind too), the rest with none; a query on
Paimon tables reads them through Spark's own Parquet reader where no merge is needed (read/query.py);
anything else goes to Spark unchanged. dbt's statements reach Spark through
this same `spark.sql` (dbt-spark's session cursor), so dbt, hooks, `run_query` and a notebook on
the session all get the same behaviour.

Statements Spark receives another way (the DataFrame writer API, a JDBC/Thrift server on the same
JVM) do not pass here: Spark's own refusal answers them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import re
from typing import Callable, Optional

from pyspark.sql import DataFrame, SparkSession

from . import query
from .branch import read_branch
from ..engine.jvm import DATASET, jvm_class
from ..engine.read.source import register as register_source
from ..engine.settings import RunSettings
from ..store.common.errors import PaimonError
from . import catalog, ddl, dml
from .merge import merge
from .statement import Statement, read
from .target import resolve

log = logging.getLogger(__name__)

# a statement that may write a table starts with one of these words (after comments): only those
# are given to the parser, so a query costs nothing more (WITH: `WITH x AS (...) INSERT ...`; a
# query starting with WITH is parsed once more, ~1 ms)
_WRITE_WORD = re.compile(r"(?:insert|delete|update|merge|truncate|alter|with)\b", re.IGNORECASE)
_SPACE = re.compile(r"\s+")
_INSTALLED = "dbt_paimon_sql"  # the attribute marking a session that has it


def _first_word(text: str) -> int:
    """Where the statement's first word starts, past whitespace and comments: a scan in one pass
    (a pattern of repeated optional parts can take exponential time on a long statement)."""
    i, n = 0, len(text)
    while i < n:
        space = _SPACE.match(text, i)
        if space:
            i = space.end()
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end + 1
        else:
            break
    return i


def run(spark: SparkSession, text: str, spark_sql: Optional[Callable[[str], DataFrame]] = None) -> Optional[DataFrame]:
    """Carry out `text` if it writes a Paimon table (its answer: a DataFrame), else None.
    `spark_sql`: Spark's own `sql`, for the views a statement's query may read."""
    if not _WRITE_WORD.match(text, _first_word(text)):
        return None
    statement = read(spark, text)
    if statement is None:
        return None
    target = resolve(spark, statement.target)
    if target is None:
        return None
    if target.branch is None and statement.kind != "rename table":  # a rename moves every branch
        # a dbt build writing on a branch (write-audit-publish): a statement writes where the
        # session's queries read the table (branch.py), its hooks and run_query included; main is
        # not written under a table that has the branch
        target = dataclasses.replace(target, branch=read_branch(spark, target.path))
    log.info("%s %s: carried out on the Paimon table at %s", statement.kind, statement.written_name, target.path)
    counts = None
    read_part = _read_part(statement)
    try:
        with (query.native_reads(spark, text, read_part, spark_sql or spark.sql) if read_part is not None
              else contextlib.nullcontext()) as rewritten:
            statement = _read_natively(spark, statement, rewritten)
            if statement.kind in ddl.KINDS:
                ddl.alter(spark, statement, target)
            elif statement.kind == "merge":
                counts = merge(spark, statement, target)
            else:
                counts = dml.run(spark, statement, target)
    except PaimonError as e:  # the engine's words name the table's path: say which statement on which name
        if e.args and isinstance(e.args[0], str) and statement.written_name not in e.args[0]:
            e.args = (f"{_verb(spark, statement)} {statement.written_name}: {e.args[0]}",) + e.args[1:]
        raise
    if counts:  # DELETE, UPDATE, MERGE: one row of the rows changed, as Delta's commands answer
        return spark.createDataFrame([tuple(counts.values())], ", ".join(f"{k} bigint" for k in counts))
    return DataFrame(spark._jsparkSession.emptyDataFrame(), spark)


def _read_part(statement: Statement):
    """The part of a statement whose Paimon tables are read as a query reads them (query.py:
    natively, from the session's branch where the table has it): INSERT's rows, MERGE's source
    when aliased (`USING t s`, `USING (...) s`: the statement names it by the alias alone). None:
    the statement reads through the catalog (its own target by the engine)."""
    if statement.kind == "insert":
        return statement.with_ctes(statement.plan.query())
    if statement.kind == "merge" and str(statement.plan.sourceTable().getClass().getSimpleName()) == "SubqueryAlias":
        return statement.with_ctes(statement.plan.sourceTable())
    return None


def _read_natively(spark: SparkSession, statement: Statement, rewritten: Optional[str]) -> Statement:
    """The statement read again from its text with its query's Paimon tables under their native
    reads' views, when that text's query analyses (a name qualifying a column by the table's full
    name, `db.t.c`, does not resolve under the view): else the statement as written."""
    again = read(spark, rewritten) if rewritten is not None else None
    if again is None or again.kind != statement.kind:
        return statement
    part = _read_part(again)
    try:
        jvm_class(spark, DATASET).ofRows(spark._jsparkSession, part)
    except Exception as e:  # noqa: BLE001 - the statement as written then reads through the catalog
        log.debug("%s: its query read through the catalog (%s)", statement.written_name, e)
        return statement
    return again


def _verb(spark: SparkSession, statement: Statement) -> str:
    if statement.kind == "insert":
        return dml.verb(spark, statement)
    return {"delete": "DELETE FROM", "update": "UPDATE", "merge": "MERGE INTO", "truncate": "TRUNCATE TABLE",
            "truncate partition": "TRUNCATE TABLE"}.get(statement.kind, "ALTER TABLE")


def install(spark: SparkSession) -> None:
    """Give the session the `sql` that carries out statements writing Paimon tables (idempotent)."""
    if getattr(spark, _INSTALLED, False):
        return
    spark_sql = spark.sql

    def sql(sqlQuery: str, args=None, **kwargs) -> DataFrame:  # noqa: N803 - SparkSession.sql's own names
        if args is None and not kwargs and isinstance(sqlQuery, str):
            done = run(spark, sqlQuery, spark_sql)
            if done is None:
                done = query.run(spark, sqlQuery, spark_sql, _first_word(sqlQuery))
            if done is not None:
                return done
        return spark_sql(sqlQuery, args, **kwargs)

    sql.__doc__ = spark_sql.__doc__
    spark.sql = sql
    setattr(spark, _INSTALLED, True)


def register(spark: SparkSession, settings: RunSettings | None = None, warehouse: Optional[str] = None) -> None:
    """Make Paimon available in this SparkSession: `spark.read.format("paimon")`, Spark SQL that
    writes a Paimon table of Spark's catalog carried out on the table, and, with `warehouse`, every
    Paimon table of that warehouse in Spark's catalog as `schema.table`. `settings`: its
    storage_options are the object store's settings the `paimon` source reads with (else those
    fileio.configure() set)."""
    register_source(spark, settings.storage_options if settings is not None else None)
    install(spark)
    if warehouse is not None:
        catalog.sync(spark, warehouse)
