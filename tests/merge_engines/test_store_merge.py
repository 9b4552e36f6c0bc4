"""Merge engines (partial-update, aggregation, first-row) through real files of our store, against
the reference of Paimon's merge functions (reference.py), and against pypaimon 2.1.0 where it can
read the table."""

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable, PaimonError, SchemaError
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_AFTER, UPDATE_BEFORE
from dbt_paimon.store.merge.merge import MergeFunction
from tests.oracle import pypaimon_read, rows

from .reference import (
    RETRACT,
    RefAgg,
    expected,
    merged,
    model,
    new_table,
    norm,
    ours,
    random_history,
    write_history,
)

# ---- aggregation ----------------------------------------------------------------------------------

AGG_SCHEMA = pa.schema([
    ("k", pa.int64()), ("p", pa.string()),
    ("s_sum", pa.int64()), ("d_sum", pa.decimal128(12, 2)), ("f_sum", pa.float64()), ("prod", pa.int32()),
    ("mn", pa.string()), ("mx", pa.timestamp("us")), ("dmax", pa.float64()), ("dec_min", pa.decimal128(8, 3)),
    ("lv", pa.int32()), ("lnn", pa.string()), ("fv", pa.int32()), ("fnn", pa.string()),
    ("band", pa.bool_()), ("bor", pa.bool_()), ("la", pa.string()), ("dflt", pa.int16()),
])
AGG_OPTIONS = {
    "merge-engine": "aggregation",
    "fields.s_sum.aggregate-function": "sum", "fields.d_sum.aggregate-function": "sum",
    "fields.f_sum.aggregate-function": "sum", "fields.prod.aggregate-function": "product",
    "fields.mn.aggregate-function": "min", "fields.mx.aggregate-function": "max",
    "fields.dmax.aggregate-function": "max", "fields.dec_min.aggregate-function": "min",
    "fields.lv.aggregate-function": "last_value", "fields.lnn.aggregate-function": "last_non_null_value",
    "fields.fv.aggregate-function": "first_value", "fields.fnn.aggregate-function": "first_non_null_value",
    "fields.band.aggregate-function": "bool_and", "fields.bor.aggregate-function": "bool_or",
    "fields.la.aggregate-function": "listagg", "fields.la.list-agg-delimiter": " | ",
}
AGG_FUNCS = {"k": ("primary_key",), "p": ("primary_key",), "dflt": ("last_non_null_value",),
             "la": ("listagg", " | ")}
AGG_FUNCS.update({c: (AGG_OPTIONS[f"fields.{c}.aggregate-function"],) for c in AGG_SCHEMA.names
                  if f"fields.{c}.aggregate-function" in AGG_OPTIONS and c != "la"})


def agg_row(rng, k, c, w):
    m = lambda v: None if rng.random() < 0.25 else v  # noqa: E731
    return {
        "k": k, "p": f"p{k % 3}", "s_sum": m(rng.randint(-10**12, 10**12)),
        "d_sum": m(Decimal(rng.randint(-10**6, 10**6)) / 100), "f_sum": m(rng.uniform(-1e3, 1e3)),
        "prod": m(rng.choice([-3, -2, -1, 1, 2, 3])), "mn": m(rng.choice(["b", "a", "ab", "é", "Z", ""])),
        "mx": m(dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**12))),
        "dmax": m(rng.choice([1.5, -2.0, 0.0, float("inf"), -7.25])),
        "dec_min": m(Decimal(rng.randint(-10**5, 10**5)) / 1000), "lv": m(rng.randint(0, 9)),
        "lnn": m(f"c{c}w{w}"), "fv": m(rng.randint(0, 9)), "fnn": m(f"c{c}w{w}"), "band": m(rng.random() < 0.8),
        "bor": m(rng.random() < 0.2), "la": m(rng.choice([f"c{c}w{w}", "x y"])), "dflt": m(rng.randint(0, 99)),
    }


