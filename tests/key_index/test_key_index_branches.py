"""The key index on a branch (key_index/versions.py, key_index/branches.py), issue 61.

An upsert on a branch looks its keys up in the branch's own index, which starts from main's version
(naming main's runs: nothing is read again when the branch's base is what main's index reflects); a
clean of either keeps the runs the other names; a fast-forward hands the branch's version to main; a
deleted branch's versions go, and with the next clean the runs only it named. Every check compares the
index's answer with where each key is live in the branch's (or main's) files.
"""

from __future__ import annotations

import os
import random
import time

import pyarrow as pa
import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.engine import upsert
from dbt_paimon.engine.settings import RunSettings
from dbt_paimon.key_index import KeyIndex
from dbt_paimon.store.table import FileStoreTable

from .index_helpers import (
    OPTIONS,
    TUNING,
    small_index,  # noqa: F401 (the fixture every test here uses)
)

BRANCH = "audit"


def _branch(path, name=BRANCH) -> None:
    """A branch from main's latest snapshot (as a build on a branch makes it)."""
    table = FileStoreTable.open(path)
    table.create_branch(name, snapshot_id=table.snapshots.latest_id())


def _upsert(spark, path, rows, branch=None, execution="local", index=True):
    df = spark.createDataFrame(rows, "id bigint, dt string, v string")
    options = dict(OPTIONS, **({"branch": branch} if branch else {}))
    return upsert(df, path, primary_keys="id", partition_keys="dt", options=options,
                  settings=RunSettings(execution=execution, key_index=index))


def _rows(rng, keys, tag):
    return [(k, rng.choice("abc"), f"{tag}{k}") for k in keys]


def _index(path, branch=None) -> tuple[FileStoreTable, KeyIndex]:
    table = FileStoreTable.open(path, branch=branch)
    return table, KeyIndex(table.io, table.path, table.schema, **TUNING)


def assert_right(path, branch=None, keys=range(60)):
    """The branch's index, caught up to its latest snapshot, says where each key is live in its files."""
    table, index = _index(path, branch)
    want = {}
    reader = table.new_read(["id"])
    for split in table.plan().splits:
        for key in reader.read_split(split).column("id").to_pylist():
            assert key not in want, f"key {key} live twice on {branch or 'main'}"
            want[key] = (split.partition_values, split.bucket)
    state = index.refresh(table.plan())
    found = index.lookup(state, pa.table({"id": pa.array(list(keys), pa.int64())}))
    assert {r["id"]: ((r["dt"],), r["_bucket"]) for r in found.to_pylist()} == \
        {k: v for k, v in want.items() if k in set(keys)}
    return state


def _main_pointer(path) -> str:
    with open(f"{ki.index_dir(path)}/{ki.LATEST}") as f:
        return f.read()


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_an_upsert_on_a_branch_starts_from_mains_index_and_keeps_its_own(spark, table_path, execution):
    rng = random.Random(61)
    _upsert(spark, table_path, _rows(rng, range(40), "m0"))
    _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 15), "m1"))
    _branch(table_path)
    main_before = _main_pointer(table_path)
    for step in range(3):  # keys moving across partitions, new keys too
        result = _upsert(spark, table_path, _rows(rng, rng.sample(range(55), 15), f"b{step}"), BRANCH, execution)
        assert result.bootstrap["source"] == "key index"
        state = assert_right(table_path, BRANCH)
        # the branch's base is what main's version reflects: nothing read again, at the start or after
        assert (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
    assert os.path.isfile(f"{ki.index_dir(table_path)}/branch-{BRANCH}/{ki.LATEST}")
    assert _main_pointer(table_path) == main_before  # main's index untouched, and right for main
    assert_right(table_path)
    # both go on: each index follows its own line
    _upsert(spark, table_path, _rows(rng, rng.sample(range(55), 10), "m2"))
    _upsert(spark, table_path, _rows(rng, rng.sample(range(55), 10), "b3"), BRANCH, execution)
    assert_right(table_path)
    assert_right(table_path, BRANCH)


def test_a_branch_made_from_an_older_snapshot_catches_up_from_mains_version(spark, table_path):
    """Main's index reflects main's latest snapshot; the branch's base is older: the buckets that
    differ are read again for the branch, and its answers are the branch's, not main's."""
    rng = random.Random(62)
    _upsert(spark, table_path, _rows(rng, range(40), "m0"))
    FileStoreTable.open(table_path).create_branch(BRANCH, snapshot_id=1)
    _upsert(spark, table_path, _rows(rng, range(0, 40, 2), "m1"))
    _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 12), "b0"), BRANCH)
    assert_right(table_path, BRANCH)
    assert_right(table_path)


