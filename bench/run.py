"""Cross-partition upsert benchmark: dbt-paimon against its peers, same data, every result checked.

    python bench/run.py [--workload W1|W2|W3|W3-100M|all] [--scale F] [--systems a,b,...] [--keep]
                        [--reuse-setup] [--repeats N]

Per case (W1, W2, W3-1M, W3-10M; see data.py) and system (see peers/): set up the base table in one
fresh process, then time the upsert of the batch in another, read its peak RSS, read the table back
and compare its checksum with the model's (model.py). A failed check marks the figure INVALID.
With --repeats N, each upsert is timed N times, the systems taking turns round by round, and a
figure is the system's median round (every round checked, every round's seconds kept).
Prints a table, writes bench/results/<date>.json (<date>-s<F>.json below full scale; -2, -3 ... for
later runs of the day, never overwriting) and a PNG chart beside it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import data  # noqa: E402
import model  # noqa: E402
import peers  # noqa: E402

RESULTS_DIR = os.path.join(HERE, "results")
WORK_ROOT = os.path.join(HERE, ".work")


# ---- machine and data -------------------------------------------------------------------------
def save_results(stem: str, doc: dict) -> str:
    """`doc` as bench/results/<stem>[-n].json (n: the first free number), with no machine paths
    (the repository's root left out of every path); returns the file's path."""
    os.makedirs(RESULTS_DIR, exist_ok=True)
    n, out = 1, os.path.join(RESULTS_DIR, stem + ".json")
    while os.path.exists(out):
        n += 1
        out = os.path.join(RESULTS_DIR, f"{stem}-{n}.json")
    root = os.path.dirname(HERE)
    with open(out, "w") as f:
        f.write(json.dumps(doc, indent=1).replace(root + "/", ""))
    return out


def machine() -> dict:
    """What the figures were measured on, read now (the machine is shared: load average too)."""
    def first(path, prefix):
        try:
            with open(path) as f:
                return next((line.split(":", 1)[1].strip() for line in f if line.startswith(prefix)), None)
        except OSError:
            return None
    mem_kib = first("/proc/meminfo", "MemTotal")
    return {
        "cores": len(os.sched_getaffinity(0)),
        "memory_gib": round(int(mem_kib.split()[0]) / 2**20, 1) if mem_kib else None,
        "cpu": first("/proc/cpuinfo", "model name"),
        "os": platform.platform(),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def prepare_case(case: data.Case) -> str:
    """Write base.parquet, batch.parquet and case.json (with the model checksums) once per case."""
    case_dir = os.path.join(WORK_ROOT, "data", f"{case.name}-b{case.base_rows}-u{case.batch_rows}-v{data.DATA_VERSION}")
    meta_path = os.path.join(case_dir, "case.json")
    if os.path.exists(meta_path):
        return case_dir
    os.makedirs(case_dir, exist_ok=True)
    batch = data.batch(case)
    pq.write_table(batch, os.path.join(case_dir, "batch.parquet"), compression="zstd")
    # The base part by part (W3-100M's is ~10 GB in memory), and each model's checksum with it:
    # a checksum is a sum over rows, and which base rows stay depends on the batch alone.
    sums = {m: [model.checksum(batch)] for m in model.MODELS}
    nbytes = 0
    with pq.ParquetWriter(os.path.join(case_dir, "base.parquet"), data.SCHEMA, compression="zstd") as out:
        for part in data.base_parts(case):
            out.write_table(part)
            nbytes += part.nbytes
            for m in model.MODELS:
                sums[m].append(model.checksum(model.kept(part, batch, m)))
    meta = case.to_json()
    meta["bytes_per_row"] = round(nbytes / case.base_rows, 1)
    meta["expected"] = {m: model.combine(sums[m]) for m in model.MODELS}
    with open(meta_path + ".tmp", "w") as f:
        json.dump(meta, f, indent=2)
    os.replace(meta_path + ".tmp", meta_path)   # a killed run leaves no half-made case behind
    return case_dir


# ---- running one system -----------------------------------------------------------------------
def run_phase(phase: str, system: str, case_dir: str, work_dir: str, timeout: float, env: dict) -> dict:
    """Run worker.py in a fresh interpreter; its RESULT line, or an error with its stderr's tail."""
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), phase, system, case_dir, work_dir]
    log = os.path.join(work_dir + f".{phase}.log")
    # Its own process group: on a timeout the whole tree goes (Spark's JVM and Python workers too).
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        return {"error": f"{phase} timed out after {timeout:.0f} s"}
    with open(log, "w") as f:
        f.write(stdout + "\n--- stderr ---\n" + stderr)
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    if p.returncode != 0 or not lines:
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-3:]
        return {"error": f"{phase} failed (exit {p.returncode}): " + " | ".join(tail)[-600:], "log": log}
    return json.loads(lines[-1][len("RESULT "):])


