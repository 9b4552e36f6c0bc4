"""Data files Java Paimon wrote under `data-file.external-paths` (outside the table's directory, their
manifest entries naming where): we read them, upsert beside them (our files in the table's own
directories), compact them away and expire them, and Java reads the same rows throughout."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import SchemaError
from tests.oracle import rows

from .javapaimon import Read, Write

FIELDS = [("k", "INT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")]
ARROW = pa.schema([pa.field("k", pa.int32(), False), pa.field("dt", pa.string(), False), ("v", pa.string())])


def test_we_read_write_compact_and_expire_files_in_external_paths(java, warehouse, tmp_path):
    from dbt_paimon.store.clone import clone_table
    path, far = f"{warehouse}/db.db/external", tmp_path / "far"
    create = {"fields": FIELDS, "primary_keys": ["k", "dt"], "partition_keys": ["dt"],
              "options": {"bucket": "2", "data-file.external-paths": f"file://{far}",
                          "data-file.external-paths.strategy": "round-robin", "write-only": "true"}}
    first = [{"k": k, "dt": f"d{k % 2}", "v": "java"} for k in range(10)]
    second = [{"k": k, "dt": f"d{k % 2}", "v": "java2"} for k in range(0, 10, 3)]
    assert java.run([Write(path, first, create), Write(path, second)]) == [None, None]
    model = {(r["dt"], r["k"]): r["v"] for r in first + second}
    table = FileStoreTable.open(path)
    files = [f for s in table.plan().splits for f in s.files]
    assert files and all(f.external_path and f.external_path.startswith(f"file:{far}") for f in files)
    assert not any(n.startswith("data-") for _, _, ns in os.walk(path) for n in ns)  # none in the table's own dirs

    def want():
        return sorted(({"k": k, "dt": d, "v": v} for (d, k), v in model.items()), key=lambda r: (r["k"], r["dt"]))

    assert rows(table.to_arrow(), ["k", "dt"]) == want()
    from dbt_paimon.store import system_tables
    assert sorted(system_tables.files(table)["file_path"].to_pylist()) == sorted(f.external_path[5:] for f in files)
    with pytest.raises(SchemaError, match="external paths"):
        clone_table(table.io, path, f"{warehouse}/db.db/external_clone")
    assert not os.path.exists(f"{warehouse}/db.db/external_clone")

    # ours: an upsert beside Java's files (a merge read across both), then a full compaction and
    # an expiration of every older snapshot, which deletes Java's external files
    w = table.new_write()
    w.write(pa.Table.from_pylist([{"k": k, "dt": f"d{k % 2}", "v": "ours"} for k in range(1, 12, 2)], ARROW))
    w.commit()
    model.update({(f"d{k % 2}", k): "ours" for k in range(1, 12, 2)})
    java_upserted, = java.run([Read(path)])
    assert rows(java_upserted, ["k", "dt"]) == want() == rows(FileStoreTable.open(path).to_arrow(), ["k", "dt"])
    from dbt_paimon.store.compaction.compact import compact_bucket
    table = FileStoreTable.open(path)
    entries = [e for s in table.plan().splits for e in compact_bucket(table, s)]
    table.new_commit().commit(entries, "COMPACT")
    table = FileStoreTable.open(path)
    table.expire_snapshots(retain_max=1, retain_min=1)
    assert not any(f for _, _, fs in os.walk(far) for f in fs)  # Java's external files are gone with their snapshots
    java_compacted, = java.run([Read(path)])
    assert rows(java_compacted, ["k", "dt"]) == want() == rows(FileStoreTable.open(path).to_arrow(), ["k", "dt"])