def _age(directory: str, hours: float = 3) -> None:
    then = time.time() - hours * 3600
    for name in os.listdir(directory):
        if os.path.isfile(f"{directory}/{name}"):
            os.utime(f"{directory}/{name}", (then, then))


def test_a_clean_keeps_the_runs_another_branch_names_until_it_is_deleted(spark, table_path):
    rng = random.Random(63)
    _upsert(spark, table_path, _rows(rng, range(40), "m0"))
    _branch(table_path)
    for step in range(2):
        _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 12), f"b{step}"), BRANCH)
    for step in range(4):  # main merges its runs away, the ones the branch still names among them
        _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 12), f"m{step + 1}"))
    ki.join_sweeps()
    root = ki.index_dir(table_path)
    _age(root)
    _age(f"{root}/branch-{BRANCH}")
    later = int(time.time() * 1000) + ki.ORPHAN_AGE_MS + 60_000
    (_, main_index), (_, branch_index) = _index(table_path), _index(table_path, BRANCH)
    main_state, branch_state = main_index.load(), branch_index.load()
    only_branch = branch_state.run_names() - main_state.run_names()
    assert only_branch and branch_state.run_names() & main_state.run_names()  # own runs, and main's
    main_index.clean(main_state, later)
    branch_index.clean(branch_state, later)
    assert branch_state.run_names() | main_state.run_names() <= set(os.listdir(root))
    assert_right(table_path, BRANCH)
    assert_right(table_path)
    FileStoreTable.open(table_path).delete_branch(BRANCH)
    assert ki.drop_branch(main_index.io, table_path, BRANCH) >= 2  # its pointer and manifest(s)
    assert not os.path.exists(f"{root}/branch-{BRANCH}")
    assert main_index.clean(main_state, later) >= len(only_branch)
    assert not only_branch & set(os.listdir(root))
    assert_right(table_path)


@pytest.mark.parametrize("publish", [True, False], ids=["published", "not published"])
def test_a_fast_forward_hands_the_branchs_index_to_main(spark, table_path, publish):
    """Published, main's next upsert finds its index caught up; otherwise it reads again every bucket
    the branch's moves took keys from (still right)."""
    rng = random.Random(64)
    _upsert(spark, table_path, _rows(rng, range(40), "m0"))
    table = FileStoreTable.open(table_path)
    _branch(table_path)
    assert not ki.publish_branch(table.io, table_path, table.schema, BRANCH)  # no index of its own yet
    _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 15), "b"), BRANCH)
    table.fast_forward(BRANCH)
    if publish:
        assert ki.publish_branch(table.io, table_path, FileStoreTable.open(table_path).schema, BRANCH)
        main_state, branch_state = _index(table_path)[1].load(), _index(table_path, BRANCH)[1].load()
        assert main_state.run_names() == branch_state.run_names()
        assert main_state.snapshot_id == FileStoreTable.open(table_path).snapshots.latest_id() == 2
    state = assert_right(table_path)
    if publish:
        assert (state.stats["buckets_read_again"], state.stats["buckets_added_to"]) == (0, 0)
    else:
        assert state.stats["buckets_read_again"] > 0
    result = _upsert(spark, table_path, _rows(rng, rng.sample(range(50), 10), "m1"))
    assert result.bootstrap["source"] == "key index"
    assert_right(table_path)
