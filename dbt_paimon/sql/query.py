"""Spark SQL queries on Paimon tables of Spark's catalog, read through native.py's plan.

Spark resolves a catalog table to its provider, the `paimon` Python source (sql/catalog.py), where
every row of every column crosses from Python to the JVM. A query that `spark.sql` receives (dbt's
`ref()`s, tests, `dbt show`, a notebook's SQL) is read first with Spark's parser: each table it
names that is one of ours is planned at its latest snapshot (native.frame), put under a temporary
view of a name of its own, and the query runs with the view's name where the table's stood (the
table's own name kept as its alias, so `t.col` still resolves). Spark analyses a query when
`spark.sql` returns, so the views are dropped then; the DataFrame keeps their plans, and with them
the snapshot read: the same rows however often it is used.

A name under a time travel clause, with options, shadowed by a CTE of the statement, or anything
the parser refuses is left as written (the `paimon` source reads it); so is the whole query when
the rewritten text fails where the original would not.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
from typing import Callable, Optional

from pyspark.sql import DataFrame, SparkSession

from .catalog import quote, scala_list
from .target import resolve
from ..engine.read.native import frame

log = logging.getLogger(__name__)

# a statement that may be a query starts with one of these (after comments)
_QUERY_WORD = re.compile(r"(?:select|with|from|table|values|\()", re.IGNORECASE)
_VIEW_PREFIX = "__paimon_read_"
_counter = itertools.count()
_lock = threading.Lock()


def _next_view() -> str:
    with _lock:
        return f"{_VIEW_PREFIX}{next(_counter)}"


def _relations(spark: SparkSession, plan) -> tuple[list, set[str]]:
    """(relation, its parent's class name) of every table the plan reads by name, subqueries and
    CTEs included, and the names of the statement's CTEs."""
    found, ctes = [], set()

    def walk(node, parent: str) -> None:
        kind = str(node.getClass().getSimpleName())
        if kind == "UnresolvedRelation":
            found.append((node, parent))
            return
        if kind == "UnresolvedWith":
            for pair in scala_list(spark, node.cteRelations()):
                ctes.add(str(pair._1()).lower())
                walk(pair._2(), kind)
        for child in scala_list(spark, node.children()):
            walk(child, kind)
        for sub in scala_list(spark, node.subqueries()):
            walk(sub, kind)

    walk(plan, "")
    return found, ctes


def _is_command(spark: SparkSession, plan) -> bool:
    command = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.catalyst.plans.logical.Command")
    return bool(command.isInstance(plan)) or str(plan.getClass().getSimpleName()).endswith("Statement")


def run(spark: SparkSession, text: str, spark_sql: Callable[[str], DataFrame], first: int) -> Optional[DataFrame]:
    """The query's DataFrame with its Paimon tables read natively; None when it names none (or is
    no query), for Spark to run as it is. `first`: where the statement's first word starts."""
    if not _QUERY_WORD.match(text, first):
        return None
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Exception:  # noqa: BLE001 - Spark reports its own parse errors when it runs the text
        return None
    if _is_command(spark, plan):
        return None
    relations, ctes = _relations(spark, plan)
    edits = []  # (start, stop, replacement, view, path)
    for node, parent in relations:
        parts = [str(p) for p in scala_list(spark, node.multipartIdentifier())]
        origin = node.origin()
        if node.isStreaming() or not node.options().isEmpty() or not origin.startIndex().isDefined():
            continue
        if len(parts) == 1 and parts[0].lower() in ctes:
            continue
        target = resolve(spark, parts)
        if target is None:
            continue
        start, stop = origin.startIndex().get(), origin.stopIndex().get()
        view = _next_view()
        bare = parent == "SubqueryAlias" or text[:start].rstrip().lower().endswith("table")
        edits.append((start, stop, view if bare else f"{view} AS {quote(parts[-1])}", view, target.path))
    if not edits:
        return None
    views = []
    try:
        planned = {}
        for _, _, _, view, path in edits:
            if path not in planned:  # one snapshot per table, however often the query names it
                planned[path] = frame(spark, path)
            planned[path].createOrReplaceTempView(view)
            views.append(view)
        out, last = [], 0
        for start, stop, replacement, _, _ in sorted(edits):
            out += [text[last:start], replacement]
            last = stop + 1
        rewritten = "".join(out + [text[last:]])
        try:
            return spark_sql(rewritten)
        except Exception as e:  # noqa: BLE001 - the query as written then decides (and words any error)
            log.debug("the query on Paimon tables could not be read natively (%s); read as written", e)
            return None
    finally:
        for view in views:
            spark.catalog.dropTempView(view)