def set_up(system: str, case: data.Case, case_dir: str, work_dir: str, args, env: dict) -> dict:
    """The setup phase into work_dir; with --reuse-setup, a copy of the one kept from an earlier run
    (made now if there is none): W3-100M's base takes most of an hour to write. The kept tables are
    in the format of the commit that wrote them: delete bench/.work/setups after a format change.
    A system that borrows a case's setup (Peer.borrows_setup) gets the lender's table instead."""
    lender = peers.get(system).borrows_setup.get(case.name)
    if lender:   # the lender's setup phase writes this system's table (a copy of its kept one)
        return dict(set_up(lender, case, case_dir, work_dir, args, env), borrowed_from=lender)
    if not args.reuse_setup or not peers.get(system).copyable:   # a copy of it would not be a table of its own
        return run_phase("setup", system, case_dir, work_dir, args.timeout, env)
    kept = os.path.join(WORK_ROOT, "setups", os.path.basename(case_dir), system)
    done = kept + ".json"
    if os.path.exists(done):
        with open(done) as f:
            setup = dict(json.load(f), reused=True)
    else:
        shutil.rmtree(kept, ignore_errors=True)
        setup = run_phase("setup", system, case_dir, kept, args.timeout, env)
        if "error" in setup:
            return setup
        with open(done, "w") as f:
            json.dump(setup, f)
    shutil.copytree(kept, work_dir, symlinks=True)
    return setup


def evict_from_page_cache(work_dir: str) -> None:
    """--cold: the set-up tables' files (data, manifests, key index) out of the page cache, as for
    a nightly upsert into a table nobody read since: written back first (a copy's pages are dirty
    and cannot be dropped), then dropped file by file. The programs' own files stay cached."""
    os.sync()
    for root, _, names in os.walk(work_dir):
        for name in names:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def prepare_system(system: str, case: data.Case, case_dir: str, run_dir: str, args, env: dict):
    """The system's row and its set-up table's directory (None: the row says why it does not run)."""
    peer = peers.get(system)
    row = {"case": case.name, "system": system, "label": peer.label, "note": peer.note, "model": peer.model,
           "batch_rows": case.batch_rows}
    if peer.workloads is not None and case.workload not in peer.workloads:
        return dict(row, status="n/a", reason=f"only for {', '.join(sorted(peer.workloads))}"), None
    reason = peer.available()
    if reason:
        return dict(row, status="unavailable", reason=reason), None
    work_dir = os.path.join(run_dir, case.name, system)
    print(f"  {case.name:<7} {system:<14} setup ...", end="", flush=True)
    setup = set_up(system, case, case_dir, work_dir, args, env)
    if "error" in setup:
        print(" error")
        return dict(row, status="error", reason=setup["error"]), None
    print(f" {setup['setup_seconds']:.1f} s"
          f"{' (by ' + setup['borrowed_from'] + ')' if 'borrowed_from' in setup else ''}",
          flush=True)
    return dict(row, setup_seconds=setup["setup_seconds"], setup_by=setup.get("borrowed_from", system)), work_dir


