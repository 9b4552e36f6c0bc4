"""Postpone bucket mode (`bucket` = -2, issue 40): a table Java Paimon wrote reads as Paimon's batch
readers read it, without the rows still waiting in bucket -2 (Paimon's postpone compaction moves them
into buckets); writing one is refused before anything is written (not supported yet)."""

from __future__ import annotations

import pytest

from dbt_paimon.engine import compact, delete, upsert
from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.errors import SchemaError
from tests.oracle import pypaimon_read

from .javapaimon import Read, Write

FIELDS = [("id", "BIGINT NOT NULL"), ("dt", "STRING NOT NULL"), ("v", "STRING")]


def test_a_postpone_table_reads_as_paimon_reads_it_and_is_not_written(spark, java, warehouse):
    path = f"{warehouse}/db.db/postponed"
    create = {"fields": FIELDS, "primary_keys": ["dt", "id"], "partition_keys": ["dt"], "options": {"bucket": "-2"}}
    done = java.run([Write(path, [{"id": k, "dt": "a", "v": "x"} for k in range(5)], create=create),
                     Write(path, [{"id": 1, "dt": "a", "v": "y"}]), Read(path)])
    assert not isinstance(done[0], Exception) and not isinstance(done[1], Exception), done
    table = FileStoreTable.open(path)
    assert table.schema.bucket_mode == "POSTPONE_MODE"
    assert table.latest_snapshot().id == 2  # Java's rows wait in bucket -2
    assert done[2].num_rows == 0
    assert table.to_arrow().num_rows == 0 and pypaimon_read(path).num_rows == 0
    assert spark.read.format("paimon").load(path).count() == 0
    for write in (lambda: upsert(spark.createDataFrame([(9, "a", "z")], "id bigint, dt string, v string"), path,
                                 primary_keys=["dt", "id"], partition_keys="dt"),
                  lambda: delete(spark, path, "id = 1"), lambda: compact(spark, path)):
        with pytest.raises(SchemaError, match="postpone bucket mode"):
            write()
    assert FileStoreTable.open(path).latest_snapshot().id == 2
