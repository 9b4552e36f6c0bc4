"""What a SparkSession on a local master (`local`, `local[...]`) starts with for the engine: the
adapter's session, and the tests' and the bench's, which stand for it.

- Python workers forked from dbt_paimon/worker_daemon.py's daemon, which imported the engine: only
  when the workers run this very interpreter (`daemon_settings`).
- Task results up to 128 MB handed to the driver in the task's status message
  (spark.task.maxDirectResultSize; Spark's default is 1 MB, past which a result is stored in the
  executor's block manager and fetched from there). The driver-local upsert hands its batch over
  with toArrow, whose task results are the batch's Arrow bytes: W1's 200K-row batch (12 MB, one
  task) took 0.44-0.96 s to collect with the default and 0.42-0.57 s with this (median of 6
  interleaved first upserts 0.62 -> 0.48 s; the git history of BENCHMARKS.md). On one machine no
  network carries the message. 128 MB is the most Spark takes (its RPC message limit,
  spark.rpc.message.maxSize). A cluster keeps Spark's default: there large results stay off the
  scheduler's RPC.
A profile's (or caller's) own value of any of these wins.
"""

from __future__ import annotations

import os
import shutil
import sys

DAEMON_SETTING = "spark.python.daemon.module"
DAEMON_MODULE = "dbt_paimon.worker_daemon"  # outside the engine package: see worker_daemon.py
DIRECT_RESULT_SIZE = "spark.task.maxDirectResultSize"
DIRECT_RESULT_BYTES = 128 << 20


def is_local_master(master: str | None) -> bool:
    return bool(master) and (master == "local" or master.startswith("local["))


def daemon_settings(master: str | None, python: str | None) -> dict[str, str]:
    """The SparkSession settings that start the workers from the preloading daemon: only for a local
    master whose workers run this very interpreter (`python`: the workers' Python, PYSPARK_PYTHON;
    a venv's python is not its base interpreter, so paths are compared as given). A cluster's
    executors run their own Python, which may not have dbt_paimon installed, and a daemon that
    cannot be imported fails every Python task."""
    if not is_local_master(master):
        return {}
    path = shutil.which(python) if python else None
    if path is None or os.path.abspath(path) != os.path.abspath(sys.executable):
        return {}
    return {DAEMON_SETTING: DAEMON_MODULE}


def session_settings(master: str | None, python: str | None) -> dict[str, str]:
    """The settings for a session on `master` whose Python workers run `python` (PYSPARK_PYTHON);
    none for a cluster master (local-cluster[...] is one)."""
    if not is_local_master(master):
        return {}
    return {**daemon_settings(master, python), DIRECT_RESULT_SIZE: str(DIRECT_RESULT_BYTES)}
