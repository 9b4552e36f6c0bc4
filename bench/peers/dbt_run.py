"""`dbt run` of one paimon_upsert model for W1: the engine plus everything dbt adds (project parse,
compile, connection and catalog sync, the materialization's macros, the adapter, run results).

The dbt project is generated into the work dir: profile `type: paimon` (local[2], the engine peer's
Spark settings), one model `bench.t` (unique_key id, partition_by dt, bucket -1: the engine peer's
table) whose SQL reads `input.parquet`, a link to the base (setup phase) or the batch (upsert
phase). The link keeps the model's text and vars the same in both phases, so the timed run gets
dbt's partial parsing, as a user's second `dbt run` does.

The SparkSession is started in start() with the settings dbt's session would use (getOrCreate
then reuses it), its catalog included, so its start-up is reported apart, as for the engine;
the adapter's catalog sync (registering the warehouse's tables) stays inside the timed run. Unlike the engine peer, the
batch is not cached beforehand: the model reads it from Parquet inside the timed run, as a model
reads its sources.
"""

from __future__ import annotations

import json
import os
import sys
import time

from peers.dbt_paimon_engine import Peer as EnginePeer
from peers.dbt_paimon_engine import event_log, tuning

MODEL = """{{ config(materialized='paimon_upsert', unique_key='id', partition_by='dt',
           options={'bucket': '-1'}) }}
select * from parquet.`{{ var('input') }}`
"""


class Peer(EnginePeer):
    label = "dbt run (paimon_upsert)"
    workloads = {"W1"}
    note = "dbtRunner `dbt run` of one paimon_upsert model reading the batch's Parquet; Spark started before"

    def available(self):
        try:
            import dbt.adapters.paimon  # noqa: F401
            from dbt.cli.main import dbtRunner  # noqa: F401
        except ImportError as e:
            return f"dbt with the paimon adapter is not importable ({e})"
        return None

    def versions(self):
        from importlib.metadata import version
        return {"pyspark": version("pyspark"), "dbt-core": version("dbt-core"), "dbt-spark": version("dbt-spark")}

    def _project(self, work_dir):
        return os.path.join(work_dir, "dbt_project")

    def _write_project(self, work_dir) -> dict:
        """The project, profile and model files; returns the profile's Spark settings."""
        root = self._project(work_dir)
        os.makedirs(os.path.join(root, "models"), exist_ok=True)
        spark_conf = tuning()
        profile = {"bench": {"target": "bench", "outputs": {"bench": {
            "type": "paimon", "schema": "bench", "threads": 1, "master": "local[2]",
            "warehouse": os.path.join(work_dir, "warehouse"), "spark_dir": os.path.join(work_dir, "spark"),
            "server_side_parameters": spark_conf}}}}
        files = {
            "profiles.yml": json.dumps(profile, indent=2),   # JSON is YAML
            "dbt_project.yml": json.dumps({"name": "bench", "version": "1.0", "profile": "bench",
                                           "config-version": 2, "vars": {"input": self._input(work_dir)}}),
            os.path.join("models", "t.sql"): MODEL,
        }
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        return profile["bench"]["outputs"]["bench"]

    def _input(self, work_dir):
        return os.path.join(work_dir, "input.parquet")

    def start(self, work_dir):
        from dbt_paimon.adapter.credentials import PaimonCredentials
        from dbt_paimon.adapter.session import build

        target = self._write_project(work_dir)
        self.events = os.path.join(work_dir, "spark-events")
        self.window = (float("inf"), float("inf"))
        creds = PaimonCredentials(host="local", schema="bench", warehouse=target["warehouse"],
                                  spark_dir=target["spark_dir"], master=target["master"],
                                  server_side_parameters=target["server_side_parameters"])
        settings = creds.spark_settings()
        settings.update(event_log(self.events))   # the per-stage profile, as for the engine peer
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        self.spark = build(settings)
        self.spark.range(1).count()   # JIT and executor start belong to start-up, as for the engine
        # Spark's catalog starts on the first catalog access (Hive's metastore took ~8 s of it before
        # the adapter moved to the in-memory catalog): session start-up, not work of the run
        self.spark.sql("SHOW DATABASES").collect()

    def _run(self, work_dir, data_path) -> dict:
        from dbt.cli.main import dbtRunner

        link = self._input(work_dir)
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(data_path), link)
        root = self._project(work_dir)
        result = dbtRunner().invoke(["run", "--project-dir", root, "--profiles-dir", root, "--quiet"])
        if not result.success:
            raise RuntimeError(f"dbt run failed: {result.exception or [r.message for r in result.result or []]}")
        response = result.result.results[0].adapter_response
        return {k: v for k, v in response.items() if isinstance(v, (int, float, str, bool, type(None)))}

    def setup(self, work_dir, base_path):
        self._run(work_dir, base_path)

    def load_batch(self, batch_path):
        return batch_path   # the model reads it: reading is part of a dbt run

    def upsert(self, work_dir, batch):
        self.window = (time.time() * 1000, float("inf"))
        facts = self._run(work_dir, batch)
        self.window = (self.window[0], time.time() * 1000)
        return facts

    def _table(self, work_dir):
        return os.path.join(work_dir, "warehouse", "bench.db", "t")

