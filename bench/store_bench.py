"""Benchmark of the pure-Python Paimon store (dbt_paimon.store) against pyarrow and pypaimon.

    .venv/bin/python bench/store_bench.py [--rows N] [--pypaimon-rows M]

One primary-key table (id bigint, v string, dt string; primary key (id, dt), partitioned by dt)
is written and read back by three systems:
  ours      dbt_paimon.store: one commit, dynamic bucket mode, bucket = id % 4 given per row
  pyarrow   the physical limit: plain zstd Parquet, one file per dt partition, no keys or merge
  pypaimon  pypaimon's filesystem catalog, fixed bucket = 4 (Python reader: no native module)
Reads are the best of --repeat runs. Ratios are seconds per row relative to the reference's
same operation (< 1: faster).
Results are printed as a table and saved to bench/results/store-<date>.json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.metadata
import json
import os
import platform
import shutil
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from pypaimon import CatalogFactory, Schema

from dbt_paimon.store import FileStoreTable

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("dt", pa.string())])
PK, PARTITION, BUCKETS, DB = ["id", "dt"], ["dt"], 4, "bench"
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def make_rows(n: int, seed: int = 42) -> pa.Table:
    """n rows: unique shuffled ids, ~20-char strings, 10 distinct dt values; same seed, same rows."""
    rng = np.random.default_rng(seed)
    ids = rng.permutation(n).astype(np.int64)
    nums = pc.cast(pa.array(rng.integers(10**13, 10**14, n)), pa.string())  # 14 digits
    v = pc.binary_join_element_wise("value-", nums, "")
    days = pa.array([f"2024-01-{d:02d}" for d in range(1, 11)])
    dts = days.take(pa.array(rng.integers(0, 10, n)))
    return pa.Table.from_arrays([pa.array(ids), v, dts], schema=SCHEMA)


def timed(fn, repeat: int = 1):
    """fn's result and its best wall time over `repeat` runs."""
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


# ---- the three systems ----------------------------------------------------------------------
def ours_write(path: str, rows: pa.Table) -> FileStoreTable:
    t = FileStoreTable.create(path, SCHEMA, PK, PARTITION, {"bucket": "-1"})
    w = t.new_write()
    w.write(rows, buckets=(rows.column("id").to_numpy() % BUCKETS).astype(np.int32))
    w.commit()
    return t


def pyarrow_write(directory: str, rows: pa.Table) -> None:
    os.makedirs(directory)
    for i, day in enumerate(pc.unique(rows.column("dt")).to_pylist()):
        part = rows.filter(pc.equal(rows.column("dt"), day))
        pq.write_table(part, f"{directory}/part-{i}.parquet", compression="zstd", compression_level=1)


def pypaimon_write(catalog, name: str, rows: pa.Table):
    schema = Schema.from_pyarrow_schema(SCHEMA, partition_keys=PARTITION, primary_keys=PK,
                                        options={"bucket": str(BUCKETS)})
    catalog.create_table(f"{DB}.{name}", schema, False)
    table = catalog.get_table(f"{DB}.{name}")
    pypaimon_append(table, rows)
    return table


def update_rows(rows: pa.Table) -> pa.Table:
    """Every 10th row with a new value, same key and partition."""
    upd = rows.take(pa.array(np.arange(0, rows.num_rows, 10)))
    return upd.set_column(1, "v", pc.binary_join_element_wise(upd.column("v"), "-updated", ""))


def expected_after(rows: pa.Table, upd: pa.Table) -> pa.Table:
    mask = pc.is_in(rows.column("id"), value_set=upd.column("id"))
    return pa.concat_tables([rows.filter(pc.invert(mask)), upd]).sort_by("id")


def ours_update(t: FileStoreTable, upd: pa.Table) -> None:
    w = t.new_write()
    w.write(upd, buckets=(upd.column("id").to_numpy() % BUCKETS).astype(np.int32), row_kinds=np.full(upd.num_rows, 2))
    w.commit()


def pypaimon_append(table, upd: pa.Table) -> None:
    builder = table.new_batch_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    write.write_arrow(upd)
    commit.commit(write.prepare_commit())
    write.close()
    commit.close()


def pypaimon_read(table) -> pa.Table:
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


# ---- report ---------------------------------------------------------------------------------
def add_ratios(results: list[dict]) -> None:
    """Per row: seconds per row divided by pyarrow's / pypaimon's for the same kind of operation."""
    def per_row(system, kind):
        r = next((r for r in results if r["system"] == system and r["kind"] == kind), None)
        return r["seconds"] / r["rows"] if r else None
    for r in results:
        for ref in ("pyarrow", "pypaimon"):
            base = per_row(ref, r["kind"])
            r[f"vs_{ref}"] = None if ref == r["system"] or not base else (r["seconds"] / r["rows"]) / base


