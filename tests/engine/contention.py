"""What the contention tests share: one writer of ours running its planned jobs on one table, each
round started together with the other writers', and the tally of what the conflicts cost."""

from __future__ import annotations

import threading

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert

from .helpers import frame


class Tally:
    """Every job's commit (snapshot id -> (kind, rows or keys)), conflicts, commits without a re-run
    and failed runs, of writers in several threads."""

    def __init__(self, spark=None):
        self.spark = spark
        self.lock = threading.Lock()
        self.committed: dict[int, tuple] = {}
        self.conflicts = self.recommits = 0
        self.failed: list[str] = []

    def fail(self, what: str) -> None:
        with self.lock:
            self.failed.append(what)

    def ours(self, spark, path: str, name: str, jobs: list[tuple], barrier: threading.Barrier) -> None:
        """Writer `name`'s jobs, one a round: ("local" | "distributed", rows) upserts,
        ("delete", keys), ("compact", _)."""
        for r, (kind, what) in enumerate(jobs):
            barrier.wait()
            try:
                if kind == "compact":
                    sid = compact(spark, path, settings=RunSettings(execution="local"))
                    extra, attempts, recommits = [], 1, 0
                elif kind == "delete":
                    done = delete(spark, path, f"id in ({', '.join(map(str, what))})")
                    sid, extra, attempts, recommits = done.snapshot_id, done.extra_snapshots or [], done.attempts, 0
                else:
                    done = upsert(frame(spark, what), path, primary_keys="id", partition_keys="dt",
                                  settings=RunSettings(execution=kind))
                    sid, extra, attempts, recommits = (done.snapshot_id, done.extra_snapshots, done.attempts,
                                                       done.recommits)
            except Exception as e:  # noqa: BLE001 - a failed run is what the tests count
                self.fail(f"{name} round {r} {kind}: {e}")
                continue
            with self.lock:
                self.conflicts += attempts - 1
                self.recommits += recommits
                if sid is not None:
                    self.committed[sid] = (kind, what)
                for s in extra:
                    self.committed[s] = ("compact", None)

    def calls(self, name: str, rounds: list, barrier: threading.Barrier) -> None:
        """Writer `name`'s calls, one a round (a Spark SQL statement's text, or a function of none:
        one of our writes, whose result's attempts and recommits are tallied)."""
        for r, call in enumerate(rounds):
            barrier.wait()
            try:
                done = self.spark.sql(call) if isinstance(call, str) else call()
            except Exception as e:  # noqa: BLE001 - a failed run is what the tests count
                self.fail(f"{name} round {r}: {e}")
                continue
            with self.lock:
                self.conflicts += getattr(done, "attempts", 1) - 1
                self.recommits += getattr(done, "recommits", 0)

    def run(self, threads: list[threading.Thread], title: str) -> dict[int, tuple]:
        """Run the writers to the end; no run may fail. The commits by snapshot id."""
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(f"\n{title}: {self.summary()}")
        # not a test module: pytest does not rewrite this assert, so it names the failed runs itself
        assert self.failed == [], self.failed
        return self.committed

    def summary(self) -> str:
        return (f"{self.conflicts} conflicts, {self.recommits} committed without a re-run, "
                f"{self.conflicts - self.recommits} re-runs, {len(self.failed)} failed")
