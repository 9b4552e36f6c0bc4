"""PaimonRelation: a Spark relation that knows whether a Paimon table stands behind it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from dbt.adapters.spark.relation import SparkRelation


@dataclass(frozen=True, eq=False, repr=False)
class PaimonRelation(SparkRelation):
    # True for a catalog table read through a dbt-paimon source (a Paimon table of the warehouse)
    is_paimon: Optional[bool] = None