def time_upsert(system: str, case: data.Case, case_dir: str, set_up_dir: str, rounds_left: int, args,
                env: dict) -> dict:
    """One timed upsert of the batch, in a fresh process, on the set-up table (the last round) or
    on a copy of it (earlier rounds: every round starts from the same table)."""
    work_dir = set_up_dir if rounds_left == 0 else f"{set_up_dir}-r{rounds_left}"
    if work_dir != set_up_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
        if peers.get(system).copyable:
            shutil.copytree(set_up_dir, work_dir, symlinks=True)
        else:   # its own setup phase again (untimed): a copy would write into the original's files
            setup = run_phase("setup", system, case_dir, work_dir, args.timeout, env)
            if "error" in setup:
                return setup
    # The set-up tables written back before the clock, whether just written or copied: their dirty
    # pages (W3-10M's ~1 GB, W3-100M's ~11 GB) would otherwise be flushed during the timed upsert,
    # whose reads and writes would queue behind them (each peer would pay for its own setup)
    os.sync()
    if args.cold:
        evict_from_page_cache(work_dir)
    res = run_phase("upsert", system, case_dir, work_dir, args.timeout, env)
    if not args.keep or work_dir != set_up_dir:
        shutil.rmtree(work_dir, ignore_errors=True)
    if "error" in res:
        print(f"  {case.name:<7} {system:<14} upsert error", flush=True)
    else:
        print(f"  {case.name:<7} {system:<14} upsert {res['seconds']:.2f} s, {res['peak_rss_mb']:.0f} MB, "
              f"check {'ok' if res['valid'] else 'INVALID'}", flush=True)
    return res


def run_case(case: data.Case, case_dir: str, systems: list[str], run_dir: str, args, env: dict) -> list[dict]:
    """Each system set up, then its upsert timed in --repeats rounds. A round times every system
    once, in the systems' order and in reverse order every other round, so that a drift in the
    machine's speed over the rounds falls on every system alike. A system's figure is its median
    round (every round's seconds kept as `rounds`); an error in any round is the system's."""
    rows, ready = [], {}
    for system in systems:
        row, set_up_dir = prepare_system(system, case, case_dir, run_dir, args, env)
        rows.append(row)
        if set_up_dir is not None:
            ready[system] = set_up_dir
    runs: dict[str, list[dict]] = {s: [] for s in ready}
    for i in range(args.repeats):
        order = list(ready) if i % 2 == 0 else list(ready)[::-1]
        for system in order:
            if runs[system] and "error" in runs[system][-1]:
                continue
            runs[system].append(time_upsert(system, case, case_dir, ready[system], args.repeats - 1 - i, args, env))
    return [finish(row, runs[row["system"]]) if row["system"] in runs else row for row in rows]


def finish(row: dict, runs: list[dict]) -> dict:
    """The system's row from its rounds: the median round's figures, every round's seconds."""
    failed = [r for r in runs if "error" in r]
    if failed:
        return dict(row, status="error", reason=failed[0]["error"])
    res = sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]   # the median (lower of two)
    invalid = [r for r in runs if not r["valid"]]
    status = "INVALID" if invalid else "ok"
    return dict(row, status=status, reason=(invalid[0] if invalid else res)["problem"], seconds=res["seconds"],
                rounds=[r["seconds"] for r in runs],
                rows_per_s=row["batch_rows"] / res["seconds"], peak_rss_mb=max(r["peak_rss_mb"] for r in runs),
                startup_seconds=res["startup_seconds"],
                read_seconds=res["read_seconds"], check={"got": res["got"], "expected": res["expected"]},
                info=res["info"], versions=res["versions"], profile=res.get("profile"),
                cross_read=res.get("cross_read"))


def add_ratios(results: list[dict]) -> None:
    """seconds / the reference's (dbt-paimon's) seconds for the same case; < 1 is faster."""
    ref = {r["case"]: r["seconds"] for r in results if r["system"] == peers.REFERENCE and r["status"] == "ok"}
    for r in results:
        r["ratio_to_dbt_paimon"] = r["seconds"] / ref[r["case"]] if "seconds" in r and r["case"] in ref else None


# ---- report -----------------------------------------------------------------------------------
HEAD = ["case", "system", "upsert s", "rows/s", "peak RSS MB", "vs dbt-paimon", "check"]


