"""Python models (issue 13, item 3): `def model(dbt, session)` runs in the adapter's own SparkSession
and is materialized as a dbt-spark `table`, or kept in Paimon (paimon_upsert, incremental merge,
file_format='paimon'), with the same configs as SQL models.

dbt-tests-adapter's BasePythonModelTests and BasePythonIncrementalTests run unchanged: the first
writes a `table` (parquet here, as dbt-spark's SQL tables), the second an incremental model with
incremental_strategy='merge', which on this adapter is a Paimon upsert on unique_key.
"""

import pytest
from dbt.tests.adapter.python_model.test_python_model import BasePythonIncrementalTests, BasePythonModelTests
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.store import FileStoreTable
from tests.files import fingerprint
from tests.oracle import pypaimon_read


def _path(project, name):
    return f"{project.adapter.credentials.warehouse}/{project.test_schema}.db/{name}"


class TestPythonModelsPaimon(BasePythonModelTests):
    pass


class TestPythonIncrementalPaimon(BasePythonIncrementalTests):
    def test_incremental(self, project):
        super().test_incremental(project)
        rows = pypaimon_read(_path(project, "incremental")).to_pylist()
        assert sorted(r["id"] for r in rows) == [1, 2, 3, 4, 5, 6, 7]


CUSTOMERS_PY = """
import pyspark.sql.functions as F

def model(dbt, session):
    dbt.config(materialized="paimon_upsert", unique_key="id", partition_by="dt", sequence_by="v")
    rows = {1: [(1, "a", 10), (2, "a", 20), (3, "b", 30)],
            2: [(2, "b", 21), (3, "b", 31), (4, "c", 40)]}[int(dbt.config.get("batch_no"))]
    df = session.createDataFrame(rows, "id bigint, dt string, v bigint")
    return df.withColumn("doubled", F.col("v") * 2)
"""

REBUILT_PY = """
def model(dbt, session):
    dbt.config(materialized="table", file_format="paimon", unique_key="id")
    return dbt.ref("customers").select("id", "v")
"""

PANDAS_PY = """
import pandas as pd

def model(dbt, session):
    dbt.config(materialized="paimon_upsert", unique_key="id")
    return pd.DataFrame({"id": [1, 2], "name": ["ann", "bob"]})
"""

FAILING_PY = """
def model(dbt, session):
    dbt.config(materialized="paimon_upsert", unique_key="id")
    if True:
        raise ValueError("the model's own error")
    return session.range(1)
"""


class TestPythonPaimonModels:
    @pytest.fixture(scope="class")
    def project_config_update(self):
        return {"models": {"+batch_no": "{{ var('batch', 1) }}"}}

    @pytest.fixture(scope="class")
    def models(self):
        return {"customers.py": CUSTOMERS_PY, "rebuilt.py": REBUILT_PY, "from_pandas.py": PANDAS_PY}

    def test_python_models_upsert_into_paimon(self, project):
        results = run_dbt(["run", "--vars", "batch: 1"])
        assert {r.node.name: r.adapter_response.get("inserted") for r in results} == {
            "customers": 3, "rebuilt": 3, "from_pandas": 2}
        results = run_dbt(["run", "--vars", "batch: 2", "--select", "customers"])
        assert results[0].message == "UPSERT 3: 1 inserted, 1 updated, 1 moved"
        rows = sorted(pypaimon_read(_path(project, "customers")).to_pylist(), key=lambda r: r["id"])
        assert [(r["id"], r["dt"], r["v"], r["doubled"]) for r in rows] == [
            (1, "a", 10, 20), (2, "b", 21, 42), (3, "b", 31, 62), (4, "c", 40, 80)]
        assert sorted(r["id"] for r in pypaimon_read(_path(project, "rebuilt")).to_pylist()) == [1, 2, 3]
        assert list(FileStoreTable.open(_path(project, "from_pandas")).schema.primary_keys) == ["id"]

    def test_a_failing_python_model_writes_nothing(self, project):
        run_dbt(["run", "--vars", "batch: 1", "--select", "customers"])
        before = fingerprint(_path(project, "customers"))
        (project.project_root / "models" / "customers.py").write(FAILING_PY)
        _, output = run_dbt_and_capture(["run", "--vars", "batch: 2", "--select", "customers"], expect_pass=False)
        assert "the model's own error" in output
        assert fingerprint(_path(project, "customers")) == before
