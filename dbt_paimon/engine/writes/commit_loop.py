"""A write's attempts: plan, job and commit, run again on the new latest snapshot when a concurrent
commit won the race, as Paimon's committers do. Every writer of the engine commits here.

    run(path, io, what, attempt, retries=...)
      └─ attempt n: the table opened afresh ─► attempt(Attempt) plans, runs its job and calls
         Attempt.commit(entries, ...) or Attempt.overwrite(...) ─► one snapshot
           └─ CommitConflictError: the attempt's files aborted (or kept for the next attempt:
              Attempt.keep), Paimon's wait (store/write/retry.py), attempt n + 1 ... past
              commit.max-retries the error names the option

Two kinds of lost race: the race for the next snapshot id alone is retried inside the store's
commit (nothing the job read changed); a conflict with what the job read (a file it deletes is gone,
the snapshot it planned on moved, a bucket's deletion vectors changed) comes here, where the job is
run again on the new snapshot, or its files committed again as they are when the attempt that
receives them (Attempt.carried) finds the commits between changed nothing it depends on (an upsert:
recommit.py). Both count against one commit.max-retries: a store commit that spent its retries
(CommitRetriesExhaustedError) is not tried again here.

An attempt that finds nothing to write returns without committing. The commit's own errors abort
the files the attempt wrote, so a failed write leaves nothing behind.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any, Callable, Collection, Optional, Sequence, TypeVar

from ...store.write.commit import FileStoreCommit
from ...store.common.errors import CommitConflictError, CommitRetriesExhaustedError
from ...store.common.fileio import FileIO
from ...store.manifest.manifest import ManifestEntry
from ...store.common.options import CoreOptions
from ...store.write.retry import after_conflict
from ...store.schema.schema import TableSchema
from ...store.table import FileStoreTable

log = logging.getLogger("dbt_paimon.engine.writes.commit_loop")
T = TypeVar("T")

# called with the attempt's number and the write's name (run()'s `what`) between its job and its
# commit: where tests land another writer's commit, to lose a race on purpose
_before_commit: Optional[Callable[[int, str], None]] = None


class Kept:
    """A job's written files an attempt kept for the next one (Attempt.keep): `value` is the
    writer's own (the job and the snapshot it was committed on); discard() deletes the files, once."""

    def __init__(self, value: Any, discard: Callable[[], None]):
        self.value, self._discard, self.discarded = value, discard, False

    def discard(self) -> None:
        if not self.discarded:
            self.discarded = True
            self._discard()


@dataclass
class Attempt:
    table: FileStoreTable  # opened for this attempt: its latest snapshot (and schema, unless pinned)
    number: int  # from 1: the commit attempt
    schema: TableSchema  # the table's, with commit.max-retries as the run sets it
    carried: Optional[Kept] = None  # what the attempt before kept (its commit conflicted): commit or discard it
    kept: Optional[Kept] = None
    what: str = ""  # the write's name (run()'s)

    @property
    def core(self) -> CoreOptions:
        return self.schema.core

    def keep(self, value: Any, discard: Optional[Callable[[], None]] = None) -> None:
        """Hand `value` to the next attempt should this attempt's commit conflict, its files kept
        (`discard` deletes them: the loop calls it when the run gives up or fails); a Kept (the one
        this attempt was carried) is handed on as it is."""
        self.kept = value if isinstance(value, Kept) else Kept(value, discard)

    def _committer(self) -> FileStoreCommit:
        if _before_commit is not None:
            _before_commit(self.number, self.what)
        return FileStoreCommit(self.table.io, self.table.path, self.schema)

    def commit(self, entries: Sequence[ManifestEntry], kind: str, expected_latest=...,
               abort: Optional[Callable[[], None]] = None, **options):
        """Commit the attempt's entries as one snapshot of `kind`, on `expected_latest` (the snapshot
        the attempt planned on; none given: whatever is latest); on any error `abort()` runs, by
        default deleting the files the entries add."""
        commit = self._committer()
        try:
            result = commit.commit(list(entries), kind, expected_latest=expected_latest, **options)
        except BaseException:
            self._failed(commit, entries, abort)
            raise
        self._committed()
        return result

    def overwrite(self, entries: Sequence[ManifestEntry], partitions: Optional[Collection[bytes]],
                  abort: Optional[Callable[[], None]] = None, **options):
        """Paimon's OVERWRITE of `partitions` (None: the table) by the entries (FileStoreCommit.overwrite)."""
        commit = self._committer()
        try:
            result = commit.overwrite(list(entries), partitions, **options)
        except BaseException:
            self._failed(commit, entries, abort)
            raise
        self._committed()
        return result

    def _failed(self, commit: FileStoreCommit, entries, abort: Optional[Callable[[], None]]) -> None:
        """A commit that raised: its files deleted, unless its snapshot was created before the error
        (a hint's write that failed after: the snapshot holds them)."""
        if commit.published is not None:
            self._committed()
        elif abort is not None:
            abort()
        else:
            commit.abort(list(entries))

    def _committed(self) -> None:
        """The kept job is the table's now: nothing after the commit (post-commit work that fails)
        may delete its files."""
        self.kept = self.carried = None


def with_retries(schema: TableSchema, retries: Optional[int]) -> TableSchema:
    """The schema with the run's commit.max-retries in its options (unchanged when the run sets none)."""
    if retries is None:
        return schema
    return dataclasses.replace(schema, options={**schema.options, "commit.max-retries": str(retries)})


def run(path: str, io: FileIO, what: str, attempt: Callable[[Attempt], T], retries: Optional[int] = None,
        open_table: Optional[Callable[[], FileStoreTable]] = None, rerun: bool = True,
        branch: Optional[str] = None) -> T:
    """attempt(Attempt) until one returns; `what` names the write in the log and the last error.
    retries: the run's commit.max-retries (None: the table's). open_table: how each attempt gets the
    table (a writer that checked its input against one schema pins it; default: opened afresh).
    rerun=False: a conflict is raised at once (work the next commit redoes: post-commit compaction).
    branch: the branch written (None: main), where open_table is not given."""
    number, carried = 0, None
    while True:
        number += 1
        table = open_table() if open_table is not None else FileStoreTable.open(path, io, branch)
        at = Attempt(table, number, with_retries(table.schema, retries), carried, what=what)
        try:
            return attempt(at)
        except CommitConflictError as e:
            carried = at.kept
            if at.carried is not None and at.carried is not carried:
                at.carried.discard()
            try:
                if isinstance(e, CommitRetriesExhaustedError) or not rerun:
                    raise
                after_conflict(at.core, number, e, what, path, log)
            except BaseException:
                if carried is not None:
                    carried.discard()
                raise
        except BaseException:
            for left in (at.kept, at.carried):
                if left is not None:
                    left.discard()
            raise
