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
from dataclasses import dataclass
from typing import Any, Optional

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from .catalog import scala_list

# Spark's logical plan (class simple name) -> what the statement does to its table
KINDS = {
    "InsertIntoStatement": "insert",
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

    @property
    def written_name(self) -> str:
        """The table's name as the statement writes it, for messages."""
        return ".".join(self.target)

    def source_text(self, node) -> Optional[str]:
        """The statement's own text of a parsed node (an expression, a query): Spark records where
        each node starts and stops in the statement."""
        origin = node.origin()
        start, stop = origin.startIndex(), origin.stopIndex()
        if not start.isDefined() or not stop.isDefined():
            return None
        return self.text[start.get():stop.get() + 1]


def read(spark: SparkSession, text: str) -> Optional[Statement]:
    """The statement, if it writes a table; None for anything else or what Spark's parser refuses."""
    try:
        plan = spark._jsparkSession.sessionState().sqlParser().parsePlan(text)
    except Exception:  # noqa: BLE001 - Spark reports its own parse errors when it runs the text
        return None
    kind = KINDS.get(str(plan.getClass().getSimpleName()))
    if kind is None:
        return None
    node = getattr(plan, _TARGET.get(kind, "table"))()
    target = _identifier(spark, node)
    if target is None:
        return None
    return Statement(kind, target, plan, text)


def _identifier(spark: SparkSession, node) -> Optional[list[str]]:
    """The multipart name of an unresolved relation or table, under its alias if any."""
    while str(node.getClass().getSimpleName()) == "SubqueryAlias":
        node = node.child()
    if not hasattr(node, "multipartIdentifier"):
        return None
    return [str(p) for p in scala_list(spark, node.multipartIdentifier())]


def alias(statement: Statement) -> Optional[str]:
    """The alias the statement gives its table (`DELETE FROM t AS x`), if any."""
    node = getattr(statement.plan, _TARGET.get(statement.kind, "table"))()
    if str(node.getClass().getSimpleName()) == "SubqueryAlias":
        return str(node.alias())
    return None


def scala_map(spark: SparkSession, mapping) -> dict:
    return dict(spark._jvm.scala.jdk.javaapi.CollectionConverters.asJava(mapping))


def option(value) -> Any:
    """A Scala Option's value, or None."""
    return value.get() if value.isDefined() else None


def spark_type(jtype) -> T.DataType:
    """A Spark SQL type from the parser as pyspark's type."""
    field = {"name": "_", "type": json.loads(jtype.json()), "nullable": True, "metadata": {}}
    return T.StructType.fromJson({"type": "struct", "fields": [field]}).fields[0].dataType
