"""What Paimon's writers do after a commit: compaction, then snapshot expiration."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ..store.errors import CommitConflictError
from ..store.fileio import FileIO
from ..store.table import FileStoreTable
from .compaction import auto_compact
from .settings import Execution

log = logging.getLogger(__name__)


def after_commit(spark: SparkSession, path: str, io: FileIO, execution: Execution) -> list[int]:
    """Compaction (the runs Paimon's universal compaction picks per bucket; in first-row tables
    every level-0 file, since Paimon's batch readers skip them), then snapshot
    expiration by the snapshot.* options; the snapshots it committed. A compaction that loses a
    race is logged; the next commit tries again.
    execution: where the job that committed ran, and so where compaction runs: LOCAL in driver
    threads (no Spark job), DISTRIBUTED as a Spark job (compaction.py)."""
    extra = []
    try:
        sid = auto_compact(spark, path, io, execution=execution)
        extra = [sid] if sid else []
    except CommitConflictError as e:
        log.warning("compaction of %s lost a race with another commit and will run after the next one: %s", path, e)
    expired = FileStoreTable.open(path, io).expire_snapshots()
    if expired.expired:
        log.info("expired snapshots %s of %s", list(expired.expired), path)
    return extra
