"""Python models (`def model(dbt, session)`) in the adapter's own SparkSession.

dbt-spark submits a Python model to Databricks (a cluster id, a job); this adapter already runs
Spark inside the dbt process, so the model's compiled code runs here, in a namespace of its own
with `spark` bound to the session every SQL model uses: its `dbt.ref()`s read the same catalog,
and the DataFrame it returns needs no copy. What happens to that DataFrame is the materialization's:
dbt-spark's `table` writes it (macros/python_models.sql), a Paimon model upserts it.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Dict

from dbt.adapters.base.impl import PythonJobHelper
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from .connections import error_message
from .credentials import PaimonCredentials
from . import incremental
from .session import spark_for, writing_relation

log = AdapterLogger("Paimon")

SUBMISSION_METHOD = "session"


class SessionPythonJobHelper(PythonJobHelper):
    def __init__(self, parsed_model: Dict, credentials: PaimonCredentials) -> None:
        self.model = parsed_model
        self.credentials = credentials

    def submit(self, compiled_code: str) -> Any:
        name = f"{self.model.get('schema')}.{self.model.get('alias') or self.model.get('name')}"
        spark = spark_for(self.credentials)
        namespace: Dict[str, Any] = {"__name__": f"dbt_python_model_{self.model.get('name')}", "spark": spark}
        # A dbt-spark `table` is written by the model's code with saveAsTable, not through the session
        # cursor: take its lock and record it, so other dbt processes see it (session.writing_relation).
        # A Paimon model's code only makes a temporary view.
        schema, alias = str(self.model.get("schema")), str(self.model.get("alias") or self.model.get("name"))
        config = self.model.get("config") or {}
        writes_spark_table = incremental.table_format(str(config.get("materialized")), config.get("file_format"),
                                                      config.get("incremental_strategy")) == "spark"
        try:
            code = compile(compiled_code, f"<python model {name}>", "exec")
            with (writing_relation(spark, self.credentials, schema, alias) if writes_spark_table else nullcontext()):
                exec(code, namespace)  # noqa: S102 - the user's own model code, as dbt runs it anywhere
        except DbtRuntimeError:
            raise
        except Exception as e:  # noqa: BLE001 - the model's error, in its words
            raise DbtRuntimeError(f"python model {name} failed: {type(e).__name__}: {error_message(e)}") from e
        return name
