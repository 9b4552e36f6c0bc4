"""A Spark SQL statement read with Spark's own parser: what it does and to which table.

Spark runs a statement on a table whose provider is a Python data source (every Paimon table in
Spark's catalog, catalog.py) in one of three ways: a read goes to our source; INSERT reaches a
writer the source does not have; DELETE, UPDATE and MERGE are refused by Spark; and ALTER TABLE,
worst, changes Spark's catalog entry alone. So the statements that write a Paimon table are read
before Spark runs them (session.py) and carried out on the table itself (ddl.py, dml.py).

The parser is Spark's (`sessionState.sqlParser`), not a pattern: what Spark would run is exactly
what is read here, quoting, comments and all. A statement the parser refuses is left to Spark,
which reports the error in its words.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Optional

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from ..store.common.errors import SchemaError
from ..engine.jvm import jvm_class, scala_list

# Spark's logical plan (class simple name) -> what the statement does to its table
KINDS = {
    "InsertIntoStatement": "insert",
    "OverwriteByExpression": "insert",  # INSERT INTO t REPLACE WHERE before Spark 4.3
    "DeleteFromTable": "delete",
    "UpdateTable": "update",
    "MergeIntoTable": "merge",
    "TruncateTable": "truncate",
    "TruncatePartition": "truncate partition",
    "AddColumns": "add columns",
    "RenameColumn": "rename column",
    "AlterColumns": "alter column",
    "DropColumns": "drop columns",
    "ReplaceColumns": "replace columns",
    "SetTableProperties": "set properties",
    "UnsetTableProperties": "unset properties",
    "RenameTable": "rename table",
}
# the plan's child that names the written table, per kind (the rest: `table`)
_TARGET = {"merge": "targetTable", "rename table": "child"}


@dataclass(frozen=True)
class Statement:
    kind: str  # a value of KINDS
    target: list[str]  # the table's name as written, in parts (catalog, schema, table)
    plan: Any  # Spark's parsed (unresolved) logical plan, a py4j object
    text: str  # the statement as given
    spark: Any = field(default=None, compare=False, repr=False)  # the session whose parser read it
    # `WITH x AS (...) INSERT ...`: Spark's node holding the statement's common table expressions
    ctes: Any = field(default=None, compare=False, repr=False)

    def with_ctes(self, query):
        """A query of the statement (INSERT's rows, MERGE's source) in the scope of the statement's
        WITH clause, as Spark plans it: the clause's node over the query instead of the statement."""
        if self.ctes is None:
            return query
        return self.ctes.withNewChildren(self.ctes.children().updated(0, query))

    def value_text(self, node, columns) -> str:
        """An assigned value's text (UPDATE SET, MERGE's actions): `DEFAULT`, where no column of the
        table (`columns`) has that name, is the column's default as Spark reads it, and a Paimon
        column declares none: NULL."""
        return "NULL" if is_default(node, columns) else self.source_text(node)

    @property
    def written_name(self) -> str:
        """The table's name as the statement writes it, for messages."""
        return ".".join(self.target)

    def source_text(self, node) -> str:
        """The statement's own text of a parsed expression (a condition, an assigned value). Spark
        records where each node starts and stops, but a predicate's span starts at its keyword
        (`IN (1, 2)` of `id IN (1, 2)`, so too BETWEEN, LIKE, IS NULL) and parentheses leave the
        tree: the node's span, its subtree's, that one with its parentheses balanced, and last
        Spark's own SQL of the node are tried in turn, and the first that parses back to the same
        expression is the one."""
        parser = self.spark._jsparkSession.sessionState().sqlParser()
        for text in self._spans(node) + [None]:
            try:
                text = str(node.sql()) if text is None else text
                if _same(parser.parseExpression(text), node):
                    return text
            except Exception:  # noqa: BLE001 - a span that does not parse is not the expression's text
                continue
        raise SchemaError(f"{self.kind.upper()} on {self.written_name}: could not read an expression of the "
                          f"statement back as written ({node.toString()}); write it another way")

    def _spans(self, node) -> list[str]:
        """Candidate texts of `node`: its own span, then its subtree's (the leftmost descendants
        start it, the rightmost stop it: no walk of a long IN list), then that one widened to
        balanced parentheses."""
        def span(n) -> Optional[tuple[int, int]]:
            origin = n.origin()
            if origin.startIndex().isDefined() and origin.stopIndex().isDefined():
                return origin.startIndex().get(), origin.stopIndex().get()
            return None

        def edge(n, last: bool) -> list[tuple[int, int]]:
            found = []
            while n is not None:
                found += [x for x in [span(n)] if x is not None]
                children = scala_list(n.children())
                n = (children[-1] if last else children[0]) if children else None
            return found
        own = span(node)
        spans = [own] if own is not None else []
        starts, stops = edge(node, False), edge(node, True)
        if starts and stops:
            start, stop = min(a for a, _ in starts), max(b for _, b in stops)
            spans.append((start, stop))
            text = self.text
            # parentheses around a child that the tree dropped: widen to the enclosing ones
            opened = text[start:stop + 1].count("(") - text[start:stop + 1].count(")")
            while opened < 0 and start > 0:
                start -= 1
                opened += {"(": 1, ")": -1}.get(text[start], 0)
            while opened > 0 and stop + 1 < len(text):
                stop += 1
                opened -= {")": 1, "(": -1}.get(text[stop], 0)
            spans.append((start, stop))
        return [self.text[a:b + 1] for a, b in dict.fromkeys(spans)]


