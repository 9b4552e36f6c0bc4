"""Random sequences of writes and commits, checked against an in-memory model (and pypaimon)."""

import os
import shutil
import tempfile

import pyarrow as pa
from hypothesis import HealthCheck, given, settings, strategies as st

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_AFTER
from tests.oracle import model_rows, pypaimon_read, rows

SCHEMA = pa.schema([("k", pa.int32()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string())])

# one write: a set of keys, each either upserted with a value or deleted
write_st = st.dictionaries(st.integers(0, 40), st.one_of(st.none(), st.integers(-5, 5)), min_size=1, max_size=25)
commit_st = st.lists(write_st, min_size=1, max_size=3)  # several writes (files) per commit


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commits=st.lists(commit_st, min_size=1, max_size=5), target=st.sampled_from(["1kb", "128mb"]))
def test_random_writes_match_model(commits, target):
    root = tempfile.mkdtemp()
    try:
        path = os.path.join(root, "db.db", "t")
        t = FileStoreTable.create(path, SCHEMA, ["k"], ["p"], {"target-file-size": target})
        model: dict = {}
        for ci, writes in enumerate(commits):
            w = t.new_write()
            for wi, write in enumerate(writes):
                batch, kinds = [], []
                for k, v in sorted(write.items()):
                    row = {"k": k, "p": None if k % 5 == 0 else f"p{k % 3}", "v": v, "s": f"c{ci}w{wi}" * (k % 4)}
                    if v is None:
                        kinds.append(DELETE)
                        model.pop(k, None)
                    else:
                        kinds.append(UPDATE_AFTER if k in model else INSERT)
                        model[k] = row
                    batch.append(row)
                w.write(pa.Table.from_pylist(batch, SCHEMA), buckets=[r["k"] % 2 for r in batch], row_kinds=kinds)
            w.commit()
        expected = model_rows(model, ["k", "p", "v", "s"], "k")
        assert rows(t.to_arrow(), "k") == expected
        assert rows(t.to_arrow(columns=["k"]), "k") == [{"k": r["k"]} for r in expected]
        assert t.latest_snapshot().total_record_count == sum(s.row_count for s in t.plan().splits)
        assert rows(pypaimon_read(path).select(["k", "p", "v", "s"]), "k") == expected
    finally:
        shutil.rmtree(root)
