"""A plain per-key reference of Paimon's merge functions, which the merge-engine tests hold ours
against, and the helpers that write a random history into a table of ours and read it back.

The reference follows the Java classes (paimon-core mergetree/compact): ReducerMergeFunctionWrapper
(one version: passed through), DeduplicateMergeFunction, FirstRowMergeFunction,
PartialUpdateMergeFunction (without sequence groups: tests/java_paimon/test_sequence_groups.py has
those), AggregateMergeFunction + Field*Agg; readers drop results that are not +I/+U.
"""

import math
import os
import struct

import pyarrow as pa

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.format.datafile import DELETE, INSERT, UPDATE_BEFORE
from tests.oracle import rows

RETRACT = (UPDATE_BEFORE, DELETE)
JAVA_BLANK = set(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\u3000")


# ---- the reference: one key at a time, as the Java classes do it ----------------------------------

def java_compare(a, b):
    """InternalRowUtils.compare: Double.compare for floats (NaN greatest, -0.0 < 0.0)."""
    if isinstance(a, float):
        if a < b:
            return -1
        if a > b:
            return 1
        ba, bb = (struct.unpack(">q", struct.pack(">d", math.nan if math.isnan(x) else x))[0] for x in (a, b))
        return 0 if ba == bb else (-1 if ba < bb else 1)
    return -1 if a < b else (1 if a > b else 0)


def trunc_div(a, b):
    if isinstance(a, float):
        return a / b
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


class RefAgg:
    def __init__(self, fn, delimiter=",", ignore_retract=False):
        self.fn, self.delimiter, self.ignore_retract, self.init = fn, delimiter, ignore_retract, False

    def agg(self, acc, v):
        fn = self.fn
        if fn in ("sum", "product", "min", "max", "bool_and", "bool_or"):
            if acc is None or v is None:
                return v if acc is None else acc
            if fn == "sum":
                return acc + v
            if fn == "product":
                return acc * v
            if fn == "min":
                return acc if java_compare(acc, v) < 0 else v
            if fn == "max":
                return v if java_compare(acc, v) < 0 else acc
            return (acc and v) if fn == "bool_and" else (acc or v)
        if fn in ("last_value", "primary_key"):
            return v
        if fn == "last_non_null_value":
            return acc if v is None else v
        if fn == "first_value":
            if not self.init:
                self.init = True
                return v
            return acc
        if fn == "first_non_null_value":
            if not self.init and v is not None:
                self.init = True
                return v
            return acc
        if fn == "listagg":
            blank = lambda s: all(c in JAVA_BLANK for c in s)  # noqa: E731
            if v is None or blank(v):
                return acc
            if acc is None or blank(acc):
                return v
            return acc + self.delimiter + v
        raise AssertionError(fn)

    def retract(self, acc, v):
        fn = self.fn
        if self.ignore_retract:
            return acc
        if fn == "sum":
            if acc is None or v is None:
                return (None if v is None else -v) if acc is None else acc
            return acc - v
        if fn == "product":
            return acc if acc is None or v is None else trunc_div(acc, v)
        if fn == "last_value":
            return None
        if fn == "last_non_null_value":
            return None if v is not None else acc
        if fn == "primary_key":
            return v
        raise NotImplementedError(f"{fn} does not support retraction")


def ref_merge(engine, versions, options, funcs=None):
    """The read result of one key (dict) or None. versions: [(kind, row)] oldest first."""
    ignore_delete = options.get("ignore-delete") == "true"
    if engine == "aggregation" and ignore_delete:  # Paimon drops retractions when writing
        versions = [(k, r) for k, r in versions if k not in RETRACT]
        if not versions:
            return None
    if len(versions) == 1:  # ReducerMergeFunctionWrapper
        kind, row = versions[0]
        return None if kind in RETRACT else dict(row)
    if engine == "deduplicate":
        live = [(k, r) for k, r in versions if not (ignore_delete and k in RETRACT)]
        return None if not live or live[-1][0] in RETRACT else dict(live[-1][1])
    if engine == "first-row":
        if not ignore_delete and any(k in RETRACT for k, _ in versions):
            raise ValueError("first-row cannot accept retracts")
        adds = [r for k, r in versions if k not in RETRACT]
        return dict(adds[0]) if adds else None
    columns = list(versions[0][1])
    if engine == "partial-update":
        remove = options.get("partial-update.remove-record-on-delete") == "true"
        state = {c: None for c in columns}
        filled = met_insert = current_delete = False
        for kind, row in versions:
            current_delete = False
            if kind in RETRACT:
                if not filled:
                    state, filled = dict(row), True
                if ignore_delete:
                    continue
                if remove:
                    if kind == DELETE:
                        current_delete, state = True, dict(row)
                    continue
                raise ValueError("partial-update cannot accept retracts")
            for c, v in row.items():
                if v is not None:
                    state[c] = v
            met_insert = filled = True
        return None if current_delete or not met_insert else state
    if engine == "aggregation":
        aggs = {c: RefAgg(*funcs[c]) for c in columns}
        state = {c: None for c in columns}
        for kind, row in versions:
            for c in columns:
                a = aggs[c]
                state[c] = a.retract(state[c], row[c]) if kind in RETRACT else a.agg(state[c], row[c])
        return state
    raise AssertionError(engine)


# ---- helpers --------------------------------------------------------------------------------------

def write_history(t, schema, commits):
    """commits: [[write, ...], ...], write: [(kind, row)] with each key at most once. Returns the
    versions of each key, oldest first."""
    versions = {}
    for writes in commits:
        w = t.new_write()
        for write in writes:
            w.write(pa.Table.from_pylist([r for _, r in write], schema), row_kinds=[k for k, _ in write])
            for kind, row in write:
                versions.setdefault((row["k"], row["p"]), []).append((kind, row))
        w.commit()
    return versions


def expected(engine, versions, options, funcs=None):
    out = {}
    for key, vs in versions.items():
        r = ref_merge(engine, vs, options, funcs)
        if r is not None:
            out[key] = r
    return out


def norm(rs):
    """Rows for exact comparison: NaN and -0.0 made visible, floats of FLOAT columns as Arrow gives."""
    def n(v):
        if isinstance(v, float):
            return "NaN" if math.isnan(v) else ("-0.0" if v == 0 and math.copysign(1, v) < 0 else v)
        return v
    return [{c: n(v) for c, v in r.items()} for r in rs]


def model(exp, columns):
    return norm(sorted(({c: r[c] for c in columns} for r in exp.values()), key=lambda r: (r["k"], r["p"])))


def ours(t):
    return norm(rows(t.to_arrow(), ["k", "p"]))


def merged(t):
    """The merge of every live file, level 0 included (what a compaction writes): a batch read of a
    first-row table leaves level 0 out, so its merge function is checked through this."""
    return t.new_read().read(t.plan().splits)


def new_table(warehouse, name, schema, options):
    path = os.path.join(warehouse, "db.db", name)
    return FileStoreTable.create(path, schema, ["k", "p"], ["p"], {"bucket": "2", **options}), path


def random_history(rng, make_row, n_commits=4, writes=2, keys=30, per_write=14, kinds=lambda rng: INSERT):
    commits = []
    for c in range(n_commits):
        commit = []
        for w in range(writes):
            ks = rng.sample(range(keys), per_write)
            commit.append([(kinds(rng), make_row(rng, k, c, w)) for k in ks])
        commits.append(commit)
    return commits