def test_every_aggregate_function_matches_reference_and_pypaimon(warehouse):
    rng = random.Random(11)
    t, path = new_table(warehouse, "agg", AGG_SCHEMA, AGG_OPTIONS)
    commits = random_history(rng, agg_row, n_commits=4, writes=2, kinds=lambda r: r.choice([INSERT, UPDATE_AFTER]))
    versions = write_history(t, AGG_SCHEMA, commits)
    assert max(len(v) for v in versions.values()) >= 4 and min(len(s.files) for s in t.plan().splits) >= 4
    assert len({s.partition_values for s in t.plan().splits}) == 3
    want = model(expected("aggregation", versions, AGG_OPTIONS, AGG_FUNCS), AGG_SCHEMA.names)
    assert ours(t) == want
    assert norm(rows(pypaimon_read(path).select(AGG_SCHEMA.names), ["k", "p"])) == want
    # a projection merges the same way
    proj = t.to_arrow(columns=["k", "p", "la", "s_sum"])
    assert rows(proj, ["k", "p"]) == [{c: r[c] for c in ("k", "p", "la", "s_sum")} for r in want]


def test_java_float_order_and_null_rules_of_min_max():
    """NaN is above +inf and -0.0 below 0.0 (Double.compare); nulls are skipped; all null stays null."""
    schema = pa.schema([("k", pa.int64()), ("p", pa.string()), ("lo", pa.float64()), ("hi", pa.float32())])
    versions = [[0.0, -0.0, 1.0], [float("nan"), 2.0], [None, None], [float("nan"), float("nan")], [-0.0, 0.0],
                [float("-inf"), None, float("nan")]]
    kv = []
    for k, vs in enumerate(versions):
        for seq, v in enumerate(vs):
            kv.append({"_KEY_k": k, "_KEY_p": "x", "_SEQUENCE_NUMBER": 100 * k + seq, "_VALUE_KIND": INSERT,
                       "k": k, "p": "x", "lo": v, "hi": v})
    table = pa.Table.from_pylist(kv, pa.schema([("_KEY_k", pa.int64()), ("_KEY_p", pa.string()),
                                                ("_SEQUENCE_NUMBER", pa.int64()), ("_VALUE_KIND", pa.int8())]
                                               + list(schema)))
    fields = _fields({"k": "primary_key", "p": "primary_key", "lo": "min", "hi": "max"}, schema)
    mf = MergeFunction("aggregation", ("_KEY_k", "_KEY_p"), fields=fields)
    got = norm(mf.merge([table.slice(0, 7), table.slice(7)]).select(["lo", "hi"]).to_pylist())
    want = []
    for vs in versions:
        lo, hi = RefAgg("min"), RefAgg("max")
        a = b = None
        for v in vs:
            a, b = lo.agg(a, v), hi.agg(b, v)
        want.append({"lo": a, "hi": b})
    assert got == norm(want)
    assert got[0] == {"lo": "-0.0", "hi": 1.0} and got[1]["hi"] == "NaN" and got[1]["lo"] == 2.0
    assert got[3] == {"lo": "NaN", "hi": "NaN"} and got[2] == {"lo": None, "hi": None}


def _fields(funcs, schema):
    from dbt_paimon.store.common.types import from_arrow
    from dbt_paimon.store.schema.merge_options import FieldAgg
    return tuple(FieldAgg(n, funcs[n], from_arrow(schema.field(n).type)) for n in schema.names)


RETRACT_SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("total", pa.int64()),
                            ("amount", pa.decimal128(20, 3)),
                            ("ratio", pa.float64()), ("prod", pa.int32()), ("lv", pa.int32()), ("lnn", pa.string())])
RETRACT_OPTIONS = {"merge-engine": "aggregation", "fields.total.aggregate-function": "sum",
                   "fields.amount.aggregate-function": "sum", "fields.ratio.aggregate-function": "sum",
                   "fields.prod.aggregate-function": "product", "fields.lv.aggregate-function": "last_value"}
