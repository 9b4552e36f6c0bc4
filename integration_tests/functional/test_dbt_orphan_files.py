"""paimon_remove_orphan_files through dbt (issue 11, item 6): files a killed writer left behind are
listed by a dry run and deleted by a real one; a file any snapshot or tag references, or a file
younger than older_than, is never deleted. pypaimon reads the same rows throughout."""

import os
import time

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read

CUSTOMERS = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
select cast(id as int) as id, concat('d', cast(id % 2 as string)) as dt, cast(id * {{ var('batch', 1) }} as int) as v
from range(0, 4)
"""


def _rows(path):
    return sorted(tuple(r.values()) for r in pypaimon_read(path).to_pylist())


class TestRemoveOrphanFiles:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS}

    def test_orphans_go_referenced_and_young_files_stay(self, project):
        schema = project.test_schema
        path = project.adapter.paimon_table_path(project.adapter.Relation.create(schema=schema, identifier="customers"))
        run_dbt(["run", "--vars", "batch: 1"])
        run_dbt(["run-operation", "paimon_create_tag", "--args", f"{{relation: {schema}.customers, tag: first}}"])
        run_dbt(["run", "--vars", "batch: 2"])
        run_dbt(["run-operation", "paimon_expire", "--args", f"{{relation: {schema}.customers, retain_max: 1}}"])
        rows = _rows(path)
        day_ago = time.time() - 2 * 86400
        for f in (os.path.join(d, n) for d, _, ns in os.walk(path) for n in ns):
            os.utime(f, (day_ago, day_ago))  # every real file is old: only references may save them
        bucket = next(d for d, _, ns in os.walk(path) if os.path.basename(d).startswith("bucket-"))
        old_orphans = [os.path.join(bucket, "data-killed-writer-0.parquet"),
                       os.path.join(path, "manifest", "manifest-lost-0")]
        young_orphan = os.path.join(bucket, "data-in-flight-0.parquet")
        for f in old_orphans + [young_orphan]:
            with open(f, "wb") as out:
                out.write(b"x" * 100)
        for f in old_orphans:
            os.utime(f, (day_ago, day_ago))
        before = fingerprint(path)

        _, log = run_dbt_and_capture(["run-operation", "paimon_remove_orphan_files", "--args",
                                      f"{{relation: {schema}.customers, dry_run: true}}"])
        assert f"REMOVE ORPHAN FILES {schema}.customers: would delete 2 file(s), 200 bytes, older than 1 d" in log
        assert all(f in log for f in old_orphans) and young_orphan not in log
        assert fingerprint(path) == before

        _, log = run_dbt_and_capture(["run-operation", "paimon_remove_orphan_files", "--args",
                                      f"{{relation: {schema}.customers}}"])
        assert f"REMOVE ORPHAN FILES {schema}.customers: deleted 2 file(s), 200 bytes" in log
        assert not any(os.path.exists(f) for f in old_orphans) and os.path.exists(young_orphan)
        left = fingerprint(path)
        assert set(before) - set(left) == {os.path.relpath(f, path) for f in old_orphans}
        assert _rows(path) == rows
        # the tag's files (the first batch, expired from the snapshots) are still readable
        assert sorted(tuple(r.values()) for r in FileStoreTable.open(path).to_arrow(tag="first").to_pylist()) == \
            sorted((i, f"d{i % 2}", i) for i in range(4))
