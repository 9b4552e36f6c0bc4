"""Java Paimon (the reference release, reference.py) reads every snapshot Spark SQL statements made on our
tables (sql/): INSERT, INSERT OVERWRITE, DELETE, UPDATE, MERGE INTO, TRUNCATE and ALTER TABLE on a key table, a
cross-partition table and an append table, each statement's snapshot read as of its id."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dbt_paimon.store import FileStoreTable
from tests.engine.helpers import sql_tables

from ..java_paimon.javapaimon import Read, assert_same

STATEMENTS = {
    "keyed": ["INSERT INTO db.keyed VALUES (2, 'a', 21), (4, 'b', 40)",
              "ALTER TABLE db.keyed ADD COLUMNS (note string)",
              "INSERT OVERWRITE db.keyed PARTITION (dt = 'a') VALUES (5, 50, 'x')",
              "ALTER TABLE db.keyed RENAME COLUMN note TO remark",
              "DELETE FROM db.keyed WHERE id = 3",
              "UPDATE db.keyed SET v = v + 1, remark = 'y' WHERE id = 4",
              "ALTER TABLE db.keyed ALTER COLUMN v TYPE bigint"],
    "cross": ["INSERT INTO db.cross VALUES (1, 'b', 11)",
              "UPDATE db.cross SET dt = 'c' WHERE id = 2",
              "MERGE INTO db.cross t USING (SELECT 2 AS id, 'a' AS dt, 2 AS v UNION ALL SELECT 9, 'b', 9) s "
              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
              "INSERT OVERWRITE db.cross VALUES (3, 'a', 33)",
              "DELETE FROM db.cross WHERE v >= 20",
              "TRUNCATE TABLE db.cross PARTITION (dt = 'b')"],
    "logs": ["INSERT INTO db.logs VALUES (1, 'a', 11)",
             "INSERT OVERWRITE db.logs PARTITION (dt = 'b') SELECT 6, 60",
             "DELETE FROM db.logs WHERE v = 10",
             "UPDATE db.logs SET v = 61 WHERE id = 6",
             "MERGE INTO db.logs t USING (SELECT 6 AS id, 62 AS v UNION ALL SELECT 8, 80) s ON t.id = s.id "
             "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (id, dt, v) VALUES (s.id, 'd', s.v)",
             "TRUNCATE TABLE db.logs"],
}
KEYS = {"keyed": ["id", "dt"], "cross": ["id"], "logs": ["id", "dt", "v"]}


@pytest.fixture(scope="module")
def statements(spark, java, tmp_path_factory):
    base = sql_tables(spark, str(tmp_path_factory.mktemp("sql") / "wh"))
    out = SimpleNamespace(snapshots={}, reads={})
    for name, texts in STATEMENTS.items():
        path = f"{base}/{name}"
        for text in texts:
            spark.sql(text)
            if not text.startswith("ALTER"):  # a schema change makes no snapshot: read at the end
                sid = FileStoreTable.open(path).latest_snapshot().id
                out.snapshots[(name, text)] = (path, sid)
                out.reads[(name, text)] = Read(path, {"scan.snapshot-id": str(sid)})
        out.reads[(name, "latest")] = Read(path)
    out.java = dict(zip(out.reads, java.run(list(out.reads.values()))))
    out.base = base
    return out


@pytest.mark.parametrize("name", list(STATEMENTS))
def test_java_reads_each_statements_snapshot_as_we_do(statements, name):
    for text in STATEMENTS[name]:
        if text.startswith("ALTER"):
            continue
        path, sid = statements.snapshots[(name, text)]
        assert_same(statements.java[(name, text)], FileStoreTable.open(path).to_arrow(snapshot_id=sid), KEYS[name])
    table = FileStoreTable.open(f"{statements.base}/{name}")
    latest = statements.java[(name, "latest")]
    assert_same(latest, table.to_arrow(), KEYS[name])
    if name == "keyed":  # every ALTER, as Java reads the table now
        assert latest.schema.names == ["id", "dt", "v", "remark"]
        assert str(latest.schema.field("v").type) == "int64"
        assert [(r["id"], r["remark"]) for r in latest.sort_by("id").to_pylist()] == [(4, "y"), (5, "x")]
