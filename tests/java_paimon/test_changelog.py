"""changelog-producer 'input', 'lookup' and 'full-compaction' (issue 40): our commits carry the changelog Paimon's
writers write, and Paimon's own streaming read of it (Java, scan.mode from-snapshot) gives exactly the
model's change stream. input: every row a commit wrote, as written (+I for an upsert, -D for a delete;
a key that moves partition on a cross-partition table: a -D of the new row in the old partition beside
its +I), in the APPEND snapshot. lookup: each key's change, derived when the write's level-0 files are
compacted up (+I, -U/+U of an update, -D of the stored row), in the COMPACT snapshot that follows.
full-compaction (with full-compaction.delta-commits 1): the same changes, derived by the full
compaction after each write against the previous one's rows.

One module fixture writes the tables on local disk (fixed bucket, dynamic bucket, cross-partition; both
executors), one batch of Java requests reads them all; cross-partition tables on the S3 server too; the
expiration of a snapshot takes its changelog files with it.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from dbt_paimon.engine import RunSettings
from dbt_paimon.engine import delete, upsert
from dbt_paimon.engine.writes.compaction import auto_compact
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import CHANGELOG_FILE_PREFIX
from tests.oracle import pypaimon_read, rows

from .javapaimon import Changes, Read

SPARK = "id bigint, dt string, v string"
KINDS = {  # name -> (primary keys, table options)
    "fixed": (["dt", "id"], {"bucket": "2"}),
    "dynamic": (["dt", "id"], {"bucket": "-1"}),
    "cross": (["id"], {"bucket": "-1"}),
}
B1 = [(1, "a", "x"), (2, "a", "x"), (3, "b", "x"), (4, "b", "x")]
B2 = [(1, "a", "y"), (2, "b", "y"), (5, "b", "y")]  # 1 updated; 2 moves to b (a new key where dt is in the key)
B3 = [(4, "a", "z")]  # after `delete id = 3`: 4 moves to a
STEPS = (B1, B2, "delete 3", B3)


def _expected(kind: str, producer: str) -> tuple[list[list[tuple]], list[tuple]]:
    """The change stream per commit (kind, id, dt, v), sorted, and the rows after all of them.
    input: the rows each commit wrote (a moved key: the new row's -D in the old partition);
    lookup: each key's change in its bucket (-U/+U of an update, a -D of the stored row)."""
    cross = kind == "cross"
    live: dict = {}
    stream = []
    for step in STEPS:
        changes = []
        if step == "delete 3":
            for k, row in list(live.items()):
                if row[0] == 3:
                    changes.append(("-D", *row))
                    del live[k]
        else:
            for row in step:
                key = row[0] if cross else (row[1], row[0])
                old = live.get(key)
                if old is not None and old[1] != row[1]:  # moves partition (cross-partition)
                    changes.append(("-D", *old) if producer != "input" else ("-D", row[0], old[1], row[2]))
                    old = None
                if producer != "input" and old is not None:
                    changes += [("-U", *old), ("+U", *row)]
                else:
                    changes.append(("+I", *row))
                live[key] = row
        stream.append(sorted(changes))
    return stream, sorted(live.values())


def _write(spark, path: str, kind: str, producer: str, execution: str, storage: dict | None = None) -> list[list[int]]:
    """The four commits; the snapshots each made (a lookup table's: APPEND, then COMPACT)."""
    keys, options = KINDS[kind]
    options = {**options, "changelog-producer": producer}
    if producer == "full-compaction":  # a full compaction after every write, as Paimon's Spark writer then does
        options["full-compaction.delta-commits"] = "1"
    settings = RunSettings(execution=execution, storage_options=storage)
    made = []
    for step in STEPS:
        if step == "delete 3":
            result = delete(spark, path, "id = 3", settings=RunSettings(storage_options=storage))
        else:
            result = upsert(spark.createDataFrame(step, SPARK), path, primary_keys=keys, partition_keys="dt",
                            options=options, settings=settings)
        made.append([result.snapshot_id, *(result.extra_snapshots or [])])
    return made


CASES = [(kind, "input", execution) for kind in KINDS for execution in ("local", "distributed")] + [
    ("fixed", "lookup", "local"), ("dynamic", "lookup", "distributed"), ("cross", "lookup", "local"),
    ("cross", "lookup", "distributed"), ("fixed", "full-compaction", "distributed"),
    ("cross", "full-compaction", "local")]


@pytest.fixture(scope="module")
def changelogs(spark, java, tmp_path_factory):
    db = tmp_path_factory.mktemp("changelog") / "wh" / "db.db"
    db.mkdir(parents=True)
    paths = {case: str(db / "_".join(case)) for case in CASES}
    made = {case: _write(spark, paths[case], *case) for case in CASES}
    results = java.run([r for path in paths.values() for r in (Changes(path), Read(path))])
    return {case: (paths[case], made[case], results[2 * i], results[2 * i + 1]) for i, case in enumerate(paths)}


def _by_snapshot(changes: list[dict]) -> dict[int, list[tuple]]:
    out: dict[int, list[tuple]] = {}
    for c in changes:
        out.setdefault(c["_snapshot"], []).append((c["_kind"], c["id"], c["dt"], c["v"]))
    return {sid: sorted(rows) for sid, rows in out.items()}


@pytest.mark.parametrize("case", CASES, ids="-".join)
def test_paimons_streaming_read_of_our_changelog_is_the_model_change_stream(changelogs, case):
    _check(case[0], case[1], *changelogs[case])


def test_on_the_object_store_too(spark, java, s3_server, s3_warehouse):
    for producer in ("input", "lookup"):
        path = f"{s3_warehouse}/db.db/changelog_cross_{producer}"
        made = _write(spark, path, "cross", producer, "distributed", s3_server.options)
        _check("cross", producer, path, made,
               *java.run([Changes(path, catalog=s3_server.options), Read(path, catalog=s3_server.options)]))


def _check(kind: str, producer: str, path: str, made: list[list[int]], java_changes, java_read) -> None:
    stream, latest = _expected(kind, producer)
    assert not isinstance(java_changes, Exception), java_changes
    table = FileStoreTable.open(path)
    # each commit's changes in one of its snapshots: the APPEND one (input), the COMPACT one that
    # follows it (lookup); no other snapshot has any
    carrying = []
    for snapshots, changes in zip(made, stream):
        with_changelog = [table.snapshots.snapshot(s) for s in snapshots
                          if table.snapshots.snapshot(s).changelog_manifest_list]
        assert [s.commit_kind for s in with_changelog] == ["APPEND" if producer == "input" else "COMPACT"], snapshots
        assert with_changelog[0].changelog_record_count == len(changes)
        carrying.append(with_changelog[0].id)
    assert _by_snapshot(java_changes) == dict(zip(carrying, stream))
    want = [{"id": i, "dt": d, "v": v} for i, d, v in latest]
    for reader, got in (("java", java_read), ("ours", table.to_arrow()), ("pypaimon", pypaimon_read(path))):
        assert rows(got, ["id", "dt"]) == want, reader


def test_expired_snapshots_take_their_changelog_with_them(changelogs, java):
    path, made, _, _ = changelogs[("cross", "input", "local")]
    table = FileStoreTable.open(path)
    before = _changelog_files(path)
    assert len(before) >= len(made)  # a file per bucket written by each commit
    table.expire_snapshots(retain_max=1, retain_min=1)
    latest = table.latest_snapshot()
    # what is left: the latest snapshot's changelog files (its changelog manifest), when it has them
    kept = {e.file.file_name for e in _changelog_entries(table, latest)}
    assert _changelog_files(path) == kept
    changes, = java.run([Changes(path, start=latest.id)])
    stream, _ = _expected("cross", "input")
    assert _by_snapshot(changes) == ({latest.id: stream[-1]} if latest.id == made[-1][0] else {})


def test_an_overwrite_of_a_lookup_table_adds_nothing_to_its_changelog(spark, warehouse):
    """Paimon compacts what an OVERWRITE wrote within its commit and drops that changelog: the
    compaction after our OVERWRITE derives none either (else its rows would show as new, and the
    rows it replaced would never show as deleted)."""
    path = f"{warehouse}/db.db/lookup_overwrite"
    upsert(spark.createDataFrame(B1, SPARK), path, primary_keys=["dt", "id"], partition_keys="dt",
           options={"bucket": "2", "changelog-producer": "lookup"}, settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    w = table.new_write()
    w.write(pa.table({"id": [7], "dt": ["a"], "v": ["o"]}))
    overwritten = table.new_commit().overwrite(w.prepare_commit(), None).snapshot
    compacted = auto_compact(spark, path, execution="local")
    assert compacted == overwritten.id + 1
    assert table.snapshots.snapshot(compacted).changelog_manifest_list is None
    assert {f.level for s in FileStoreTable.open(path).plan().splits for f in s.files} != {0}  # it did compact


def _changelog_files(path: str) -> set[str]:
    return {name for _, _, names in os.walk(path) for name in names if name.startswith(CHANGELOG_FILE_PREFIX)}


def _changelog_entries(table: FileStoreTable, snapshot) -> list:
    from dbt_paimon.store.maintenance.file_deletion import FileDeletion

    return FileDeletion(table.io, table.path, table.schema).changelog_files(snapshot)


def test_a_java_consumer_keeps_the_snapshots_it_has_not_read(spark, java, warehouse):
    """`consumer-id`: Paimon's streaming reader records the snapshot it reads next
    (consumer/consumer-<id>); our expiration keeps it and every later one, so the consumer continues
    where it stopped."""
    path = f"{warehouse}/db.db/consumed"
    options = {"bucket": "1", "changelog-producer": "input"}
    for v in ("a", "b"):
        upsert(spark.createDataFrame([(1, "d", v)], SPARK), path, primary_keys="id", options=options,
               settings=RunSettings(execution="local"))
    first, = java.run([Changes(path, consumer="c1")])
    assert [c["v"] for c in first] == ["a", "b"]
    for v in ("c", "d", "e"):
        upsert(spark.createDataFrame([(1, "d", v)], SPARK), path, primary_keys="id", options=options,
               settings=RunSettings(execution="local"))
    table = FileStoreTable.open(path)
    table.expire_snapshots(retain_max=1, retain_min=1)
    assert table.snapshots.earliest_id() == 3  # the consumer's next snapshot, kept with the later ones
    rest, = java.run([Changes(path, consumer="c1")])
    assert [(c["_snapshot"], c["v"]) for c in rest] == [(3, "c"), (4, "d"), (5, "e")]
