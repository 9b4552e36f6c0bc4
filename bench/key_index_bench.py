"""The key index's lookup against the number of keys it holds (issue 14): time, bytes touched and
memory of looking up a 10K batch in an index of 1M, 10M and 100M keys.

    python bench/key_index_bench.py [--keys 1000000,10000000,100000000] [--batch 10000]

An index is written from synthetic entries (keys 0..N-1 in 100 partitions, the entry layout and
sharding of dbt_paimon/key_index/: ~2M keys per shard), not from a Paimon table: a 100M-row table
takes hours to write on 2 cores, the index minutes. Each lookup runs in a fresh process (cold
page cache is not forced: the index files were just written), which reports the lookup's seconds,
the bytes its run reads touched, and the growth of its resident memory (VmRSS, memory-mapped pages
included) over the lookup. The batch
is half keys the index holds, half keys it does not, as W3's batch is.
Results: a table on stdout and bench/results/key-index-<date>[-N].json.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

PARTITIONS = 100
CHUNK = 5_000_000  # entries written per run while building (memory of the build)


def _schema():
    import pyarrow as pa
    from dbt_paimon.store.schema.schema import build_schema
    return build_schema(pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string())]), ["id"], ["dt"],
                        {"bucket": "-1"})


def write_index(root: str, keys: int) -> float:
    """An index of `keys` keys at <root>/db.db/.t.dbt-key-index; seconds taken."""
    import numpy as np
    import pyarrow as pa
    from dbt_paimon.key_index import BucketState, IndexState, KeyIndex
    from dbt_paimon.key_index.merge_policy import add_runs
    from dbt_paimon.store.common import binary_row
    from dbt_paimon.store.common.fileio import FileIO

    t0 = time.perf_counter()
    schema = _schema()
    path = os.path.join(root, "db.db", "t")
    index = KeyIndex(FileIO.get(path), path, schema)
    shards = 1
    while shards * index.keys_per_shard < keys:
        shards *= 2
    state = IndexState(shards, [[] for _ in range(shards)], {}, schema_id=schema.id)
    names = [f"2024-01-{d:03d}" for d in range(PARTITIONS)]
    pbytes = [binary_row.serialize([n], schema.partition_types) for n in names]
    for p in pbytes:
        state.buckets[(p, 0)] = BucketState(frozenset(), state.new_gen(), keys // PARTITIONS)
    gens = np.array([state.buckets[(p, 0)].gen for p in pbytes], np.int32)
    for start in range(0, keys, CHUNK):
        ids = np.arange(start, min(keys, start + CHUNK), dtype=np.int64)
        part = ids % PARTITIONS
        key_table = pa.table({"id": ids})
        entries = pa.table({
            "_h": pa.array(index.hashes(key_table), pa.int32()), "id": ids,
            "dt": pa.array(names, pa.string()).take(pa.array(part)),
            "_p": pa.array(pbytes, pa.binary()).take(pa.array(part)), "_bucket": pa.array(np.zeros(len(ids), np.int32)),
            "_gen": pa.array(gens[part]), "_live": pa.array(np.ones(len(ids), np.bool_))})
        add_runs(index.files, state, entries.cast(index.entry_schema), index.max_runs)
    index.save(state)
    index.clean(state, now_ms=int(time.time() * 1000) + 10 * 3_600_000)  # merged-away runs: nobody reads them
    return time.perf_counter() - t0


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def lookup(root: str, keys: int, batch: int) -> dict:
    """In this (fresh) process: one lookup of `batch` keys; seconds, bytes, RSS growth."""
    import numpy as np
    import pyarrow as pa
    from dbt_paimon.key_index import KeyIndex
    from dbt_paimon.store.common.fileio import FileIO

    path = os.path.join(root, "db.db", "t")
    index = KeyIndex(FileIO.get(path), path, _schema())
    state = index.load()
    rng = np.random.default_rng(1)
    held = rng.choice(keys, batch // 2, replace=False)
    wanted = pa.table({"id": np.concatenate([held, keys + np.arange(batch - batch // 2)]).astype(np.int64)})
    before = _rss_kib()
    t0 = time.perf_counter()
    found = index.lookup(state, wanted)
    seconds = time.perf_counter() - t0
    after = _rss_kib()  # the memory-mapped pages the lookup touched count here too
    assert found.num_rows == batch // 2, (found.num_rows, batch // 2)
    return {"seconds": seconds, "bytes_touched": index.bytes_read, "rss_growth_mb": (after - before) / 1024,
            "found": found.num_rows, "shards": state.shards, "runs": sum(len(r) for r in state.runs)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", default="1000000,10000000,100000000")
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", nargs=2)  # internal: root, keys
    args = ap.parse_args()
    if args.child:
        print("RESULT " + json.dumps(lookup(args.child[0], int(args.child[1]), args.batch)))
        return
    rows = []
    for keys in [int(k) for k in args.keys.split(",")]:
        root = tempfile.mkdtemp(prefix="key-index-bench-")
        try:
            built = write_index(root, keys)
            size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)
            runs = []
            for _ in range(args.repeats):
                out = subprocess.run([sys.executable, __file__, "--batch", str(args.batch), "--child", root, str(keys)],
                                     capture_output=True, text=True, check=True).stdout
                runs.append(json.loads(out.split("RESULT ", 1)[1]))
            best = min(runs, key=lambda r: r["seconds"])
            row = {"keys": keys, "batch": args.batch, "index_mb": size / 1e6, "write_seconds": built,
                   "lookup_seconds": [r["seconds"] for r in runs], **{k: best[k] for k in best if k != "seconds"}}
            rows.append(row)
            print(f"{keys:>12,} keys: index {size / 1e6:8.1f} MB in {best['shards']} shards ({best['runs']} runs), "
                  f"written {built:6.1f} s; lookup of {args.batch:,}: "
                  f"{', '.join(f'{s:.3f}' for s in row['lookup_seconds'])} s, "
                  f"{best['bytes_touched'] / 1e6:.2f} MB touched, RSS +{best['rss_growth_mb']:.0f} MB", flush=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    stem = os.path.join(HERE, "results", f"key-index-{dt.date.today().isoformat()}")
    out, n = stem + ".json", 1
    while os.path.exists(out):
        n += 1
        out = f"{stem}-{n}.json"
    with open(out, "w") as f:
        json.dump({"load": os.getloadavg(), "rows": rows}, f, indent=1)
    print(f"results: {out}")


if __name__ == "__main__":
    main()
