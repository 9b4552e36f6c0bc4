"""Several dbt processes on one project at once (issue 16): no metastore admits only one of them.

This pytest process runs dbt in-process on the session's SparkSession; the other dbt commands are
real OS processes with their own JVM (the `dbt` entry point), on the same project, warehouse and
spark_dir. Two of them at most, because each costs a JVM start (10+ s on 2 cores); the start-up
failure case never gets a JVM going.
"""

import json
import os
import re
import subprocess
import sys
import time

import pytest
from dbt.tests.util import run_dbt, run_dbt_and_capture

from dbt_paimon.adapter.locks import RelationLock, lock_path
from dbt_paimon.adapter.session import root_cause
from tests.oracle import pypaimon_read

BASE = """{{ config(materialized='table') }}
select cast(id as bigint) as id, concat('name-', cast(id as string)) as name from range(1, 6)
"""
BASE_VIEW = """{{ config(materialized='view') }}
select id, upper(name) as name from {{ ref('base') }}
"""
UPSERTED = """{{ config(materialized='paimon_upsert', unique_key='id') }}
select id, name from {{ ref('base_view') }}
"""
OTHER = """{{ config(materialized='table') }}
select count(*) as n from {{ ref('base_view') }}
"""
# What the JVM and Spark print when nothing catches it: none of it may reach dbt's console
JVM_NOISE = re.compile(r"WARNING: Using incubator|log4j|Setting default log level|SparkContext|NativeCodeLoader|"
                       r"WARN |ERROR [A-Z]|^\tat |Exception in thread|py4j", re.MULTILINE)


