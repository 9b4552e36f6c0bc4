"""engine/warm_up.py: the background warm-up a dbt command's session starts (issue 16, first read)."""

import logging
import os
import time

from dbt_paimon.engine.runtime import local_session
from dbt_paimon.engine import warm_up
from dbt_paimon.engine import upsert

PLANNER_MODULES = ("pyspark.sql.worker.create_data_source", "pyspark.sql.worker.plan_data_source_read")


DAEMONS = ("pyspark.daemon", local_session.DAEMON_MODULE)


def _daemons(spark) -> dict:
    """The JVM's Python worker daemons (`python -m pyspark.daemon <worker module>`, or the session's
    spark.python.daemon.module: the tests' session has worker_daemon's), by worker module."""
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    found: dict = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().decode().split("\0")
        except (OSError, IndexError, ValueError):
            continue
        daemon = next((d for d in DAEMONS if d in argv), None)
        if parent == jvm_pid and daemon:
            module = argv[argv.index(daemon) + 1]
            found[module] = found.get(module, 0) + 1
    return found


def _persisted_back_to(spark, count: int, timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while spark.sparkContext._jsc.getPersistentRDDs().size() > count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def test_warm_up_runs_every_step_and_a_paimon_read_works_after(spark, table_path, caplog):
    caplog.set_level(logging.DEBUG, logger=warm_up.__name__)
    persisted = spark.sparkContext._jsc.getPersistentRDDs().size()
    threads = warm_up.start(spark)
    for thread in threads:
        thread.join(120)
    assert len(threads) == 4 and not any(t.is_alive() for t in threads)
    assert "warm-up" not in caplog.text  # each step ran: a failing one is logged, not raised
    # the Arrow step's cached rows are dropped again: the user's session keeps only its own caches.
    # Spark drops a cache asynchronously (unpersist without blocking, here and in an upsert's), so
    # the count is awaited: what is asserted is that it comes back, not how fast
    assert _persisted_back_to(spark, persisted), spark.sparkContext._jsc.getPersistentRDDs().size()
    upsert(spark.createDataFrame([(1, "a")], "id long, v string"), table_path, primary_keys="id")
    assert spark.read.format("paimon").load(table_path).collect()[0]["v"] == "a"


def test_the_planner_steps_start_the_daemons_a_real_read_then_uses(spark, table_path):
    """The warm-up calls Spark's planning steps itself; a daemon is keyed by its worker module and
    environment, so a step called with anything but what the analyzer passes would start a second
    daemon beside the one the real read uses, and warm up nothing."""
    for thread in warm_up.start(spark, upserts=False):
        thread.join(120)
    upsert(spark.createDataFrame([(1, "a")], "id long, v string"), table_path, primary_keys="id")
    assert spark.read.format("paimon").load(table_path).count() == 1
    daemons = _daemons(spark)
    assert [daemons.get(module) for module in PLANNER_MODULES] == [1, 1], daemons


def test_an_upsert_commands_warm_worker_holds_what_the_stages_import():
    """What the warm worker of a command that upserts runs (_import_upserts), in a fresh
    interpreter: afterwards the stage modules and pandas (which pyarrow's first array of Python
    values imports, ~0.3 s, inside the first Spark stage of the first upsert otherwise) are in;
    pandas was not before."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from dbt_paimon.engine import warm_up\n"
        "before = 'pandas' in sys.modules\n"
        "assert list(warm_up._import_upserts(iter([1]))) == [1]\n"
        "wanted = ['dbt_paimon.engine.runtime.key_lookup', 'dbt_paimon.engine.runtime.tasks', 'pandas']\n"
        "print(before, [m in sys.modules for m in wanted])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False [True, True, True]", out
