"""The Paimon table a statement names: Spark's catalog entry of ours (catalog.py) and its path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from pyspark.sql import SparkSession

from . import catalog
from .statement import Statement, alias

SESSION_CATALOG = "spark_catalog"


@dataclass(frozen=True)
class Target:
    schema: str  # lower case, as Spark's catalog keeps it
    name: str
    path: str


def resolve(spark: SparkSession, parts: list[str]) -> Optional[Target]:
    """The Paimon table behind a name as a statement writes it (`t`, `db.t`, `spark_catalog.db.t`);
    None when the name is anything else: another catalog's, a temporary view, a table not ours."""
    if len(parts) == 3 and parts[0].lower() == SESSION_CATALOG:
        parts = parts[1:]
    if len(parts) == 1:
        jcatalog = spark._jsparkSession.sessionState().catalog()
        if jcatalog.getTempView(parts[0]).isDefined():
            return None
        parts = [spark.catalog.currentDatabase(), parts[0]]
    if len(parts) != 2:
        return None
    entry = catalog.catalog_entry(spark, parts[0].lower(), parts[1].lower())
    if entry is None or not entry.ours or not entry.path:
        return None
    return Target(entry.schema, entry.name, entry.path)


def names(statement: Statement, target: Target) -> list[str]:
    """The name a statement's columns may qualify its table's with: its alias, else the table's
    qualified name, any tail of which Spark resolves (`t.id`, `shop.t.id`, `spark_catalog.shop.t.id`)."""
    given = alias(statement)
    return [given] if given else [SESSION_CATALOG, target.schema, target.name]
