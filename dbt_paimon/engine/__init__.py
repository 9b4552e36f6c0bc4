"""The Spark engine: the only part of dbt-paimon that talks to Spark.

- upsert(df, path, ..., settings=RunSettings(...)): one job that upserts a DataFrame into a Paimon
  table, one snapshot; a run's settings (where it runs, the object store's, ...) in one object.
- write(df, path, mode=...): append to a Paimon append table (no primary key), or overwrite its
  partitions, the whole table, or the rows a predicate holds for; one snapshot.
- delete(spark, path, where): -D records for every live row matching a Spark SQL predicate (an
  append table: its files holding such rows written again without them).
- compact(spark, path[, buckets]): full compaction of buckets into one COMPACT snapshot.
Every write takes `settings=RunSettings(...)`: where it runs, its parallelism and commit retries,
the object store's settings.
- read(spark, path[, snapshot_id=..., tag=...]): the table as a DataFrame, the files that need no
  merge read by Spark's own Parquet reader (read/native.py), the rest merged by the `paimon` source.
- register(spark[, warehouse=...]): the `paimon` data source for spark.read.format("paimon"),
  Spark SQL statements that write a Paimon table carried out on it (engine/sql/), and with a
  warehouse its tables in Spark's catalog.
"""

from .append import WriteResult, write
from .compaction import compact
from .delete import DeleteResult, delete
from .settings import Execution, RunSettings
from .upsert import UpsertResult, upsert
from .read.native import frame as read
from .sql.session import register  # last: the sql package builds on the modules above

__all__ = ["upsert", "write", "read", "delete", "compact", "register", "RunSettings", "Execution", "UpsertResult",
           "WriteResult", "DeleteResult"]
