"""Our incremental reads and audit log against Java Paimon's: the comparisons the incremental-read
tests share (test_incremental_reads.py, test_incremental_matrix.py)."""

from __future__ import annotations

from dbt_paimon.store import FileStoreTable
from tests.engine.helpers import change_records
from tests.java_paimon.javapaimon import JavaError, Read

MODES = ("auto", "delta", "changelog")


def java_records(found) -> list[tuple]:
    return sorted((r["_kind"], r["id"], r["v"]) for r in found)


def source_rows(df) -> list[tuple]:
    return sorted(tuple(r) for r in df.select("rowkind", "id", "v").collect())


def audit_logs_agree(java, table: FileStoreTable, spark=None) -> int:
    """The audit log of the latest snapshot and of the first: ours (store, and with `spark` the
    source, also of each incremental range) and Java's."""
    first = table.snapshots.earliest_id()
    requests = [Read(table.path + "$audit_log"), Read(table.path + "$audit_log", {"scan.snapshot-id": str(first)})]
    latest, at_first = java.run(requests)
    for theirs, ours in ((latest, table.audit_log()), (at_first, table.audit_log(snapshot_id=first))):
        assert change_records(ours) == sorted(zip(*(theirs.column(c).to_pylist() for c in ("rowkind", "id", "v"))))
    if spark is not None:
        source = spark.read.format("paimon")
        assert source_rows(source.load(table.path + "$audit_log")) == change_records(table.audit_log())
        end = table.snapshots.latest_id()
        assert source_rows(source.option("incremental-between", f"1,{end}").load(table.path + "$audit_log")) == \
            change_records(table.read_between(1, end))
    return latest.num_rows


def _ranges(latest: int) -> list[tuple[int, int]]:
    return [(0, latest), (1, latest), (latest - 1, latest), (1, 2), (2, latest - 1)]


def compare_with_java(java, table: FileStoreTable, modes=MODES, spark=None) -> int:
    """Ours and Java's records of every range and mode; with `spark`, the `paimon` source's rows too:
    Java's inserted and updated records (a DataFrame has no retractions, as in Paimon's connector)."""
    latest = table.snapshots.latest_id()
    cases = [(r, m) for r in _ranges(latest) for m in modes]
    found = java.run([Read(table.path, {"incremental-between": f"{s},{e}", "incremental-between-scan-mode": m},
                           records=True) for (s, e), m in cases])
    records = 0
    for ((start, end), mode), theirs in zip(cases, found):
        assert not isinstance(theirs, JavaError), theirs
        ours = change_records(table.read_between(start, end, mode))
        assert ours == java_records(theirs), (start, end, mode)
        records += len(ours)
        if spark is not None:
            rows = (spark.read.format("paimon").option("incremental-between", f"{start},{end}")
                    .option("incremental-between-scan-mode", mode).load(table.path).select("id", "v").collect())
            assert sorted(map(tuple, rows)) == sorted((i, v) for k, i, v in ours if k in ("+I", "+U")), (start, end)
    return records
