"""compact_bucket: every file of a bucket merged into one sorted run at the output level, committed as a
COMPACT snapshot; reads are unchanged (ours and pypaimon's), sequence numbers survive, deletes go."""

import os
import pickle
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dbt_paimon.store import CommitConflictError, FileStoreTable
from dbt_paimon.store.common import binary_row
from dbt_paimon.store.compaction.compact import abort_compaction, compact_bucket, max_level
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from dbt_paimon.store.manifest.manifest import ADD, DELETE as DELETE_ENTRY, FILE_SOURCE_COMPACT
from tests.oracle import pypaimon_read, rows

SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("a", pa.int64()), ("s", pa.string())])


def history(t, rng, commits=4, writes=2, keys=60, per_write=25, kinds=(INSERT,)):
    for c in range(commits):
        w = t.new_write()
        for wi in range(writes):
            ks = rng.sample(range(keys), per_write)
            batch = [{"k": k, "p": f"p{k % 2}", "a": None if rng.random() < 0.3 else rng.randint(-50, 50),
                      "s": None if rng.random() < 0.3 else f"c{c}w{wi}"} for k in ks]
            w.write(pa.Table.from_pylist(batch, SCHEMA), row_kinds=[rng.choice(kinds) for _ in ks])
        w.commit()


def compact_all(t, **kw):
    entries = [e for s in t.plan().splits for e in compact_bucket(t, s, **kw)]
    return t.new_commit().commit(entries, kind="COMPACT"), entries


def kv_rows(t, split, f):
    return pq.ParquetFile(os.path.join(split.bucket_path, f.file_name)).read().to_pylist()


def assert_one_sorted_run(t, level):
    for s in t.plan().splits:
        assert {f.level for f in s.files} == {level}
        assert {f.file_source for f in s.files} == {FILE_SOURCE_COMPACT}
        key_types = t.schema.key_types
        spans = sorted((binary_row.deserialize(f.min_key, key_types), binary_row.deserialize(f.max_key, key_types))
                       for f in s.files)
        assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))  # disjoint: one sorted run
        keys = [r["_KEY_k"] for f in sorted(s.files, key=lambda f: f.min_key) for r in kv_rows(t, s, f)]
        assert keys == sorted(set(keys))


ENGINES = [
    ("deduplicate", {}, (INSERT, UPDATE_AFTER, DELETE)),
    ("partial-update", {}, (INSERT, UPDATE_AFTER)),
    ("partial-update", {"partial-update.remove-record-on-delete": "true"}, (INSERT, UPDATE_AFTER, DELETE)),
    ("aggregation", {"fields.a.aggregate-function": "sum", "fields.s.aggregate-function": "listagg"},
     (INSERT, UPDATE_AFTER)),
    ("aggregation", {"fields.a.aggregate-function": "sum", "fields.s.aggregate-function": "last_value"},
     (INSERT, UPDATE_BEFORE, DELETE)),
    ("first-row", {}, (INSERT,)),
]


@pytest.mark.parametrize("engine,options,kinds", ENGINES, ids=[f"{e}-{i}" for i, (e, _, _) in enumerate(ENGINES)])
def test_compaction_keeps_the_read_and_pypaimon_agrees(warehouse, engine, options, kinds):
    path = os.path.join(warehouse, "db.db", "t")
    t = FileStoreTable.create(path, SCHEMA, ["k", "p"], ["p"],
                              {"bucket": "2", "merge-engine": engine, **options})
    history(t, random.Random(len(engine) * 7 + len(options)), kinds=kinds)
    # the merge of every live file: what compaction must keep (a batch read of a first-row table
    # leaves level 0 out, so there it sees nothing before the compaction: checked below)
    before = rows(t.new_read().read(t.plan().splits), ["k", "p"])
    assert before and all(len(s.files) >= 8 for s in t.plan().splits)
    live = t.latest_snapshot()
    result, entries = compact_all(t)
    assert result.snapshot.commit_kind == "COMPACT" and result.snapshot.id == live.id + 1
    assert sum(e.kind == DELETE_ENTRY for e in entries) == sum(len(s.files) for s in t.plan(live.id).splits)
    top = max_level(t.schema)
    assert top == 5
    assert_one_sorted_run(t, top)
    assert all(f.delete_row_count == 0 for s in t.plan().splits for f in s.files)
    assert rows(t.to_arrow(), ["k", "p"]) == before
    assert result.snapshot.total_record_count == len(before)
    if not (engine == "partial-update" and options):  # pypaimon 2.1.0 refuses remove-record-on-delete
        assert rows(pypaimon_read(path).select(SCHEMA.names), ["k", "p"]) == before
    # the time-travelled snapshot before compaction still reads the same; for first-row, as
    # pypaimon reads it: nothing, since every file was at level 0
    travelled = rows(t.to_arrow(snapshot_id=live.id), ["k", "p"])
    assert travelled == ([] if engine == "first-row" else before)
    if engine == "first-row":
        assert rows(pypaimon_read(path, live.id), ["k", "p"]) == []


