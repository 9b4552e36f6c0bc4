"""Spark SQL on Paimon tables, above the engine: every Paimon table in Spark's catalog (catalog.py),
the queries on them read through the engine's native plan (query.py), and the statements that write
one carried out on the table itself by the engine's writers (session.py reads them, ddl.py, dml.py
and merge.py run them).

- register(spark[, warehouse=...]): the `paimon` data source for spark.read.format("paimon"), Spark
  SQL statements on Paimon tables carried out as above, and with a warehouse its tables in Spark's
  catalog.
- catalog: the Paimon tables' entries in Spark's catalog, for the adapter's relations.
- set_session_branch / read_branch: the branch a session's queries read (branch.py: a dbt build's
  write-audit-publish).
"""

from . import catalog
from .branch import read_branch, set_session_branch
from .session import register

__all__ = ["register", "catalog", "read_branch", "set_session_branch"]
