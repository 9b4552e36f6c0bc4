"""Changes as input with Java Paimon 2.0 on the other side (issue 60): a table Java wrote (its own
`input` changelog, deletes included) is read by `engine.changes` as the difference of Java's own reads
of the two snapshots; and a consumer position is one file both sides keep: Java's streaming read
resumes where ours left it, and we read the position Java's left."""

from __future__ import annotations

from dbt_paimon.engine import changes
from dbt_paimon.store import FileStoreTable
from tests.java_paimon.javapaimon import Changes, JavaError, Read, Write

FIELDS = [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")]


def _states(java, path: str, ids: list[int]) -> dict[int, dict]:
    found = java.run([Read(path, {"scan.snapshot-id": str(i)}) for i in ids])
    out = {}
    for sid, table in zip(ids, found):
        assert not isinstance(table, JavaError), table
        out[sid] = {(r["id"], r["dt"]): r for r in table.to_pylist()}
    return out


def test_changes_of_a_table_java_wrote_are_the_difference_of_javas_reads(java, spark, warehouse):
    path = f"{warehouse}/db.db/java_changes"
    create = {"fields": FIELDS, "primary_keys": ["dt", "id"], "partition_keys": ["dt"],
              "options": {"bucket": "2", "changelog-producer": "input"}}
    batches = [[{"id": i, "dt": "ab"[i % 2], "v": f"v0-{i}"} for i in range(10)],
               [{"id": i, "dt": "ab"[i % 2], "v": f"v1-{i}"} for i in (1, 2, 3)]
               + [{"id": 4, "dt": "a", "v": "gone", "_kind": "-D"}],
               [{"id": 11, "dt": "b", "v": "new"}, {"id": 2, "dt": "a", "v": "v1-2"},  # 2 rewritten as it was
                {"id": 5, "dt": "b", "v": "gone", "_kind": "-D"}, {"id": 3, "dt": "b", "v": "v2-3"}]]
    done = java.run([Write(path, batches[0], create=create), *[Write(path, b) for b in batches[1:]]])
    assert not [d for d in done if isinstance(d, Exception)], done
    states = _states(java, path, [1, 2, 3])
    states[0] = {}
    for start, end in ((0, 3), (1, 2), (1, 3), (2, 3)):
        got = {}
        for r in changes(spark, path, start, end).collect():
            row = r.asDict()
            kind = row.pop("rowkind")
            assert (row["id"], row["dt"]) not in got
            got[(row["id"], row["dt"])] = (kind, row)
        before, after = states[start], states[end]
        differ = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
        assert differ <= set(got), (start, end, sorted(differ - set(got)))
        for key, (kind, row) in got.items():
            assert (kind in ("+I", "+U") and row == after[key]) if key in after else kind == "-D", (start, end, key)
    assert {k: v[0] for k, v in _fold(spark, path, 1, 3).items()} == {
        (1, "b"): "+I", (2, "a"): "+I", (3, "b"): "+I", (4, "a"): "-D", (5, "b"): "-D", (11, "b"): "+I"}


def _fold(spark, path, start, end):
    return {(r.id, r.dt): (r.rowkind, r.v) for r in changes(spark, path, start, end).collect()}


def test_a_consumer_position_is_one_file_for_java_and_us(java, warehouse):
    path = f"{warehouse}/db.db/java_consumer"
    create = {"fields": FIELDS, "primary_keys": ["dt", "id"], "partition_keys": ["dt"],
              "options": {"bucket": "1", "changelog-producer": "input"}}
    done = java.run([Write(path, [{"id": s, "dt": "a", "v": f"v{s}"}], create=create if s == 0 else None)
                     for s in range(4)])
    assert not [d for d in done if isinstance(d, Exception)], done
    table = FileStoreTable.open(path)
    table.reset_consumer("dbt-s.copy", 3)  # as paimon_changes leaves it after reading snapshots 1..2
    resumed, = java.run([Changes(path, consumer="dbt-s.copy")])
    assert not isinstance(resumed, JavaError), resumed
    assert sorted({c["_snapshot"] for c in resumed}) == [3, 4]  # Java starts where we left it
    assert FileStoreTable.open(path).consumers()["dbt-s.copy"] == 5  # and records where it stopped, for us
