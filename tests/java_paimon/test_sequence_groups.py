"""Partial-update sequence groups (`fields.<s>.sequence-group`, store/merge/sequence_group.py) against Java
Paimon: random histories of inserts, updates and retractions written by Java, then by us, then
compacted by us; after each step Java's read and ours agree, row for row.

One JVM batch per step; the tables differ in ignore-delete and in a group ordered by two fields.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import ROW_KINDS

from .javapaimon import Read, Write, assert_same

FIELDS = [("k", "INT NOT NULL"), ("a", "STRING"), ("b", "INT"), ("g1", "INT"),
          ("c", "STRING"), ("g2", "INT"), ("g3", "BIGINT"), ("d", "STRING")]
ARROW = pa.schema([pa.field("k", pa.int32(), False), ("a", pa.string()), ("b", pa.int32()), ("g1", pa.int32()),
                   ("c", pa.string()), ("g2", pa.int32()), ("g3", pa.int64()), ("d", pa.string())])
GROUPS = {"fields.g1.sequence-group": "a,b", "fields.g2,g3.sequence-group": "c"}
TABLES = {"retracting": {}, "ignore_delete": {"ignore-delete": "true"}}
SEED = 11


def _history(rng: random.Random, version: int, kinds: bool) -> list[dict]:
    """A commit's rows: some keys, each once, with sequence values often equal, sometimes null."""
    def maybe(v, p=0.2):
        return None if rng.random() < p else v
    out = []
    for k in rng.sample(range(25), 12):
        kind = rng.choice(["+I", "+I", "+U", "-U", "-D"]) if kinds else "+I"
        out.append({"k": k, "a": maybe(f"a{version}-{k}"), "b": maybe(rng.randrange(100)),
                    "g1": maybe(rng.randrange(4)), "c": maybe(f"c{version}-{k}"), "g2": maybe(rng.randrange(3)),
                    "g3": maybe(rng.randrange(3)), "d": maybe(f"d{version}-{k}", 0.4), "_kind": kind})
    return out


def _ours(path: str, batch: list[dict]) -> None:
    table = FileStoreTable.open(path)
    w = table.new_write()
    w.write(pa.Table.from_pylist([{c: r[c] for c in ARROW.names} for r in batch], ARROW),
            row_kinds=[ROW_KINDS[r["_kind"]] for r in batch])
    w.commit()


@pytest.mark.parametrize("name", list(TABLES))
def test_sequence_groups_merge_as_java_merges_them(java, warehouse, name):
    path = f"{warehouse}/db.db/groups_{name}"
    rng = random.Random(SEED + list(TABLES).index(name))
    create = {"fields": FIELDS, "primary_keys": ["k"], "partition_keys": [],
              "options": {"bucket": "1", "merge-engine": "partial-update", "write-only": "true", **GROUPS,
                          **TABLES[name]}}
    java_commits = [_history(rng, v, kinds=v > 0) for v in range(5)]
    results = java.run([Write(path, java_commits[0], create)] + [Write(path, c) for c in java_commits[1:]]
                       + [Read(path)])
    assert results[:5] == [None] * 5, results[:5]
    table = FileStoreTable.open(path)
    assert len(table.plan().splits[0].files) == 5  # five level-0 files: every read merges them
    assert_same(results[5], table.to_arrow(), ["k"])
    assert results[5].num_rows > 10

    # our writes on top (one commit per history, retractions too), then our full compaction
    for v in range(5, 8):
        _ours(path, _history(rng, v, kinds=True))
    java_ours, = java.run([Read(path)])
    assert_same(java_ours, FileStoreTable.open(path).to_arrow(), ["k"])
    from dbt_paimon.store.compaction.compact import compact_bucket
    table = FileStoreTable.open(path)
    [split] = table.plan().splits
    table.new_commit().commit(compact_bucket(table, split), "COMPACT")
    table = FileStoreTable.open(path)
    assert len(table.plan().splits[0].files) == 1
    java_compacted, = java.run([Read(path)])
    assert_same(java_compacted, table.to_arrow(), ["k"])
    assert java_compacted.to_pylist() == java_ours.to_pylist() or \
        sorted(java_compacted.to_pylist(), key=lambda r: r["k"]) == sorted(java_ours.to_pylist(), key=lambda r: r["k"])
    # a projection reads the group's sequence fields too, to merge by them
    assert table.to_arrow(columns=["k", "c"]).sort_by("k").to_pylist() == \
        [{"k": r["k"], "c": r["c"]} for r in sorted(java_ours.to_pylist(), key=lambda r: r["k"])]


def test_what_groups_cannot_merge_is_refused(java, warehouse):
    """Combinations Paimon forbids or that we do not merge: refused on create and on a table Java made."""
    from dbt_paimon.store.common.errors import SchemaError
    pu = {"merge-engine": "partial-update"}
    with pytest.raises(SchemaError, match="conflicting behavior"):
        FileStoreTable.create(f"{warehouse}/db.db/g_rrod", ARROW, ["k"], [],
                              {**pu, **GROUPS, "partial-update.remove-record-on-delete": "true"})
    with pytest.raises(SchemaError, match="is for merge-engine 'partial-update'"):
        FileStoreTable.create(f"{warehouse}/db.db/g_dedup", ARROW, ["k"], [], GROUPS)
    with pytest.raises(SchemaError, match="defined repeatedly by multiple groups"):
        FileStoreTable.create(f"{warehouse}/db.db/g_twice", ARROW, ["k"], [],
                              {**pu, **GROUPS, "fields.b.sequence-group": "c"})
    with pytest.raises(SchemaError, match="contains primary key field 'k'"):  # (Paimon 2.0's rule)
        FileStoreTable.create(f"{warehouse}/db.db/g_key", ARROW, ["k"], [], {**pu, "fields.g1.sequence-group": "a,k"})
    with pytest.raises(SchemaError, match=r"order one sequence group and belong to another"):
        FileStoreTable.create(f"{warehouse}/db.db/g_crossed", ARROW, ["k"], [],
                              {**pu, "fields.g1.sequence-group": "a,g2", "fields.g2.sequence-group": "c"})
    with pytest.raises(SchemaError, match="names column ' b'"):  # split on commas as written, as Paimon does
        FileStoreTable.create(f"{warehouse}/db.db/g_space", ARROW, ["k"], [],
                              {**pu, "fields.g1.sequence-group": "a, b"})
    # Paimon gives group fields an aggregator even when it is last_non_null_value: not merged here
    with pytest.raises(SchemaError, match="does not merge aggregate functions"):
        FileStoreTable.create(f"{warehouse}/db.db/g_lnn", ARROW, ["k"], [],
                              {**pu, **GROUPS, "fields.a.aggregate-function": "last_non_null_value"})
    path = f"{warehouse}/db.db/g_agg"
    create = {"fields": FIELDS, "primary_keys": ["k"], "partition_keys": [],
              "options": {"bucket": "1", **pu, **GROUPS, "fields.b.aggregate-function": "sum"}}
    assert java.run([Write(path, [{"k": 1, "a": "x", "b": 1, "g1": 1}], create)]) == [None]
    with pytest.raises(SchemaError, match=r"fields.b.aggregate-function"):
        FileStoreTable.open(path).to_arrow()
