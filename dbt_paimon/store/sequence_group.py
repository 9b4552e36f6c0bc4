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
value). With groups, -D/-U rows are accepted without `ignore-delete`. Refused, as in Paimon or where
we do not follow it: `partial-update.remove-record-on-delete` (Paimon forbids it with groups),
`partial-update.remove-record-on-sequence-group` and aggregate functions on a partial-update table
(not implemented here: a table that has them is refused, never read another way).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa

from .errors import SchemaError
from .sequence_order import sequence_rank

_OPTION = re.compile(r"^fields\.(?P<sequence>.+)\.sequence-group$")


@dataclass(frozen=True)
class SequenceGroup:
    sequence: tuple  # the fields that order the group's versions
    members: tuple  # the other fields the group holds

    @property
    def fields(self) -> tuple:
        return self.sequence + self.members


def is_option(key: str) -> bool:
    return _OPTION.match(key) is not None


def groups_of(options: Mapping[str, str], field_names: Sequence[str]) -> tuple[SequenceGroup, ...]:
    """The sequence groups the options declare (Paimon's messages where it refuses them)."""
    groups, seen = [], {}
    for key in sorted(options):
        m = _OPTION.match(key)
        if not m:
            continue
        sequence = tuple(s.strip() for s in m.group("sequence").split(","))
        members = tuple(s.strip() for s in str(options[key]).split(",") if s.strip())
        for name in sequence + members:
            if name not in field_names:
                raise SchemaError(f"option {key!r} names column {name!r}, which the table does not have")
        for name in members:
            if name in seen:
                raise SchemaError(f"Field {name} is defined repeatedly by multiple groups: {key}")
            seen[name] = key
        groups.append(SequenceGroup(sequence, tuple(m for m in members if m not in sequence)))
    return tuple(groups)


def check(options: Mapping[str, str], field_names: Sequence[str], engine: str) -> tuple[SequenceGroup, ...]:
    """The groups of a table, or SchemaError for a configuration we do not merge as Paimon does."""
    groups = groups_of(options, field_names)
    if not groups:
        return groups
    if engine != "partial-update":
        raise SchemaError("option 'fields.<field>.sequence-group' is for merge-engine 'partial-update' (dbt-paimon "
                          f"merges sequence groups of partial-update tables only), not {engine!r}")
    if str(options.get("partial-update.remove-record-on-delete", "false")).lower() == "true":
        raise SchemaError("sequence-group and partial-update.remove-record-on-delete have conflicting behavior so "
                          "should not be enabled at the same time (as in Paimon)")
    return groups


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
