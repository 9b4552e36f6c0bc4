"""A changelog table (changelog-producer input, lookup, full-compaction) written by turns by us and by
Paimon's own Spark connector: Paimon's streaming read (Java) of the whole table gives every commit's
changes, ours and the connector's alike, in commit order; the rows stay the model's. full-compaction:
the connector's 0.9 batch writer never compacts fully, so its commits' changes show in the changelog of
our next full compaction (against the previous one), as in Paimon; 2.0's compacts fully after its
commit (`full-compaction.delta-commits` 1), as ours does, and tells its own changes.

The table is a fixed-bucket one (the connector's 0.9 writer and ours share Paimon's bucket hash). Each
commit changes keys 1 and 2 and adds one: input gives each written row as +I; lookup gives -U/+U for
the stored keys and +I for the new one, in the COMPACT snapshot that follows the write (the connector
compacts its level-0 files up as ours does). Our incremental read of each snapshot's changelog
(`incremental-between`, scan mode changelog) gives the same changes, the connector's too.
"""

from __future__ import annotations

import pytest

from dbt_paimon.engine import upsert
from dbt_paimon.store import FileStoreTable
from tests.engine.helpers import change_records
from tests.java_paimon.javapaimon import Changes
from tests.oracle import rows

from .side_env import sql_values, table_name

SPARK = "id bigint, v string"


@pytest.mark.parametrize("producer", ["input", "lookup", "full-compaction"])
def test_ours_and_paimons_writer_both_feed_the_change_stream(spark, paimon_spark, java, warehouse, producer):
    path = f"{warehouse}/db.db/changelog_{producer.replace('-', '_')}"
    options = {"bucket": "2", "changelog-producer": producer}
    if producer == "full-compaction":  # ours compacts fully after every commit; the connector's 0.9
        options["full-compaction.delta-commits"] = "1"  # batch writer never does (no changelog of its own)
    wh, name = table_name(path)
    live: dict[int, str] = {}
    derived: dict[int, str] = {}  # the rows the changelog has told of so far
    expected: list[list[tuple]] = []  # each changelog's changes, sorted
    for turn, writer in enumerate(["ours", "paimon", "ours", "paimon"]):
        batch = {1: f"v{turn}", 2: f"v{turn}", 10 + turn: f"v{turn}"}
        if writer == "ours":
            upsert(spark.createDataFrame(list(batch.items()), SPARK), path, primary_keys="id",
                   options=options)
        else:
            paimon_spark.sql(wh, f"INSERT INTO {name} VALUES "
                                 + sql_values([{"id": k, "v": v} for k, v in batch.items()]))
        if producer == "input":
            expected.append(sorted(("+I", k, v) for k, v in batch.items()))
            live.update(batch)
            continue
        live.update(batch)
        if producer == "full-compaction" and writer == "paimon" and paimon_spark.line.name == "0.9":
            continue  # told at our next full compaction, against the previous one
        changes = [("+I", k, v) for k, v in live.items() if k not in derived]
        changes += [c for k, v in live.items() if k in derived and derived[k] != v
                    for c in (("-U", k, derived[k]), ("+U", k, v))]
        expected.append(sorted(changes))
        derived = dict(live)

    table = FileStoreTable.open(path)
    carrying = [s for s in range(1, table.latest_snapshot().id + 1)
                if table.snapshots.snapshot(s).changelog_manifest_list]
    changes, = java.run([Changes(path)])
    got: dict[int, list[tuple]] = {}
    for c in changes:
        got.setdefault(c["_snapshot"], []).append((c["_kind"], c["id"], c["v"]))
    assert [sorted(got[s]) for s in sorted(got)] == expected
    assert sorted(got) == carrying
    # our incremental read of each of those snapshots' changelog (incremental-between s-1,s): the same
    assert [change_records(table.read_between(s - 1, s, "changelog")) for s in carrying] == expected
    kinds = {table.snapshots.snapshot(s).commit_kind for s in carrying}
    assert kinds == {"APPEND" if producer == "input" else "COMPACT"}
    assert rows(table.to_arrow(), "id") == [{"id": k, "v": v} for k, v in sorted(live.items())]
