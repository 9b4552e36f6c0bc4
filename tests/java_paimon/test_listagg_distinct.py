"""`listagg` with `fields.<f>.distinct` (store/merge/listagg_distinct.py) against Java Paimon: random histories
of delimited strings (repeated, blank and empty tokens) written by Java, then by us, then compacted by
us; Java's read and ours agree after each step."""

from __future__ import annotations

import random

import pyarrow as pa

from dbt_paimon.store import FileStoreTable

from .javapaimon import Read, Write, assert_same

FIELDS = [("k", "INT NOT NULL"), ("tags", "STRING"), ("names", "STRING")]
ARROW = pa.schema([pa.field("k", pa.int32(), False), ("tags", pa.string()), ("names", pa.string())])
OPTIONS = {"bucket": "1", "merge-engine": "aggregation", "write-only": "true",
           "fields.tags.aggregate-function": "listagg", "fields.tags.distinct": "true",
           "fields.names.aggregate-function": "listagg", "fields.names.distinct": "true",
           "fields.names.list-agg-delimiter": "|"}


def _history(rng: random.Random) -> list[dict]:
    def text(sep):
        if rng.random() < 0.15:
            return rng.choice([None, "", "  "])
        return sep.join(rng.choice(["a", "b", "c", "", " ", "dd"]) for _ in range(rng.randrange(1, 4)))
    return [{"k": k, "tags": text(","), "names": text("|")} for k in rng.sample(range(15), 10)]


def test_listagg_distinct_merges_as_java_merges_it(java, warehouse):
    path = f"{warehouse}/db.db/listagg_distinct"
    rng = random.Random(23)
    create = {"fields": FIELDS, "primary_keys": ["k"], "partition_keys": [], "options": OPTIONS}
    commits = [_history(rng) for _ in range(4)]
    done = java.run([Write(path, commits[0], create)] + [Write(path, c) for c in commits[1:]] + [Read(path)])
    assert done[:4] == [None] * 4, done
    table = FileStoreTable.open(path)
    assert len(table.plan().splits[0].files) == 4
    assert_same(done[4], table.to_arrow(), ["k"])
    assert any("," in (r["tags"] or "") for r in done[4].to_pylist())
    for _ in range(2):
        w = table.new_write()
        w.write(pa.Table.from_pylist(_history(rng), ARROW))
        w.commit()
        table = FileStoreTable.open(path)
    ours, = java.run([Read(path)])
    assert_same(ours, table.to_arrow(), ["k"])
    from dbt_paimon.store.compaction.compact import compact_bucket
    [split] = table.plan().splits
    table.new_commit().commit(compact_bucket(table, split), "COMPACT")
    compacted, = java.run([Read(path)])
    assert_same(compacted, FileStoreTable.open(path).to_arrow(), ["k"])
    assert sorted(compacted.to_pylist(), key=lambda r: r["k"]) == sorted(ours.to_pylist(), key=lambda r: r["k"])
