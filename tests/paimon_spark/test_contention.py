"""Paimon's own Spark writer as one of three writers on one cross-partition table (issue 41).

Two writers of ours (upserts in the driver and as Spark jobs, deletes, compactions) and Paimon's
connector (`INSERT INTO` with keys moving partition, `DELETE FROM`) for 11 rounds, each round's three
jobs started together. The connector is the current release's (2.0): the writer a team shares a
table with today (0.9's has the same limits; the other tests here hold our tables against both).
Every run finishes, and every snapshot is what the serial order of the commits gives: replayed on a
model in snapshot order and compared with Paimon's Spark SQL read of it (`VERSION AS OF`).

Paimon's writer keeps keys of its own (100 and up). Paimon's commit checks file deletions only, and its
cross-partition writer decides where a key lives from the keys it bootstrapped when the statement
started: a key another writer moves meanwhile ends up live twice. Paimon documents its dynamic-bucket
writers as single-writer ("can lead to duplicate data"), so no writer, ours or Paimon's, can share keys
with it; ours detect its commits and share keys with each other. Its inline compaction is off
(`spark.paimon.write-only`), as Paimon advises beside a separate compaction job: our compactions are
that job, and a compaction of Paimon's that lost a race to ours would fail its statement.

One more limit of Paimon's writer is met here and retried, as its user would: each task of its
cross-partition writer reads the keys of its share of the buckets at the latest snapshot when the
task starts (IndexBootstrap), so a key of ours that moves between two tasks' reads is read twice and
the statement fails ("Exception in bulkLoad ... duplicates") before it commits anything (the count of
Paimon's snapshots below holds it to that). Seen in about one run in 15.
"""

from __future__ import annotations

import random
import threading

from dbt_paimon.engine import upsert
from dbt_paimon.store.table import FileStoreTable
from tests.engine.contention import Tally
from tests.engine.helpers import COLUMNS, frame, keys_live_twice, live_places
from tests.oracle import rows

from .side_env import CURRENT_RELEASE_ONLY, sql_values, spark_sql_rows, table_name

ROW = {"id": 0, "dt": "a", "v": 0, "s": "x", "amount": 1, "flag": True, "seq": 0}
ROUNDS, KEYS = 11, 40
PAIMON_KEYS = range(100, 100 + KEYS)
OURS = ["local", "local", "distributed", "delete", "compact"]
# Paimon's cross-partition writer read a key twice at its start (the module's docstring): run it again
BOOTSTRAP_RACE, PAIMON_ATTEMPTS = "Exception in bulkLoad", 3


def _ours(rng: random.Random) -> list[tuple]:
    jobs = []
    for r in range(ROUNDS):
        kind = rng.choice(OURS)
        keys = rng.sample(range(KEYS), rng.randint(1, 6))
        jobs.append((kind, keys if kind in ("delete", "compact") else
                     [{**ROW, "id": k, "dt": rng.choice("abc"), "v": 10 * r + i} for i, k in enumerate(keys)]))
    return jobs


@CURRENT_RELEASE_ONLY
def test_ours_and_paimons_writer_for_eleven_rounds_all_finish_in_a_serial_order(spark, paimon_spark, warehouse):
    path = f"{warehouse}/db.db/contended"
    start = [{**ROW, "id": k, "dt": "abc"[k % 3]} for k in [*range(KEYS), *PAIMON_KEYS]]
    upsert(frame(spark, start), path, primary_keys="id", partition_keys="dt")
    wh, name = table_name(path)
    rng = random.Random(41)
    plans = [_ours(rng), _ours(rng)]
    barrier, tally = threading.Barrier(3), Tally()
    paimons: list[tuple] = []  # Paimon's statements in order: (kind, rows or keys)
    bootstrap_races: list[int] = []  # the rounds whose statement Paimon's bootstrap race failed, run again

    def paimon() -> None:
        prng, alive = random.Random(7), set(PAIMON_KEYS)
        paimon_spark.sql(wh, "SET `spark.paimon.write-only` = true")
        try:
            for r in range(ROUNDS):
                barrier.wait()
                if r % 3 == 2:  # a DELETE of keys that are there: one commit
                    keys = prng.sample(sorted(alive), 3)
                    text, job = f"DELETE FROM {name} WHERE id IN ({', '.join(map(str, keys))})", ("delete", keys)
                    alive -= set(keys)
                else:
                    batch = [{**ROW, "id": k, "dt": prng.choice("abc"), "v": 5000 + 10 * r + i, "s": "paimon"}
                             for i, k in enumerate(prng.sample(list(PAIMON_KEYS), 5))]
                    text, job = f"INSERT INTO {name} VALUES {sql_values(batch, COLUMNS)}", ("upsert", batch)
                    alive |= {row["id"] for row in batch}
                for attempt in range(1, PAIMON_ATTEMPTS + 1):
                    try:
                        paimon_spark.sql(wh, text)
                    except Exception as e:  # noqa: BLE001 - a failed run is what the test counts
                        if BOOTSTRAP_RACE in str(e) and attempt < PAIMON_ATTEMPTS:
                            bootstrap_races.append(r)
                            continue
                        tally.fail(f"Paimon round {r}: {e}")
                    else:
                        paimons.append(job)
                    break
        finally:
            paimon_spark.sql(wh, "RESET `spark.paimon.write-only`")

    def guarded(job, *args) -> None:
        try:
            job(*args)
        except BaseException as e:  # noqa: BLE001 - a writer that stops frees the others, and fails the test
            tally.fail(f"{job.__name__}{args[2:3]}: {type(e).__name__}: {e}")
            barrier.abort()

    threads = [threading.Thread(target=guarded, args=(tally.ours, spark, path, f"ours {w}", plans[w], barrier))
               for w in (0, 1)] + [threading.Thread(target=guarded, args=(paimon,))]
    try:
        committed = tally.run(threads, f"ours x 2 and Paimon's x 1, {ROUNDS} rounds (ours)")
    except AssertionError as e:  # a rare failure (once in CI): name the snapshots that hold a key twice
        raise AssertionError(f"{e}; keys live twice (snapshot: kind, user, keys): {keys_live_twice(path)}") from None
    print(f"Paimon's statements run again after its bootstrap read a key twice, in rounds: {bootstrap_races}")

    # the snapshots ours did not commit are Paimon's, one per statement, in its order
    latest = FileStoreTable.open(path).latest_snapshot().id
    theirs = [sid for sid in range(2, latest + 1) if sid not in committed]
    assert len(theirs) == len(paimons), (theirs, [kind for kind, _ in paimons])
    committed.update(zip(theirs, paimons))
    model = {row["id"]: row for row in start}
    for sid in range(2, latest + 1):
        kind, what = committed[sid]
        if kind == "delete":
            for k in what:
                model.pop(k, None)
        elif kind != "compact":
            model.update({row["id"]: row for row in what})
        expected = [model[k] for k in sorted(model)]
        assert spark_sql_rows(paimon_spark, path, ["id"], sid) == expected, f"snapshot {sid} ({kind})"
    assert rows(FileStoreTable.open(path).to_arrow(), "id") == expected
    assert all(n == 1 for n in live_places(path).values())