def table_lines(results: list[dict], markdown: bool = False) -> list[str]:
    head = HEAD
    body = []
    for r in results:
        if "seconds" in r:
            ratio = r["ratio_to_dbt_paimon"]
            body.append([r["case"], r["label"], f"{r['seconds']:.3f}", f"{r['rows_per_s']:,.0f}",
                         f"{r['peak_rss_mb']:,.0f}", "-" if ratio is None else f"{ratio:.2f}x",
                         "ok" if r["status"] == "ok" else "INVALID"])
        else:
            body.append([r["case"], r["label"], "-", "-", "-", "-", r["status"]])
    if markdown:   # for BENCHMARKS.md
        return ["| " + " | ".join(x) + " |" for x in [head, ["---"] * 2 + ["---:"] * 4 + ["---"]] + body]
    widths = [max(len(x[i]) for x in [head] + body) for i in range(len(head))]
    fmt = lambda x: " | ".join(c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(x, widths)))  # noqa: E731
    return [fmt(head), "-+-".join("-" * w for w in widths)] + [fmt(x) for x in body]


def footnotes(results: list[dict]) -> list[str]:
    notes, seen = [], set()
    for r in results:
        if r.get("reason") and (r["system"], r["reason"]) not in seen:
            seen.add((r["system"], r["reason"]))
            notes.append(f"{r['label']} [{r['case']}] {r['status']}: {r['reason']}")
    for r in results:
        c = r.get("cross_read")
        if c and not c["agrees"]:
            what = c.get("error") or (f"{c['got']['rows']:,} rows hash {c['got']['hash']}, "
                                      f"model {r['check']['expected']}")
            notes.append(f"cross-read of {r['label']}'s table [{r['case']}] by {c['reader']}: "
                         f"DISAGREES ({what})")
    starts = [f"{r['case']} {r['startup_seconds']:.1f} s" for r in results
              if r["system"] == peers.REFERENCE and "startup_seconds" in r]
    if starts:
        notes.append("SparkSession start-up before the clock (not in the figures): " + ", ".join(starts))
    for r in results:
        prof = r.get("profile")
        if prof and prof.get("stages"):
            top = ", ".join(f"stage {s['stage']} ({s['name'].rsplit('/', 1)[-1]}, {s['tasks']} tasks) "
                            f"{s['seconds']:.2f} s"
                            for s in prof["stages"][:3])
            notes.append(f"{r['label']} [{r['case']}] profile: {len(prof['stages'])} Spark stages, longest: {top}; "
                         f"no stage running for {prof['no_stage_running_seconds']:.2f} s of {r['seconds']:.2f} s")
        boot = (r.get("info") or {}).get("bootstrap")
        if isinstance(boot, dict) and boot:
            notes.append(f"{r['label']} [{r['case']}] bootstrap from the {boot.get('source')}: "
                         f"{boot.get('seconds', 0):.3f} s, {boot.get('bytes', 0) / 1e6:.1f} MB read"
                         + (f", {boot['keys_found']:,} keys found" if "keys_found" in boot else ""))
        phases = (r.get("info") or {}).get("phases")
        if isinstance(phases, dict) and phases:  # the engine's own account (UpsertResult.phases)
            notes.append(f"{r['label']} [{r['case']}] phases: " + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()))
    if any(r["system"] == "pypaimon" and "seconds" in r for r in results):
        notes.append("* pypaimon's table is keyed on (id, dt): moved keys stay in their old partition too; "
                     "checked against that model (`id_dt`), not the cross-partition one")
    return notes


