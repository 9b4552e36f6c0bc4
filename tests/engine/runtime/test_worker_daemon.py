"""dbt_paimon/worker_daemon.py: Spark's Python workers forked from a daemon that imported the engine;
dbt_paimon/engine/runtime/local_session.py: what a local master's session starts with."""

import os
import sys

from dbt_paimon import worker_daemon
from dbt_paimon.engine.runtime import local_session

ENGINE = ("dbt_paimon.engine.runtime.tasks", "dbt_paimon.engine.runtime.key_lookup", "dbt_paimon.engine.read.source",
          "pyarrow", "pandas")


def _report(batches):
    """In a task's worker, before it imports anything of its own: what it already holds, and what
    its parent (the daemon that forked it) runs."""
    loaded = [m for m in ENGINE if m in sys.modules]
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as f:
        parent = f.read().decode().split("\0")
    for _ in batches:
        pass
    import pyarrow as pa  # the task's own import, after the report's facts

    yield pa.RecordBatch.from_pylist([{"loaded": ",".join(loaded), "parent": " ".join(parent)}])


def test_the_sessions_workers_fork_from_the_daemon_with_the_engine_imported(spark):
    """The tests' session starts its workers as the adapter's does (local_session.daemon_settings):
    two tasks at once (so at least one worker the daemon forks for this job, not only a reused
    one), each already holding the engine, pyarrow and pandas, forked by `-m dbt_paimon.worker_daemon`."""
    assert spark.sparkContext.getConf().get(local_session.DAEMON_SETTING) == local_session.DAEMON_MODULE
    rows = (spark.range(0, 4, numPartitions=2).mapInArrow(_report, "loaded string, parent string")
            .collect())
    assert len(rows) == 2
    for row in rows:
        assert row["loaded"].split(",") == list(ENGINE), row
        assert f"-m {local_session.DAEMON_MODULE} pyspark.worker" in row["parent"], row


def test_only_a_local_master_running_this_interpreter_gets_it():
    assert local_session.daemon_settings("local[2]", sys.executable) == {
        local_session.DAEMON_SETTING: local_session.DAEMON_MODULE}
    assert local_session.daemon_settings("local", sys.executable)
    assert local_session.daemon_settings("spark://host:7077", sys.executable) == {}
    assert local_session.daemon_settings(None, sys.executable) == {}
    assert local_session.daemon_settings("local[*]", "/no/such/python") == {}
    assert local_session.daemon_settings("local[*]", None) == {}


def test_the_daemon_starts_when_its_preload_fails(tmp_path):
    """A broken engine import costs the preload only: the daemon still answers as Spark's does
    (it prints the port it listens on)."""
    import subprocess

    fake = tmp_path / "dbt_paimon"
    (fake / "engine").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "engine" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    (fake / "worker_daemon.py").write_text(open(worker_daemon.__file__).read())
    proc = subprocess.Popen([sys.executable, "-m", local_session.DAEMON_MODULE, "pyspark.worker"], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(tmp_path)},
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        port = int.from_bytes(proc.stdout.read(4), "big", signed=True)
        assert port > 0
    finally:
        proc.kill()
        _, err = proc.communicate(timeout=30)
    assert b"modules not preloaded (broken on purpose)" in err



def test_a_local_masters_session_hands_task_results_over_directly(spark):
    """local_session: a local master's tasks send results up to 128 MB with their status (the
    driver-local upsert's toArrow of its batch), its workers fork from the daemon; a cluster master
    (local-cluster[...] is one) gets neither. The tests' session starts with them, as the adapter's."""
    assert local_session.session_settings("local[2]", sys.executable) == {
        local_session.DAEMON_SETTING: local_session.DAEMON_MODULE, "spark.task.maxDirectResultSize": str(128 << 20)}
    assert local_session.session_settings("local", "/no/such/python") == {
        "spark.task.maxDirectResultSize": str(128 << 20)}
    for cluster in ("spark://host:7077", "local-cluster[2,1,1024]", "yarn", None):
        assert local_session.session_settings(cluster, sys.executable) == {}
    assert spark.sparkContext.getConf().get("spark.task.maxDirectResultSize") == str(128 << 20)
