"""Randomized runs in which other writers change a cross-partition table between our upserts (issue 14).

A run draws its steps from a seed: our upsert (new keys, updates in place, moves to another dt), Java
Paimon writing as a correct cross-partition writer would (other_writers.py: an update where the key
lives, a move as -D there plus +I elsewhere, a new key in any bucket, a delete, a delete of a key that
is not there), our delete, our compaction (full or of some buckets), a rollback to an earlier snapshot
and snapshot expiration. An independent model (model.UpsertModel's rows, and its state per snapshot id
for rollbacks) follows each step. After every step the table equals the model in our reader, at the
latest snapshot and at each snapshot the step committed, and every key is live in exactly one
(partition, bucket); every few steps pypaimon reads it too, and Java Paimon at the end.

The key index (docs/architecture.md) answers where keys live for driver-local upserts; a stale answer
shows here as a wrong count, a key live twice or a wrong row. So our upserts draw first from the keys
the step before changed, then from those other steps changed; half the Java writes and deletes are
followed at once by our upsert; and a rollback is often followed by Java commits that reuse the
rolled-back snapshot ids up to the one our latest upsert left, then by our upsert.
A failure names the seed and the steps before it; the seed replays the run.
"""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import delete, upsert
from dbt_paimon.store.table import FileStoreTable
from tests.java_paimon.javapaimon import Read
from tests.oracle import rows

from .helpers import frame, pypaimon_rows
from .model import UpsertModel
from .other_writers import JavaWriter, buckets_by_partition, places

KEYS = 40  # ids 0..39: small enough that steps keep hitting the same keys
PARTITIONS = ["d1", "d2", "d3", "d4"]
PYPAIMON_EVERY = 4  # steps between pypaimon reads (each costs ~0.1-0.3 s)

# (merge rule, execution, steps, seeds); the distributed runs are Spark jobs per step, so shorter.
# The key index serves driver-local runs without sequence_by; "mixed" draws each upsert's and
# compaction's execution, so the index also catches up on files our Spark job added.
# The suite runs each case's first seed (every step kind, every executor, both merge rules);
# DBT_PAIMON_SOAK=1 runs them all, as a soak before a release (the 5 more took 90 s on 2 cores).
CASES = [
    ("dedup", "local", 26, (1, 2, 3, 4, 5)),
    ("dedup", "distributed", 12, (6, 7)),
    ("dedup", "mixed", 20, (11,)),
    ("sequence_by", "local", 16, (8,)),
    ("sequence_by", "distributed", 10, (10,)),
]
SOAK = os.environ.get("DBT_PAIMON_SOAK") == "1"


@pytest.fixture(scope="module")
def java_writer(java, tmp_path_factory):
    writer = JavaWriter(java.classpath, str(tmp_path_factory.mktemp("java-writer")))
    yield writer
    writer.close()


