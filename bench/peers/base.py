"""What every system under test implements. run.py asks available() (None, or why not); then a
worker process (worker.py) drives the peer through one phase:

  setup phase (own process):  start() -> setup(work_dir, base_path) -> stop()
  upsert phase (own process): start() [startup timed, reported apart]
                              -> load_batch(batch_path) [untimed] -> upsert(work_dir, batch) [timed]
                              -> peak memory read here -> read_back(work_dir) -> check
                              -> second_opinion(work_dir) -> stop() -> profile()

Heavy imports go inside the methods, so that listing the peers (and an unavailable peer) costs nothing.
"""

from __future__ import annotations

import pyarrow.parquet as pq


class Peer:
    label = "?"               # the name in the report
    model = "cross"           # which expected table its read-back is checked against (model.MODELS)
    workloads = None          # None: every workload; else the set it takes part in
    # case name -> the system whose set-up table this one upserts into, for a case whose base this
    # one cannot write itself (run.py's set_up)
    borrows_setup: dict = {}
    note = ""                 # one line in the report on what exactly is measured
    # False for a table whose metadata holds absolute paths (Iceberg): a copy of it would write into
    # and read from the original, so run.py sets up each round's table anew instead of copying
    copyable = True

    def available(self) -> str | None:
        """None if the system can run here, else the reason it cannot."""
        return None

    def versions(self) -> dict:
        return {}

    def start(self, work_dir: str) -> None:
        """Start what a user has running before the upsert (e.g. a SparkSession)."""

    def stop(self) -> None:
        pass

    def setup(self, work_dir: str, base_path: str) -> None:
        raise NotImplementedError

    def load_batch(self, batch_path: str):
        """The batch in the form the system takes it, already in memory (not timed)."""
        return pq.read_table(batch_path)

    def upsert(self, work_dir: str, batch) -> dict:
        """The timed operation; returns small JSON-able facts (snapshot id, counts)."""
        raise NotImplementedError

    def read_back(self, work_dir: str):
        """The table's final rows as the system's own reader returns them: a pa.Table, or an
        iterable of tables that make it up (for tables too large for memory)."""
        raise NotImplementedError

    second_reader = None      # name of another implementation's reader that second_opinion() uses

    def second_opinion(self, work_dir: str):
        """The table as another implementation's reader returns it (only if second_reader is set).
        A disagreement is reported as a cross-read note; the figure's validity rests on read_back."""
        raise NotImplementedError

    def profile(self):
        """After stop(): where the upsert's time went (e.g. Spark stages), or None."""
        return None

    def check(self, info: dict, case: dict) -> str | None:
        """A peer-specific problem with the upsert's facts, beyond the checksum; None if fine."""
        return None