def print_table(results: list[dict]) -> None:
    head = ["system", "operation", "rows", "seconds", "rows/s", "vs pyarrow", "vs pypaimon"]
    fmt = lambda x: "-" if x is None else f"{x:.2f}x"  # noqa: E731
    body = [[r["system"], r["operation"], f"{r['rows']:,}", f"{r['seconds']:.3f}",
             f"{r['rows'] / r['seconds']:,.0f}", fmt(r["vs_pyarrow"]), fmt(r["vs_pypaimon"])] for r in results]
    widths = [max(len(row[i]) for row in [head] + body) for i in range(len(head))]
    line = lambda row: " | ".join(c.ljust(w) if i < 2 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(row, widths)))
    print(line(head))
    print("-+-".join("-" * w for w in widths))
    for row in body:
        print(line(row))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000, help="rows for ours and pyarrow")
    ap.add_argument("--pypaimon-rows", type=int, default=1_000_000, help="rows for pypaimon (its write is slow)")
    ap.add_argument("--repeat", type=int, default=3, help="reads: best of this many runs (writes run once)")
    args = ap.parse_args()
    r = args.repeat

    rows = make_rows(args.rows)
    py_rows = rows if args.pypaimon_rows == args.rows else make_rows(args.pypaimon_rows)
    results, checks = [], {}

    def record(system, operation, kind, n, seconds):
        results.append(dict(system=system, operation=operation, kind=kind, rows=n, seconds=seconds))
        print(f"  {system:<9} {operation:<28} {n:>10,} rows {seconds:8.3f} s", flush=True)

    tmp = tempfile.mkdtemp(prefix="store-bench-")
    try:
        warehouse = os.path.join(tmp, "warehouse")
        ours_path = os.path.join(warehouse, f"{DB}.db", "ours")

        ours, s = timed(lambda: ours_write(ours_path, rows))
        record("ours", "write + commit", "write", args.rows, s)
        out, s = timed(lambda: ours.to_arrow(), r)
        record("ours", "merge read (all columns)", "read", out.num_rows, s)
        out, s = timed(lambda: ours.to_arrow(columns=["id", "dt"]), r)
        record("ours", "read keys only (id, dt)", "read keys", out.num_rows, s)

        pa_dir = os.path.join(tmp, "pyarrow")
        _, s = timed(lambda: pyarrow_write(pa_dir, rows))
        record("pyarrow", "write (zstd, file per dt)", "write", args.rows, s)
        out, s = timed(lambda: pq.read_table(pa_dir), r)
        record("pyarrow", "read (all columns)", "read", out.num_rows, s)
        out, s = timed(lambda: pq.read_table(pa_dir, columns=["id", "dt"]), r)
        record("pyarrow", "read keys only (id, dt)", "read keys", out.num_rows, s)

        catalog = CatalogFactory.create({"warehouse": warehouse})
        catalog.create_database(DB, True)
        pyp, s = timed(lambda: pypaimon_write(catalog, "pyp", py_rows))
        record("pypaimon", "write + commit", "write", args.pypaimon_rows, s)
        out, s = timed(lambda: pypaimon_read(pyp), r)
        record("pypaimon", "merge read (all columns)", "read", out.num_rows, s)

        # A second commit updating 10% of the keys: now every bucket holds two overlapping files
        # and both readers must really merge (the single-commit reads above take fast paths).
        upd = update_rows(rows)
        _, s = timed(lambda: ours_update(ours, upd))
        record("ours", "update 10% + commit", "update", upd.num_rows, s)
        out, s = timed(lambda: ours.to_arrow(), r)
        record("ours", "merge read, 2 files/bucket", "read merged", out.num_rows, s)
        merged_ours = out
        py_upd = upd if py_rows is rows else update_rows(py_rows)
        _, s = timed(lambda: pypaimon_append(pyp, py_upd))
        record("pypaimon", "update 10% + commit", "update", py_upd.num_rows, s)
        out, s = timed(lambda: pypaimon_read(pyp), r)
        record("pypaimon", "merge read, 2 files/bucket", "read merged", out.num_rows, s)
        checks["merged read equals the model"] = (
            "OK" if merged_ours.sort_by("id").column("v").equals(expected_after(rows, upd).column("v")) else "MISMATCH")

        # Cross-check: each reads the other's table; the row count (and id sum) must match.
        def check(name, fn, expect: pa.Table):
            try:
                got = fn()
                ok = got.num_rows == expect.num_rows and pc.sum(got["id"]) == pc.sum(expect["id"])
                checks[name] = f"{'OK' if ok else 'MISMATCH'} ({got.num_rows:,} rows, expected {expect.num_rows:,})"
            except Exception as e:  # noqa: BLE001 - a failure to read is a result of the benchmark, not a crash of it
                checks[name] = f"MISMATCH ({type(e).__name__}: {e})"
        check("ours reads pypaimon's table",
              lambda: FileStoreTable.open(os.path.join(warehouse, f"{DB}.db", "pyp")).to_arrow(), py_rows)
        check("pypaimon reads ours", lambda: pypaimon_read(catalog.get_table(f"{DB}.ours")), rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    add_ratios(results)
    print()
    print_table(results)
    print("\nratio = seconds per row / the reference's for the same operation (< 1 is faster)\n")
    for name, verdict in checks.items():
        print(f"cross-check: {name}: {verdict}")

    os.makedirs(RESULTS_DIR, exist_ok=True)
    out_path = os.path.join(RESULTS_DIR, f"store-{dt.date.today().isoformat()}.json")
    with open(out_path, "w") as f:
        json.dump(dict(date=dt.datetime.now().isoformat(timespec="seconds"), rows=args.rows,
                       pypaimon_rows=args.pypaimon_rows, repeat=args.repeat, python=platform.python_version(),
                       pyarrow=pa.__version__, pypaimon=importlib.metadata.version("pypaimon"),
                       cpus=os.cpu_count(), results=results, cross_checks=checks), f, indent=2)
    print(f"\nresults: {out_path}")


if __name__ == "__main__":
    main()