RETRACT_FUNCS = {"k": ("primary_key",), "p": ("primary_key",), "total": ("sum",), "amount": ("sum",),
                 "ratio": ("sum",), "prod": ("product",), "lv": ("last_value",), "lnn": ("last_non_null_value",)}


def retract_row(rng, k, c, w):
    m = lambda v: None if rng.random() < 0.2 else v  # noqa: E731
    return {"k": k, "p": f"p{k % 2}", "total": m(rng.randint(-100, 100)),
            "amount": m(Decimal(rng.randint(-10**6, 10**6)) / 1000), "ratio": m(rng.uniform(-1, 1)),
            "prod": m(rng.choice([-3, -2, -1, 1, 2, 3])), "lv": m(rng.randint(0, 9)), "lnn": m(f"c{c}w{w}")}


def test_aggregation_retractions_subtract_divide_and_clear(warehouse):
    rng = random.Random(5)
    t, path = new_table(warehouse, "agg_retract", RETRACT_SCHEMA, RETRACT_OPTIONS)
    kinds = lambda r: r.choice([INSERT, INSERT, UPDATE_AFTER, UPDATE_BEFORE, DELETE])  # noqa: E731
    versions = write_history(t, RETRACT_SCHEMA, random_history(rng, retract_row, n_commits=5, kinds=kinds))
    assert any(len(v) > 1 and any(k in RETRACT for k, _ in v) for v in versions.values())
    want = model(expected("aggregation", versions, RETRACT_OPTIONS, RETRACT_FUNCS), RETRACT_SCHEMA.names)
    assert ours(t) == want
    # a key whose versions are a +I then a -D keeps a row: sum minus, last_value cleared
    t2, _ = new_table(warehouse, "agg_retract2", RETRACT_SCHEMA, RETRACT_OPTIONS)
    row = {"k": 1, "p": "p1", "total": 5, "amount": Decimal("1.500"), "ratio": 0.5, "prod": 6, "lv": 3, "lnn": "x"}
    write_history(t2, RETRACT_SCHEMA, [[[(INSERT, row)]], [[(DELETE, dict(row, total=2, prod=3, lnn=None))]]])
    assert t2.to_arrow().to_pylist() == [{"k": 1, "p": "p1", "total": 3, "amount": Decimal("0.000"), "ratio": 0.0,
                                          "prod": 2, "lv": None, "lnn": "x"}]
    # a lone -D is passed through and dropped (ReducerMergeFunctionWrapper), not negated
    write_history(t2, RETRACT_SCHEMA, [[[(DELETE, dict(row, k=2))]]])
    assert t2.to_arrow().num_rows == 1


def test_aggregation_refuses_retraction_of_functions_without_one(warehouse):
    schema = pa.schema([("k", pa.int64()), ("p", pa.string()), ("hi", pa.int64()), ("n", pa.int64())])
    opts = {"merge-engine": "aggregation", "fields.hi.aggregate-function": "max", "fields.n.aggregate-function": "sum"}
    t, _ = new_table(warehouse, "agg_max", schema, opts)
    write_history(t, schema, [[[(INSERT, {"k": 1, "p": "a", "hi": 5, "n": 1})]],
                              [[(DELETE, {"k": 1, "p": "a", "hi": 5, "n": 1})]]])
    with pytest.raises(PaimonError, match="'max'.*does not support retraction.*fields.hi.ignore-retract"):
        t.to_arrow()
    assert t.to_arrow(columns=["k", "n"]).to_pylist() == [{"k": 1, "n": 0}]  # only read columns aggregate
    # ignore-retract on the column: its retractions are no-ops, the others still retract
    t2, _ = new_table(warehouse, "agg_max_ir", schema, {**opts, "fields.hi.ignore-retract": "true"})
    write_history(t2, schema, [[[(INSERT, {"k": 1, "p": "a", "hi": 5, "n": 1})]],
                               [[(DELETE, {"k": 1, "p": "a", "hi": 9, "n": 1})]]])
    assert t2.to_arrow().to_pylist() == [{"k": 1, "p": "a", "hi": 5, "n": 0}]
    # ignore-delete: retractions are dropped before merging (Paimon drops them when writing)
    t3, _ = new_table(warehouse, "agg_max_id", schema, {**opts, "ignore-delete": "true"})
    write_history(t3, schema, [[[(INSERT, {"k": 1, "p": "a", "hi": 5, "n": 1})]],
                               [[(DELETE, {"k": 1, "p": "a", "hi": 9, "n": 1}),
                                 (DELETE, {"k": 2, "p": "a", "hi": 1, "n": 1})]],
                               [[(INSERT, {"k": 1, "p": "a", "hi": 2, "n": 4})]]])
    assert rows(t3.to_arrow(), "k") == [{"k": 1, "p": "a", "hi": 5, "n": 5}]