def test_output_rolls_at_target_file_size_as_one_sorted_run(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "1", "target-file-size": "16kb",
                                                                     "merge-engine": "partial-update"})
    n = 6000
    for half in range(2):
        w = t.new_write()
        ks = list(range(half, n, 2)) + list(range(n, n + 100))
        w.write(pa.table({"k": ks, "p": ["x"] * len(ks), "a": [k * (half + 1) for k in ks],
                          "s": [None if half else f"value-{k}" for k in ks]}, schema=SCHEMA))
        w.commit()
    before = rows(t.to_arrow(), "k")
    compact_all(t)
    (split,) = t.plan().splits
    assert len(split.files) >= 2 and sum(f.row_count for f in split.files) == n + 100
    assert_one_sorted_run(t, 5)
    assert rows(t.to_arrow(), "k") == before
    assert before[n + 1] == {"k": n + 1, "p": "x", "a": 2 * (n + 1), "s": f"value-{n + 1}"}
    assert rows(pypaimon_read(table_path), "k") == before


def test_first_row_batch_read_skips_level0_until_compacted(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "2", "merge-engine": "first-row"})
    history(t, random.Random(2))
    compacted_id = compact_all(t)[0].snapshot.id
    model = rows(t.to_arrow(), ["k", "p"])
    assert model and rows(pypaimon_read(table_path), ["k", "p"]) == model
    # new level-0 rows: a batch read (ours, pypaimon's, Java's) skips them until they are compacted,
    # also when it travels to that APPEND snapshot
    w = t.new_write()
    w.write(pa.table({"k": [1000, 1], "p": ["p0", "p1"], "a": [7, 7], "s": ["late", "late"]}, schema=SCHEMA))
    append_id = w.commit().snapshot.id
    assert t.latest_snapshot().commit_kind == "APPEND" and {f.level for s in t.plan().splits for f in s.files} == {0, 5}
    for sid in (None, append_id):
        assert rows(t.to_arrow(snapshot_id=sid), ["k", "p"]) == model
        assert rows(pypaimon_read(table_path, sid), ["k", "p"]) == model
    expect = {(r["k"], r["p"]): r for r in model}
    for r in ({"k": 1000, "p": "p0", "a": 7, "s": "late"}, {"k": 1, "p": "p1", "a": 7, "s": "late"}):
        expect.setdefault((r["k"], r["p"]), r)  # the first row stays
    merged = rows(t.new_read().read(t.plan().splits), ["k", "p"])  # every live file, level 0 included
    assert merged == rows(pa.Table.from_pylist(list(expect.values())), ["k", "p"]) != model
    compact_id = compact_all(t)[0].snapshot.id
    assert rows(pypaimon_read(table_path), ["k", "p"]) == merged == rows(t.to_arrow(), ["k", "p"])
    # time travel: the APPEND snapshot still reads without its level-0 file, the older ones as before
    for sid, want in ((append_id, model), (compacted_id, model), (compact_id, merged)):
        assert rows(t.to_arrow(snapshot_id=sid), ["k", "p"]) == want
        assert rows(pypaimon_read(table_path, sid), ["k", "p"]) == want


