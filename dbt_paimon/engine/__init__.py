"""The Spark engine: the only part of dbt-paimon that talks to Spark.

- upsert(df, path, ..., settings=RunSettings(...)): one job that upserts a DataFrame into a Paimon
  table, one snapshot; a run's settings (where it runs, the object store's, ...) in one object.
- write(df, path, mode=...): append to a Paimon append table (no primary key), or overwrite its
  partitions, the whole table, or the rows a predicate holds for; one snapshot.
- delete(spark, path, where): -D records for every live row matching a Spark SQL predicate (an
  append table: its files holding such rows written again without them).
- compact(spark, path[, buckets]): full compaction of buckets into one COMPACT snapshot.
- register(spark): the `paimon` data source for spark.read.format("paimon").
"""

from .append import WriteResult, write
from .compaction import compact
from .delete import DeleteResult, delete
from .settings import Execution, RunSettings
from .source import register
from .upsert import UpsertResult, upsert

__all__ = ["upsert", "write", "delete", "compact", "register", "RunSettings", "Execution", "UpsertResult", "WriteResult", "DeleteResult"]