def targets(results: list[dict], scale: float) -> list[str]:
    """The open goals (not assertions), from valid figures only: issue 15's speed targets (W1 at
    full scale and at --scale 0.05, W2, the distributed executor against the local one), issue
    14's bootstrap target (W3) and the targets against Paimon's own Spark writer (W1, W2, W3-10M, small)."""
    sec = {(r["case"], r["system"]): r["seconds"] for r in results if r["status"] == "ok"}
    ours, rust, distributed, paimon = peers.REFERENCE, "pypaimon-rust", "dbt-paimon-distributed", "paimon-spark"
    against_paimon = "dbt-paimon time / paimon-spark time"
    goals = [("W2", "pypaimon-rust time / dbt-paimon time", (("W2", rust), ("W2", ours)), ">=", 3.0),
             ("W2 distributed", "distributed time / local time", (("W2", distributed), ("W2", ours)), "<=", 1.3),
             ("W3", "dbt-paimon 10K into 10M / 10K into 1M", (("W3-10M", ours), ("W3-1M", ours)), "<=", 1.5),
             ("W3-100M", "dbt-paimon 10K into 100M / 10K into 1M", (("W3-100M", ours), ("W3-1M", ours)), "<=", 3.0),
             ("W2 paimon-spark", against_paimon, (("W2", ours), ("W2", paimon)), "<=", 0.25),
             ("W3-10M paimon-spark", against_paimon, (("W3-10M", ours), ("W3-10M", paimon)), "<=", 0.1)]
    if scale == 1:
        goals.insert(0, ("W1", "dbt-paimon time / pypaimon-rust time", (("W1", ours), ("W1", rust)), "<=", 0.5))
        goals.insert(1, ("W1 paimon-spark", against_paimon, (("W1", ours), ("W1", paimon)), "<=", 0.25))
    elif scale == 0.05:  # the small batch, the common dbt case: the fixed cost of one upsert
        goals.insert(0, ("W1 small", "dbt-paimon time / pypaimon-rust time", (("W1", ours), ("W1", rust)), "<=", 2.0))
        goals.insert(1, ("W1 small paimon-spark", against_paimon, (("W1", ours), ("W1", paimon)), "<=", 0.5))
    rounds = {(r["case"], r["system"]): r.get("rounds", []) for r in results if r["status"] == "ok"}
    out = []
    for name, what, (a, b), op, goal in goals:
        if a in sec and b in sec:
            x = sec[a] / sec[b]
            met = x <= goal if op == "<=" else x >= goal
            line = f"target {name}: {what} = {x:.2f} (goal {op} {goal}): {'met' if met else 'NOT met'}"
            if len(rounds[a]) > 1 and len(rounds[a]) == len(rounds[b]):   # the medians' ratio, and each round's
                each = [p / q for p, q in zip(rounds[a], rounds[b])]
                hits = sum(r <= goal if op == "<=" else r >= goal for r in each)
                line += (f" (of the median rounds; round by round {', '.join(f'{r:.2f}' for r in each)}: "
                         f"met in {hits} of {len(each)})")
            out.append(line)
    return out


