"""The upsert pipeline's two executors, peers behind one small interface.

    plan ─► bootstrap ─► route by key ─► assign ─► route by (partition, bucket) ─► write ─► commit ─► post-commit

upsert.py plans, commits and retries; an executor runs one job between plan and commit:
- LocalExecutor (local.py): inside the driver, on an Arrow batch, in threads; no Spark job;
- DistributedExecutor (distributed.py): one Spark job, mapInArrow stages and two shuffles (one for a
  cross-partition table, whose assigners write their rows).
Both run the stage functions of tasks.py on the rows of assign/rows.py. Post-commit work (compaction)
runs where the job ran: post_commit.py takes the executor's `execution`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Protocol

import numpy as np

from ...assign.global_index_assigner import AssignCounts
from ...assign.rows import StageRows
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable
from ..settings import Execution


@dataclass
class JobOutput:
    """What a job hands to the commit: the new files' manifest entries, the counts, the HASH index
    files it rewrote ((partition bytes, bucket) -> entry) and its plan, for logs and tests."""

    entries: list
    counts: AssignCounts
    index_changes: dict
    plan: str
    # called after the commit and post-commit work with (our snapshot id, our compactions' ids):
    # records the commit in the key index (key_lookup.py); a failure there is only logged
    record: Callable[[int | None, list[int]], None] | None = None
    # how the bootstrap went (driver-local): "source" (key index / table), "seconds", "bytes" (the
    # index's blocks and catch-up files, or the data files read), for logs and the bench
    bootstrap: dict = field(default_factory=dict)
    # seconds of the job's own stages where the executor times them (driver-local: bootstrap,
    # assign, write); upsert.py adds its phases around them (UpsertResult.phases)
    phases: dict = field(default_factory=dict)


class Executor(Protocol):
    execution: Execution

    def run_job(self, table: FileStoreTable, plan, stage: StageRows) -> JobOutput:
        """One attempt of the job on the table's plan (None: a new table); stage: the upsert's
        rows between stages (the table's schema, sequence_by, the run's NOT NULL columns)."""

    def holds_any(self, schema: TableSchema, hashes: np.ndarray) -> bool:
        """Whether a key of the batch has one of these hashes (Paimon's hash of the whole primary
        key, sorted): after a commit conflict, whether the commits between touched the batch's keys."""


def driver_threads() -> int:
    """Threads of driver-local work (writers, bootstrap chunks, compacted buckets)."""
    return max(2, min(8, os.cpu_count() or 2))
