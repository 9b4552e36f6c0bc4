"""The expected final tables, built with pyarrow alone, and an order-independent checksum.

The model never touches a system under test: it applies the batch to the base table by key with
last-write-wins, which is what every upsert here must produce. Three models, one per kind of result:

  cross   key = id: a batch row replaces the base row with its id, dt included (the key may move
          partition). What dbt-paimon, pypaimon-rust (cross-partition), Delta MERGE and Iceberg
          upsert on id must produce.
  id_dt   key = (id, dt): what a table keyed on (id, dt) holds after the same batch. A moved key is
          a new row and its old row stays. pypaimon without cross-partition support can only do
          this, so it differs from `cross` by design; this model checks it is right at what it does.
  batch   the batch itself: the physical-limit probe writes the batch as a file, nothing more.

The checksum is the row count plus the sum (mod 2**64) of one 64-bit hash per row over every
column, so it ignores row order and file layout but catches any changed, lost or extra row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from data import SCHEMA

MODELS = ("cross", "id_dt", "batch")


def expected(base: pa.Table, batch: pa.Table, model: str) -> pa.Table:
    """The expected table, or (with base a part of the base table) the rows it contributes
    beside the batch: a base row's fate depends on the batch alone, so parts add up."""
    return pa.concat_tables([kept(base, batch, model), batch.select(SCHEMA.names).cast(SCHEMA)])


def kept(base: pa.Table, batch: pa.Table, model: str) -> pa.Table:
    """The rows of base (or of a part of it) that stay after the batch."""
    if model == "cross":
        rows = base.filter(pc.invert(pc.is_in(base["id"], value_set=batch["id"])))
    elif model == "id_dt":
        rows = base.join(batch.select(["id", "dt"]), keys=["id", "dt"], join_type="left anti")
    elif model == "batch":
        return base.schema.empty_table().select(SCHEMA.names).cast(SCHEMA)
    else:
        raise ValueError(model)
    return rows.select(SCHEMA.names).cast(SCHEMA)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a well-spread uint64 hash of uint64 values (vectorised)."""
    with np.errstate(over="ignore"):
        x = (x + np.uint64(0x9E3779B97F4A7C15)).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _column_hash(col: pa.ChunkedArray) -> np.ndarray:
    """uint64 per row, by value: systems return the same values with different Arrow types
    (large_string, timestamp with a time zone, dictionary arrays, non-null flags), so compare values."""
    t = col.type
    if pa.types.is_dictionary(t):
        return _column_hash(col.cast(t.value_type))
    nulls = col.is_null().to_numpy(zero_copy_only=False)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        h = pd.util.hash_array(col.to_numpy(zero_copy_only=False).astype(object), categorize=False)
    else:
        if pa.types.is_timestamp(t):
            col = col.cast(pa.timestamp("us", t.tz)).cast(pa.int64())   # instants in microseconds
        elif pa.types.is_floating(t):
            col = col.cast(pa.float64())
        elif pa.types.is_boolean(t) or pa.types.is_integer(t):
            col = col.cast(pa.int64())
        else:
            raise TypeError(f"no checksum rule for {t}")
        vals = col.fill_null(0).to_numpy()
        h = _mix(vals.view(np.uint64) if vals.dtype.itemsize == 8 else vals.astype(np.uint64))
    return np.where(nulls, np.uint64(0x5BD1E995), h).astype(np.uint64)


def checksum(tables) -> dict:
    """{"rows": n, "hash": 16 hex digits} over the bench schema's columns, of one table or of the
    parts (any iterable of tables) that make it up."""
    if not isinstance(tables, pa.Table):
        return combine([checksum(t) for t in tables])
    row = np.zeros(tables.num_rows, np.uint64)
    for name in SCHEMA.names:
        with np.errstate(over="ignore"):
            row = _mix(row ^ _column_hash(tables[name]))     # chained: column order matters
    with np.errstate(over="ignore"):
        total = int(row.sum(dtype=np.uint64))               # wraps mod 2**64: row order does not matter
    return {"rows": tables.num_rows, "hash": f"{total:016x}"}


def combine(sums: list[dict]) -> dict:
    """The checksum of a table from the checksums of parts that make it up."""
    total = sum(int(s["hash"], 16) for s in sums) % 2**64
    return {"rows": sum(s["rows"] for s in sums), "hash": f"{total:016x}"}
