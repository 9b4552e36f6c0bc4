"""The key index under SIGKILL (issue 14): a process killed at any file operation of an index update
leaves a state from which the next upsert is right.

A child process (plain Python, no Spark) catches the index up after a writer that does not keep it,
and stops before its N-th file operation (a run, the manifest, the pointer), or halfway through
writing a run; the parent kills it with SIGKILL there, for every N, then upserts through the index
and checks the table and the index against the files."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import textwrap

import pytest

from dbt_paimon import key_index as ki
from dbt_paimon.key_index.merge_policy import add_runs
from dbt_paimon.store.table import FileStoreTable

from .index_helpers import TUNING, assert_index_right, random_rows, small_index, upsert_rows  # noqa: F401 (fixture)

CHILD = textwrap.dedent("""
    import sys, time, json
    from dbt_paimon import key_index as ki
    from dbt_paimon.store.table import FileStoreTable
    path, stop_at, half = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "half"
    tuning = json.loads(sys.argv[4])
    table = FileStoreTable.open(path)
    index = ki.KeyIndex(table.io, table.path, table.schema, **tuning)
    ops = [0]

    def pause():
        print("ready", flush=True)
        time.sleep(60)

    def counted(fn):
        def wrapper(*args, **kwargs):
            if ops[0] == stop_at and not half:
                pause()
            ops[0] += 1
            return fn(*args, **kwargs)
        return wrapper

    class HalfWritten:
        def __init__(self, inner):
            self.inner, self.written = inner, 0
        def __enter__(self):
            self.f = self.inner.__enter__()
            return self
        def write(self, data):
            self.f.write(data)
            self.f.flush()
            self.written += len(data)
            if self.written > 200:
                pause()
        def __exit__(self, *exc):
            return self.inner.__exit__(*exc)
        def __getattr__(self, name):
            return getattr(self.f, name)

    io = table.io
    output = io.output
    def output_op(p):
        n = ops[0]
        if half and n == stop_at:
            ops[0] += 1
            return HalfWritten(output(p))
        return counted(output)(p)
    io.output = output_op
    io.write_bytes = counted(io.write_bytes)
    io.overwrite_text = counted(io.overwrite_text)
    index.refresh(table.plan())
    print("finished", ops[0], flush=True)
""")


def _child(path, stop_at, half=False):
    return subprocess.Popen([sys.executable, "-c", CHILD, path, str(stop_at), "half" if half else "whole",
                             json.dumps(TUNING)], stdout=subprocess.PIPE, text=True)


def _operations(table_path, scratch) -> int:
    """How many file operations the next catch-up makes: the child run whole on a copy of the
    table and its index (the same state, so the same operations)."""
    db = os.path.dirname(table_path)
    copy = os.path.join(scratch, "db.db")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(db, copy)
    out, _ = _child(os.path.join(copy, os.path.basename(table_path)), 10_000).communicate(timeout=120)
    return int(out.split()[-1])


def test_a_kill_at_every_file_operation_of_an_index_update_leaves_a_usable_state(spark, table_path, tmp_path):
    rng = random.Random(7)
    upsert_rows(spark, table_path, random_rows(rng, range(40)))
    kills, seen = 0, set()
    # counted from the end too: the last operations (manifest, pointer) are the ones that matter most
    for where in [-1, -2, -3, 0, 1, 2, 3]:
        for half in (False, True):
            # another writer's change for the index to catch up, then a killed catch-up
            upsert_rows(spark, table_path, random_rows(rng, rng.sample(range(60), 12), tag=f"k{kills}"), index=False)
            operations = _operations(table_path, str(tmp_path))
            assert operations >= 3  # at least a run, the manifest and the pointer
            stop_at = where % operations
            child = _child(table_path, stop_at, half)
            line = child.stdout.readline().strip()
            if line != "ready":  # a half-write only stops in a run file: this op was not one
                child.wait(timeout=120)
                continue
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
            kills += 1
            seen.add((where if where < 0 else stop_at, half))
            # the kill left a version the next refresh catches up, not one it must rebuild
            table = FileStoreTable.open(table_path)
            state = ki.KeyIndex(table.io, table.path, table.schema, **TUNING).refresh(table.plan())
            assert state.stats["built"] is False, (f"a kill before file operation {stop_at} of {operations} "
                                                   "forced a rebuild")
            # the next upsert, through whatever the kill left, is right and so is the index
            upsert_rows(spark, table_path, random_rows(rng, rng.sample(range(60), 10), tag=f"n{kills}"))
            assert_index_right(table_path, range(60))
    assert {(-1, False), (-2, False), (0, False), (0, True)} <= seen  # pointer, manifest, first run whole and half
    assert kills >= 12


@pytest.mark.parametrize("step", ["runs written", "manifest written"])
def test_an_update_stopped_before_its_pointer_leaves_the_previous_version(spark, table_path, step):
    """What a kill between the steps leaves, shown without a process: the previous version stays
    current and is caught up next time."""
    rng = random.Random(8)
    upsert_rows(spark, table_path, random_rows(rng, range(30)))
    d = ki.index_dir(table_path)
    before = open(os.path.join(d, ki.LATEST)).read()
    upsert_rows(spark, table_path, random_rows(rng, range(20, 40), tag="b"), index=False)
    table = FileStoreTable.open(table_path)
    index = ki.KeyIndex(table.io, table.path, table.schema, **TUNING)
    state = index.load()
    add_runs(index.files, state, index.layout.entries(_keys_table([100, 101]), next(iter(state.buckets))[0],
                                                      next(iter(state.buckets))[1], 999), index.max_runs)
    if step == "manifest written":
        index.io.write_bytes(f"{index.dir}/manifest-stray.json", b"{}")
    assert open(os.path.join(d, ki.LATEST)).read() == before
    upsert_rows(spark, table_path, random_rows(rng, range(35, 45), tag="c"))
    assert_index_right(table_path, list(range(50)) + [100, 101])


def _keys_table(ids):
    import pyarrow as pa
    return pa.table({"id": pa.array(ids, pa.int64())})
