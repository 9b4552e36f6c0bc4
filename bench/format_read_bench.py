"""Reading one table's rows through each format's Spark reader: dbt-paimon's (`engine.read`, what a dbt
`ref()` reads through: Spark's Parquet reader over the files, the `paimon` source for what it cannot) against
Delta, Iceberg and Paimon 2.0's own connector, on the same Spark as each.

The rows: a workload's base (bench/data.py) with its batch applied, by each format's own writer
(formats.py: dbt-spark's MERGE, or Paimon's INSERT INTO its cross-partition table) and by
dbt-paimon's engine; read as written ("upserted": updates and moved keys in newer files, deletion
vectors, position deletes) and after each format's compaction ("compacted"; Paimon 2.0.0 refuses to
compact a bucket -1 cross-partition table, which the results say). Queries:

- scan: count, sums (price summed in cents, exact whatever the order), latest update, the whole table;
- partition: the same over one dt partition;
- keys: the rows of 1,000 ids (moved, updated-in-place, new and untouched ones) by `id IN (...)`;
- unique: dbt's `unique` test query on id.

Every answer is checked against the model (model.py's `cross` table, computed with pyarrow) and so
against every other reader: a difference marks the row INVALID. A Spark line holds the formats built
for it (spark_side.LINES: Delta and Iceberg on Spark 4.1, Paimon 2.0 on 4.0), dbt-paimon's reader
beside them. Per query the readers run once (warm), then --repeats rounds taking turns (reversed
every other round); a figure is the median round; each reader's peak RSS (the Spark process tree:
driver, JVM, Python workers), the Python driver's own and the JVM's peak heap use are read around its
first (warm-up) answer. Then, per reader, the scan query's first
answer in a fresh session (a new process and JVM), in --first-read-rounds rounds (median).
Writes bench/results/format-read-<date>[-n].json.

    python bench/format_read_bench.py [--workload W1|W2] [--scale F] [--repeats N] [--readers a,b]
                                      [--reuse-setup]

--reuse-setup keeps the built tables under bench/.work/format-read/ and measures reads only: the
tables are a few minutes of writes at full scale; dbt-paimon's reader is what changes between runs.
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

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [HERE, ROOT]

import data  # noqa: E402
import model  # noqa: E402
import spark_side  # noqa: E402
from formats import FORMATS  # noqa: E402
from peers.dbt_paimon_engine import tuning  # noqa: E402
from run import machine, prepare_case, save_results  # noqa: E402

OURS = "dbt-paimon"
READERS = [OURS] + list(FORMATS)
STATES = ("upserted", "compacted")
WORK = os.path.join(HERE, ".work", "format-read")


# ---- the queries and the model's answers ------------------------------------------------------
def pick_keys(case: data.Case, batch: pa.Table, n: int = 1000) -> list[int]:
    """n ids: a quarter moved, a quarter updated in place, a quarter new, the rest untouched."""
    rng = np.random.default_rng(7)
    ids = batch["id"].to_numpy()
    old = ids[ids < case.base_rows]
    new = ids[ids >= case.base_rows]
    untouched = np.setdiff1d(np.arange(case.base_rows), old)
    # data.batch() lists the moved keys first among the updates, but shuffles the batch; moved or
    # not, both are updates of existing keys, and the model decides each one's answer
    parts = [old, new, untouched]
    share = [n // 2, n // 4, n - n // 2 - n // 4]
    chosen = [rng.choice(p, min(k, len(p)), replace=False) for p, k in zip(parts, share)]
    return sorted(int(x) for x in np.concatenate(chosen))


def queries(case: data.Case, keys: list[int]) -> dict[str, str]:
    """SQL with {t} for the table; the answers are exact (integers), so readers compare equal."""
    aggregates = ("count(*) AS n, sum(qty) AS qty, sum(CAST(round(price * 100) AS BIGINT)) AS cents, "
                  "unix_micros(CAST(max(updated_at) AS TIMESTAMP)) AS latest")
    return {
        "scan": f"SELECT {aggregates} FROM {{t}}",
        "partition": f"SELECT {aggregates} FROM {{t}} WHERE dt = '{middle_dt(case)}'",
        "keys": f"SELECT id, dt, qty FROM {{t}} WHERE id IN ({', '.join(map(str, keys))}) ORDER BY id",
        "unique": "SELECT count(*) AS n FROM (SELECT id FROM {t} WHERE id IS NOT NULL GROUP BY id "
                  "HAVING count(*) > 1) x",
    }


def middle_dt(case: data.Case) -> str:
    return data._dt_values(case.partitions)[case.partitions // 2].as_py()  # noqa: SLF001 - the bench's own data


def model_answers(case: data.Case, case_dir: str, keys: list[int]) -> dict[str, list]:
    """What every reader must answer, from model.py's `cross` table (pyarrow only)."""
    base = pq.read_table(os.path.join(case_dir, "base.parquet"))
    batch = pq.read_table(os.path.join(case_dir, "batch.parquet"))
    t = model.expected(base, batch, "cross")

    def aggregates(rows):
        cents = pc.sum(pc.cast(pc.round(pc.multiply(rows["price"], 100)), pa.int64())).as_py()
        latest = pc.max(rows["updated_at"]).cast(pa.int64()).as_py()
        return [[rows.num_rows, pc.sum(rows["qty"]).as_py(), cents, latest]]

    sel = t.filter(pc.is_in(t["id"], pa.array(keys, pa.int64()))).sort_by("id")
    return {"scan": aggregates(t), "partition": aggregates(t.filter(pc.equal(t["dt"], middle_dt(case)))),
            "keys": [[r["id"], r["dt"], r["qty"]] for r in sel.select(["id", "dt", "qty"]).to_pylist()],
            "unique": [[0]]}


