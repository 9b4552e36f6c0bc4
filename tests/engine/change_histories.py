"""Engine-written change histories for every merge engine, changelog producer and bucket mode, and the
pairwise cells of their product that the incremental-read oracles read (Java Paimon's:
tests/java_paimon/test_incremental_matrix.py; Paimon's Spark connector's:
tests/paimon_spark/test_incremental_reads_connector.py)."""

from __future__ import annotations

import random

from dbt_paimon.engine import RunSettings, delete, upsert
from dbt_paimon.store import FileStoreTable

ENGINES = {
    "deduplicate": {},
    "partial-update": {"partial-update.remove-record-on-delete": "true"},
    "aggregation": {"fields.v.aggregate-function": "max"},
    "first-row": {},
}
PRODUCERS = ["none", "input", "lookup", "full-compaction"]
# bucket mode: the table's bucket option and its primary key (dt is the partition)
BUCKETS = {"fixed": ("2", ["id", "dt"]), "dynamic": ("-1", ["id", "dt"]), "cross-partition": ("-1", ["id"])}
BUCKET_MODES = {"fixed": "HASH_FIXED", "dynamic": "HASH_DYNAMIC", "cross-partition": "KEY_DYNAMIC"}
REFUSED = {("first-row", "input"), ("first-row", "full-compaction")}  # by Paimon
# by us, not yet by Paimon: a lookup producer on a table that merges a key's rows (option_validation.py)
NOT_YET = {("partial-update", "lookup"), ("aggregation", "lookup")}


def cells() -> list[tuple[str, str, str]]:
    """(engine, producer, bucket mode): engine i with producer j on bucket mode (i + j) mod 3, less the
    pairs refused; then a cell for each (engine, bucket mode) and (producer, bucket mode) that the
    refusals left out."""
    modes, refused = list(BUCKETS), REFUSED | NOT_YET
    found = [(engine, producer, modes[(i + j) % len(modes)])
             for i, engine in enumerate(ENGINES) for j, producer in enumerate(PRODUCERS)
             if (engine, producer) not in refused]
    for mode in modes:
        for engine in ENGINES:
            if not any(c[0] == engine and c[2] == mode for c in found):
                found.append((engine, next(p for p in PRODUCERS if (engine, p) not in refused), mode))
        for producer in PRODUCERS:
            if not any(c[1] == producer and c[2] == mode for c in found):
                found.append((next(e for e in ENGINES if (e, producer) not in refused), producer, mode))
    return found


def options(engine: str, producer: str, bucket: str) -> dict[str, str]:
    return {"merge-engine": engine, "changelog-producer": producer, "bucket": bucket,
            "dynamic-bucket.target-row-num": "4", **ENGINES[engine]}


def engine_history(spark, path: str, engine: str, producer: str, mode: str) -> FileStoreTable:
    """Four upserts of random rows (id, v, dt) whose keys repeat (on a cross-partition table they move
    between partitions), a delete where the engine takes one (deduplicate; partial-update with
    'partial-update.remove-record-on-delete'), and a last upsert, driver-local; the producer's
    compactions commit between them as the engine runs them. The table as it left it."""
    bucket, keys = BUCKETS[mode]
    table_options, rnd = options(engine, producer, bucket), random.Random(f"{engine}{producer}{mode}")
    settings = RunSettings(execution="local")

    def write(batch: int) -> None:
        ids = rnd.sample(range(10), 5)
        rows = [(i, f"v{batch}-{i}", f"d{rnd.randrange(2)}") for i in ids]
        upsert(spark.createDataFrame(rows, "id BIGINT, v STRING, dt STRING"), path, primary_keys=keys,
               partition_keys="dt", options=table_options, settings=settings)

    for batch in range(4):
        write(batch)
    if engine in ("deduplicate", "partial-update"):
        assert delete(spark, path, "id % 3 = 0", settings=settings).deleted > 0
    write(4)
    table = FileStoreTable.open(path)
    assert table.schema.bucket_mode == BUCKET_MODES[mode]
    return table
