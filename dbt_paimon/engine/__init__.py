"""The Spark engine: the only part of dbt-paimon that talks to Spark.

- upsert(df, path, ...): one job that upserts a DataFrame into a Paimon table, one snapshot.
- register(spark): the `paimon` data source for spark.read.format("paimon").
"""

from .source import register
from .upsert import UpsertResult, upsert

__all__ = ["upsert", "register", "UpsertResult"]