def test_arithmetic_follows_java(warehouse):
    schema = pa.schema([("k", pa.int64()), ("p", pa.string()), ("big", pa.int64()), ("wide", pa.decimal128(20, 2)),
                        ("small", pa.decimal128(6, 2)), ("tiny", pa.int8())])
    opts = {"merge-engine": "aggregation", "fields.big.aggregate-function": "sum",
            "fields.wide.aggregate-function": "sum", "fields.small.aggregate-function": "product",
            "fields.tiny.aggregate-function": "product"}
    t, _ = new_table(warehouse, "arith", schema, opts)
    r = {"k": 1, "p": "a", "big": 1, "wide": Decimal("999999999999999999.99"), "small": Decimal("1.25"), "tiny": 11}
    write_history(t, schema, [[[(INSERT, r)]],
                              [[(INSERT, dict(r, wide=Decimal("0.01"), small=Decimal("1.25"), tiny=-12))]]])
    # HALF_UP is away from zero: 1.25 * 0.5 = 0.625 -> 0.63 and -1.25 * 0.5 -> -0.63
    w = t.new_write()
    for factor in ("1.25", "0.5"):
        sign = {2: 1, 3: -1 if factor == "1.25" else 1}
        w.write(pa.Table.from_pylist([dict(r, k=k, big=None, wide=None, tiny=None, small=Decimal(factor) * sign[k])
                                      for k in (2, 3)], schema))
    w.commit()
    assert rows(t.to_arrow(columns=["k", "small"]), "k")[1:] == [{"k": 2, "small": Decimal("0.63")},
                                                                  {"k": 3, "small": Decimal("-0.63")}]
    # DECIMAL(20, 2) sum beyond its precision is null (DecimalUtils.add -> fromBigDecimal);
    # DECIMAL product rounds HALF_UP to the scale: 1.25 * 1.25 = 1.5625 -> 1.56; TINYINT 11 * -12 overflows
    with pytest.raises(PaimonError, match="tiny.*overflow"):
        t.to_arrow()
    got = rows(t.to_arrow(columns=["k", "big", "wide", "small"]), "k")[:1]
    assert got == [{"k": 1, "big": 2, "wide": None, "small": Decimal("1.56")}]
    write_history(t, schema, [[[(INSERT, dict(r, big=2**63 - 2, wide=Decimal("1.00"), small=None))]]])
    with pytest.raises(PaimonError, match="big.*overflow"):
        t.to_arrow(columns=["k", "big"])
    # after the null, the sum restarts from the next input (a null accumulator takes the input)
    assert rows(t.to_arrow(columns=["k", "wide", "small"]), "k")[0] == {"k": 1, "wide": Decimal("1.00"),
                                                                          "small": Decimal("1.56")}


