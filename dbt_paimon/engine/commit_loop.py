"""A write's attempts: plan, job and commit, run again on the new latest snapshot when a concurrent
commit won the race, as Paimon's committers do.

    run(path, io, what, attempt)
      └─ attempt n: the table opened afresh ─► attempt(Attempt) plans, runs its job and calls
         Attempt.commit(entries, ...) ─► one snapshot
           └─ CommitConflictError: the attempt's files aborted (Attempt.commit), Paimon's wait
              (store/retry.py), attempt n + 1 ... past commit.max-retries the error names the option

An attempt that finds nothing to write returns without committing. The commit's own errors abort
the files the attempt wrote, so a failed write leaves nothing behind.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Optional, Sequence, TypeVar

from ..store.errors import CommitConflictError
from ..store.fileio import FileIO
from ..store.manifest import ManifestEntry
from ..store.retry import after_conflict
from ..store.table import FileStoreTable

log = logging.getLogger("dbt_paimon.engine.commit_loop")
T = TypeVar("T")

# called with the attempt's number between its job and its commit: where tests land another
# writer's commit, to lose a race on purpose
_before_commit: Optional[Callable[[int], None]] = None


@dataclass
class Attempt:
    table: FileStoreTable  # opened for this attempt: its latest schema and snapshot
    number: int  # from 1

    def commit(self, entries: Sequence[ManifestEntry], kind: str, expected_latest, **options):
        """Commit the attempt's entries as one snapshot of `kind`, on `expected_latest` (the snapshot
        the attempt planned on); on any error the files the entries added are deleted."""
        if _before_commit is not None:
            _before_commit(self.number)
        commit = self.table.new_commit()
        try:
            return commit.commit(list(entries), kind, expected_latest=expected_latest, **options)
        except BaseException:
            commit.abort(list(entries))
            raise


def run(path: str, io: FileIO, what: str, attempt: Callable[[Attempt], T]) -> T:
    """attempt(Attempt) until one returns; `what` names the write in the log and the last error."""
    number = 0
    while True:
        number += 1
        table = FileStoreTable.open(path, io)
        try:
            return attempt(Attempt(table, number))
        except CommitConflictError as e:
            after_conflict(table.schema.core, number, e, what, path, log)
