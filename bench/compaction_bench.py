"""Read cost of a table after many upsert runs, with and without compaction (issue 5).

Two tables get the same base and the same 30 upsert batches through the Spark engine; one sets
`write-only` (no compaction), the other compacts at Paimon's default trigger (5 sorted runs).
Then both are read back (our merge-on-read and pypaimon's) and the files per bucket are counted.

    python bench/compaction_bench.py [--base 200000] [--batch 10000] [--runs 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

from dbt_paimon.engine import upsert  # noqa: E402
from dbt_paimon.store.table import FileStoreTable  # noqa: E402


def batch(rng, n, key_space, parts):
    ids = rng.choice(key_space, size=n, replace=False)
    return pa.table({"id": ids.astype(np.int64), "dt": pa.array([f"p{p}" for p in rng.integers(0, parts, n)]),
                     "v": rng.integers(0, 1 << 30, n), "s": pa.array([f"value-{i}" for i in ids])})


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=int, default=200_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    root = tempfile.mkdtemp(prefix="compaction-bench-")
    results = {}
    try:
        for name, options in (("no compaction (write-only)", {"write-only": "true"}),
                              ("compaction at 5 sorted runs", {})):
            path = f"{root}/wh/db.db/{'wo' if options else 'cmp'}"
            rng = np.random.default_rng(7)
            base = batch(rng, args.base, args.base, 10)
            options = {**options, "dynamic-bucket.target-row-num": str(args.base // 10)}
            upsert(spark.createDataFrame(base.to_pandas()), path, primary_keys="id", partition_keys="dt",
                   options=options)
            upsert_s = 0.0
            for _ in range(args.runs):
                b = batch(rng, args.batch, args.base * 11 // 10, 10)
                r = upsert(spark.createDataFrame(b.to_pandas()), path, primary_keys="id", partition_keys="dt",
                           options=options)
                upsert_s += r.seconds
            table = FileStoreTable.open(path)
            splits = table.plan().splits
            read_s, rows = timed(table.to_arrow)
            from pypaimon import CatalogFactory
            cat = CatalogFactory.create({"warehouse": f"{root}/wh"})
            pt = cat.get_table(f"db.{os.path.basename(path)}")

            def py_read(pt=pt):
                rb = pt.new_read_builder()
                return rb.new_read().to_arrow(rb.new_scan().plan().splits())
            py_s, py_rows = timed(py_read)
            assert py_rows.num_rows == rows.num_rows
            results[name] = {"files": sum(len(s.files) for s in splits),
                             "max_files_per_bucket": max(len(s.files) for s in splits),
                             "buckets": len(splits), "rows": rows.num_rows, "upserts_s": round(upsert_s, 2),
                             "read_s": round(read_s, 3), "pypaimon_read_s": round(py_s, 3)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
        spark.stop()
    print(f"\n{args.runs} upserts of {args.batch} rows into {args.base} rows (10 partitions)\n")
    print("| table | files | max files/bucket | upserts total s | our read s | pypaimon read s |")
    print("|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['files']} | {r['max_files_per_bucket']} | {r['upserts_s']} | {r['read_s']} | "
              f"{r['pypaimon_read_s']} |")
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                       f"compaction-{time.strftime('%Y-%m-%d')}.json")
    with open(out, "w") as f:
        json.dump({"args": vars(args), "cores": os.cpu_count(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
