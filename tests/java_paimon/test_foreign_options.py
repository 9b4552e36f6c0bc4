"""Options another writer stored that dbt-paimon does not follow and that change what a read returns
or what a write must do (store/schema/foreign_options.py): Java makes such tables; we refuse to read them, or
to write them while still reading them, naming the option, and commit nothing."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.common.errors import SchemaError

from .javapaimon import Read, Write

FIELDS = [("id", "BIGINT NOT NULL"), ("v", "BIGINT"), ("ts", "TIMESTAMP(3)")]
ROW = {"id": 1, "v": 5, "ts": None}
KEYED = {"bucket": "1"}
TABLES = {  # name: (primary key, options, the option named, refused on read too)
    "agg_remove": (["id"], {**KEYED, "merge-engine": "aggregation", "fields.v.aggregate-function": "sum",
                            "aggregation.remove-record-on-delete": "true"},
                   "aggregation.remove-record-on-delete", True),
    "expiring": (["id"], {**KEYED, "record-level.expire-time": "1 d", "record-level.time-field": "ts"},
                 "record-level.expire-time", False),
    "tracked": ([], {"row-tracking.enabled": "true"}, "row-tracking.enabled", False),
}


@pytest.mark.parametrize("name", list(TABLES))
def test_options_we_do_not_follow_are_refused_by_name(spark, java, warehouse, name):
    key, options, option, on_read = TABLES[name]
    path = f"{warehouse}/db.db/foreign_{name}"
    done = java.run([Write(path, [ROW], {"fields": FIELDS, "primary_keys": key, "partition_keys": [],
                                         "options": options}), Read(path)])
    assert done[0] is None, done
    table = FileStoreTable.open(path)
    sid = table.latest_snapshot().id
    if on_read:
        with pytest.raises(SchemaError, match=rf"neither reads nor writes it: .*{option}="):
            table.to_arrow()
    else:
        assert table.to_arrow().to_pylist() == done[1].to_pylist() == [ROW]
    with pytest.raises(SchemaError, match=rf"{option}="):
        w = table.new_write()
        w.write(pa.Table.from_pylist([{**ROW, "id": 2}], table.schema.arrow_schema()))
        w.commit()
    from dbt_paimon.engine import RunSettings, compact
    from dbt_paimon.engine import delete
    files_before = sorted(str(p) for p in __import__("pathlib").Path(path).rglob("data-*"))
    with pytest.raises(SchemaError, match=rf"{option}="):
        compact(spark, path, settings=RunSettings(execution="local"))
    with pytest.raises(SchemaError, match=rf"{option}="):
        delete(spark, path, "id = 1")
    assert sorted(str(p) for p in __import__("pathlib").Path(path).rglob("data-*")) == files_before  # none written
    assert FileStoreTable.open(path).latest_snapshot().id == sid


def test_a_fallback_branch_is_refused_on_read(java, warehouse):
    """Java sets `scan.fallback-branch` only once the branch exists (we make no branches): the option
    is put in a schema as Java's ALTER would, on a table Java wrote. Refused even where the table has
    every partition (we do not read branches to know)."""
    import dataclasses
    from dbt_paimon.store.schema.schema import SchemaManager
    path = f"{warehouse}/db.db/foreign_fallback"
    done = java.run([Write(path, [ROW], {"fields": FIELDS, "primary_keys": ["id"], "partition_keys": [],
                                         "options": KEYED})])
    assert done == [None]
    manager = SchemaManager(FileStoreTable.open(path).io, path)
    latest = manager.latest()
    manager.commit(dataclasses.replace(latest, id=latest.id + 1,
                                       options={**latest.options, "scan.fallback-branch": "old"}))
    with pytest.raises(SchemaError, match="neither reads nor writes it: scan.fallback-branch='old'"):
        FileStoreTable.open(path).to_arrow()
