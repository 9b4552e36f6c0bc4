"""The fixed cost of a dbt command (issue 16): how long `dbt run` takes when the data is tiny.

    python bench/startup_bench.py [--repeats 5] [--cases floor,paimon-1,...] [--label after]

Cases (each repetition of each case is a fresh process; cases are interleaved, so that a change of
the machine's load hits every case alike; the median is reported):

    floor          a bare PySpark script: start a local[2] SparkSession, write 2K rows as Parquet
    paimon-1       `dbt run` of one 2K-row paimon_upsert model (type: paimon)
    spark-1        `dbt run` of the same model as dbt-spark's `table` (type: spark, method: session)
    paimon-20      `dbt run` of 20 such paimon_upsert models
    spark-20       `dbt run` of 20 such dbt-spark `table` models
    paimon-table-1 `dbt run` of the `table` model under type: paimon (dbt-spark's materialization on
                   our session: what the catalog design costs dbt-spark's own relations)
    read-paimon    `dbt show` of count(*) over the paimon-1 model's table: the first read of a Paimon
                   table in a fresh dbt process (the query's own time is reported as `first_read`)
    read-spark     the same over the spark-1 model's Parquet table, under dbt-spark

Every dbt case runs one warm-up invocation first (not timed: dbt's full parse, the tables' creation),
so that the timed runs are what a user's next `dbt run` is: partial parsing, an incremental upsert.
Each timed process reports where its time went (`phases`): interpreter and imports, dbt's parse,
the JVM and SparkContext, the SparkSession's state, the catalog (Hive metastore or in-memory), the
adapter's catalog sync, the models, and the exit (JVM shutdown). These are measured by wrapping
pyspark's and the adapter's entry points in the child process (bench instrumentation, nothing is
replaced). Results: a table on stdout and bench/results/startup-<date>[-N].json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

T0 = time.time()  # the child's first instant (before dbt or pyspark is imported)
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_DIR = os.path.join(HERE, "results")
ROWS = 2000
MASTER = "local[2]"
CASES = ("floor", "paimon-1", "spark-1", "paimon-20", "spark-20", "paimon-table-1", "read-paimon", "read-spark")

MODEL_SQL = """{{{{ config({config}) }}}}
select id, cast(id % 97 as int) as k, concat('name-', cast(id as string)) as name,
       cast(id as double) * 1.5 + {offset} as amount