def test_sequence_numbers_survive_and_later_writes_still_win(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "1"})
    for v in range(3):
        w = t.new_write()
        w.write(pa.table({"k": [1, 2, 3], "p": ["x"] * 3, "a": [v] * 3, "s": ["s"] * 3}, schema=SCHEMA))
        w.commit()
    (split,) = t.plan().splits
    winners = {r["_KEY_k"]: r["_SEQUENCE_NUMBER"] for f in split.files for r in kv_rows(t, split, f) if r["a"] == 2}
    compact_all(t)
    (split,) = t.plan().splits
    (f,) = split.files
    assert {r["_KEY_k"]: r["_SEQUENCE_NUMBER"] for r in kv_rows(t, split, f)} == winners
    assert (f.min_sequence_number, f.max_sequence_number) == (min(winners.values()), max(winners.values()))
    w = t.new_write()
    w.write(pa.table({"k": [2], "p": ["x"], "a": [99], "s": ["new"]}, schema=SCHEMA))
    w.commit()
    assert rows(t.to_arrow(), "k") == [{"k": 1, "p": "x", "a": 2, "s": "s"}, {"k": 2, "p": "x", "a": 99, "s": "new"},
                                       {"k": 3, "p": "x", "a": 2, "s": "s"}]
    assert rows(pypaimon_read(table_path), "k") == rows(t.to_arrow(), "k")


def test_aggregation_keeps_the_latest_sequence_number(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"],
                              {"bucket": "1", "merge-engine": "aggregation", "fields.a.aggregate-function": "sum"})
    for v in range(3):
        w = t.new_write()
        w.write(pa.table({"k": [1], "p": ["x"], "a": [v + 1], "s": [None]}, schema=SCHEMA))
        w.commit()
    compact_all(t)
    (split,) = t.plan().splits
    assert [(r["_SEQUENCE_NUMBER"], r["a"]) for r in kv_rows(t, split, split.files[0])] == [(2, 6)]


def test_deletes_are_kept_unless_dropped(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "1"})
    w = t.new_write()
    w.write(pa.table({"k": [1, 2, 3], "p": ["x"] * 3, "a": [1, 2, 3], "s": [None] * 3}, schema=SCHEMA))
    w.commit()
    w = t.new_write()
    w.write(pa.table({"k": [2, 4], "p": ["x"] * 2, "a": [2, 4], "s": [None] * 2}, schema=SCHEMA),
            row_kinds=[DELETE, DELETE])
    w.commit()
    want = rows(t.to_arrow(), "k")
    assert [r["k"] for r in want] == [1, 3]
    compact_all(t, output_level=3, drop_deletes=False)
    (split,) = t.plan().splits
    (f,) = split.files
    assert f.level == 3 and f.delete_row_count == 2
    assert [(r["_KEY_k"], r["_VALUE_KIND"]) for r in kv_rows(t, split, f)] == [(1, 0), (2, 3), (3, 0), (4, 3)]
    assert rows(t.to_arrow(), "k") == want == rows(pypaimon_read(table_path), "k")
    compact_all(t)  # to the max level: the lone file holds deletes, so it is rewritten without them
    (split,) = t.plan().splits
    (f,) = split.files
    assert f.level == 5 and f.delete_row_count == 0 and f.row_count == 2
    assert rows(t.to_arrow(), "k") == want == rows(pypaimon_read(table_path), "k")
    assert compact_all(t)[1] == []  # nothing left to do


def test_a_lone_file_is_moved_up_without_rewriting(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "2", "merge-engine": "first-row"})
    w = t.new_write()
    w.write(pa.table({"k": [1, 2, 3, 4], "p": ["x"] * 4, "a": [1, 2, 3, 4], "s": [None] * 4}, schema=SCHEMA))
    w.commit()
    before = {(s.bucket, f.file_name) for s in t.plan().splits for f in s.files}
    _, entries = compact_all(t)
    assert {e.kind for e in entries} == {ADD, DELETE_ENTRY}
    assert {(s.bucket, f.file_name) for s in t.plan().splits for f in s.files} == before
    assert {f.level for s in t.plan().splits for f in s.files} == {5}
    assert rows(pypaimon_read(table_path), "k") == rows(t.to_arrow(), "k")


