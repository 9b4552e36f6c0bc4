"""Branches between us and Paimon's Spark connectors (0.9 on Spark 3.5, 2.0 on Spark 4.0): each reads the
branch we make and write (`t$branch_b`), the `$branches` table and the main we fast-forward; we read,
continue and fast-forward the branch it makes (`CALL sys.create_branch`) and writes (`INSERT INTO
t$branch_b`)."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from dbt_paimon.store import BranchError, FileStoreTable
from tests.oracle import rows

from .side_env import table_name


def _ours(path: str, branch: str | None = None) -> list[dict]:
    return rows(FileStoreTable.open(path, branch=branch).to_arrow(), "id")


def _theirs(paimon_spark, path: str, suffix: str = "") -> list[dict]:
    warehouse, name = table_name(path)
    db, table = name.split(".")
    return sorted(paimon_spark.sql(warehouse, f"SELECT * FROM {db}.`{table}{suffix}`"), key=lambda r: r["id"])


def test_branches_written_by_either_side_are_read_by_the_other(paimon_spark, tmp_path):
    warehouse = str(tmp_path / "wh")
    os.makedirs(f"{warehouse}/db.db")
    path = f"{warehouse}/db.db/t"
    paimon_spark.sql(warehouse, "CREATE TABLE db.t (id BIGINT NOT NULL, dt STRING, v BIGINT) PARTITIONED BY (dt) "
                                "TBLPROPERTIES ('primary-key' = 'id,dt', 'bucket' = '2')")
    paimon_spark.sql(warehouse, "INSERT INTO db.t VALUES (1, 'a', 10), (2, 'b', 20)")

    # ours: a branch from the latest snapshot, written by our store; the connector reads it
    table = FileStoreTable.open(path)
    mine = table.create_branch("mine", snapshot_id=table.snapshots.latest_id())
    _write(mine, [{"id": 3, "dt": "a", "v": 30}, {"id": 1, "dt": "a", "v": 11}])
    assert _theirs(paimon_spark, path, "$branch_mine") == _ours(path, "mine") == [
        {"id": 1, "dt": "a", "v": 11}, {"id": 2, "dt": "b", "v": 20}, {"id": 3, "dt": "a", "v": 30}]
    assert _theirs(paimon_spark, path) == _ours(path)  # main as it was
    listed = paimon_spark.sql(warehouse, "SELECT branch_name FROM db.`t$branches`")
    assert [r["branch_name"] for r in listed] == ["mine"]

    # theirs: a branch the connector makes from a tag and writes; we read, continue and publish it
    paimon_spark.sql(warehouse, "CALL sys.create_tag('db.t', 't1')")
    paimon_spark.sql(warehouse, "CALL sys.create_branch('db.t', 'tb', 't1')")
    paimon_spark.sql(warehouse, "INSERT INTO db.`t$branch_tb` VALUES (4, 'b', 40)")
    assert FileStoreTable.open(path).list_branches() == ["mine", "tb"]
    assert [r["id"] for r in _ours(path, "tb")] == [1, 2, 4]
    _write(FileStoreTable.open(path, branch="tb"), [{"id": 5, "dt": "a", "v": 50}])
    assert _theirs(paimon_spark, path, "$branch_tb") == _ours(path, "tb")
    assert table.fast_forward("tb")
    assert _theirs(paimon_spark, path) == _ours(path) == _ours(path, "tb")
    with pytest.raises(BranchError, match="main is at snapshot 3, past the branch's latest 2"):
        table.fast_forward("mine")  # main moved on past the branch's base: refused, nothing changed
    assert _theirs(paimon_spark, path) == _ours(path, "tb")


def _write(table: FileStoreTable, items: list[dict]) -> None:
    w = table.new_write()
    w.write(pa.Table.from_pylist(items, table.schema.arrow_schema()))
    w.commit()
