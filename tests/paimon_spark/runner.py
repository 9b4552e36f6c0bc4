"""Paimon's own Spark connector in a process of its own: Spark SQL requests in, rows out.

Run by the side environment's Python (`.work/paimon-spark/venv`: the pyspark the connector is built for),
never imported by the suite: `python runner.py JARS [SETTINGS_JSON]`, JARS the connector's jars
comma-separated, SETTINGS_JSON extra Spark settings (as the bench gives its Spark systems). One local[2]
SparkSession with Paimon's session extensions serves every request. A request is one JSON line on stdin:
`{"catalog": NAME, "warehouse": PATH, "sql": TEXT, "options": {...}}`; the catalog NAME (a Paimon `SparkCatalog`
over PATH, with the catalog options given, such as an object store's settings) is
registered on first use and made the current catalog, so the statement names tables as `db.t`
and one session serves the warehouses of many tests. The answer is one JSON line:
`{"columns": [...], "rows": [[...], ...], "seconds": S}` or `{"error": TEXT}`. With `"parquet": DIR` in the
request the statement's rows go to Parquet files in DIR instead (`"rows": []`), for results too big for
JSON. Values: numbers, strings, booleans, null; DECIMAL as a string, DATE and TIMESTAMP as ISO-8601
text, BINARY as base64.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
import time
from decimal import Decimal


def _json(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    return value


def session(jars: str, settings: dict):
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = (builder.master("local[2]").appName("paimon-spark")
             .config("spark.jars", jars)
             .config("spark.sql.extensions", "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main() -> None:
    spark = session(sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {})
    catalogs: dict[str, str] = {}
    out = sys.stdout
    sys.stdout = sys.stderr  # nothing but answers on the pipe
    for line in sys.stdin:
        request = json.loads(line)
        try:
            name, warehouse = request["catalog"], request["warehouse"]
            if catalogs.get(name, warehouse) != warehouse:
                raise ValueError(f"catalog {name} is over {catalogs[name]}, not {warehouse}")
            if name not in catalogs:
                spark.conf.set(f"spark.sql.catalog.{name}", "org.apache.paimon.spark.SparkCatalog")
                spark.conf.set(f"spark.sql.catalog.{name}.warehouse", warehouse)
                for key, value in (request.get("options") or {}).items():
                    spark.conf.set(f"spark.sql.catalog.{name}.{key}", value)
                catalogs[name] = warehouse
            spark.catalog.setCurrentCatalog(name)  # `db.t` in the statement names a table of that warehouse
            start = time.perf_counter()
            frame = spark.sql(request["sql"])
            if request.get("parquet"):
                frame.write.mode("overwrite").parquet(request["parquet"])
                rows = []
            else:
                rows = [[_json(v) for v in row] for row in frame.collect()]
            answer = {"columns": frame.columns, "rows": rows, "seconds": time.perf_counter() - start}
        except Exception as e:  # noqa: BLE001 - the test asserts on Paimon's message
            answer = {"error": f"{type(e).__name__}: {e}"}
        out.write(json.dumps(answer) + "\n")
        out.flush()
    spark.stop()


if __name__ == "__main__":
    main()
