"""W1 on an object store: the engine's upsert with the warehouse on a local S3 server against the
same upsert on the local disk, in one run, and the requests each upsert makes.

    python bench/object_store_bench.py [--scale 0.2] [--runs 3]

The S3 server is moto's (tests/s3.py, a Python server: slower per request than a real store, so the
ratio is an upper bound of the object-store overhead, not a forecast of S3's). Its request log gives
the LIST/GET/HEAD/PUT/DELETE counts of each timed upsert: the metadata path must make a bounded number
of requests per snapshot, manifest and bucket, never per row or key. Every result is checked
against the independent model (bench/model.py). Writes bench/results/object-store-<date>.json.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import re
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import data  # noqa: E402
import model  # noqa: E402

_REQUEST = re.compile(r'"(GET|PUT|POST|HEAD|DELETE) (/[^ ]*) HTTP')


def requests_since(log_path: str, offset: int) -> tuple[dict, int]:
    """Requests the server logged after byte `offset`, by kind: LIST (a GET of the bucket with a
    prefix), GET, HEAD, PUT, DELETE."""
    counts: collections.Counter = collections.Counter()
    with open(log_path, "rb") as f:
        f.seek(offset)
        text = f.read().decode("utf-8", "replace")
        end = offset + len(text.encode())
    for method, target in _REQUEST.findall(text):
        kind = "LIST" if method == "GET" and ("list-type=" in target or "delimiter=" in target) else method
        counts[kind] += 1
    return dict(sorted(counts.items())), end


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=0.2)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    from dbt_paimon.engine import RunSettings
    from dbt_paimon.sql import register
    from dbt_paimon.engine import upsert
    from dbt_paimon.store import FileStoreTable
    from dbt_paimon.store.common import fileio
    from tests.s3 import BUCKET, free_port, make_user, start_moto

    work = tempfile.mkdtemp(prefix="object-store-bench-")
    log_path = os.path.join(work, "moto.log")
    server_proc = start_moto(free_port_ := free_port(), log_path)
    server = make_user(f"http://127.0.0.1:{free_port_}")
    server.client().create_bucket(Bucket=BUCKET)
    fileio.configure(server.options)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master("local[2]").appName("object-store-bench")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
             .config("spark.driver.memory", "6g").config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)

    case = data.cases("W1", args.scale)[0]
    base, batch = data.generate(case)
    expected = model.checksum(model.expected(base, batch, "cross"))
    rows = []
    try:
        for run in range(args.runs):
            for where in ("local", "s3"):
                for execution in ("local", "distributed"):
                    wh = (os.path.join(work, f"wh-{run}") if where == "local"
                          else f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}/wh")
                    path = f"{wh}/db.db/w1_{execution}"
                    upsert(spark.createDataFrame(base), path, primary_keys="id", partition_keys="dt",
                           options={"bucket": "-1"}, settings=RunSettings(execution=execution))
                    df = spark.createDataFrame(batch).cache()
                    df.count()
                    offset = os.path.getsize(log_path)
                    started = time.perf_counter()
                    result = upsert(df, path, primary_keys="id", partition_keys="dt",
                                    settings=RunSettings(execution=execution))
                    seconds = time.perf_counter() - started
                    requests, _ = requests_since(log_path, offset)
                    df.unpersist()
                    got = FileStoreTable.open(path).to_arrow()
                    ok = model.checksum(got.select(base.column_names)) == expected
                    rows.append({"run": run, "warehouse": where, "execution": execution,
                                 "seconds": round(seconds, 3), "ok": ok, "rows": got.num_rows,
                                 "summary": result.summary(), "requests": requests if where == "s3" else None})
                    print(json.dumps(rows[-1]), flush=True)
    finally:
        spark.stop()
        server_proc.terminate()

    best = {}
    for r in rows:
        key = (r["warehouse"], r["execution"])
        if key not in best or r["seconds"] < best[key]["seconds"]:
            best[key] = r
    summary = {f"{w}/{e}": {"best_seconds": r["seconds"], "requests": r["requests"], "ok": r["ok"]}
               for (w, e), r in sorted(best.items())}
    for execution in ("local", "distributed"):
        summary[f"ratio s3/local ({execution})"] = round(best[("s3", execution)]["seconds"]
                                                        / best[("local", execution)]["seconds"], 2)
    out = {"case": case.to_json(), "scale": args.scale, "date": dt.date.today().isoformat(),
           "load_average": os.getloadavg(), "runs": rows, "summary": summary}
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    name = os.path.join(HERE, "results", f"object-store-{dt.date.today().isoformat()}-s{args.scale:g}.json")
    with open(name, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(summary, indent=1))
    print(f"written {name}")


if __name__ == "__main__":
    main()
