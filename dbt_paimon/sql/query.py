"""Spark SQL queries on Paimon tables of Spark's catalog, read through native.py's plan.

Spark resolves a catalog table to its provider, the `paimon` Python source (sql/catalog.py), where
every row of every column crosses from Python to the JVM. A query that `spark.sql` receives (dbt's
`ref()`s, tests, `dbt show`, a notebook's SQL) is read first with Spark's parser: each table it
names that is one of ours is planned at its latest snapshot (native.frame), put under a temporary
view of a name of its own, and the query runs with the view's name where the table's stood (the
table's own name kept as its alias, so `t.col` still resolves). Spark analyses a query when
`spark.sql` returns, so the views are dropped then; the DataFrame keeps their plans, and with them
the snapshot read: the same rows however often it is used. The query of a statement that writes
its rows into a table (CREATE or REPLACE TABLE ... AS SELECT, INSERT ... SELECT: dbt-spark's
`table` models over a Paimon table, dbt's stored test failures) is read the same way, its target
left as written; Spark runs such a statement when `spark.sql` is called, while the views exist.
A view is made from its text as written (Spark keeps the text, which may not name a temporary
view); a query naming a permanent view whose text reads our tables reads that text natively in
its place, under the view's column names and types (dbt's `view` models over Paimon tables).

A system table (`t$audit_log`), a table given options (`t WITH ('incremental-between' = '1,3')`)
and Paimon's `paimon_incremental_query('t', 1, 3)` are read through the `paimon` source with those
options, under a view likewise. A time travel clause (`t VERSION AS OF 2`, `t TIMESTAMP AS OF
'2026-01-01'`) reads the snapshot or tag it names, as Paimon's connector does (natively; Spark
refuses time travel on a table of its session catalog). A name shadowed by a CTE of the statement,
or anything the parser refuses, is left as written (the `paimon` source reads it); so is the whole
query when the rewritten text fails where the original would not. A session writing on a
branch (branch.py: a dbt build's write-audit-publish) reads each table that has the branch from it.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .branch import read_branch
from .catalog import quote
from ..engine.jvm import java_dict, jvm_class, scala_list
from .target import SESSION_CATALOG, resolve
from ..engine.read.native import frame
from ..engine.read.source import SOURCE_NAME
from ..store.common.errors import PaimonError
from ..store.common.fileio import FileIO
from ..store.read import travel
from ..store.table import FileStoreTable
from ..store.system_tables import split_name

log = logging.getLogger(__name__)

# a statement that may be a query, or write a query's rows, starts with one of these (after comments)
_QUERY_WORD = re.compile(r"(?:select|with|from|table|values|\(|create|replace|insert)", re.IGNORECASE)
# the statements whose query is read as a query is (their target left as written): dbt-spark's
# `table` and `incremental` models and dbt's stored test failures write with these. A view is not
# among them: its text is kept and read again later, and could not name the temporary views
_WRITES_A_QUERY = {"CreateTableAsSelect", "ReplaceTableAsSelect", "InsertIntoStatement"}
_VIEW_PREFIX = "__paimon_read_"
INCREMENTAL_QUERY = "paimon_incremental_query"
_WITH_OPTIONS = re.compile(r"\s*WITH\s*\(", re.IGNORECASE)
_VIEW_DEPTH = 8   # views over views read natively up to this depth; deeper ones as Spark reads them
_TIME_TRAVEL = "RelationTimeTravel"   # `t VERSION AS OF v`, `t TIMESTAMP AS OF e`
_AS_OF = re.compile(r"^.*?\bAS\s+OF\s+", re.IGNORECASE | re.DOTALL)
_counter = itertools.count()
_lock = threading.Lock()


def _next_view() -> str:
    with _lock:
        return f"{_VIEW_PREFIX}{next(_counter)}"


def _named(plan) -> tuple[list, set[str], list]:
    """What the plan names, subqueries and CTEs included, in one walk (each step is a call into the
    JVM): (relation, its parent's class name) of every table it reads by name, the names of the
    statement's CTEs, and every `paimon_incremental_query(...)` it calls as a table."""
    found, ctes, functions = [], set(), []

    def walk(node, parent: str) -> None:
        kind = str(node.nodeName())  # a logical plan's class name (the fewest calls: one)
        if kind in ("UnresolvedRelation", _TIME_TRAVEL):  # a time travel holds its relation, not as a child
            found.append((node, parent))
            return
        if kind == "UnresolvedTableValuedFunction":
            name = [str(p) for p in scala_list(node.name())]
            if name and name[-1].lower() == INCREMENTAL_QUERY:
                functions.append(node)
        if kind == "UnresolvedWith":
            for pair in scala_list(node.cteRelations()):
                ctes.add(str(pair._1()).lower())
                walk(pair._2(), kind)
        for child in scala_list(node.children()):
            walk(child, kind)
        for sub in scala_list(node.subqueries()):
            walk(sub, kind)

    walk(plan, "")
    return found, ctes, functions


def _incremental_query(spark: SparkSession, node) -> DataFrame:
    """paimon_incremental_query('t', start, end[, scan mode]) as Paimon's Spark connector takes it:
    the table's records between the two snapshots (or tags), as the `paimon` source reads them."""
    args = [a for a in scala_list(node.functionArgs())]
    values = []
    for a in args:
        if str(a.getClass().getSimpleName()) != "Literal":
            raise PaimonError(f"{INCREMENTAL_QUERY} takes literals ('table', start, end[, 'scan mode']), "
                              f"got {a.sql()}")
        values.append(str(a.value()))
    if len(values) not in (3, 4):
        raise PaimonError(f"{INCREMENTAL_QUERY} takes ('table', start, end[, 'scan mode']), got {len(values)} "
                          f"argument(s)")
    options = {"incremental-between": f"{values[1]},{values[2]}"}
    if len(values) == 4:
        options["incremental-between-scan-mode"] = values[3]
    rows = _source_read(spark, [p.strip("`") for p in values[0].split(".")], options)
    if rows is None:
        raise PaimonError(f"{INCREMENTAL_QUERY}: {values[0]!r} is not a Paimon table of this session")
    return rows


def _source_read(spark: SparkSession, parts: list[str], options: dict) -> Optional[DataFrame]:
    """A name with more than a table's: a branch of one of our tables (`t$branch_b`, read natively),
    a system table (`t$audit_log`, `db.t$branch_b$snapshots`), or a table given options (`t WITH
    ('incremental-between' = '1,3')`), these through the `paimon` source with those options."""
    base, sep, rest = parts[-1].partition("$")
    if not sep and not options:
        return None
    target = resolve(spark, parts[:-1] + [base])
    if target is None:
        return None
    if sep:
        _, branch, system = split_name(f"{target.path}${rest}")
        if system is None and not options:
            return frame(spark, target.path, branch=branch)
    return spark.read.format(SOURCE_NAME).options(**options).load(target.path + (f"${rest}" if sep else ""))


def _is_command(spark: SparkSession, plan) -> bool:
    command = jvm_class(spark, "java.lang.Class").forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    return bool(command.isInstance(plan)) or str(plan.getClass().getSimpleName()).endswith("Statement")


def run(spark: SparkSession, text: str, spark_sql: Callable[[str], DataFrame], first: int,
        depth: int = 0) -> Optional[DataFrame]:
    """The query's DataFrame with its Paimon tables read natively; None when it names none (or is
    no query), for Spark to run as it is. `first`: where the statement's first word starts;
    `depth`: how many views deep this text is (a view's text is read by this function too)."""
    if not _QUERY_WORD.match(text, first):
        return None
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Exception:  # noqa: BLE001 - Spark reports its own parse errors when it runs the text
        return None
    if str(plan.getClass().getSimpleName()) in _WRITES_A_QUERY:
        plan = plan.query()  # Spark runs the statement when spark.sql is called: the views are there
    elif _is_command(spark, plan):
        return None
    with native_reads(spark, text, plan, spark_sql, depth) as rewritten:
        if rewritten is None:
            return None
        try:
            return spark_sql(rewritten)
        except Exception as e:  # noqa: BLE001 - the query as written then decides (and words any error)
            log.debug("the query on Paimon tables could not be read natively (%s); read as written", e)
            return None


@contextmanager
def native_reads(spark: SparkSession, text: str, plan, spark_sql: Callable[[str], DataFrame],
                 depth: int = 0) -> Iterator[Optional[str]]:
    """`text` with each Paimon table that `plan` (a parsed part of it: a query, a statement's
    source) reads put under a temporary view of its native read, the views there while the
    context lasts; None when the part reads none of ours. A statement writing a Paimon table reads
    its query this way too (session.py): the rows as a query of the session reads them."""
    relations, ctes, functions = _named(plan)
    edits = []  # (start, stop, replacement, view, path or DataFrame)
    for node, parent in relations:
        clause = None
        if str(node.nodeName()) == _TIME_TRAVEL:
            clause, node = node, node.relation()
            if str(node.nodeName()) != "UnresolvedRelation" or not clause.origin().stopIndex().isDefined():
                continue
        parts = [str(p) for p in scala_list(node.multipartIdentifier())]
        origin = node.origin()
        if node.isStreaming() or not origin.startIndex().isDefined():
            continue
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        start, stop = origin.startIndex().get(), origin.stopIndex().get()
        bare = parent == "SubqueryAlias" or text[:start].rstrip().lower().endswith("table")
        given = {k: str(v) for k, v in java_dict(node.options()).items()}
        if clause is not None:
            target = resolve(spark, [p.partition("$")[0] for p in parts])
            if target is None:
                continue
            stop = clause.origin().stopIndex().get()
            if "$" not in parts[-1] and not given:  # a table's snapshot, read natively
                view = _next_view()
                read = _travelled(spark, target.path, _travel_options(text, clause, spark_sql),
                                  text[start:stop + 1])
                edits.append((start, stop, view if bare else f"{view} AS {quote(parts[-1])}", view, read))
                continue
            given.update(_travel_options(text, clause, spark_sql))
        read = _source_read(spark, parts, given)
        if read is not None:  # `t$audit_log`, `t WITH (...)`, `t VERSION AS OF 2`: read with its options
            view = _next_view()
            name = parts[-1].partition("$")[0]
            edits.append((start, _options_end(text, stop), view if bare else f"{view} AS {quote(name)}", view, read))
            continue
        if given:
            continue
        target = resolve(spark, parts)
        read = _view_read(spark, parts, spark_sql, depth) if target is None else target.path
        if read is None:
            continue
        view = _next_view()
        edits.append((start, stop, view if bare else f"{view} AS {quote(parts[-1])}", view, read))
    for node in functions:
        origin = node.origin()
        if not origin.startIndex().isDefined():
            continue
        rows = _incremental_query(spark, node)
        view = _next_view()
        edits.append((origin.startIndex().get(), origin.stopIndex().get(), view, view, rows))
    if not edits:
        yield None
        return
    views = []
    try:
        planned = {}
        for _, _, _, view, read in edits:
            if isinstance(read, DataFrame):
                read.createOrReplaceTempView(view)
            else:
                if read not in planned:  # one snapshot per table, however often the query names it
                    planned[read] = frame(spark, read, branch=read_branch(spark, read))
                planned[read].createOrReplaceTempView(view)
            views.append(view)
        out, last = [], 0
        for start, stop, replacement, _, _ in sorted(edits):
            out += [text[last:start], replacement]
            last = stop + 1
        yield "".join(out + [text[last:]])
    finally:
        for view in views:
            spark.catalog.dropTempView(view)


def _travel_options(text: str, clause, spark_sql: Callable[[str], DataFrame]) -> dict:
    """The `paimon` source's options for a time travel clause, as Paimon's connector takes it:
    `VERSION AS OF v` a tag named v, else snapshot v (`scan.version`); `TIMESTAMP AS OF e` the last
    snapshot committed at or before e, evaluated as Spark evaluates it (a time in the session's
    zone, or an expression without a column or subquery)."""
    version = clause.version()
    if version.isDefined():
        return {"scan.version": str(version.get())}
    origin = clause.origin()
    written = text[origin.startIndex().get():origin.stopIndex().get() + 1]
    expression = _AS_OF.sub("", written, count=1)
    try:
        micros = spark_sql(f"SELECT unix_micros(CAST(({expression}) AS TIMESTAMP))").first()[0]
    except Exception as e:  # noqa: BLE001 - Spark's words say what is wrong with the expression
        raise PaimonError(f"{written}: not a time Spark can evaluate: {str(e).splitlines()[0]}") from None
    if micros is None:
        raise PaimonError(f"{written}: the time is NULL")
    return {"scan.timestamp-millis": str(micros // 1000)}


def _travelled(spark: SparkSession, path: str, options: dict, written: str) -> DataFrame:
    """The table at the snapshot or tag the options name (store/read/travel.py), read natively;
    an error names the relation as written."""
    branch = read_branch(spark, path)
    try:
        table = FileStoreTable.open(path, FileIO.get(path), branch)
        to = travel.resolve(options, table.snapshots, table.tags)
        return frame(spark, path, snapshot_id=to.snapshot_id, tag=to.tag, branch=branch)
    except PaimonError as e:
        raise PaimonError(f"{written}: {e}") from None


def _view_read(spark: SparkSession, parts: list[str], spark_sql: Callable[[str], DataFrame],
               depth: int) -> Optional[DataFrame]:
    """A permanent view of Spark's catalog whose text reads Paimon tables (a dbt model's view over
    one), as its text read natively, under the view's column names and types; None for any other
    name, for a view reading none of ours, and where the view's text would resolve a name otherwise
    than here: its unqualified names belong to the database current when it was made."""
    if depth >= _VIEW_DEPTH or len(parts) > 3 or (len(parts) == 3 and parts[0].lower() != SESSION_CATALOG):
        return None
    current = spark.catalog.currentDatabase()
    database, name = (current, parts[0]) if len(parts) == 1 else (parts[-2], parts[-1])
    session_catalog = spark._jsparkSession.sessionState().catalog()
    try:
        if len(parts) == 1 and session_catalog.getTempView(name).isDefined():
            return None
        ident = jvm_class(spark, "org.apache.spark.sql.catalyst.TableIdentifier")(
            name, jvm_class(spark, "scala.Option").apply(database))
        if not session_catalog.tableExists(ident):
            return None
        table = session_catalog.getTableMetadata(ident)
        if str(table.tableType().name()) != "VIEW" or not table.viewText().isDefined():
            return None
        made_in = [str(p) for p in scala_list(table.viewCatalogAndNamespace())]
        text, fields = str(table.viewText().get()), T._parse_datatype_json_string(table.schema().json()).fields
    except Exception as e:  # noqa: BLE001 - a name Spark's catalog cannot answer for: Spark reads it as written
        log.debug("%s: not read as a view of Paimon tables (%s)", ".".join(parts), e)
        return None
    if made_in and made_in[-1].lower() != current.lower():
        return None
    rows = run(spark, text, spark_sql, len(text) - len(text.lstrip()), depth + 1)
    if rows is None or len(rows.columns) != len(fields):
        return None
    rows = rows.toDF(*[f"c{i}" for i in range(len(fields))])  # by position, as Spark maps a view's columns
    return rows.select(*[F.col(f"c{i}").cast(f.dataType).alias(f.name) for i, f in enumerate(fields)])


def _options_end(text: str, stop: int) -> int:
    """Where a relation's `WITH (...)` options end (the relation's own span leaves them out), so the
    rewrite replaces them with the name: the view reads with them already."""
    found = _WITH_OPTIONS.match(text, stop + 1)
    if not found:
        return stop
    depth, i = 1, found.end()
    quote_char = None
    while i < len(text) and depth:  # per character of the clause only, never of the data
        c = text[i]
        if quote_char:
            if c == quote_char:
                quote_char = None
        elif c in "'\"`":
            quote_char = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        i += 1
    return i - 1