def test_listagg_skips_blank_and_single_versions_pass_through(warehouse):
    schema = pa.schema([("k", pa.int64()), ("p", pa.string()), ("tags", pa.string())])
    t, path = new_table(warehouse, "la", schema,
                        {"merge-engine": "aggregation", "fields.tags.aggregate-function": "listagg"})
    write_history(t, schema, [[[(INSERT, {"k": 1, "p": "a", "tags": " "}), (INSERT, {"k": 2, "p": "a", "tags": "\t"})]],
                              [[(INSERT, {"k": 1, "p": "a", "tags": "x"}), (INSERT, {"k": 3, "p": "a", "tags": "y"})]],
                              [[(INSERT, {"k": 1, "p": "a", "tags": ""}),
                                (INSERT, {"k": 3, "p": "a", "tags": "\u3000"})]],
                              [[(INSERT, {"k": 1, "p": "a", "tags": "z w"}),
                                (INSERT, {"k": 3, "p": "a", "tags": None})]]])
    want = [{"k": 1, "p": "a", "tags": "x,z w"}, {"k": 2, "p": "a", "tags": "\t"}, {"k": 3, "p": "a", "tags": "y"}]
    assert rows(t.to_arrow(), "k") == want
    # pypaimon 2.1.0 runs the merge function on single-version keys too (Java's ReducerMergeFunctionWrapper
    # passes them through), so it turns the lone blank value of key 2 into null
    assert rows(pypaimon_read(path), "k") == [want[0], dict(want[1], tags=None), want[2]]


# ---- partial-update -------------------------------------------------------------------------------

PU_SCHEMA = pa.schema([("k", pa.int64()), ("p", pa.string()), ("a", pa.int32()), ("b", pa.string()),
                       ("c", pa.float64()), ("d", pa.date32())])


def pu_row(rng, k, c, w):
    m = lambda v: None if rng.random() < 0.5 else v  # noqa: E731
    return {"k": k, "p": f"p{k % 2}", "a": m(rng.randint(0, 99)), "b": m(f"c{c}w{w}"), "c": m(rng.uniform(0, 1)),
            "d": m(dt.date(2024, 1, 1) + dt.timedelta(days=rng.randint(0, 300)))}


def test_partial_update_matches_reference_and_pypaimon(warehouse):
    rng = random.Random(3)
    t, path = new_table(warehouse, "pu", PU_SCHEMA, {"merge-engine": "partial-update"})
    kinds = lambda r: r.choice([INSERT, UPDATE_AFTER])  # noqa: E731
    versions = write_history(t, PU_SCHEMA, random_history(rng, pu_row, kinds=kinds))
    want = model(expected("partial-update", versions, {}), PU_SCHEMA.names)
    assert ours(t) == want
    assert any(None in r.values() for r in want) and any(len(v) > 2 for v in versions.values())
    assert norm(rows(pypaimon_read(path).select(PU_SCHEMA.names), ["k", "p"])) == want


@pytest.mark.parametrize("options", [{"ignore-delete": "true"}, {"partial-update.remove-record-on-delete": "true"}])
def test_partial_update_deletes(warehouse, options):
    rng = random.Random(8)
    opts = {"merge-engine": "partial-update", **options}
    t, _ = new_table(warehouse, "pud", PU_SCHEMA, opts)
    kinds = lambda r: r.choice([INSERT, UPDATE_AFTER, UPDATE_AFTER, UPDATE_BEFORE, DELETE])  # noqa: E731
    versions = write_history(t, PU_SCHEMA, random_history(rng, pu_row, n_commits=5, kinds=kinds))
    want = model(expected("partial-update", versions, opts), PU_SCHEMA.names)
    assert ours(t) == want
    first_retract = [k for k, v in versions.items() if len(v) > 1 and v[0][0] in RETRACT]
    assert first_retract  # the initRow quirk is exercised