def test_runs_from_a_path_and_a_pickled_split_and_conflicts_are_detected(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "1"})
    history(t, random.Random(9), commits=3, writes=1)
    before = rows(t.to_arrow(), ["k", "p"])
    splits = t.plan().splits
    shipped = pickle.loads(pickle.dumps((table_path, splits)))  # as to a Spark executor
    entries = [e for s in shipped[1] for e in compact_bucket(shipped[0], s, output_level=2)]
    stale = [e for s in splits for e in compact_bucket(t, s)]  # a second compaction of the same files
    t.new_commit().commit(entries, kind="COMPACT")
    assert rows(t.to_arrow(), ["k", "p"]) == before
    with pytest.raises(CommitConflictError, match="no longer live"):
        t.new_commit().commit(stale, kind="COMPACT")
    written = [os.path.join(s.bucket_path, e.file.file_name) for s in splits for e in stale
               if e.kind == ADD and (e.partition, e.bucket) == (s.partition, s.bucket)]
    assert len(written) == len(splits)
    assert all(os.path.exists(p) for p in written)
    for s in splits:
        abort_compaction(t, s, [e for e in stale if e.partition == s.partition and e.bucket == s.bucket])
    assert not any(os.path.exists(p) for p in written)
    assert rows(t.to_arrow(), ["k", "p"]) == before == rows(pypaimon_read(table_path), ["k", "p"])


def test_output_level_is_checked(table_path):
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"], {"bucket": "1", "num-levels": "3"})
    history(t, random.Random(1), commits=2, writes=1)
    split = t.plan().splits[0]
    assert max_level(t.schema) == 2
    from dbt_paimon.store import PaimonError
    for bad in (0, 3):
        with pytest.raises(PaimonError, match="within 1 .. 2"):
            compact_bucket(t, split, output_level=bad)


def test_partial_update_sequence_numbers_and_deletes_through_compaction(table_path):
    """PartialUpdateMergeFunction: the result carries the sequence number of the last version it took
    into account (ignored retractions do not count; none left: 0) and is a -D when no +I/+U was seen."""
    t = FileStoreTable.create(table_path, SCHEMA, ["k", "p"], ["p"],
                              {"bucket": "1", "merge-engine": "partial-update", "ignore-delete": "true"})
    versions = [  # per commit: (k, kind, a, s)
        [(1, INSERT, 1, "x"), (2, INSERT, 2, None), (3, DELETE, 3, "gone"), (4, UPDATE_AFTER, 4, None)],
        [(1, DELETE, None, None), (2, UPDATE_AFTER, None, "y"), (3, UPDATE_BEFORE, 3, "gone"),
         (5, UPDATE_BEFORE, 5, None)],
    ]
    for commit in versions:
        w = t.new_write()
        w.write(pa.Table.from_pylist([{"k": k, "p": "x", "a": a, "s": s} for k, _, a, s in commit], SCHEMA),
                row_kinds=[kind for _, kind, _, _ in commit])
        w.commit()
    want = [{"k": 1, "p": "x", "a": 1, "s": "x"}, {"k": 2, "p": "x", "a": 2, "s": "y"},
            {"k": 4, "p": "x", "a": 4, "s": None}]
    assert rows(t.to_arrow(), "k") == want
    compact_all(t, output_level=2, drop_deletes=False)
    (split,) = t.plan().splits
    got = [(r["_KEY_k"], r["_SEQUENCE_NUMBER"], r["_VALUE_KIND"]) for r in kv_rows(t, split, split.files[0])]
    # seq 0..3 first commit, 4..7 second; key 3 saw only (ignored) retractions: a -D with sequence 0;
    # keys 4 and 5 have one version each, passed through as they are (ReducerMergeFunctionWrapper)
    assert got == [(1, 0, INSERT), (2, 5, INSERT), (3, 0, DELETE), (4, 3, UPDATE_AFTER), (5, 7, UPDATE_BEFORE)]
    assert rows(t.to_arrow(), "k") == want
