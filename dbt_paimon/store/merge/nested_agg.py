"""Paimon's aggregate functions over nested values, merging a key's versions in sequence order:

- `collect` (FieldCollectAgg, without `distinct`): the key's non-null arrays concatenated, in order;
  null when every version is null;
- `merge_map` (FieldMergeMapAgg): the union of the key's non-null maps, a map key's value taken from
  the last version that holds it (Paimon's `putAll` of each input over the accumulator); null when
  every version is null. Java returns its HashMap's entries in hash order; ours are in the order
  their keys were first seen, which readers of a map do not depend on.

Both take the selected versions of the keys with any (`values`, grouped contiguously by key, in
sequence order) and where each key's versions start among them (`offsets`), and return one value
per such key: whole-array work, no loop per key or per row.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def _lengths(values: pa.Array) -> np.ndarray:
    """Each (non-null) array's or map's entry count."""
    return np.diff(values.offsets.to_numpy()).astype(np.int64)


def collect(values: pa.Array, offsets: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """Per key, its arrays' elements one after another."""
    counts = np.add.reduceat(_lengths(values), offsets) if len(values) else np.zeros(0, np.int64)
    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(bounds), values.flatten(), type=dtype)


def merge_map(values: pa.Array, offsets: np.ndarray, dtype: pa.DataType) -> pa.Array:
    """Per key, its maps merged: each map key once, with its last value."""
    entries = values.cast(pa.list_(pa.struct([dtype.key_field, dtype.item_field]))).flatten()
    keys = len(offsets)
    version_key = np.repeat(np.arange(keys), np.diff(np.append(offsets, len(values))))
    entry_key = np.repeat(version_key, _lengths(values))
    table = pa.table({"g": entry_key, "k": entries.field("key"), "p": np.arange(len(entries), dtype=np.int64)})
    seen = table.group_by(["g", "k"], use_threads=False).aggregate([("p", "min"), ("p", "max")])
    order = np.lexsort((seen.column("p_min").to_numpy(), seen.column("g").to_numpy()))
    kept = entries.take(pa.array(seen.column("p_max").to_numpy()[order]))
    counts = np.bincount(seen.column("g").to_numpy()[order], minlength=keys)
    bounds = pa.array(np.concatenate(([0], np.cumsum(counts))).astype(np.int32))
    return pa.MapArray.from_arrays(bounds, kept.field("key"), kept.field("value"), type=dtype)
