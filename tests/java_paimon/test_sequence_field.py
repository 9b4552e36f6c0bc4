"""`sequence.field` tables between Java Paimon and us: Java writes versions whose sequence values
arrive out of order (nulls among them), we read them as Java and pypaimon 2.1 do; we upsert and
compact on top, and all three read the same again.

Each Java commit holds one row per key (Paimon 1.4's write buffer ignored a descending sort order
inside one commit, which 2.0 honours; both honour it across commits), so the rows' order is the commits'.
"""

from __future__ import annotations

import pytest

from dbt_paimon.engine import RunSettings, compact
from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read, rows

from .javapaimon import Read, Write

FIELDS = [("id", "BIGINT NOT NULL"), ("v", "STRING"), ("s", "BIGINT"), ("t", "INT")]
SPARK = "id bigint, v string, s bigint, t int"
# name -> table options
TABLES = {
    "dedup": {"bucket": "2", "sequence.field": "s"},
    "descending": {"bucket": "2", "sequence.field": "s", "sequence.field.sort-order": "descending"},
    "two fields": {"bucket": "2", "sequence.field": "s,t"},
    "partial-update": {"bucket": "2", "sequence.field": "s", "merge-engine": "partial-update"},
    "aggregation": {"bucket": "2", "sequence.field": "s", "merge-engine": "aggregation",
                    "fields.t.aggregate-function": "sum"},
}
# Java's commits (id, v, s, t): key 1's sequence falls, key 2's rises, key 3's is null then set,
# key 4's is set then null, key 5's ties on s and is decided by t (or by the commit order)
JAVA_COMMITS = [
    [(1, "a", 5, 1), (2, "a", 1, 1), (3, "a", None, 1), (4, "a", 3, 1), (5, "a", 2, 1)],
    [(1, "b", 3, 2), (2, "b", 4, 2), (3, "b", 2, 2), (4, "b", None, 2), (5, "b", 2, 0)],
]
# our upsert (one row per key): key 1 older than every stored version, key 2 newer, key 6 new
OURS = [(1, "c", 1, 3), (2, "c", 9, 3), (6, "c", 7, 3)]


def _latest(options: dict, versions: list[tuple]) -> dict | None:
    """The version Paimon's merge keeps last (rows of one key in write order): by the sequence
    fields (null oldest; descending reverses values only), then the write order."""
    fields = [{"s": 2, "t": 3}[f] for f in options["sequence.field"].split(",")]
    sign = -1 if options.get("sequence.field.sort-order") == "descending" else 1

    def rank(i):
        row = versions[i]
        return tuple((0, 0) if row[f] is None else (1, sign * row[f]) for f in fields) + (i,)
    return [versions[i] for i in sorted(range(len(versions)), key=rank)]


def _expected(options: dict, commits: list[list[tuple]]) -> list[dict]:
    by_key: dict[int, list[tuple]] = {}
    for commit in commits:
        for row in commit:
            by_key.setdefault(row[0], []).append(row)
    engine = options.get("merge-engine", "deduplicate")
    out = []
    for key, versions in sorted(by_key.items()):
        ordered = _latest(options, versions)
        last = ordered[-1]
        if engine == "partial-update":  # non-null values overwrite, in the merge order
            merged = list(ordered[0])
            for row in ordered[1:]:
                merged = [new if new is not None else old for old, new in zip(merged, row)]
            last = tuple(merged)
        elif engine == "aggregation":  # t summed; v last non-null; s (the sequence field) last value
            v = [r[1] for r in ordered if r[1] is not None]
            last = (key, v[-1] if v else None, ordered[-1][2], sum(r[3] for r in ordered if r[3] is not None))
        out.append(dict(zip(("id", "v", "s", "t"), last)))
    return out


def _java_rows(commit: list[tuple]) -> list[dict]:
    return [dict(zip(("id", "v", "s", "t"), r)) for r in commit]


@pytest.fixture(scope="module")
def written(java, tmp_path_factory):
    db = tmp_path_factory.mktemp("sequence-field") / "wh" / "db.db"
    db.mkdir(parents=True)
    paths = {name: str(db / name.replace(" ", "_")) for name in TABLES}
    requests = []
    for name, options in TABLES.items():
        create = {"fields": FIELDS, "primary_keys": ["id"], "partition_keys": [], "options": options}
        requests += [Write(paths[name], _java_rows(JAVA_COMMITS[0]), create),
                     Write(paths[name], _java_rows(JAVA_COMMITS[1]))]
    requests += [Read(p) for p in paths.values()]
    results = java.run(requests)
    assert results[:2 * len(TABLES)] == [None] * (2 * len(TABLES)), results
    return paths, dict(zip(TABLES, results[2 * len(TABLES):]))


@pytest.mark.parametrize("name", list(TABLES))
def test_we_read_javas_sequence_field_tables_as_java_and_pypaimon_do(written, name):
    paths, java_read = written
    expected = _expected(TABLES[name], JAVA_COMMITS)
    assert rows(java_read[name], "id") == expected
    assert rows(FileStoreTable.open(paths[name]).to_arrow(), "id") == expected
    assert rows(pypaimon_read(paths[name]), "id") == expected
    # a projection without the sequence field still merges by it
    assert rows(FileStoreTable.open(paths[name]).to_arrow(columns=["id", "v"]), "id") == [
        {"id": r["id"], "v": r["v"]} for r in expected]


@pytest.mark.parametrize("execution", ["local", "distributed"])
def test_our_upserts_and_compaction_keep_javas_order(spark, java, written, execution):
    paths, _ = written
    for name, options in TABLES.items():
        path = paths[name]
        before = FileStoreTable.open(path).latest_snapshot().id
        result = upsert(spark.createDataFrame(OURS, SPARK), path, settings=RunSettings(execution=execution))
        expected = _expected(options, JAVA_COMMITS + [OURS])
        if name == "dedup":
            # one ascending field of a deduplicate table is the run's sequence_by: key 1's row is
            # older than the stored one
            assert (result.inserted, result.updated, result.skipped) == (1, 1, 1), name
        java_before_compaction, = java.read(path)
        compact(spark, path, settings=RunSettings(execution=execution))
        java_after, = java.read(path)
        for label, got in (("java", java_before_compaction), ("java after compaction", java_after),
                           ("ours", FileStoreTable.open(path).to_arrow()), ("pypaimon", pypaimon_read(path))):
            assert rows(got, "id") == expected, (name, label)
        # the next test run starts from Java's table again
        FileStoreTable.open(path).rollback_to(before)