def _dbt(project_root, profiles_dir, log_dir, *args, env=None):
    """A dbt command in its own OS process (and so its own JVM), as a user runs it: the `dbt` entry
    point of this environment."""
    entry = os.path.join(os.path.dirname(sys.executable), "dbt")
    command = [entry] if os.path.isfile(entry) else [sys.executable, "-m", "dbt.cli.main"]
    return subprocess.Popen(
        [*command, *args, "--project-dir", str(project_root), "--profiles-dir",
         str(profiles_dir), "--log-path", str(log_dir)],
        env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_open(log_dir, procs, timeout=300):
    """Until every process has opened its SparkSession (its catalog is rebuilt: it logs so)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        opened = 0
        for d in log_dir:
            try:
                with open(os.path.join(d, "dbt.log")) as f:
                    opened += "Spark relations restored" in f.read()
            except FileNotFoundError:
                pass
        if opened == len(log_dir) or any(p.poll() is not None for p in procs):
            return
        time.sleep(0.5)


class TestSeveralProcessesAtOnce:
    @pytest.fixture(scope="class")
    def models(self):
        return {"base.sql": BASE, "base_view.sql": BASE_VIEW, "upserted.sql": UPSERTED, "other.sql": OTHER}

    def test_run_run_and_docs_generate_at_once(self, project, tmp_path):
        run_dbt(["run"])  # everything once, in this process (its SparkSession runs throughout)
        schema = project.test_schema
        logs = [tmp_path / "logs-run", tmp_path / "logs-docs"]
        # another `dbt run` of one model (it reads base_view and base, which this process rebuilds
        # meanwhile), and `dbt docs generate`, each in its own process
        run = _dbt(project.project_root, project.profiles_dir, logs[0], "run", "-s", "upserted")
        docs = _dbt(project.project_root, project.profiles_dir, logs[1], "docs", "generate")
        try:
            _wait_for_open([str(d) for d in logs], [run, docs])
            run_dbt(["run", "-s", "base", "base_view", "other"])
            out_run, err_run = run.communicate(timeout=600)
            out_docs, err_docs = docs.communicate(timeout=600)
        finally:
            for p in (run, docs):
                if p.poll() is None:
                    p.kill()
        assert run.returncode == 0, out_run[-4000:] + err_run[-2000:]
        assert docs.returncode == 0, out_docs[-4000:] + err_docs[-2000:]
        assert "1 of 1 OK created sql paimon_upsert model" in out_run

        # the other process's upsert is in the warehouse: pypaimon reads it
        path = os.path.join(project.adapter.config.credentials.warehouse, f"{schema}.db", "upserted")
        rows = sorted((r["id"], r["name"]) for r in pypaimon_read(path).to_pylist())
        assert rows == [(i, f"NAME-{i}") for i in range(1, 6)]
        # docs generate saw every relation: two Spark tables, a view, the Paimon table
        with open(os.path.join(project.project_root, "target", "catalog.json")) as f:
            nodes = {uid.split(".")[-1]: n["metadata"]["type"] for uid, n in json.load(f)["nodes"].items()}
        assert nodes == {"base": "table", "base_view": "view", "upserted": "table", "other": "table"}
        # this process's rebuild is what every process now sees
        assert run_dbt(["show", "--inline", "select * from {{ ref('other') }}"]).results[0].agate_table.rows[0][0] == 5

        # quiet: nothing from the JVM or Spark on the console; Spark's log beside dbt's
        assert not JVM_NOISE.search(out_run + err_run), (out_run + err_run)[-3000:]
        assert not err_run.strip(), err_run[-3000:]
        spark_log = logs[0] / "spark.log"
        assert spark_log.is_file() and (logs[0] / "dbt.log").is_file()
        assert re.search(r"\[\d+\] (WARN|INFO|ERROR) ", spark_log.read_text()) or \
            "Using incubator modules" in spark_log.read_text()


class TestAWrittenRelationIsExclusive:
    @pytest.fixture(scope="class")
    def models(self):
        return {"base.sql": BASE, "base_view.sql": BASE_VIEW, "upserted.sql": UPSERTED}

    @pytest.fixture(scope="class")
    def profiles_config_update(self, dbt_profile_target, unique_schema):
        return {"test": {"target": "default", "outputs": {"default": {
            **dbt_profile_target, "schema": unique_schema, "lock_timeout": 1}}}}

    def test_a_second_writer_waits_then_fails_in_one_sentence(self, project):
        run_dbt(["run"])
        credentials = project.adapter.config.credentials
        # another dbt process rebuilding `base` (its lock, as that process takes it)
        holder = RelationLock(lock_path(os.path.join(credentials.spark_dir, "locks"), project.test_schema, "base"),
                              f"{project.test_schema}.base")
        holder.acquire(True, 0, print)
        try:
            results, output = run_dbt_and_capture(["run", "-s", "base"], expect_pass=False)
            message = results.results[0].message.splitlines()[-1].strip()
            assert re.fullmatch(
                rf"{project.test_schema}\.base is being written by another dbt process, pid {os.getpid()} on \S+ "
                rf"\(.*, since \d\d:\d\d:\d\d\); gave up after 1 s \(the profile's lock_timeout\): run again "
                rf"when that process is done", message), message
            assert "waiting for it (up to 1 s" in output
            # reading it waits too (its files may be half gone while it is rebuilt)
            results = run_dbt(["run", "-s", "base_view"], expect_pass=False)
            assert "is being written by another dbt process" in results.results[0].message
            # so does a Paimon model, whose query dbt-paimon runs itself (through the view)
            results = run_dbt(["run", "-s", "upserted"], expect_pass=False)
            assert "is being written by another dbt process" in results.results[0].message
        finally:
            holder.release()
        run_dbt(["run", "-s", "base"])  # free again

    def test_root_cause_names_the_innermost_java_exception(self, project):
        with project.adapter.connection_named("__test"):
            spark = project.adapter.spark()
        with pytest.raises(Exception) as caught:
            spark._jvm.java.lang.Long.parseLong("not a number")
        assert root_cause(caught.value) == 'For input string: "not a number" (NumberFormatException)'


def test_a_failed_spark_start_is_one_paragraph_with_the_trace_in_the_log(tmp_path):
    """A JVM that cannot start (a thread stack too small to run): dbt says why in one paragraph; the JVM's own
    output is in logs/spark.log. No JVM comes up, so this process is cheap."""
    project = tmp_path / "broken"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text(
        "name: broken\nversion: '1.0'\nconfig-version: 2\nprofile: broken\n")
    (project / "models" / "m.sql").write_text("select 1 as id\n")
    (project / "profiles.yml").write_text(json.dumps({"broken": {"target": "dev", "outputs": {"dev": {
        "type": "paimon", "schema": "s", "warehouse": str(tmp_path / "wh"), "master": "local[1]",
        "server_side_parameters": {"spark.driver.extraJavaOptions": "-Xss1k"}}}}}))
    proc = _dbt(project, project, project / "logs", "run")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode != 0
    console = out + err
    lines = [line for line in console.splitlines() if "could not start Spark" in line]
    assert len(lines) == 1, console[-3000:]
    assert re.search(r"dbt-paimon could not start Spark: The Java thread stack size specified is too small\. "
                     r".*check spark\.driver\.extraJavaOptions.* The full trace is in .*logs/spark\.log$",
                     lines[0]), lines[0]
    assert "\tat " not in console and "Traceback" not in console
    log = (project / "logs" / "spark.log").read_text()
    assert "thread stack size specified is too small" in log and "Traceback (most recent call last)" in log
