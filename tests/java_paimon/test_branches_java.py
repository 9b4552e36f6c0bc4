"""Branches against Java Paimon (the reference release): Java reads the branches we make and write and
the main we fast-forward; we read, continue and fast-forward the branches Java makes and writes, and
Java fast-forwards ours. Every read is held against the model of that branch, on the wide table."""

from __future__ import annotations

import random

import pyarrow as pa

from dbt_paimon.store import FileStoreTable
from tests.oracle import rows

from .data import JAVA_FIELDS, KEY, PARTITION, SCHEMA, Model, random_rows
from .javapaimon import JavaError, Maintain, Read, Write, assert_same


def _write(path: str, rows: list[dict], branch: str | None = None) -> None:
    t = FileStoreTable.open(path, branch=branch)
    w = t.new_write()
    w.write(pa.Table.from_pylist(rows, t.schema.arrow_schema()))
    w.commit()


def _ours(path: str, branch: str | None = None) -> pa.Table:
    return FileStoreTable.open(path, branch=branch).to_arrow()


def rows_of(table: pa.Table) -> list[dict]:
    return rows(table, KEY)


def _copy(model: Model) -> Model:
    out = Model()
    out.rows = dict(model.rows)
    return out


def _check(results: list) -> list:
    for r in results:
        if isinstance(r, JavaError):
            raise r
    return results


def test_java_reads_our_branches_and_the_main_we_fast_forward(java, warehouse):
    path = f"{warehouse}/db.db/ours"
    FileStoreTable.create(path, SCHEMA, KEY, PARTITION, {"bucket": "2"})
    rng = random.Random(3)
    main = Model()
    first = random_rows(rng, range(40), 1)
    _write(path, first)
    main.upsert(first)
    table = FileStoreTable.open(path)
    table.create_tag("v1")
    wap = _copy(main)
    table.create_branch("wap", tag="v1")
    second = random_rows(rng, range(20, 60), 2)
    _write(path, second, "wap")
    wap.upsert(second)
    table.create_branch("empty")
    third = random_rows(rng, range(5), 3)
    _write(path, third, "empty")
    alone = Model()
    alone.upsert(third)

    j_wap, j_empty, j_main, j_branches = _check(java.run(
        [Read(f"{path}$branch_wap"), Read(f"{path}$branch_empty"), Read(path), Read(f"{path}$branches")]))
    assert_same(j_wap, _ours(path, "wap"), KEY, wap.sorted_rows())
    assert_same(j_empty, _ours(path, "empty"), KEY, alone.sorted_rows())
    assert_same(j_main, _ours(path), KEY, main.sorted_rows())
    assert sorted(j_branches.column("branch_name").to_pylist()) == ["empty", "wap"]

    assert table.fast_forward("wap") == [2]
    (j_main,) = _check(java.run([Read(path)]))
    assert_same(j_main, _ours(path), KEY, wap.sorted_rows())


def test_we_read_continue_and_fast_forward_java_branches_and_java_fast_forwards_ours(java, warehouse):
    path = f"{warehouse}/db.db/theirs"
    rng = random.Random(4)
    create = {"fields": JAVA_FIELDS, "primary_keys": KEY, "partition_keys": PARTITION, "options": {"bucket": "2"}}
    main = Model()
    first, second = random_rows(rng, range(30), 1), random_rows(rng, range(15, 45), 2)
    main.upsert(first)
    jb = _copy(main)
    jb.upsert(second)
    _check(java.run([Write(path, first, create=create), Maintain(path, "tag", "v1"),
                     Maintain(path, "create_branch", {"name": "jb", "tag": "v1"}),
                     Write(f"{path}$branch_jb", second)]))
    table = FileStoreTable.open(path)
    assert table.list_branches() == ["jb"]
    assert rows_of(_ours(path, "jb")) == jb.sorted_rows() and rows_of(_ours(path)) == main.sorted_rows()

    third = random_rows(rng, range(40, 50), 3)
    _write(path, third, "jb")  # we continue Java's branch: its snapshot 3
    jb.upsert(third)
    (j_jb,) = _check(java.run([Read(f"{path}$branch_jb")]))
    assert_same(j_jb, _ours(path, "jb"), KEY, jb.sorted_rows())
    assert table.fast_forward("jb") == [2, 3]
    (j_main,) = _check(java.run([Read(path)]))
    assert_same(j_main, _ours(path), KEY, jb.sorted_rows())

    # a branch of ours, from main's latest snapshot, fast-forwarded by Java
    latest = FileStoreTable.open(path).snapshots.latest_id()
    FileStoreTable.open(path).create_branch("mine", snapshot_id=latest)
    fourth = random_rows(rng, range(0, 60, 3), 4)
    _write(path, fourth, "mine")
    jb.upsert(fourth)
    _check(java.run([Maintain(path, "fast_forward", "mine")]))
    assert rows_of(_ours(path)) == jb.sorted_rows()
