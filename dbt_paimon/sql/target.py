"""The Paimon table a statement names: Spark's catalog entry of ours (catalog.py) and its path."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from pyspark.sql import SparkSession

from . import catalog
from ..engine.settings import RunSettings
from ..store.common.errors import PaimonError
from ..store.system_tables import split_name
from .statement import Statement, alias

SESSION_CATALOG = "spark_catalog"


@dataclass(frozen=True)
class Target:
    schema: str  # lower case, as Spark's catalog keeps it
    name: str
    path: str
    branch: Optional[str] = None  # `t$branch_b`: that branch of the table

    @property
    def settings(self) -> RunSettings:
        """How the engine writes the target: on its branch."""
        return RunSettings(branch=self.branch)


def resolve(spark: SparkSession, parts: list[str]) -> Optional[Target]:
    """The Paimon table behind a name as a statement writes it (`t`, `db.t`, `spark_catalog.db.t`,
    a branch: `t$branch_b`); None when the name is anything else: another catalog's, a temporary
    view, a table not ours, a system table."""
    if parts and "$" in parts[-1]:
        base, _, rest = parts[-1].partition("$")
        found = resolve(spark, parts[:-1] + [base])
        if found is None:
            return None
        _, branch, system = split_name(f"{found.path}${rest}")
        if system is not None:
            raise PaimonError(f"{'.'.join(parts)} is a system table: it is read, never written")
        return dataclasses.replace(found, branch=branch)
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
