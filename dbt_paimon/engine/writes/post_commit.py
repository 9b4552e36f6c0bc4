"""What Paimon's writers do after a commit: compaction, then partition, tag and snapshot expiration,
and a batch write's tag."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ...store.common.errors import CommitConflictError, PaimonError
from ...store.common.fileio import FileIO
from ...store.common.options import BucketMode
from ...store.maintenance.partition_expire import expire_partitions
from ...store.snapshot.tag_creation import create_batch_tag, create_process_time_tags
from ...store.table import FileStoreTable
from .compaction import auto_compact
from ..settings import Execution

log = logging.getLogger(__name__)


def after_commit(spark: SparkSession, path: str, io: FileIO, execution: Execution,
                 branch: str | None = None) -> list[int]:
    """Compaction (the runs Paimon's universal compaction picks per bucket; every level-0 file where
    Paimon's batch readers skip them: first-row tables and deletion vectors), then expired
    partitions dropped (partition.expiration-time), tags and snapshots expired, and a batch write's
    tag (tag.automatic-creation); the snapshots it committed. A compaction that loses a
    race is logged and the next commit tries again; one of level 0 that must go up is tried again
    at once (commit.max-retries).
    execution: where the job that committed ran, and so where compaction runs: LOCAL in driver
    threads (no Spark job), DISTRIBUTED as a Spark job (compaction.py). branch: the one committed to."""
    extra = []
    # where batch readers skip level 0 the rows just written stay invisible until compacted up:
    # a conflict plans again on the new snapshot, as for any commit (commit.max-retries); else
    # the next commit's compaction picks the runs up
    table = FileStoreTable.open(path, io, branch)  # its snapshots are read afresh at each use
    try:
        sid = auto_compact(spark, path, io, execution=execution, retry=table.schema.core.force_up_level0,
                           branch=branch)
        extra = [sid] if sid else []
    except CommitConflictError as e:
        log.warning("compaction of %s lost a race with another commit and will run after the next one: %s", path, e)
    # then as Paimon's commit maintenance: partitions, tags, snapshots; a batch tag last (Spark's
    # writer creates it once its commit is done)
    # The write is committed: what follows is maintenance, which a concurrent writer may race (two
    # batch tags of one day, an expiration that lost every retry); a failure is logged, as Paimon's
    # writers log theirs, and the next write tries again.
    extra += _maintain(path, "process-time tags", lambda: create_process_time_tags(table) and [])
    extra += _maintain(path, "partition expiration", lambda: expire_partitions(table))
    if table.schema.core.get("tag.time-expire-enabled").lower() == "true":
        _maintain(path, "tag expiration", lambda: table.expire_tags() and [])
    # Paimon runs no snapshot expiration after commits on a postpone-bucket table (its
    # newExpireRunnable is null there): the rows waiting in bucket -2 stay with their snapshots
    if table.schema.bucket_mode != BucketMode.POSTPONE_MODE:
        expired = table.expire_snapshots()
        if expired.expired:
            log.info("expired snapshots %s of %s", list(expired.expired), path)
    _maintain(path, "the batch tag", lambda: create_batch_tag(table) and [])
    return extra


def _maintain(path: str, what: str, step) -> list[int]:
    """One maintenance step after a commit: the snapshots it committed; [] when it failed (logged)."""
    try:
        return list(step() or [])
    except PaimonError as e:
        log.warning("%s of %s failed after the commit and is tried again after the next one: %s", what, path, e)
        return []
