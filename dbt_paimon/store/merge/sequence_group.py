"""Sequence groups of a partial-update table (`fields.<s1>[,<s2>...].sequence-group` = `<f1>,<f2>...`):
columns that several writers update independently, each group ordered by its own sequence fields.

As Paimon's PartialUpdateMergeFunction merges a key's versions (oldest first), for each group:

- a version whose sequence fields are all null leaves the group as it is;
- otherwise it takes the group when its sequence values are at least the group's current ones
  (compared field by field, a null before any value, as UserDefinedSeqComparator): an insert gives
  the group its values (nulls too), a -D/-U row sets the sequence fields to its own and the other
  fields of the group to null (a partial retraction);
- so the group ends with the values of the last version holding the greatest sequence values; a key
  whose first version is a -D/-U row starts from that row's values (Paimon's initRow), which with
  `ignore-delete` is the only -D/-U row that counts (the others change nothing), as a state to beat.

Columns outside every group merge as in a partial-update table without groups (the last non-null
value). With groups, -D/-U rows are accepted without `ignore-delete`. The groups a table declares, and
what is refused with them, are merge_options.py's (sequence_groups, check_sequence_groups).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa

from .sequence_order import sequence_rank


def group_rank(columns: Sequence[pa.Array | pa.ChunkedArray]) -> np.ndarray:
    """Per row, the rank of its sequence values (field by field, nulls first: larger wins), or -1
    where they are all null (a version that leaves the group alone)."""
    ranks = [np.asarray(sequence_rank(c, True).to_numpy(zero_copy_only=False), dtype=np.int64) for c in columns]
    empty = np.logical_and.reduce([r == 0 for r in ranks])  # rank 0: null
    if len(ranks) == 1:
        combined = ranks[0]
    else:  # dense rank of the tuples
        order = np.lexsort(ranks[::-1])
        stacked = np.stack([r[order] for r in ranks])
        new = np.concatenate(([True], (stacked[:, 1:] != stacked[:, :-1]).any(axis=0)))
        combined = np.empty(len(order), dtype=np.int64)
        combined[order] = np.cumsum(new)
    return np.where(empty, -1, combined)


def winners(rank: np.ndarray, eligible: np.ndarray, starts: np.ndarray, gid: np.ndarray) -> np.ndarray:
    """Per key (rows sorted oldest first; groups of rows from `starts`, `gid` each row's), the last
    eligible row holding the key's greatest rank, or -1 when no eligible row has a rank."""
    n = len(rank)
    r = np.where(eligible & (rank >= 0), rank, -1)
    top = np.maximum.reduceat(r, starts) if n else np.zeros(0, dtype=np.int64)
    hit = (r >= 0) & (r == top[gid])
    return np.maximum.reduceat(np.where(hit, np.arange(n), -1), starts) if n else top
