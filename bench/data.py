"""The workloads of issue 6 and their deterministic data.

One schema for every system: id bigint (the key), dt string (the partition), five value columns of
mixed types; ~100 bytes a row in Arrow memory. Same case and scale, same bytes: every system gets
the same base table and the same upsert batch, written once to Parquet by run.py (the base in parts:
W3-100M's would not fit in memory at once).

A batch has the mix of the issue: half of its rows update existing keys (half of those move the key
to another dt partition, the case cross-partition upsert exists for), the other half are new keys.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("dt", pa.string()),
    pa.field("name", pa.string()),
    pa.field("qty", pa.int32()),
    pa.field("price", pa.float64()),
    pa.field("active", pa.bool_()),
    pa.field("updated_at", pa.timestamp("us")),
])
KEY, PARTITION = "id", "dt"
DATA_VERSION = 3   # part of the cache directory's name: bump it whenever base_parts() or batch() change
WORDS = pa.array(["north", "south", "east", "west", "central", "harbour", "valley", "uplands"])
EPOCH_2024_US = 1_704_067_200_000_000


@dataclass(frozen=True)
class Case:
    """One measured upsert: a base table of base_rows in `partitions` dt values, then one batch."""
    name: str
    workload: str
    base_rows: int
    partitions: int
    batch_rows: int
    seed: int

    @property
    def updates(self) -> int:   # existing keys in the batch; the rest are new keys
        return self.batch_rows // 2

    @property
    def moves(self) -> int:     # updates whose dt changes, so the key changes partition
        return self.updates // 2

    def to_json(self) -> dict:
        return dict(asdict(self), updates=self.updates, moves=self.moves, new_keys=self.batch_rows - self.updates)


def cases(workload: str, scale: float) -> list[Case]:
    """The cases of one workload (W1, W2, W3, W3-100M). Scale multiplies rows, never partitions."""
    n = lambda rows: max(10, int(round(rows * scale)))  # noqa: E731
    if workload == "W1":
        return [Case("W1", "W1", n(1_000_000), 10, n(200_000), seed=1)]
    if workload == "W2":
        return [Case("W2", "W2", n(10_000_000), 100, n(1_000_000), seed=2)]
    if workload == "W3":  # the same small batch into W1's and W2's tables: cost against table size
        return [Case("W3-1M", "W3", n(1_000_000), 10, n(10_000), seed=1),
                Case("W3-10M", "W3", n(10_000_000), 100, n(10_000), seed=2)]
    if workload == "W3-100M":  # issue 14's large case, apart (its base is ~10 GB): beside W3-1M, one run.
        # W3-10M's 100 partitions, so that the batch touches as many buckets as there: the case
        # measures the table's size. (1000 partitions would measure 1000 written files instead.)
        return [Case("W3-1M", "W3", n(1_000_000), 10, n(10_000), seed=1),
                Case("W3-100M", "W3", n(100_000_000), 100, n(10_000), seed=3)]
    raise ValueError(f"unknown workload {workload!r}")


def _dt_values(partitions: int) -> pa.Array:
    days = np.datetime64("2024-01-01") + np.arange(partitions)
    return pa.array(days.astype(str).tolist())


def _rows(rng: np.random.Generator, ids: np.ndarray, dt_idx: np.ndarray, partitions: int) -> pa.Table:
    """Rows for the given keys and partition indexes; value columns drawn from rng."""
    n = len(ids)
    digits = lambda: pc.cast(pa.array(rng.integers(10**13, 10**14, n)), pa.string())  # noqa: E731
    name = pc.binary_join_element_wise(
        "customer-account", digits(), WORDS.take(pa.array(rng.integers(0, len(WORDS), n))), digits(), "-")
    return pa.Table.from_arrays([
        pa.array(ids, pa.int64()),
        _dt_values(partitions).take(pa.array(dt_idx)),
        name,
        pa.array(rng.integers(0, 10_000, n, dtype=np.int32)),
        pa.array(np.round(rng.random(n) * 1000, 2)),
        pa.array(rng.random(n) < 0.5),
        pa.array(EPOCH_2024_US + rng.integers(0, 366 * 86_400 * 10**6, n), pa.timestamp("us")),
    ], schema=SCHEMA)


CHUNK_ROWS = 4_000_000   # the base is made and written in parts: W3-100M's would be ~10 GB at once


def _layout(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """(base keys in file order, dt index of each key): what base and batch both follow."""
    rng = np.random.default_rng(case.seed)
    ids = rng.permutation(case.base_rows).astype(np.int64)   # shuffled: files are not pre-sorted by key
    return ids, rng.integers(0, case.partitions, case.base_rows)


def base_parts(case: Case) -> Iterator[pa.Table]:
    """The base table in parts of CHUNK_ROWS rows, each part's values from its own stream."""
    ids, dt_of_id = _layout(case)
    for i, start in enumerate(range(0, case.base_rows, CHUNK_ROWS)):
        part = ids[start:start + CHUNK_ROWS]
        yield _rows(np.random.default_rng([case.seed, i]), part, dt_of_id[part], case.partitions)


def batch(case: Case) -> pa.Table:
    """The upsert batch of a case. It gets its own stream (seed + case size), so W3's batch is
    not W1's batch cut short."""
    n, p = case.base_rows, case.partitions
    _, dt_of_id = _layout(case)
    rng = np.random.default_rng([case.seed, case.batch_rows])
    upd = rng.choice(n, case.updates, replace=False).astype(np.int64)
    upd_dt = dt_of_id[upd].copy()
    shift = rng.integers(1, p, case.moves) if p > 1 else np.zeros(case.moves, np.int64)
    upd_dt[: case.moves] = (upd_dt[: case.moves] + shift) % p          # these keys change partition
    new = np.arange(n, n + case.batch_rows - case.updates, dtype=np.int64)
    batch_ids = np.concatenate([upd, new])
    batch_dt = np.concatenate([upd_dt, rng.integers(0, p, len(new))])
    order = rng.permutation(len(batch_ids))                              # mixed, not grouped by kind
    return _rows(rng, batch_ids[order], batch_dt[order], p)
