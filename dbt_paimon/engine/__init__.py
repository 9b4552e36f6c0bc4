"""The Spark engine: the only part of dbt-paimon that talks to Spark.

- upsert(df, path, ..., settings=RunSettings(...)): one job that upserts a DataFrame into a Paimon
  table, one snapshot; a run's settings (where it runs, the object store's, ...) in one object.
- write(df, path, mode=...): append to a Paimon append table (no primary key), or overwrite its
  partitions, the whole table, or the rows a predicate holds for; one snapshot.
- delete(spark, path, where): -D records for every live row matching a Spark SQL predicate (an
  append table: its files holding such rows written again without them).
- compact(spark, path[, buckets]): full compaction of buckets into one COMPACT snapshot.
- read(spark, path[, snapshot_id=..., tag=...]): the table as a DataFrame, the files that need no
  merge read by Spark's own Parquet reader (read/native.py), the rest merged by the `paimon` source.
- changes(spark, path, start, end): what the table's rows became after snapshot `start` up to `end`,
  one record per key with its row kind (read/changes.py).
Every operation takes `settings=RunSettings(...)`: where it runs, its parallelism and commit retries,
the object store's settings (a read: the last alone). `RunSettings.from_options` splits a user's
options into those and the table's own.
What else the adapter needs of the engine is here too, and nothing else of the engine is for
outside use: a run's settings (`RunSettings`, `Execution`), the table checks of an upsert, the
append modes, schema changes (`schema_change`), Spark <-> Paimon types, the session's warm-up and a
local session's settings (`warm_up`, `local_session`).
Spark SQL on Paimon tables (`register`) builds on this face: the package dbt_paimon.sql, above it.
"""

from . import warm_up
from .read.changes import changes
from .read.native import frame as read
from .runtime import local_session
from .settings import EXECUTIONS, RUN_OPTIONS, Execution, RunSettings
from .spark_types import fits, from_spark, spark_schema, to_spark
from .writes import schema_change
from .writes.append import APPEND_MODE, OVERWRITE_PARTITIONS, OVERWRITE_TABLE, REPLACE_WHERE, WriteResult, write
from .writes.compaction import compact
from .writes.delete import DeleteResult, delete
from .writes.replace import Replace
from .writes.upsert import TableMismatchError, UpsertResult, check_table, upsert

__all__ = [
    "upsert", "write", "read", "changes", "delete", "compact", "RunSettings", "Execution", "UpsertResult",
    "WriteResult", "DeleteResult",
    # for the adapter
    "EXECUTIONS", "RUN_OPTIONS", "TableMismatchError", "check_table", "APPEND_MODE", "OVERWRITE_PARTITIONS",
    "OVERWRITE_TABLE", "REPLACE_WHERE", "Replace", "schema_change", "fits", "from_spark", "to_spark",
    "spark_schema", "warm_up", "local_session",
]
