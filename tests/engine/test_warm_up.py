"""engine/warm_up.py: the background warm-up a dbt command's session starts (issue 16, first read)."""

import logging

from dbt_paimon.engine import upsert, warm_up


def test_warm_up_runs_its_read_and_task_and_a_paimon_read_works_after(spark, table_path, caplog):
    caplog.set_level(logging.DEBUG, logger=warm_up.__name__)
    threads = warm_up.start(spark)
    for thread in threads:
        thread.join(120)
    assert [t.is_alive() for t in threads] == [False, False, False]
    assert "warm-up" not in caplog.text  # each step ran: a failing one is logged, not raised
    assert spark.read.format(warm_up.NAME).load().collect()[0]["one"] == 1
    upsert(spark.createDataFrame([(1, "a")], "id long, v string"), table_path, primary_keys="id")
    assert spark.read.format("paimon").load(table_path).collect()[0]["v"] == "a"