def test_partial_update_remove_record_on_delete_restarts_from_the_delete_row(warehouse):
    t, _ = new_table(warehouse, "pur", PU_SCHEMA, {"merge-engine": "partial-update",
                                                  "partial-update.remove-record-on-delete": "true"})
    base = {"k": 1, "p": "a", "a": 1, "b": "x", "c": 0.5, "d": None}
    nulls = {"a": None, "b": None, "c": None, "d": None}
    write_history(t, PU_SCHEMA, [[[(INSERT, base)]], [[(DELETE, {**base, **nulls})]]])
    assert t.to_arrow().num_rows == 0
    write_history(t, PU_SCHEMA, [[[(INSERT, {**base, **nulls, "b": "y"})]]])
    assert t.to_arrow().to_pylist() == [{"k": 1, "p": "a", "a": None, "b": "y", "c": None, "d": None}]


def test_partial_update_refuses_deletes_by_default(warehouse):
    t, _ = new_table(warehouse, "pu_err", PU_SCHEMA, {"merge-engine": "partial-update"})
    row = {"k": 1, "p": "a", "a": 1, "b": None, "c": None, "d": None}
    write_history(t, PU_SCHEMA, [[[(DELETE, dict(row, k=2))]]])
    assert t.to_arrow().num_rows == 0  # a lone -D never reaches the merge function
    write_history(t, PU_SCHEMA, [[[(INSERT, row)]], [[(DELETE, row)]]])
    with pytest.raises(PaimonError, match="Partial update can not accept delete records.*ignore-delete"):
        t.to_arrow()


# ---- first-row ------------------------------------------------------------------------------------

def test_first_row_keeps_the_lowest_sequence_and_refuses_deletes(warehouse):
    rng = random.Random(4)
    t, path = new_table(warehouse, "fr", PU_SCHEMA, {"merge-engine": "first-row"})
    versions = write_history(t, PU_SCHEMA, random_history(rng, pu_row))
    want = model(expected("first-row", versions, {}), PU_SCHEMA.names)
    assert norm(rows(merged(t), ["k", "p"])) == want
    # a batch read (ours, pypaimon's, Java's) skips level-0 files of first-row tables: before
    # compaction it sees nothing
    assert pypaimon_read(path).num_rows == 0 and t.to_arrow().num_rows == 0
    row = {"k": 1000, "p": "p0", "a": 1, "b": None, "c": None, "d": None}
    write_history(t, PU_SCHEMA, [[[(INSERT, row)]], [[(DELETE, row)]]])
    with pytest.raises(PaimonError, match="First row merge engine can not accept DELETE/UPDATE_BEFORE"):
        merged(t)
    t2, _ = new_table(warehouse, "fr2", PU_SCHEMA, {"merge-engine": "first-row", "ignore-delete": "true"})
    versions = write_history(t2, PU_SCHEMA, [[[(DELETE, row)]], [[(INSERT, dict(row, a=2))]],
                                             [[(INSERT, dict(row, a=3))]],
                                             [[(DELETE, dict(row, k=7)), (INSERT, dict(row, k=8))]],
                                             [[(UPDATE_BEFORE, dict(row, k=7))]]])
    assert rows(merged(t2), "k") == [dict(row, k=8), dict(row, a=2)]
    want = model(expected("first-row", versions, {"ignore-delete": "true"}), PU_SCHEMA.names)
    assert rows(merged(t2), "k") == want


# ---- options --------------------------------------------------------------------------------------

