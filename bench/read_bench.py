"""Reading a Paimon table from a dbt model: our `paimon` Spark source against Paimon's own JVM reader.

A dbt model that selects from a Paimon table reads it through `spark.sql`, which plans the table with
`engine.read` (Spark's Parquet reader over its files, the `paimon` Python source for what needs a merge
in Python). Paimon's reader is its Spark connector (the one tests/paimon_spark runs,
in its own venv and JVM). Both run local[2] with the bench's Spark settings, over the same table: a
workload's base (bench/data.py) upserted by our engine, then its batch (so keys moved and updated rows
sit in level-0 files: merge on read), then a full compaction. Queries, each checked equal across readers:

- scan: a full scan with aggregates (count, sums, max);
- partition: the same over one `dt` partition (partition pruning);
- key: the rows of a few keys (Spark pushes the filter into our files' row groups; Paimon's prunes files by key stats).

Each query runs once untimed per reader (warm), then --repeats rounds, the readers taking turns (reversed
every other round); a figure is the reader's median round. Writes bench/results/read-<date>[-n].json.

    python bench/read_bench.py [--workload W2] [--scale F] [--repeats N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import data  # noqa: E402
from peers.dbt_paimon_engine import SETUP_PART_ROWS, spark_session, tuning  # noqa: E402

WORK = os.path.join(HERE, ".work", "read")
RESULTS_DIR = os.path.join(HERE, "results")


def queries(case: data.Case, keys: list[int]) -> dict[str, str]:
    middle = data._dt_values(case.partitions)[case.partitions // 2].as_py()  # noqa: SLF001 - the bench's own data
    key_list = ", ".join(str(k) for k in keys)
    return {
        "scan": "SELECT count(*) AS n, sum(qty) AS qty, round(sum(price), 2) AS price, "
                "CAST(max(updated_at) AS STRING) AS latest FROM {t}",
        "partition": f"SELECT count(*) AS n, sum(qty) AS qty FROM {{t}} WHERE dt = '{middle}'",
        "key": f"SELECT id, dt, name, qty FROM {{t}} WHERE id IN ({key_list}) ORDER BY id",
    }


def build_table(spark, case: data.Case, path: str) -> list[int]:
    """The base by upserts of at most SETUP_PART_ROWS rows, then the batch; returns some moved keys."""
    from dbt_paimon.engine import upsert
    os.makedirs(WORK, exist_ok=True)
    for i, part in enumerate(data.base_parts(case)):
        for start in range(0, part.num_rows, SETUP_PART_ROWS):
            chunk = os.path.join(WORK, f"part-{i}-{start}.parquet")
            pq.write_table(part.slice(start, SETUP_PART_ROWS), chunk)
            upsert(spark.read.parquet(chunk), path, primary_keys=["id"], partition_keys=["dt"],
                   options={"bucket": "-1"})
    batch = data.batch(case)
    pq.write_table(batch, os.path.join(WORK, "batch.parquet"))
    upsert(spark.read.parquet(os.path.join(WORK, "batch.parquet")), path, primary_keys=["id"],
           partition_keys=["dt"])
    old_ids = pc.less(batch.column("id"), case.base_rows)
    return sorted(batch.filter(old_ids).column("id").to_pylist()[:5] + batch.column("id").to_pylist()[-3:])


def ours(spark, path: str, sql: str) -> tuple[float, list]:
    """A fresh plan of the table for every query, inside the clock (engine.read: what `spark.sql`
    does for a query on a catalog table)."""
    from dbt_paimon.engine import read
    t0 = time.perf_counter()
    read(spark, path).createOrReplaceTempView("bench_t")
    rows = [list(r) for r in spark.sql(sql.format(t="bench_t")).collect()]
    return time.perf_counter() - t0, rows


def paimons(client, warehouse: str, sql: str) -> tuple[float, list]:
    answer = client.request(warehouse, sql.format(t="bench.t"), catalog="bench_wh")
    return answer["seconds"], answer["rows"]


def same(a: list, b: list) -> bool:
    """Equal results: numbers compared as floats (Decimal and JSON text), the rest as text."""
    def norm(v):
        try:
            return round(float(v), 2)
        except (TypeError, ValueError):
            return str(v)
    return [[norm(v) for v in r] for r in a] == [[norm(v) for v in r] for r in b]


def measure(spark, client, warehouse, path, qs: dict, repeats: int, state: str) -> list[dict]:
    out = []
    for name, sql in qs.items():
        readers = {"dbt-paimon": lambda s=sql: ours(spark, path, s),
                   "paimon-spark": lambda s=sql: paimons(client, warehouse, s)}
        results = {r: fn()[1] for r, fn in readers.items()}   # warm, and the answers to compare
        ok = same(results["dbt-paimon"], results["paimon-spark"])
        seconds = {r: [] for r in readers}
        for i in range(repeats):
            for r in (list(readers) if i % 2 == 0 else list(readers)[::-1]):
                seconds[r].append(readers[r]()[0])
        med = {r: statistics.median(s) for r, s in seconds.items()}
        row = {"state": state, "query": name, "check": "ok" if ok else f"DIFFERENT: {results}",
               "seconds": med, "rounds": seconds, "ratio": med["dbt-paimon"] / med["paimon-spark"]}
        print(f"  {state:10} {name:10} ours {med['dbt-paimon']:.3f} s  paimon {med['paimon-spark']:.3f} s  "
              f"ratio {row['ratio']:.2f}  {row['check'][:60]}", flush=True)
        out.append(row)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="W2", choices=["W1", "W2"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    [case] = data.cases(args.workload, args.scale)
    shutil.rmtree(WORK, ignore_errors=True)
    warehouse = os.path.join(WORK, "warehouse")
    path = os.path.join(warehouse, "bench.db", "t")
    from dbt_paimon.engine import compact, register
    from tests.paimon_spark.side_env import PaimonSpark

    spark = spark_session()
    register(spark)  # the `paimon` source, as the adapter's session has it
    t0 = time.perf_counter()
    keys = build_table(spark, case, path)
    print(f"{case.name}: table of {case.base_rows:,} rows + batch of {case.batch_rows:,} built in "
          f"{time.perf_counter() - t0:.0f} s", flush=True)
    client = PaimonSpark(os.path.join(WORK, "paimon-spark.log"), tuning())
    qs = queries(case, keys)
    results = measure(spark, client, warehouse, path, qs, args.repeats, "upserted")
    compact(spark, path)
    results += measure(spark, client, warehouse, path, qs, args.repeats, "compacted")
    client.close()
    spark.stop()

    os.makedirs(RESULTS_DIR, exist_ok=True)
    stem = f"read-{dt.date.today().isoformat()}" + ("" if args.scale == 1 else f"-s{args.scale:g}")
    n, out = 1, os.path.join(RESULTS_DIR, stem + ".json")
    while os.path.exists(out):
        n += 1
        out = os.path.join(RESULTS_DIR, f"{stem}-{n}.json")
    with open(out, "w") as f:
        json.dump({"case": case.to_json(), "repeats": args.repeats, "load_average": os.getloadavg(),
                   "results": results}, f, indent=1)
    print(f"results: {os.path.relpath(out, ROOT)}")
    worst = max(r["ratio"] for r in results)
    print(f"target read: dbt-paimon time / paimon-spark time <= 1.5 in every case: worst {worst:.2f} "
          f"({'met' if worst <= 1.5 and all(r['check'] == 'ok' for r in results) else 'NOT met'})")


if __name__ == "__main__":
    pa.set_cpu_count(2)
    main()
