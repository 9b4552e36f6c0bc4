"""`listagg` with `fields.<f>.distinct` = true (Paimon's FieldListaggAgg): a key's first non-blank
value is kept as it is; each later one is split on the delimiter (every token kept, empty ones too,
as splitByWholeSeparatorPreserveAllTokens splits), and only its non-blank tokens that the values so
far do not hold are appended. Vectorised over all keys at once: the caller joins the result."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def distinct_tokens(values: pa.Array, offsets: np.ndarray, blank_re: str,
                    delimiter: str) -> tuple[pa.Array, np.ndarray]:
    """values: each key's non-blank inputs, contiguous and in order, key i's from offsets[i]. The
    strings to join instead (each key's first value, then its new tokens), and their offsets."""
    n, keys = len(values), len(offsets)
    counts = np.diff(np.append(offsets, n))
    seg = np.repeat(np.arange(keys), counts)
    first = np.zeros(n, dtype=bool)
    first[offsets] = True
    lists = pc.split_pattern(values, delimiter)
    parent = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False)
    tokens = pc.list_flatten(lists)
    pos = np.arange(len(tokens))
    # where each (key, token) first occurs: a token of the first value, or an earlier kept token, wins
    stream = pa.table({"seg": seg[parent], "token": tokens, "pos": pos})
    seen = stream.group_by(["seg", "token"]).aggregate([("pos", "min")])
    earliest = np.empty(len(tokens), dtype=np.int64)
    joined = stream.join(seen, ["seg", "token"])
    earliest[joined.column("pos").to_numpy()] = joined.column("pos_min").to_numpy()
    blank = pc.match_substring_regex(tokens, blank_re).to_numpy(zero_copy_only=False).astype(bool)
    kept = ~first[parent] & ~blank & (earliest == pos)
    # the stream to join: per key its first value, then its kept tokens, in order
    key = np.concatenate([seg[offsets], seg[parent][kept]])
    order = np.concatenate([offsets * 0 - 1, pos[kept]])  # the first value before every token
    rank = np.lexsort((order, key))
    out = pa.concat_arrays([values.take(pa.array(offsets)), tokens.filter(pa.array(kept))]).take(pa.array(rank))
    sizes = np.bincount(key, minlength=keys)
    return out, np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