def schedule(rnd: random.Random, steps: int) -> list[str]:
    """The steps of a run: an upsert first (it creates the table), then each other kind a fixed number
    of times (so every run has them all) among upserts, in random order. Half the Java writes and
    deletes are followed at once by our upsert ("java+upsert"), before anything rewrites the buckets
    they changed."""
    others = {"java": max(2, steps // 4), "delete": max(1, steps // 8), "compact": max(1, steps // 8),
              "rollback": max(1, steps // 6), "expire": max(1, steps // 10)}
    ops = [op + ("+upsert" if op in ("java", "delete") and i % 2 else "")
           for op, n in others.items() for i in range(n)]
    ops += ["upsert"] * (steps - 1 - len(ops))
    rnd.shuffle(ops)
    return ["upsert"] + ops


class Run:
    def __init__(self, spark, java_writer: JavaWriter, path: str, seed: int, sequence_by: str | None,
                 execution: str):
        self.spark, self.java_writer, self.path = spark, java_writer, path
        self.seed, self.sequence_by = seed, sequence_by
        self.executions = ["local", "distributed"] if execution == "mixed" else [execution]
        self.rnd = rnd = random.Random(seed)
        self.parts = rnd.sample(PARTITIONS, rnd.randint(2, 4)) + ([None] if rnd.random() < 0.4 else [])
        # a small target: buckets fill and new ones open within a few steps; sometimes a low compaction
        # trigger, so our post-commit compaction and Java's own rewrite buckets often
        self.options = {"bucket": "-1", "dynamic-bucket.target-row-num": str(rnd.choice([4, 5, 6, 8]))}
        trigger = rnd.choice([None, None, "3"])  # (a rewrite also hides a stale index: not too often)
        if trigger:
            self.options["num-sorted-run.compaction-trigger"] = trigger
        self.model = UpsertModel(["id"], ["dt"], sequence_by=sequence_by)
        self.history: dict[int, dict] = {}  # snapshot id -> the model's rows at that snapshot
        self.touched: set[int] = set()  # keys the other steps changed since our last upsert of them
        self.changed: set[int] = set()  # those the running step changed
        self.fresh: set[int] = set()  # those the step before changed
        self.ours: int | None = None  # the snapshot our latest upsert left (what an index reflects after it)
        self.log: list[str] = []  # what each step did, for failure messages
        self.done: list[str] = []  # the kinds of steps run
        self.pypaimon_reads = Counter()

    # ---- drawing keys and rows ------------------------------------------------------------------
    def draw_keys(self, n: int) -> list[int]:
        """n distinct keys: first those the latest step changed (before anything else rewrites their
        buckets), then those other steps changed since our last upsert, then live keys, then new ones."""
        rnd, chosen = self.rnd, []
        live = sorted(k for (k,) in self.model.rows)  # the model keys rows by (id,)
        new = [k for k in range(KEYS) if (k,) not in self.model.rows]
        while len(chosen) < min(n, KEYS):
            r = rnd.random()
            fresh, touched = sorted(self.fresh - set(chosen)), sorted(self.touched - set(chosen))
            pool = (fresh if r < 0.4 and fresh else touched if r < 0.55 and touched else live if r < 0.8 and live
                    else new or live)
            k = rnd.choice(pool)
            if k not in chosen:
                chosen.append(k)
        return chosen

    def row(self, id_: int, dt) -> dict:
        rnd = self.rnd
        old = self.model.rows.get((id_,))
        if self.sequence_by and old is not None:
            # near the live value, so older, equal and newer versions all occur (and rarely null: oldest)
            seq = None if rnd.random() < 0.05 else (old["seq"] or 0) + rnd.randint(-3, 3)
        else:
            seq = rnd.randrange(50)
        return {"id": id_, "dt": dt, "v": rnd.choice([None, rnd.randrange(-50, 50)]),
                "s": rnd.choice([None, "", "a", "ab", "b", "xyz"]), "amount": rnd.choice([None, rnd.randrange(100)]),
                "flag": rnd.choice([None, True, False]), "seq": seq}

    def dt_for(self, id_: int):
        old = self.model.rows.get((id_,))
        return old["dt"] if old is not None and self.rnd.random() < 0.5 else self.rnd.choice(self.parts)

    def some_bucket(self, buckets: dict, dt) -> int:
        """Any bucket a writer may put a new key in: one the partition has (full or not), the next one,
        or one past a gap."""
        have = sorted(buckets.setdefault(dt, set()))
        top = max(have, default=-1)
        bucket = self.rnd.choice(have + [top + 1, top + 1 + self.rnd.randint(1, 3)])
        buckets[dt].add(bucket)
        return bucket

    # ---- steps ----------------------------------------------------------------------------------
    def upsert_step(self) -> str:
        rnd = self.rnd
        ids = self.draw_keys(rnd.randint(1, 8))
        batch = [self.row(k, self.dt_for(k)) for k in ids]
        if self.sequence_by and rnd.random() < 0.3:  # a key twice in the batch: the higher sequence wins
            twin = {**self.row(batch[0]["id"], rnd.choice(self.parts))}
            twin["seq"] = (batch[0]["seq"] or 0) + rnd.choice([-3, 3])  # never a tie (that is an error)
            batch.append(twin)
        expected = self.model.apply(batch)
        execution = rnd.choice(self.executions)
        result = upsert(frame(self.spark, batch), self.path, primary_keys="id", partition_keys="dt",
                        options=self.options, sequence_by=self.sequence_by, settings=RunSettings(execution=execution))
        got = {k: getattr(result, k) for k in expected}
        assert got == expected, self.failure(f"upsert counts {got} != model {expected}")
        self.touched -= set(ids)
        self.ours = FileStoreTable.open(self.path).snapshots.latest_id()
        return f"upsert ({execution}) {[(r['id'], r['dt'], r['seq']) for r in batch]} -> {got}"

    def java_step(self, one_snapshot: bool = False) -> str:
        rnd, where, buckets = self.rnd, places(self.path), buckets_by_partition(self.path)
        rows, did = [], []
        for k in self.draw_keys(rnd.randint(1, 6)):
            if (k,) in self.model.rows:
                [(dt, bucket, old)] = where[k]
                op = rnd.choice(["update", "move", "delete"])
                if op == "delete":
                    rows.append({**old, "_kind": "-D", "_bucket": bucket})
                    del self.model.rows[(k,)]
                elif op == "update":  # where the key lives
                    new = self.row(k, dt)
                    rows.append({**new, "_kind": rnd.choice(["+I", "+U"]), "_bucket": bucket})
                    self.model.rows[(k,)] = new
                else:  # retract it where it lives, add it in another partition
                    new = self.row(k, rnd.choice([p for p in self.parts if p != dt]))
                    rows += [{**old, "_kind": "-D", "_bucket": bucket},
                             {**new, "_kind": "+I", "_bucket": self.some_bucket(buckets, new["dt"])}]
                    self.model.rows[(k,)] = new
            else:
                new = self.row(k, rnd.choice(self.parts))
                op = "insert" if rnd.random() < 0.8 else "stray -D"  # a delete of a key that is not there
                rows.append({**new, "_kind": "+I" if op == "insert" else "-D",
                             "_bucket": self.some_bucket(buckets, new["dt"])})
                if op == "insert":
                    self.model.rows[(k,)] = new
            did.append((k, op))
        self.java_writer.write(self.path, rows, {"write-only": "true"} if one_snapshot else None)
        self.touch(k for k, _ in did)
        return f"java {did}: {[(r['id'], r['dt'], r['_bucket'], r['_kind']) for r in rows]}"

    def predicate(self):
        """A Spark SQL predicate and the same in Python (SQL's null: a comparison with null is not true)."""
        rnd = self.rnd
        kind = rnd.randrange(6)
        if kind == 0:
            m = rnd.randint(3, 7)
            r = rnd.randrange(m)
            return f"id % {m} = {r}", lambda row: row["id"] % m == r
        if kind == 1:
            p, t = rnd.choice([p for p in self.parts if p is not None]), rnd.randrange(-50, 50)
            return f"dt = '{p}' AND v > {t}", lambda row: row["dt"] == p and row["v"] is not None and row["v"] > t
        if kind == 2:
            ids = self.draw_keys(rnd.randint(1, 5))
            return f"id IN ({', '.join(map(str, ids))})", lambda row: row["id"] in ids
        if kind == 3:
            return "v IS NULL OR s = 'ab'", lambda row: row["v"] is None or row["s"] == "ab"
        if kind == 4:
            return "flag AND amount < 50", lambda row: row["flag"] is True and row["amount"] is not None \
                and row["amount"] < 50
        lo = rnd.randrange(KEYS)
        hi = lo + rnd.randint(0, 8)
        return f"id BETWEEN {lo} AND {hi}", lambda row: lo <= row["id"] <= hi

    def delete_step(self) -> str:
        sql, matches = self.predicate()
        doomed = sorted(k for (k,), r in self.model.rows.items() if matches(r))
        result = delete(self.spark, self.path, sql)
        assert result.deleted == len(doomed), self.failure(f"delete {sql!r}: {result.deleted} != model {doomed}")
        for k in doomed:
            del self.model.rows[(k,)]
        self.touch(doomed)
        return f"delete {sql!r} -> {doomed}"

    def compact_step(self) -> str:
        # in a fixed order, so the seed alone decides which buckets
        splits = sorted(FileStoreTable.open(self.path).plan().splits,
                        key=lambda s: (s.partition_values[0] is None, s.partition_values[0] or "", s.bucket))
        if not splits or self.rnd.random() < 0.4:
            chosen = None
        else:
            chosen = self.rnd.sample(splits, self.rnd.randint(1, len(splits)))
            # keys of rewritten buckets: an index must keep them where they are
            self.touch(k for k, [(p, b, _)] in places(self.path).items()
                       if any((s.partition_values[0], s.bucket) == (p, b) for s in chosen))
        execution = self.rnd.choice(self.executions)
        sid = compact(self.spark, self.path, None if chosen is None else [(s.partition, s.bucket) for s in chosen],
                      settings=RunSettings(execution=execution))
        what = "all" if chosen is None else [(s.partition_values[0], s.bucket) for s in chosen]
        return f"compact ({execution}) {what} -> snapshot {sid}"

    def rollback_step(self) -> str:
        """Roll back; then, mostly, Java commits until the ids rolled back exist again holding other data,
        often exactly up to the id our latest upsert left, and we upsert at once: whatever trusts a
        snapshot id (an index's "reflected snapshot") answers from data that is gone."""
        snapshots = FileStoreTable.open(self.path).snapshots
        before = ""
        if snapshots.earliest_id() == snapshots.latest_id():  # nothing to go back to: commit, then undo it
            before = self.upsert_step() + "; "
            self.settle()
        earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
        r = self.rnd.random()
        reuse_ours = r < 0.55 and self.ours is not None and earliest < min(self.ours, latest)
        target = self.rnd.randrange(earliest, min(self.ours, latest) if reuse_ours else latest)
        FileStoreTable.open(self.path).rollback_to(target)
        old = self.model.rows
        self.model.rows = {k: dict(row) for k, row in self.history[target].items()}
        # later commits reuse the ids after the target
        self.history = {s: state for s, state in self.history.items() if s <= target}
        changed = {key[0] for key in old.keys() | self.model.rows.keys() if old.get(key) != self.model.rows.get(key)}
        self.touch(changed)
        after = ""
        if r < 0.75:
            goal = self.ours if reuse_ours else latest
            while snapshots.latest_id() < goal:
                # the last one write-only (no compaction, so one snapshot): the goal's id exactly
                after += "; " + self.java_step(one_snapshot=snapshots.latest_id() == goal - 1)
                self.settle()
            if reuse_ours:
                self.fresh = set(self.changed)
                after += "; " + self.upsert_step()
                self.settle()
        return f"{before}rollback {latest} -> {target}, changed {sorted(changed)}{after}"

    def expire_step(self) -> str:
        retain_max = self.rnd.randint(1, 6)
        retain_min = self.rnd.randint(1, retain_max)
        table = FileStoreTable.open(self.path)
        expired = table.expire_snapshots(retain_max=retain_max, retain_min=retain_min).expired
        earliest = table.snapshots.earliest_id()
        self.history = {s: state for s, state in self.history.items() if s >= earliest}
        # what expiration deleted no retained snapshot needed: each still reads as it was
        for sid, state in self.history.items():
            expected = sorted(state.values(), key=lambda r: r["id"])
            assert rows(table.to_arrow(snapshot_id=sid), "id") == expected, self.failure(f"snapshot {sid} after expire")
        return f"expire max={retain_max} min={retain_min} -> expired {list(expired)}"

    # ---- checks ---------------------------------------------------------------------------------
    def failure(self, what: str) -> str:
        recent = "\n  ".join(self.log[-8:])
        return f"seed {self.seed}, step {len(self.log)}: {what}\nsteps before (latest last):\n  {recent}"

    def settle(self) -> None:
        """Record the model as the state of each snapshot committed since the last call (those above the
        highest recorded: a rollback cut the history at its target), and check each reads so."""
        table = FileStoreTable.open(self.path)
        expected = self.model.sorted_rows()
        for sid in range(max(self.history, default=0) + 1, (table.snapshots.latest_id() or 0) + 1):
            self.history[sid] = {k: dict(r) for k, r in self.model.rows.items()}
            assert rows(table.to_arrow(snapshot_id=sid), "id") == expected, self.failure(f"snapshot {sid}")

    def check(self, with_pypaimon: bool) -> None:
        expected = self.model.sorted_rows()
        assert rows(FileStoreTable.open(self.path).to_arrow(), "id") == expected, self.failure("our read")
        where = places(self.path)
        twice = {k: [(p, b) for p, b, _ in v] for k, v in where.items() if len(v) > 1}
        assert not twice, self.failure(f"keys live in several (partition, bucket)s: {twice}")
        astray = {k: (p, row["dt"]) for k, v in where.items() for p, _, row in v if row["dt"] != p}
        assert not astray, self.failure(f"rows in another partition's directory: {astray}")
        if with_pypaimon:
            assert pypaimon_rows(self.path) == expected, self.failure("pypaimon's read")
            self.pypaimon_reads["equal"] += 1

    def touch(self, keys) -> None:
        keys = set(keys)
        self.touched |= keys
        self.changed |= keys

    def run(self, steps: int) -> None:
        for i, ops in enumerate(schedule(self.rnd, steps)):
            for op in ops.split("+"):
                self.fresh, self.changed = self.changed, set()
                self.log.append(getattr(self, f"{op}_step")())
                self.done.append(op)
                self.settle()
                self.check(with_pypaimon=i % PYPAIMON_EVERY == PYPAIMON_EVERY - 1 or i == steps - 1)


@pytest.mark.parametrize("rule,execution,steps,seed", [
    pytest.param(rule, execution, steps, seed, id=f"{rule}-{execution}-seed{seed}")
    for rule, execution, steps, seeds in CASES for seed in (seeds if SOAK else seeds[:1])])
def test_other_writers_between_upserts_keep_the_table_equal_to_the_model(spark, java, java_writer, warehouse,
                                                                        rule, execution, steps, seed):
    path = f"{warehouse}/db.db/t"
    run = Run(spark, java_writer, path, seed, "seq" if rule == "sequence_by" else None, execution)
    run.run(steps)
    assert set(run.done) == {"upsert", "java", "delete", "compact", "rollback", "expire"}
    assert run.pypaimon_reads["equal"] >= 1
    # Java Paimon reads the latest snapshot and each retained one as the model says (one JVM)
    retained = sorted(run.history)
    latest, *snapshots = java.read(path, *[Read(path, {"scan.snapshot-id": str(sid)}) for sid in retained])
    assert latest.schema.types == FileStoreTable.open(path).to_arrow().schema.types
    assert rows(latest, "id") == run.model.sorted_rows(), run.failure("Java Paimon's read at the end")
    for sid, table in zip(retained, snapshots):
        expected = sorted(run.history[sid].values(), key=lambda r: r["id"])
        assert rows(table, "id") == expected, run.failure(f"Java Paimon's read of snapshot {sid} at the end")
