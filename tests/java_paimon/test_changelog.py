"""changelog-producer 'input' (issue 40): our commits carry the changelog Paimon's writers write, and
Paimon's own streaming read of it (Java, scan.mode from-snapshot) gives exactly the model's change
stream: every row a commit wrote, as written (+I for an upsert, -D for a delete, and for a key that
moves partition on a cross-partition table a -D of the new row in the old partition beside its +I).

One module fixture writes every table (fixed bucket, dynamic bucket, cross-partition; both executors;
and a cross-partition table on the S3 server), then one batch of Java requests reads them all; the
expiration of a snapshot takes its changelog files with it.
"""

from __future__ import annotations

import os

import pytest

from dbt_paimon.engine import RunSettings, delete, upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.datafile import CHANGELOG_FILE_PREFIX
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


def _case(kind: str):
    keys, options = KINDS[kind]
    return keys, {**options, "changelog-producer": "input"}


def _expected(kind: str) -> tuple[list[list[tuple]], list[tuple]]:
    """The change stream per commit (kind, id, dt, v), sorted, and the rows after all of them."""
    cross = kind == "cross"
    live: dict = {}
    stream = []
    for step in (B1, B2, "delete 3", B3):
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
                if cross and old is not None and old[1] != row[1]:
                    changes.append(("-D", row[0], old[1], row[2]))  # the new row in the old partition
                live[key] = row
                changes.append(("+I", *row))
        stream.append(sorted(changes))
    return stream, sorted(live.values())


def _write(spark, path: str, kind: str, execution: str, storage: dict | None = None) -> list[int]:
    """The four commits; the APPEND snapshot each made."""
    keys, options = _case(kind)
    settings = RunSettings(execution=execution, storage_options=storage)
    made = []
    for step in (B1, B2, "delete 3", B3):
        if step == "delete 3":
            made.append(delete(spark, path, "id = 3", storage_options=storage).snapshot_id)
        else:
            result = upsert(spark.createDataFrame(step, SPARK), path, primary_keys=keys, partition_keys="dt",
                            options=options, settings=settings)
            made.append(result.snapshot_id)
    return made


CASES = [(kind, execution) for kind in KINDS for execution in ("local", "distributed")]


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
    _check(case[0], *changelogs[case])


def test_on_the_object_store_too(spark, java, s3_server, s3_warehouse):
    path = f"{s3_warehouse}/db.db/changelog_cross"
    made = _write(spark, path, "cross", "distributed", s3_server.options)
    _check("cross", path, made, *java.run([Changes(path, catalog=s3_server.options), Read(path, catalog=s3_server.options)]))


def _check(kind: str, path: str, made: list[int], java_changes, java_read) -> None:
    stream, latest = _expected(kind)
    assert not isinstance(java_changes, Exception), java_changes
    # each commit's changes in the snapshot it made; no other snapshot (a compaction's) has any
    assert _by_snapshot(java_changes) == dict(zip(made, stream))
    table = FileStoreTable.open(path)
    for sid, changes in zip(made, stream):
        snapshot = table.snapshots.snapshot(sid)
        assert snapshot.changelog_manifest_list and snapshot.changelog_record_count == len(changes)
    want = [{"id": i, "dt": d, "v": v} for i, d, v in latest]
    for reader, got in (("java", java_read), ("ours", table.to_arrow()), ("pypaimon", pypaimon_read(path))):
        assert rows(got, ["id", "dt"]) == want, reader


def test_expired_snapshots_take_their_changelog_with_them(changelogs, java):
    path, made, _, _ = changelogs[("cross", "local")]
    table = FileStoreTable.open(path)
    before = _changelog_files(path)
    assert len(before) >= len(made)  # a file per bucket written by each commit
    table.expire_snapshots(retain_max=1, retain_min=1)
    latest = table.latest_snapshot()
    # what is left: the latest snapshot's changelog files (its changelog manifest), when it has them
    kept = {e.file.file_name for e in _changelog_entries(table, latest)}
    assert _changelog_files(path) == kept
    changes, = java.run([Changes(path, start=latest.id)])
    stream, _ = _expected("cross")
    assert _by_snapshot(changes) == ({latest.id: stream[-1]} if latest.id == made[-1] else {})


def _changelog_files(path: str) -> set[str]:
    return {name for _, _, names in os.walk(path) for name in names if name.startswith(CHANGELOG_FILE_PREFIX)}


def _changelog_entries(table: FileStoreTable, snapshot) -> list:
    from dbt_paimon.store.file_deletion import FileDeletion

    return FileDeletion(table.io, table.path, table.schema).changelog_files(snapshot)