from range({rows})
"""
PAIMON_CONFIG = "materialized='paimon_upsert', unique_key='id'"
TABLE_CONFIG = "materialized='table'"
READ_SQL = "select count(*) as n, sum(amount) as s from {{ ref('m01') }}"
# The same quietness for every system (static settings: they apply when the session starts)
SPARK_CONF = {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}


# ---- projects -----------------------------------------------------------------------------------
def write_project(root: str, kind: str, models: int) -> None:
    """kind: paimon (paimon_upsert models), paimon-table (`table` models under type: paimon) or
    spark (dbt-spark's `table` models under type: spark, method: session)."""
    os.makedirs(os.path.join(root, "models"), exist_ok=True)
    if kind == "spark":
        # dbt-spark's session keeps Derby's metastore_db and spark-warehouse in the working
        # directory: the child runs in the project
        target = {"type": "spark", "method": "session", "host": "localhost", "schema": "analytics",
                  "threads": 1, "server_side_parameters": {"spark.master": MASTER, **SPARK_CONF}}
    else:
        target = {"type": "paimon", "schema": "analytics", "threads": 1, "master": MASTER,
                  "warehouse": os.path.join(root, "warehouse"), "server_side_parameters": dict(SPARK_CONF)}
    files = {
        "profiles.yml": json.dumps({"bench": {"target": "dev", "outputs": {"dev": target}}}, indent=1),
        "dbt_project.yml": json.dumps({"name": "bench", "version": "1.0", "profile": "bench",
                                       "config-version": 2, "flags": {"send_anonymous_usage_stats": False}}),
    }
    config = PAIMON_CONFIG if kind == "paimon" else TABLE_CONFIG
    for i in range(1, models + 1):
        files[os.path.join("models", f"m{i:02d}.sql")] = MODEL_SQL.format(config=config, offset=i, rows=ROWS)
    for name, text in files.items():
        with open(os.path.join(root, name), "w") as f:
            f.write(text)


PROJECTS = {  # case -> (project, kind, models, dbt arguments)
    "paimon-1": ("paimon-1", "paimon", 1, ["run"]),
    "spark-1": ("spark-1", "spark", 1, ["run"]),
    "paimon-20": ("paimon-20", "paimon", 20, ["run"]),
    "spark-20": ("spark-20", "spark", 20, ["run"]),
    "paimon-table-1": ("paimon-table-1", "paimon-table", 1, ["run"]),
    "read-paimon": ("paimon-1", "paimon", 1, ["show", "--inline", READ_SQL]),
    "read-spark": ("spark-1", "spark", 1, ["show", "--inline", READ_SQL]),
}


# ---- the child processes ------------------------------------------------------------------------
def child_floor(work: str) -> dict:
    from pyspark.sql import SparkSession

    marks = {"imported": time.time()}
    builder = SparkSession.builder.master(MASTER).appName("floor")
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    marks["spark"] = time.time()
    (spark.range(ROWS).selectExpr("id", "cast(id % 97 as int) as k", "concat('name-', cast(id as string)) as name",
                                  "cast(id as double) * 1.5 as amount")
     .write.mode("overwrite").parquet(os.path.join(work, "floor.parquet")))
    marks["written"] = time.time()
    return {"marks": marks, "phases": {"imports": marks["imported"] - T0,
                                       "spark_start": marks["spark"] - marks["imported"],
                                       "write": marks["written"] - marks["spark"]}}


def _timed(phases: dict, name: str, fn, once: bool = True):
    """fn, with its (first) call's seconds added to phases[name]."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if once and name in phases:
            return fn(*args, **kwargs)
        t = time.time()
        try:
            return fn(*args, **kwargs)
        finally:
            phases[name] = phases.get(name, 0.0) + time.time() - t
    return wrapper


def _instrument(phases: dict) -> None:
    """Time the start-up steps where they happen, whichever adapter runs them."""
    from pyspark.sql import SparkSession

    builder_cls = type(SparkSession.builder)
    original = builder_cls.getOrCreate

    def get_or_create(self):
        first = getattr(SparkSession, "_instantiatedSession", None) is None
        t = time.time()
        session = original(self)
        if first:
            phases["jvm_and_context"] = time.time() - t
            t = time.time()
            state = session._jsparkSession.sessionState()
            phases["session_state"] = time.time() - t
            t = time.time()
            # the external catalog: Hive's metastore client and Derby, or the in-memory catalog
            state.catalog().externalCatalog().listDatabases()
            phases["catalog_init"] = time.time() - t
        return session

    builder_cls.getOrCreate = get_or_create
    try:
        from dbt_paimon.adapter import session as adapter_session
        from dbt_paimon.sql import catalog
    except ImportError:
        return
    catalog.sync = _timed(phases, "catalog_sync", catalog.sync, once=False)
    # the persisted catalog of Spark-native relations, where the adapter has one
    for module_name, fn_name in (("dbt_paimon.adapter.relations", "restore"),):
        try:
            module = __import__(module_name, fromlist=[fn_name])
            setattr(module, fn_name, _timed(phases, "relations_restore", getattr(module, fn_name), once=False))
        except (ImportError, AttributeError):
            pass
    del adapter_session


def child_dbt(project: str, args: list) -> dict:
    phases: dict = {}
    from dbt.cli.main import dbtRunner

    marks = {"imported": time.time()}
    _instrument(phases)
    events: list = []

    def on_event(e):
        name = e.info.name
        if name in ("MainReportVersion", "FoundStats", "ConcurrencyLine", "NodeStart", "NodeFinished",
                    "FinishedRunningStats", "ShowNode", "LogNodeResult", "StatsLine"):
            events.append((name, e.info.ts.seconds + e.info.ts.nanos / 1e9))

    marks["invoke"] = time.time()
    result = dbtRunner(callbacks=[on_event]).invoke([*args, "--project-dir", project, "--profiles-dir", project])
    marks["done"] = time.time()
    if not result.success:
        raise SystemExit(f"dbt {' '.join(args)} failed: {result.exception}")
    first = {}
    for name, ts in events:
        first.setdefault(name, ts)
    nodes = []
    for r in getattr(result.result, "results", None) or []:
        timing = {t.name: (t.completed_at - t.started_at).total_seconds() for t in r.timing
                  if t.started_at and t.completed_at}
        nodes.append({"node": r.node.name, **timing})
    try:  # the adapter's own account of its start-up steps, where it keeps one
        from dbt_paimon.adapter import session as adapter_session

        phases.update({f"adapter_{k}": v for k, v in adapter_session.STARTUP.items()})
        marks["jvm_archive"] = bool(getattr(adapter_session, "JVM_ARCHIVE", None))
    except (ImportError, AttributeError):
        pass
    phases["imports"] = marks["imported"] - T0
    # dbt's parse (partial) and set-up: from the invocation to "Found N models, ..."
    if "FoundStats" in first:
        phases["dbt_parse"] = first["FoundStats"] - marks["invoke"]
    phases["models_execute"] = sum(n.get("execute", 0.0) for n in nodes)
    phases["models_compile"] = sum(n.get("compile", 0.0) for n in nodes)
    out = {"marks": marks, "phases": phases, "nodes": nodes}
    if args[0] == "show" and nodes:
        out["first_read"] = nodes[0].get("execute")
    return out


# ---- the parent ---------------------------------------------------------------------------------
def run_child(argv: list, cwd: str, env: dict) -> dict:
    started = time.time()
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), *argv], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=1800)
    wall = time.time() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                           f"{proc.stderr[-3000:]}")
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    report["wall"] = wall
    report["phases"]["interpreter"] = report["t0"] - started
    report["phases"]["exit"] = started + wall - report["marks"].get("done", report["marks"].get("written"))
    report["console_lines"] = [line for line in proc.stderr.splitlines() if line.strip()][:20]
    return report


def case_argv(case: str, work: str) -> tuple[list, str]:
    if case == "floor":
        return ["child", "floor", work], work
    project, kind, models, args = PROJECTS[case]
    root = os.path.join(work, project)
    if not os.path.exists(os.path.join(root, "dbt_project.yml")):
        write_project(root, kind, models)
    return ["child", "dbt", root, *args], root


def expand(cases: list, variants: list) -> list:
    """(label, case, variant name, python path) per run: our cases once per variant of the adapter."""
    runs = []
    for case in cases:
        ours = case.startswith(("paimon", "read-paimon"))
        for name, path in (variants if ours else [("", "")]):
            runs.append((f"{case}@{name}" if ours and name else case, case, name, path))
    return runs


def median(values):
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--label", default="", help="a word saved with the results (e.g. before, after)")
    parser.add_argument("--work", default=None, help="work dir (default: a temporary one, removed)")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME=PYTHONPATH[;VAR=VALUE...]",
                        help="run our cases once per adapter variant: its code first on PYTHONPATH (e.g. "
                             "before=/tmp/before from `git archive`; empty: this checkout) and environment "
                             "variables (e.g. 'nowarm=;DBT_PAIMON_WARM_READS=0'); one run interleaves them all")
    opts = parser.parse_args()
    cases = [c.strip() for c in opts.cases.split(",") if c.strip()]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases {sorted(unknown)}; known: {', '.join(CASES)}")
    variants = [tuple(v.split("=", 1)) for v in opts.variant] or [("", "")]
    work = opts.work or tempfile.mkdtemp(prefix="startup-bench-")
    os.makedirs(work, exist_ok=True)
    base_env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYTHONHASHSEED": "0",
                "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    base_env.pop("SPARK_HOME", None)

    def env_for(spec: str) -> dict:
        env = dict(base_env)
        path, *assignments = spec.split(";")
        if path:
            env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(a.split("=", 1) for a in assignments if "=" in a)
        return env

    plan = expand(cases, variants)
    runs: dict = {label: [] for label, *_ in plan}
    try:
        # warm-up: full parse, tables created (the read cases' tables too)
        warmed = set()
        for _label, case, name, path in plan:
            if case == "floor":
                continue
            case_work = os.path.join(work, name) if name else work
            for c in ([case.replace("read-", "") + "-1"] if case.startswith("read-") else []) + [case]:
                if (c, name) in warmed or PROJECTS[c][3][0] != "run":
                    continue
                warmed.add((c, name))
                print(f"warm-up {c} {name} ...", flush=True)
                run_child(*case_argv(c, case_work), env_for(path))
        if any(case.startswith(("paimon", "read-paimon")) for case in cases):
            # the adapter's JVM class archive (jvm_cache.py) is written by a JVM as it exits and taken
            # into use by a later process once settled: one more run each after that, so every timed
            # run starts as a user's next command does
            time.sleep(25)
            for _label, case, name, path in plan:
                if case.startswith(("paimon", "read-paimon")) and PROJECTS[case][3][0] == "run":
                    run_child(*case_argv(case, os.path.join(work, name) if name else work), env_for(path))
        for i in range(opts.repeats):
            for label, case, name, path in plan:
                argv, cwd = case_argv(case, os.path.join(work, name) if name and case != "floor" else work)
                load = [round(x, 2) for x in os.getloadavg()]
                report = run_child(argv, cwd, env_for(path))
                report["load_average"] = load
                runs[label].append(report)
                print(f"[{i + 1}/{opts.repeats}] {label:22s} {report['wall']:6.2f} s  load {load[0]:.2f}"
                      + (f"  first read {report['first_read']:.2f} s" if report.get("first_read") is not None else "")
                      + ("  (JVM class archive)" if report["marks"].get("jvm_archive") else ""),
                      flush=True)
    finally:
        if not opts.keep and not opts.work:
            shutil.rmtree(work, ignore_errors=True)
    summary = {}
    for case, reports in runs.items():
        if not reports:
            continue
        phase_names = sorted({p for r in reports for p in r["phases"]})
        summary[case] = {
            "wall_median": median([r["wall"] for r in reports]),
            "wall_min": round(min(r["wall"] for r in reports), 3),
            "walls": [round(r["wall"], 2) for r in reports],
            "load_averages": [r["load_average"][0] for r in reports],
            "phases_median": {p: median([r["phases"].get(p) for r in reports]) for p in phase_names},
            "first_read_median": median([r.get("first_read") for r in reports]),
            "console_lines": reports[-1]["console_lines"],
        }
    floor = summary.get("floor", {}).get("wall_median")
    floor_min = summary.get("floor", {}).get("wall_min")
    print(f"\n{'case':22s} {'median s':>9s} {'x floor':>8s} {'min s':>7s} {'x floor':>8s}  load 1-min   "
          f"where the time goes (medians, s)")
    for case, s in summary.items():
        ratio = f"{s['wall_median'] / floor:.2f}" if floor else "-"
        ratio_min = f"{s['wall_min'] / floor_min:.2f}" if floor_min else "-"
        loads = f"{min(s['load_averages']):.1f}-{max(s['load_averages']):.1f}"
        phases = ", ".join(f"{k} {v:.2f}" for k, v in s["phases_median"].items() if v is not None)
        print(f"{case:22s} {s['wall_median']:9.2f} {ratio:>8s} {s['wall_min']:7.2f} {ratio_min:>8s}  "
              f"{loads:11s}  {phases}")
        if s["first_read_median"] is not None:
            print(f"{'':22s} first read of the table inside dbt: {s['first_read_median']:.2f} s")
    os.makedirs(RESULTS_DIR, exist_ok=True)
    stem = f"startup-{dt.date.today().isoformat()}"
    path, n = os.path.join(RESULTS_DIR, stem + ".json"), 1
    while os.path.exists(path):
        n += 1
        path = os.path.join(RESULTS_DIR, f"{stem}-{n}.json")
    with open(path, "w") as f:
        json.dump({"label": opts.label, "variants": [v[0] for v in variants],
                   "date": dt.datetime.now().isoformat(timespec="seconds"),
                   "cores": len(os.sched_getaffinity(0)), "repeats": opts.repeats, "summary": summary,
                   "runs": runs}, f, indent=1, default=str)
    print(f"\nwritten {path}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "child":
        out = child_floor(sys.argv[3]) if sys.argv[2] == "floor" else child_dbt(sys.argv[3], sys.argv[4:])
        out["t0"] = T0
        print(json.dumps(out, default=str))
    else:
        main()
