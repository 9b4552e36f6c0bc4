"""Spark's Python worker daemon, started with the engine's modules already imported.

Spark runs a Python task in a worker that its daemon (pyspark.daemon) forks; a new worker imports
what the task needs: pyspark's worker, pyarrow, pandas and the engine, ~0.8 s of CPU on this
project's 2-core machines. Workers are reused while they are busy or idle for under a minute, so a
stage with more tasks than idle workers pays that import inside the stage, on the cores the stage
runs on: a distributed upsert's first stage, whose empty task (a batch read from one file is one
partition) started a worker beside the task doing all the work. This daemon imports those modules
once, before it forks, and every worker it forks starts with them (copy-on-write pages).

Spark imports a worker's modules after the fork because pyarrow and numpy start threads when
imported (jemalloc's background purger, OpenBLAS's pool), and a forked child has only the thread
that forked. Both libraries handle that: they register fork handlers that leave the child's
allocator and thread pool usable (jemalloc restarts no purger in the child; OpenBLAS shuts its pool
down before the fork and starts it again on use). The daemon itself runs no work of its own.

Which sessions start their workers from it: engine/runtime/local_session.py (`daemon_settings`). Why it is
not a module of the engine package: importing any module under `dbt_paimon.engine` runs the
package's `__init__`, which imports the whole engine and pyspark's SQL side; the daemon must start
even when that fails, as Spark's own would, and only the preload is lost. So it imports nothing of
dbt_paimon's at module level.

    python -m dbt_paimon.worker_daemon <worker module>    (how Spark starts it: spark.python.daemon.module)
"""

from __future__ import annotations

import sys


def _preload() -> None:
    """What a worker of the engine's tasks and of the `paimon` source imports (and pandas, which
    pyarrow's first array of Python values imports)."""
    try:
        import pyarrow as pa
        import pyspark.worker  # noqa: F401

        from dbt_paimon.engine.runtime import key_lookup, tasks  # noqa: F401
        from dbt_paimon.engine.read import source  # noqa: F401
        pa.array([0])
    except Exception as e:  # noqa: BLE001 - a worker imports what it needs itself
        print(f"dbt_paimon.worker_daemon: modules not preloaded ({e})", file=sys.stderr)


if __name__ == "__main__":
    _preload()
    from pyspark import daemon

    daemon.manager()
