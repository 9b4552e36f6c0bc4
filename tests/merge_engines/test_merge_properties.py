"""Many random histories straight through the merge functions (files as Arrow tables, no IO), so
that hypothesis can try hundreds of them against the reference (reference.py);
test_store_merge.py runs the same merges through real files."""


import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dbt_paimon.store import PaimonError
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE

from .reference import expected, model, norm

PROP_SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("a", pa.int64()), ("b", pa.string()),
                        ("c", pa.int32())])
PROP_KV = pa.schema([("_KEY_k", pa.int64()), ("_SEQUENCE_NUMBER", pa.int64()), ("_VALUE_KIND", pa.int8())]
                    + list(PROP_SCHEMA))
small_value = st.one_of(st.none(), st.integers(-3, 3).filter(lambda v: v != 0))
version_st = st.tuples(st.sampled_from([INSERT, UPDATE_AFTER, UPDATE_BEFORE, DELETE]), small_value,
                       st.one_of(st.none(), st.sampled_from(["x", "y", " ", "zz"])), small_value)
file_st = st.dictionaries(st.integers(0, 12), version_st, min_size=1, max_size=10)  # one data file
files_st = st.lists(file_st, min_size=1, max_size=8)


def _run_property(engine, options, funcs, files):
    from dbt_paimon.store.merge.merge import merge_function
    from dbt_paimon.store.schema.schema import build_schema
    schema = build_schema(PROP_SCHEMA, ["k", "p"], ["p"], {"merge-engine": engine, **options})
    seq, tables, versions = 0, [], {}
    for f in files:
        kv = []
        for k, (kind, a, b, c) in sorted(f.items()):
            row = {"k": k, "p": f"p{k % 2}", "a": a, "b": b, "c": c}
            kv.append({"_KEY_k": k, "_SEQUENCE_NUMBER": seq, "_VALUE_KIND": kind, **row})
            versions.setdefault((k, row["p"]), []).append((kind, row))
            seq += 1
        tables.append(pa.Table.from_pylist(kv, PROP_KV))
    mf = merge_function(schema)
    try:
        want = model(expected(engine, versions, options, funcs), PROP_SCHEMA.names)
    except (ValueError, NotImplementedError):
        with pytest.raises(PaimonError):
            mf.merge(tables)
        return
    merged = mf.merge(tables)
    assert norm(merged.select(PROP_SCHEMA.names).to_pylist()) == want  # sorted by key, one row per key
    kept = mf.merge(tables, drop_deletes=False)  # what a compaction keeping deletes writes
    keys = kept.column("_KEY_k").to_pylist()
    assert keys == sorted(set(keys)) and set(keys) <= {k for k, _ in versions}
    assert mf.merge([kept], overlapping=False).to_pylist() == merged.to_pylist()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=files_st, mode=st.sampled_from([{}, {"ignore-delete": "true"},
                                             {"partial-update.remove-record-on-delete": "true"}]))
def test_property_partial_update(files, mode):
    _run_property("partial-update", mode, None, files)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=files_st, mode=st.sampled_from([{}, {"ignore-delete": "true"}]),
       funcs=st.tuples(st.sampled_from(["sum", "product", "last_value", "last_non_null_value", "max", "first_value"]),
                       st.sampled_from(["listagg", "last_value", "min", "first_non_null_value"]),
                       st.sampled_from(["sum", "product", "first_value", "last_non_null_value"])))
def test_property_aggregation(files, mode, funcs):
    a, b, c = funcs
    options = {**mode, "fields.a.aggregate-function": a, "fields.b.aggregate-function": b,
               "fields.c.aggregate-function": c}
    ref = {"k": ("primary_key",), "p": ("primary_key",), "a": (a,), "b": (b,), "c": (c,)}
    _run_property("aggregation", options, ref, files)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(files=files_st, mode=st.sampled_from([{}, {"ignore-delete": "true"}]))
def test_property_first_row(files, mode):
    _run_property("first-row", mode, None, files)
