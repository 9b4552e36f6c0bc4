"""The cost of reading a table's changes against reading the table (issue 60: cost in proportion to
the changes, target <= 0.05x).

W2's base (10M rows in 100 partitions, bench/data.py) upserted by the engine, then a 1% batch (100K
rows: 50K updates, half of them moving partitions, 50K new keys). Measured on one local Spark:
- full read: the table as a `ref()` reads it (`engine.read`), count and a sum;
- changes: `engine.changes(spark, path, before, after)` (what `paimon_changes` reads: the range's
  records folded to one per key), count and a sum;
--rounds rounds taking turns after a warm-up of each, the median of each; every answer checked
(the table's row count, the changed keys' count). Results: stdout and
bench/results/changes-<date>[-N].json.

    python bench/changes_bench.py [--scale 1.0] [--rounds 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

import data  # noqa: E402
from run import prepare_case  # noqa: E402


def _answer(df) -> tuple:
    """The timed read: every row of every column, as a downstream model that rewrites what it reads
    takes them (Spark's `noop` sink reads it all and keeps nothing); a count and a sum besides, which
    Spark answers from fewer columns, are timed apart."""
    from pyspark.sql import functions as F
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    every_column = time.perf_counter() - started
    started = time.perf_counter()
    count, total = df.agg(F.count("*"), F.sum("qty")).first()
    return count, total, every_column, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    from dbt_paimon.engine import changes, read, upsert
    from dbt_paimon.sql import register
    from dbt_paimon.store import FileStoreTable

    n = lambda rows: max(10, int(round(rows * args.scale)))  # noqa: E731
    case = data.Case("W2-1%", "W2", n(10_000_000), 100, n(100_000), seed=2)
    case_dir = prepare_case(case)
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "6g")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)  # the `paimon` source, which both reads use
    root = tempfile.mkdtemp(prefix="changes-bench-")
    try:
        path = f"{root}/wh/db.db/w2"
        started = time.perf_counter()
        upsert(spark.read.parquet(os.path.join(case_dir, "base.parquet")), path, primary_keys="id",
               partition_keys="dt")
        base_s = time.perf_counter() - started
        before = FileStoreTable.open(path).snapshots.latest_id()
        upsert(spark.read.parquet(os.path.join(case_dir, "batch.parquet")), path, primary_keys="id",
               partition_keys="dt")
        after = FileStoreTable.open(path).snapshots.latest_id()

        readers = {"full read": lambda: read(spark, path),
                   "changes": lambda: changes(spark, path, before, after)}
        expected = {"full read": case.base_rows + case.batch_rows - case.updates, "changes": case.batch_rows}
        seconds = {name: [] for name in readers}
        aggregate = {name: [] for name in readers}
        answers = {}
        for r in range(args.rounds + 1):  # round 0 warms up
            order = list(readers) if r % 2 == 0 else list(reversed(readers))
            for name in order:
                answers[name] = _answer(readers[name]())
                if r:
                    seconds[name].append(answers[name][2])
                    aggregate[name].append(answers[name][3])
        from pyspark.sql import functions as F
        for name, want in expected.items():  # checked apart from the timed query: one row per key
            count, distinct = readers[name]().agg(F.count("*"), F.countDistinct("id")).first()
            if count != want or distinct != want or answers[name][0] != want:
                raise SystemExit(f"{name}: {count} rows, {distinct} keys; expected {want}")
        medians = {name: statistics.median(s) for name, s in seconds.items()}
        counted = {name: statistics.median(s) for name, s in aggregate.items()}
        result = {"case": case.to_json(), "base_upsert_seconds": round(base_s, 1), "snapshots": [before, after],
                  "seconds_every_column": {k: [round(x, 3) for x in v] for k, v in seconds.items()},
                  "median_seconds_every_column": {k: round(v, 3) for k, v in medians.items()},
                  "ratio_changes_to_full_read": round(medians["changes"] / medians["full read"], 4),
                  "median_seconds_count_and_sum": {k: round(v, 3) for k, v in counted.items()},
                  "ratio_count_and_sum": round(counted["changes"] / counted["full read"], 4),
                  "target": "<= 0.05 (every column)"}
        print(json.dumps(result, indent=2))
        out_dir = os.path.join(HERE, "results")
        os.makedirs(out_dir, exist_ok=True)
        stem = os.path.join(out_dir, f"changes-{dt.date.today().isoformat()}")
        out, i = f"{stem}.json", 1
        while os.path.exists(out):
            out, i = f"{stem}-{i}.json", i + 1
        with open(out, "w") as f:
            json.dump(result, f, indent=2)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