def read(spark: SparkSession, text: str) -> Optional[Statement]:
    """The statement, if it writes a table; None for anything else or what Spark's parser refuses."""
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Exception:  # noqa: BLE001 - Spark reports its own parse errors when it runs the text
        return None
    ctes = None
    if str(plan.getClass().getSimpleName()) == "UnresolvedWith":  # WITH ... INSERT / MERGE / DELETE / UPDATE
        ctes, plan = plan, plan.child()
    kind = KINDS.get(str(plan.getClass().getSimpleName()))
    if kind is None:
        return None
    node = getattr(plan, _TARGET.get(kind, "table"))()
    target = _identifier(node)
    if target is None:
        return None
    return Statement(kind, target, plan, text, spark, ctes)


_EXPR_ID = re.compile(r"#\d+")


def _same(parsed, node) -> bool:
    """Whether two parses are one expression: equal trees, or (a subquery gets a new id at each
    parse: ScalarSubquery, Exists, ListQuery) equal trees but for those ids, their plans included."""
    if parsed.equals(node):
        return True
    text = _EXPR_ID.sub("#", str(parsed.treeString()))
    if "#" not in text:
        return False

    def plans(expr) -> list[str]:
        found = []

        def walk(e) -> None:
            if str(e.getClass().getSimpleName()) in _SUBQUERIES:
                try:
                    found.append(_EXPR_ID.sub("#", str(e.plan().treeString())))
                except Exception:  # noqa: BLE001 - no plan to show (InSubquery: its ListQuery child has it)
                    pass
            for child in scala_list(e.children()):
                walk(child)
        walk(expr)
        return found
    return text == _EXPR_ID.sub("#", str(node.treeString())) and plans(parsed) == plans(node)


_SUBQUERIES = {"ScalarSubquery", "Exists", "ListQuery", "InSubquery", "LateralSubquery"}


def _identifier(node) -> Optional[list[str]]:
    """The multipart name of an unresolved relation or table, under its alias if any."""
    while str(node.getClass().getSimpleName()) == "SubqueryAlias":
        node = node.child()
    if not hasattr(node, "multipartIdentifier"):
        return None
    return [str(p) for p in scala_list(node.multipartIdentifier())]


def is_default(node, columns) -> bool:
    """Whether a parsed expression is the DEFAULT keyword (an unresolved name `DEFAULT`) and no
    column of `columns` takes the name first, as Spark resolves it."""
    if str(node.getClass().getSimpleName()) != "UnresolvedAttribute":
        return False
    parts = [str(p) for p in scala_list(node.nameParts())]
    return [p.lower() for p in parts] == ["default"] and "default" not in {c.lower() for c in columns}


_DEFAULT_WORD = re.compile(r"\bdefault\b", re.IGNORECASE)


def values_defaults(spark: SparkSession, statement: Statement, query):
    """An INSERT's VALUES with each DEFAULT as NULL (the default of a column that declares none, as
    every Paimon column here); any other query as it is. Each cell is a call into the JVM: only a
    statement whose text holds the word is walked."""
    if not _DEFAULT_WORD.search(statement.text) or str(query.getClass().getSimpleName()) != "UnresolvedInlineTable":
        return query
    rows = query.rows()
    null = None
    for i in range(rows.length()):
        row = rows.apply(i)
        for j in range(row.length()):
            if is_default(row.apply(j), ()):
                null = null or spark._jsparkSession.sessionState().sqlParser().parseExpression("NULL")
                row = row.updated(j, null)
        rows = rows.updated(i, row)
    if null is None:
        return query
    return jvm_class(spark, "org.apache.spark.sql.catalyst.analysis.UnresolvedInlineTable")(query.names(), rows)


def alias(statement: Statement) -> Optional[str]:
    """The alias the statement gives its table (`DELETE FROM t AS x`), if any."""
    node = getattr(statement.plan, _TARGET.get(statement.kind, "table"))()
    if str(node.getClass().getSimpleName()) == "SubqueryAlias":
        return str(node.alias())
    return None


def option(value) -> Any:
    """A Scala Option's value, or None."""
    return value.get() if value.isDefined() else None


def spark_type(jtype) -> T.DataType:
    """A Spark SQL type from the parser as pyspark's type."""
    field = {"name": "_", "type": json.loads(jtype.json()), "nullable": True, "metadata": {}}
    return T.StructType.fromJson({"type": "struct", "fields": [field]}).fields[0].dataType
