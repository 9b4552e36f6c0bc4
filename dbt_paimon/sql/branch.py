"""The branch a session reads its Paimon tables from, when a dbt build writes on one (adapter/wap.py).

Paimon's Spark connector reads every table of a session from the branch `spark.paimon.branch` names,
and fails on a table without it. Here the session's branch is where the build writes: a table that
has the branch is read from it (a model the build wrote, as its downstream models and tests must
see it), every other table from main (a source the build only reads).
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import SparkSession

from ..store.common.fileio import FileIO
from ..store.snapshot.branches import BranchManager

SESSION_BRANCH = "spark.dbt_paimon.branch"
_ATTRIBUTE = "_dbt_paimon_branch"  # kept on the session object too: read on every query, no JVM call


def set_session_branch(spark: SparkSession, branch: Optional[str]) -> None:
    if getattr(spark, _ATTRIBUTE, None) == branch:
        return
    if branch:
        spark.conf.set(SESSION_BRANCH, branch)
    else:
        spark.conf.unset(SESSION_BRANCH)
    setattr(spark, _ATTRIBUTE, branch)


def session_branch(spark: SparkSession) -> Optional[str]:
    return getattr(spark, _ATTRIBUTE, None)


def read_branch(spark: SparkSession, path: str) -> Optional[str]:
    """The branch a query of this session reads the table at `path` from: the session's branch
    where the table has it, else main (None)."""
    branch = session_branch(spark)
    if branch and BranchManager(FileIO.get(path), path).exists(branch):
        return branch
    return None
