"""What Paimon's writers do after a commit: compaction, then partition, tag and snapshot expiration,
and a batch write's tag."""

from __future__ import annotations

import logging

from pyspark.sql import SparkSession

from ..store.errors import CommitConflictError
from ..store.fileio import FileIO
from ..store.partition_expire import expire_partitions
from ..store.tag_creation import create_batch_tag, create_process_time_tags
from ..store.retry import after_conflict
from ..store.table import FileStoreTable
from .compaction import auto_compact
from .settings import Execution

log = logging.getLogger(__name__)


def after_commit(spark: SparkSession, path: str, io: FileIO, execution: Execution) -> list[int]:
    """Compaction (the runs Paimon's universal compaction picks per bucket; every level-0 file where
    Paimon's batch readers skip them: first-row tables and deletion vectors), then expired
    partitions dropped (partition.expiration-time), tags and snapshots expired, and a batch write's
    tag (tag.automatic-creation); the snapshots it committed. A compaction that loses a
    race is logged and the next commit tries again; one of level 0 that must go up is tried again
    at once (commit.max-retries).
    execution: where the job that committed ran, and so where compaction runs: LOCAL in driver
    threads (no Spark job), DISTRIBUTED as a Spark job (compaction.py)."""
    extra, attempt = [], 0
    while True:
        attempt += 1
        try:
            sid = auto_compact(spark, path, io, execution=execution)
            extra = [sid] if sid else []
            break
        except CommitConflictError as e:
            core = FileStoreTable.open(path, io).schema.core
            # where batch readers skip level 0 the rows just written stay invisible until compacted
            # up: try again on the new snapshot, as for any commit (commit.max-retries)
            if not core.force_up_level0 or attempt > core.commit_max_retries:
                log.warning("compaction of %s lost a race with another commit and will run after the next one: %s",
                            path, e)
                break
            after_conflict(core, attempt, e, "compaction", path, log)
    # then as Paimon's commit maintenance: partitions, tags, snapshots; a batch tag last (Spark's
    # writer creates it once its commit is done)
    table = FileStoreTable.open(path, io)
    for tag in create_process_time_tags(table):
        log.info("tagged %s as %s", path, tag)
    extra += expire_partitions(table)
    if (table.schema.core.get("tag.time-expire-enabled") or "true").lower() == "true":
        gone = table.expire_tags()
        if gone:
            log.info("expired tags %s of %s", gone, path)
    expired = table.expire_snapshots()
    if expired.expired:
        log.info("expired snapshots %s of %s", list(expired.expired), path)
    tag = create_batch_tag(table)
    if tag:
        log.info("tagged snapshot %s of %s as %s", table.latest_snapshot().id, path, tag)
    return extra
