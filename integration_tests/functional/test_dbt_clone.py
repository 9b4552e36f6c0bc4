"""`dbt clone` (issue 13, item 6): a Paimon table in the state becomes an independent Paimon table in
the target, its data files shared (hard links: no bytes copied), read back by pypaimon; a dbt-spark
table becomes a view, as dbt does where a table cannot be cloned. dbt-tests-adapter's clone classes
are not used: they expect every table (seeds, dbt-spark tables) cloned as a table, which only
Delta's shallow clone does here."""

import os
import shutil
from copy import deepcopy

import pytest
from dbt.tests.util import run_dbt

from dbt_paimon.store import FileStoreTable
from tests.oracle import pypaimon_read

CUSTOMERS_SQL = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
select * from values (1, 'a', 10), (2, 'a', 20), (3, 'b', 30) as src(id, dt, v)
"""
PLAIN_SQL = "{{ config(materialized='table') }} select 1 as id"
MORE_SQL = """
{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt') }}
select * from values (2, 'b', 21), (4, 'c', 40) as src(id, dt, v)
"""


def _path(project, schema, name):
    return f"{project.adapter.credentials.warehouse}/{schema}.db/{name}"


def _rows(path):
    return sorted((r["id"], r["dt"], r["v"]) for r in pypaimon_read(path).to_pylist())


class TestClone:
    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.sql": CUSTOMERS_SQL, "plain.sql": PLAIN_SQL}

    @pytest.fixture(scope="class")
    def other_schema(self, unique_schema):
        return unique_schema + "_dev"

    @pytest.fixture(scope="class")
    def profiles_config_update(self, dbt_profile_target, unique_schema, other_schema):
        outputs = {"default": dbt_profile_target, "dev": deepcopy(dbt_profile_target)}
        outputs["default"]["schema"] = unique_schema
        outputs["dev"]["schema"] = other_schema
        return {"test": {"outputs": outputs, "target": "default"}}

    def test_a_paimon_table_clones_as_a_table_of_its_own(self, project, unique_schema, other_schema):
        project.create_test_schema(other_schema)
        run_dbt(["run"])
        os.makedirs(os.path.join(project.project_root, "state"), exist_ok=True)
        shutil.copyfile(os.path.join(project.project_root, "target", "manifest.json"),
                        os.path.join(project.project_root, "state", "manifest.json"))
        prod, dev = _path(project, unique_schema, "customers"), _path(project, other_schema, "customers")
        results = run_dbt(["clone", "--state", "state", "--target", "dev"])
        assert {r.node.name: r.message.split(":")[0] for r in results}["customers"] == f"CLONE {other_schema}.customers"
        types = {r.identifier: r.type for r in project.adapter.list_relations(database=project.database,
                                                                                  schema=other_schema)}
        assert types == {"customers": "table", "plain": "view"}
        assert _rows(dev) == _rows(prod) == [(1, "a", 10), (2, "a", 20), (3, "b", 30)]
        clone = FileStoreTable.open(dev)
        split = clone.plan().splits[0]
        assert os.stat(os.path.join(clone.bucket_path(split.partition_values, split.bucket),
                                    split.files[0].file_name)).st_nlink == 2  # shared, not copied
        # again: the clone exists, nothing is done (dbt's "no-op", as for any clone target that exists)
        results = run_dbt(["clone", "--state", "state", "--target", "dev"])
        assert "no-op" in {r.node.name: r.message for r in results}["customers"].lower()
        # the dev table moves on alone (a key moves partition there, not in prod)
        (project.project_root / "models" / "customers.sql").write(MORE_SQL)
        run_dbt(["run", "--target", "dev", "--select", "customers"])
        assert _rows(dev) == [(1, "a", 10), (2, "b", 21), (3, "b", 30), (4, "c", 40)]
        assert _rows(prod) == [(1, "a", 10), (2, "a", 20), (3, "b", 30)]
        # --full-refresh replaces the clone with prod's rows again
        run_dbt(["clone", "--state", "state", "--target", "dev", "--full-refresh"])
        assert _rows(dev) == _rows(prod)