@pytest.mark.parametrize("options,message", [
    ({"merge-engine": "aggregation", "fields.a.aggregate-function": "count"}, "unknown aggregate function 'count'"),
    ({"merge-engine": "aggregation", "fields.default-aggregate-function": "count"}, "unknown function 'count'"),
    ({"merge-engine": "aggregation", "fields.a.aggregate-function": "sum", "fields.a.dbt-paimon.count": "yes"},
     "must be true or false"),
    ({"merge-engine": "aggregation", "fields.zz.dbt-paimon.count": "true"}, "names column 'zz'"),
    ({"merge-engine": "aggregation", "fields.a.dbt-paimon.count": "true"},
     "stored as 'fields.a.aggregate-function'='sum'"),
    ({"merge-engine": "partial-update", "fields.a.sequence-group": "zz"}, "names column 'zz'"),
    ({"fields.a.sequence-group": "b"}, "is for merge-engine 'partial-update'"),
    ({"merge-engine": "aggregation", "fields.b.distinct": "maybe"}, "must be true or false"),
    ({"merge-engine": "partial-update", "fields.a.aggregate-function": "sum"}, "Must use sequence group"),
    ({"merge-engine": "partial-update", "ignore-delete": "true", "partial-update.remove-record-on-delete": "true"},
     "conflicting behavior"),
    ({"fields.a.ignore-retract": "maybe"}, "must be true or false"),
    ({"num-levels": "1"}, "'num-levels' must be at least 2"),
])
def test_merge_options_are_checked(table_path, options, message):
    with pytest.raises(SchemaError) as e:
        FileStoreTable.create(table_path, PU_SCHEMA, ["k", "p"], ["p"], options)
    assert message in str(e.value)


def test_count_marker_and_type_checks(warehouse):
    ok = {"merge-engine": "aggregation", "fields.a.aggregate-function": "sum", "fields.a.dbt-paimon.count": "TRUE",
          "fields.b.list-agg-delimiter": ";", "fields.b.aggregate-function": "listagg", "num-levels": "3"}
    t, _ = new_table(warehouse, "marker", PU_SCHEMA, ok)
    assert t.schema.options["fields.a.dbt-paimon.count"] == "true" and t.schema.core.is_count("a")
    assert t.schema.core.num_levels == 3 and not t.schema.core.is_count("b")
    # a function that does not fit its column's type is refused when the table is created
    with pytest.raises(SchemaError, match="column 'b' is STRING: aggregate function 'sum' needs a numeric type"):
        new_table(warehouse, "bad", PU_SCHEMA, {"merge-engine": "aggregation", "fields.b.aggregate-function": "sum"})
    with pytest.raises(SchemaError, match="'bool_or' needs BOOLEAN"):
        new_table(warehouse, "bad2", PU_SCHEMA,
                  {"merge-engine": "aggregation", "fields.a.aggregate-function": "bool_or"})


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation"])
def test_one_file_is_read_as_it_is_unless_it_holds_a_retract(warehouse, engine):
    """A split of one file without -D/-U rows needs no merge (Paimon's raw-convertible section): it
    is read as its value columns. A file holding a retract is merged, so the key it deletes is gone."""
    from dbt_paimon.store.read.read import raw_convertible
    options = {"merge-engine": engine, **({"partial-update.remove-record-on-delete": "true"}
                                           if engine == "partial-update" else {})}
    t, path = new_table(warehouse, f"raw_{engine}", PU_SCHEMA, {**options, "bucket": "1"})
    row = {"k": 1, "p": "p1", "a": 1, "b": "x", "c": 1.5, "d": None}
    write_history(t, PU_SCHEMA, [[[(INSERT, row), (INSERT, dict(row, k=3, a=None))]]])
    [split] = t.plan().splits
    assert raw_convertible(split)
    want = [row, dict(row, k=3, a=None)]
    assert ours(t) == want
    if engine == "deduplicate":  # pypaimon 2.1 reads no partial-update deletes
        assert norm(rows(pypaimon_read(path), ["k", "p"])) == want

    t2, path2 = new_table(warehouse, f"retract_{engine}", PU_SCHEMA, {**options, "bucket": "1"})
    write_history(t2, PU_SCHEMA, [[[(INSERT, row), (DELETE, dict(row, k=3))]]])
    [split] = t2.plan().splits
    assert split.files[0].delete_row_count == 1 and not raw_convertible(split)
    assert ours(t2) == [row]
    if engine == "deduplicate":
        assert norm(rows(pypaimon_read(path2), ["k", "p"])) == [row]