# ---- the tables -------------------------------------------------------------------------------
def session_conf(names: list[str], root: str) -> dict:
    """One session's settings for several formats: their extensions joined, their catalogs side by side."""
    conf, extensions = dict(tuning()), []
    for name in names:
        for key, value in FORMATS[name].conf(root).items():
            if key == "spark.sql.extensions":
                extensions.append(value)
            else:
                conf[key] = value
    if extensions:
        conf["spark.sql.extensions"] = ",".join(dict.fromkeys(extensions))
    return conf


def ours_path(root: str, state: str) -> str:
    return os.path.join(root, OURS, "db.db", f"t_{state}")


def build(spark, reader: str, root: str, case_dir: str) -> dict:
    """Both states' tables of one reader: base loaded, batch applied, the second one compacted.
    Returns what happened (seconds, a refused compaction's message)."""
    base, batch = (os.path.abspath(os.path.join(case_dir, f)) for f in ("base.parquet", "batch.parquet"))
    facts, t0 = {}, time.perf_counter()
    for state in STATES:
        if reader == OURS:
            for source in (base, batch):
                spark.request(op="upsert", path=ours_path(root, state), parquet=source, options={"bucket": "-1"})
        else:
            fmt = FORMATS[reader]
            for statement in fmt.create(root, state):
                spark.sql(statement)
            spark.sql(fmt.load(root, state, f"parquet.`{base}`"))
            spark.sql(f"CREATE OR REPLACE TEMP VIEW batch AS SELECT * FROM parquet.`{batch}`")
            spark.sql(fmt.upsert(root, state, "batch"))
    facts["write_seconds"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        if reader == OURS:
            spark.request(op="compact", path=ours_path(root, "compacted"))
        else:
            for statement in FORMATS[reader].compact(root, "compacted"):
                spark.sql(statement)
        facts["compact_seconds"] = time.perf_counter() - t0
    except spark_side.SparkSideError as e:   # Paimon 2.0.0 on KEY_DYNAMIC: reported, state skipped
        facts["compact_error"] = str(e).splitlines()[0][:400]
    return facts


def ensure_tables(readers: list[str], root: str, case_dir: str, reuse: bool) -> dict:
    """Each reader's tables, built in a session of its line that is closed before any read is
    timed; with reuse, a reader whose tables were built before (its stamp) is not built again."""
    facts = {}
    for line in spark_side.LINES:
        todo = [r for r in readers if r != OURS and FORMATS[r].line == line]
        if line == "4.1" and OURS in readers:
            todo.insert(0, OURS)   # dbt-paimon's table is the same on every line: built once
        todo_now = []
        for r in todo:
            stamp = os.path.join(root, f"{r}.built.json")
            if reuse and os.path.exists(stamp):
                with open(stamp) as f:
                    facts[r] = dict(json.load(f), reused=True)
            else:
                todo_now.append(r)
        if not todo_now:
            continue
        spark = spark_side.SideSpark(spark_side.LINES[line], session_conf([r for r in todo_now if r != OURS], root),
                                     os.path.join(root, f"build-{line}.log"))
        try:
            for r in todo_now:
                print(f"  build {r} ...", end="", flush=True)
                facts[r] = build(spark, r, root, case_dir)
                compaction = ("REFUSED" if "compact_error" in facts[r]
                              else f"{facts[r]['compact_seconds']:.1f} s")
                print(f" {facts[r]['write_seconds']:.1f} s, compaction {compaction}", flush=True)
                with open(os.path.join(root, f"{r}.built.json"), "w") as f:
                    json.dump(facts[r], f)
        finally:
            spark.close()
    return facts


# ---- measuring --------------------------------------------------------------------------------
def ask(spark, reader: str, root: str, state: str, sql: str) -> tuple[float, list]:
    """One query by one reader; dbt-paimon's table a fresh DataFrame each time (runner's `views`)."""
    if reader == OURS:
        answer = spark.sql(sql.format(t="paimon_t"), views={"paimon_t": ours_path(root, state)})
    else:
        answer = spark.sql(sql.format(t=FORMATS[reader].table(root, state)))
    return answer["seconds"], answer["rows"]


def open_sessions(line: str, readers: list[str], root: str, log_dir: str) -> dict:
    """reader -> its session on this line: one shared, except that dbt-paimon gets one of its own
    (no format's jars) beside a format whose jar claims the source name `paimon` (formats.py)."""
    alone = OURS in readers and any(FORMATS[r].claims_paimon_name for r in readers if r != OURS)
    formats = [r for r in readers if r != OURS]
    sessions = {}
    if formats:
        shared = spark_side.SideSpark(spark_side.LINES[line], session_conf(formats, root),
                                      os.path.join(log_dir, f"read-{line}.log"))
        sessions = {r: shared for r in readers}
    if alone or not formats:
        sessions[OURS] = spark_side.SideSpark(spark_side.LINES[line], session_conf([], root),
                                              os.path.join(log_dir, f"read-{line}-{OURS}.log"), jars=[])
    return sessions


def measure_line(sessions: dict, line: str, readers: list[str], root: str, qs: dict, want: dict, built: dict,
                 repeats: int) -> list[dict]:
    out = []
    for state in STATES:
        here = [r for r in readers if not (state == "compacted" and "compact_error" in built[r])]
        for name, sql in qs.items():
            answers, peak, driver, heap = {}, {}, {}, {}
            for r in here:   # warm, and the answers to check; its peaks read around it
                sessions[r].request(op="rss", reset=True)
                answers[r] = ask(sessions[r], r, root, state, sql)[1]
                memory = sessions[r].request(op="rss")
                peak[r], driver[r] = memory["peak_rss_mb"], memory["driver_python_mb"]
                heap[r] = memory["jvm_heap_peak_mb"]
            seconds = {r: [] for r in here}
            for i in range(repeats):
                for r in (here if i % 2 == 0 else here[::-1]):
                    seconds[r].append(ask(sessions[r], r, root, state, sql)[0])
            wrong = {r: a for r, a in answers.items() if a != want[name]}
            med = {r: statistics.median(s) for r, s in seconds.items()}
            peers = {r: s for r, s in med.items() if r != OURS}
            fastest = min(peers, key=peers.get) if peers else None
            row = {"line": line, "state": state, "query": name, "seconds": med, "rounds": seconds,
                   "peak_rss_mb": peak, "driver_python_mb": driver, "jvm_heap_peak_mb": heap,
                   "check": "ok" if not wrong else "INVALID",
                   "fastest_peer": fastest,
                   "ratio": med[OURS] / peers[fastest] if fastest and OURS in med else None}
            if wrong:
                row["wrong"] = {r: str(a)[:500] for r, a in wrong.items()}
                row["model"] = str(want[name])[:500]
            skipped = [r for r in readers if r not in here]
            if skipped:
                row["skipped"] = {r: built[r]["compact_error"] for r in skipped}
            out.append(row)
            print(f"  {line} {state:9} {name:9} " + "  ".join(f"{r} {v:.3f}" for r, v in med.items())
                  + (f"  ratio {row['ratio']:.2f}" if row["ratio"] else "") + f"  {row['check']}"
                  + (f" ({', '.join(wrong)} differ from the model)" if wrong else ""), flush=True)
    return out


def first_reads(line: str, readers: list[str], root: str, scan: str, want: list, log_dir: str,
                rounds: int) -> list[dict]:
    """Per reader and round a fresh process, JVM and session with only its format configured:
    start-up, then the scan's first answer (dbt-paimon's includes registering its source). The
    readers take turns (reversed every other round); a figure is the median round, as one fresh
    process moves by seconds from the next on this machine."""
    runs: dict[str, list[tuple[float, float, bool]]] = {r: [] for r in readers}
    for i in range(rounds):
        for r in (readers if i % 2 == 0 else readers[::-1]):
            names = [] if r == OURS else [r]
            spark = spark_side.SideSpark(spark_side.LINES[line], session_conf(names, root),
                                         os.path.join(log_dir, f"first-read-{line}-{r}.log"),
                                         jars=[] if r == OURS else None)   # a dbt-paimon user loads no format's jar
            try:
                seconds, rows = ask(spark, r, root, "upserted", scan)
            finally:
                spark.close()
            runs[r].append((spark.startup_seconds, seconds, rows == want))
    out = []
    for r in readers:
        starts, scans, right = zip(*runs[r])
        out.append({"line": line, "reader": r, "startup_seconds": statistics.median(starts),
                    "first_scan_seconds": statistics.median(scans), "rounds": list(scans),
                    "check": "ok" if all(right) else "INVALID"})
        print(f"  {line} fresh session {r:18} start-up {out[-1]['startup_seconds']:.1f} s, first scan "
              f"{out[-1]['first_scan_seconds']:.2f} s (median of {rounds}: "
              f"{', '.join(f'{x:.2f}' for x in scans)}) {out[-1]['check']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="W1", choices=["W1", "W2"])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--readers", default=",".join(READERS), help="comma-separated, from: " + ",".join(READERS))
    ap.add_argument("--reuse-setup", action="store_true", help="keep the built tables; measure reads only")
    ap.add_argument("--no-first-read", action="store_true", help="skip the fresh-session first reads")
    ap.add_argument("--first-read-rounds", type=int, default=3, help="fresh sessions per reader (median)")
    args = ap.parse_args()
    readers = [r for r in READERS if r in args.readers.split(",")]
    [case] = data.cases(args.workload, args.scale)
    case_dir = prepare_case(case)
    root = os.path.join(WORK, os.path.basename(case_dir))
    if not args.reuse_setup:
        shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root, exist_ok=True)
    started, mach = dt.datetime.now(), machine()
    print(f"{case.name}: base {case.base_rows:,} rows, batch {case.batch_rows:,}; load {mach['load_average_at_start']}")

    built = ensure_tables(readers, root, case_dir, args.reuse_setup)
    keys = pick_keys(case, pq.read_table(os.path.join(case_dir, "batch.parquet"), columns=["id"]))
    qs, want = queries(case, keys), model_answers(case, case_dir, keys)
    results, firsts = [], []
    for line in spark_side.LINES:
        group = [r for r in readers if r != OURS and FORMATS[r].line == line]
        if not group:
            continue
        group = ([OURS] if OURS in readers else []) + group
        sessions = open_sessions(line, group, root, root)
        try:
            results += measure_line(sessions, line, group, root, qs, want, built, args.repeats)
        finally:
            for spark in set(sessions.values()):
                spark.close()
        if not args.no_first_read:
            firsts += first_reads(line, group, root, qs["scan"], want["scan"], root, args.first_read_rounds)

    stem = f"format-read-{started.date().isoformat()}" + ("" if args.scale == 1 else f"-s{args.scale:g}")
    versions = {"pyspark": {k: v.pyspark for k, v in spark_side.LINES.items()},
                "jars": {a.coordinates: a.sha256 for v in spark_side.LINES.values() for a in v.jars}}
    doc = {"date": started.isoformat(timespec="seconds"), "machine": mach, "case": case.to_json(),
           "repeats": args.repeats, "readers": readers, "versions": versions, "built": built,
           "keys": len(keys), "results": results, "first_reads": firsts}
    out = save_results(stem, doc)
    print(f"results: {os.path.relpath(out, ROOT)}")
    for r in readers:
        ran = [x for x in results if r in x["peak_rss_mb"]]
        if ran:
            print(f"  peaks of {r}'s queries: process tree {max(x['peak_rss_mb'][r] for x in ran):,.0f} MB, "
                  f"its Python driver {max(x['driver_python_mb'][r] for x in ran):,.0f} MB, "
                  f"the JVM's heap in use {max(x['jvm_heap_peak_mb'][r] for x in ran):,.0f} MB")
    ratios = [r["ratio"] for r in results if r["ratio"] is not None]
    if ratios:
        invalid = sum(r["check"] != "ok" for r in results)
        print(f"dbt-paimon / fastest peer on the same Spark: worst {max(ratios):.2f}, best {min(ratios):.2f}"
              + (f"; {invalid} rows INVALID" if invalid else "; every answer equal to the model's"))


if __name__ == "__main__":
    pa.set_cpu_count(2)
    main()