def chart(results: list[dict], path: str, title: str) -> None:
    """One panel per case, a bar per system (log scale: the systems span orders of magnitude).
    dbt-paimon blue, valid peers grey, INVALID figures red; no bar for a system that did not run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["case"] for r in results))
    fig, axes = plt.subplots(len(cases), 1, figsize=(9, 1.0 + 0.45 * len(peers.ORDER) * len(cases)), squeeze=False)
    for ax, case in zip(axes[:, 0], cases):
        rows = [r for r in results if r["case"] == case][::-1]   # barh draws bottom-up
        measured = [r["seconds"] for r in rows if "seconds" in r] or [1.0]
        lo, hi = min(measured) / 3, max(measured) * 10
        colors = ["#2a6fdb" if r["system"] == peers.REFERENCE else "#888888" if r["status"] == "ok"
                  else "#d62728" for r in rows]
        ax.barh([r["label"] for r in rows], [r.get("seconds", float("nan")) for r in rows], color=colors)
        for y, r in enumerate(rows):
            text = f"{r['seconds']:.2f} s" + ("" if r["status"] == "ok" else " INVALID") if "seconds" in r \
                else r["status"]
            ax.text(r.get("seconds", lo), y, " " + text, va="center", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
        ax.set_title(f"{case}: upsert of {rows[0]['batch_rows']:,} rows (wall seconds, log scale, lower is better)",
                     fontsize=9)
        ax.tick_params(labelsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="W1", choices=["W1", "W2", "W3", "W3-100M", "all"])
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every row count (0.01 for a smoke run)")
    ap.add_argument("--systems", default=",".join(peers.ORDER), help="comma-separated, from: " + ",".join(peers.ORDER))
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per phase of one system")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="K=V", help="extra SparkSession config")
    ap.add_argument("--keep", action="store_true",
                    help="keep the tables under bench/.work/run-*/ (the phases' logs are always kept there)")
    ap.add_argument("--reuse-setup", action="store_true",
                    help="keep each case's set-up tables under bench/.work/setups/ and time the upsert on a copy")
    ap.add_argument("--repeats", type=int, default=1,
                    help="time each upsert this many rounds (a fresh copy of the set-up table each), "
                         "the systems interleaved; a figure is the system's median round")
    ap.add_argument("--cold", action="store_true",
                    help="drop the set-up tables' files from the page cache before each timed upsert")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in peers.ORDER]
    if unknown:
        ap.error(f"unknown systems {unknown}; known: {peers.ORDER}")
    systems = [s for s in peers.ORDER if s in systems]
    workloads = ["W1", "W2", "W3"] if args.workload == "all" else [args.workload]
    all_cases = [c for w in workloads for c in data.cases(w, args.scale)]

    env = dict(os.environ, PYTHONHASHSEED="0",
               BENCH_SPARK_CONF=json.dumps(dict(kv.split("=", 1) for kv in args.spark_conf)))
    started = dt.datetime.now()
    run_dir = os.path.join(WORK_ROOT, "run-" + started.strftime("%Y%m%d-%H%M%S"))
    mach = machine()
    print(f"machine: {mach['cores']} cores, {mach['memory_gib']} GiB, {mach['cpu']}; "
          f"load {mach['load_average_at_start']}; scale {args.scale:g}")

    results, case_meta = [], []
    for case in all_cases:
        t0 = time.perf_counter()
        case_dir = prepare_case(case)
        with open(os.path.join(case_dir, "case.json")) as f:
            meta = json.load(f)
        case_meta.append(meta)
        print(f"{case.name}: base {case.base_rows:,} rows in {case.partitions} partitions, batch "
              f"{case.batch_rows:,} ({case.moves:,} moving, {case.updates - case.moves:,} staying, "
              f"{case.batch_rows - case.updates:,} new); {meta['bytes_per_row']} B/row; "
              f"data {time.perf_counter() - t0:.1f} s")
        results += run_case(case, case_dir, systems, run_dir, args, env)
    results = [r for r in results if r["status"] != "n/a"]   # e.g. the dbt-run slot outside W1
    add_ratios(results)

    lines = table_lines(results)
    notes = footnotes(results) + targets(results, args.scale)
    print("\n" + "\n".join(lines) + "\n")
    for n in notes:
        print(n)

    os.makedirs(RESULTS_DIR, exist_ok=True)
    stem = started.date().isoformat() + ("" if args.scale == 1 else f"-s{args.scale:g}")
    versions = {"pyarrow": pa.__version__}
    for r in results:
        versions.update(r.get("versions", {}))
    doc = dict(date=started.isoformat(timespec="seconds"), machine=mach, versions=versions,
               args=dict(workload=args.workload, scale=args.scale, systems=systems, spark_conf=args.spark_conf,
                         reuse_setup=args.reuse_setup, cold=args.cold, repeats=args.repeats),
               cases=case_meta, results=results, table=lines, markdown=table_lines(results, markdown=True), notes=notes)
    n = 1   # never overwrite an earlier run of the day: <date>.json, then <date>-2.json, ...
    while os.path.exists(os.path.join(RESULTS_DIR, stem + ("" if n == 1 else f"-{n}") + ".json")):
        n += 1
    stem += "" if n == 1 else f"-{n}"
    json_path = os.path.join(RESULTS_DIR, stem + ".json")
    # Paths inside the results are made relative to the repository: no machine paths in the repo.
    text = json.dumps(doc, indent=2).replace(os.path.dirname(HERE) + "/", "")
    with open(json_path, "w") as f:
        f.write(text)
    png_path = os.path.join(RESULTS_DIR, stem + ".png")
    chart(results, png_path, f"dbt-paimon upsert benchmark, {started.date()}, scale {args.scale:g}, "
                             f"{mach['cores']} cores / {mach['memory_gib']} GiB")
    print(f"\nresults: {json_path}\nchart:   {png_path}")


if __name__ == "__main__":
    main()
