"""An independent, plainly written model of what a cross-partition upsert must leave in the table.

It knows nothing of buckets or files: a dict from key to row, updated row by row with the merge
engine's rules as Paimon documents them. Slow on purpose; tests keep data small.
"""

from __future__ import annotations

import random
import string
from typing import Callable


def _sum(old, new):
    return new if old is None else old if new is None else old + new


def _agg(fn: str) -> Callable:
    return {
        "sum": _sum,
        "count": _sum,  # values are already 1/0 per row when applied (see UpsertModel.apply)
        "min": lambda o, n: n if o is None else o if n is None else min(o, n),
        "max": lambda o, n: n if o is None else o if n is None else max(o, n),
        "last_value": lambda o, n: n,
        "last_non_null_value": lambda o, n: o if n is None else n,
        "first_value": lambda o, n: o,
        "first_non_null_value": lambda o, n: n if o is None else o,
        "bool_and": lambda o, n: n if o is None else o if n is None else (o and n),
        "bool_or": lambda o, n: n if o is None else o if n is None else (o or n),
    }[fn]


def _lower(a, b) -> bool:
    """a < b with null lowest."""
    if a is None:
        return b is not None
    return b is not None and a < b


class UpsertModel:
    def __init__(self, keys, partition_keys, engine="deduplicate", aggregates=None, sequence_by=None):
        self.keys = list(keys)
        self.partition_keys = list(partition_keys)
        self.engine = engine
        self.aggregates = dict(aggregates or {})
        self.sequence_by = sequence_by
        self.rows: dict[tuple, dict] = {}

    def key(self, row) -> tuple:
        return tuple(row[k] for k in self.keys)

    def _winners(self, batch: list[dict]) -> list[dict]:
        best: dict[tuple, dict] = {}
        for row in batch:
            k = self.key(row)
            if k not in best or (self.sequence_by and not _lower(row[self.sequence_by], best[k][self.sequence_by])):
                best[k] = row
        return list(best.values())

    def apply(self, batch: list[dict]) -> dict[str, int]:
        counts = dict(inserted=0, updated=0, moved=0, skipped=len(batch))
        for row in self._winners(batch):
            counts["skipped"] -= 1
            row = dict(row)
            for col, fn in self.aggregates.items():
                if fn == "count":
                    row[col] = 0 if row[col] is None else 1
            k = self.key(row)
            old = self.rows.get(k)
            if old is None:
                self.rows[k] = row
                counts["inserted"] += 1
                continue
            if self.sequence_by and _lower(row[self.sequence_by], old[self.sequence_by]):
                counts["skipped"] += 1
                continue
            same = all(row[p] == old[p] for p in self.partition_keys)
            if self.engine == "first-row":
                counts["skipped"] += 1
            elif self.engine == "deduplicate":
                self.rows[k] = row
                counts["updated" if same else "moved"] += 1
            else:  # partial-update / aggregation: the key stays where it lives
                merged = dict(old)
                for col, value in row.items():
                    if col in self.keys or col in self.partition_keys:
                        continue
                    if self.engine == "partial-update":
                        if value is not None:
                            merged[col] = value
                    else:
                        merged[col] = _agg(self.aggregates.get(col, "last_non_null_value"))(old[col], value)
                self.rows[k] = merged
                counts["updated"] += 1
        return counts

    def sorted_rows(self) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: tuple(r[k] for k in self.keys))


def random_batches(seed: int, batches: int, size: int, key_space: int, partitions=("a", "b", "c"),
                   with_null_partition: bool = False, duplicates: bool = False) -> list[list[dict]]:
    """Batches of rows (id, dt, v, s, amount, flag, seq): a mix of new keys, updates in place and
    partition moves, with nulls in the value columns."""
    rnd = random.Random(seed)
    parts = list(partitions) + ([None] if with_null_partition else [])
    out = []
    for _ in range(batches):
        ids = rnd.sample(range(key_space), min(size, key_space))
        if duplicates:
            ids += rnd.choices(ids, k=max(1, size // 5))
        rows = []
        for i, id_ in enumerate(ids):
            rows.append({
                "id": id_,
                "dt": rnd.choice(parts),
                "v": rnd.choice([None, rnd.randrange(-1000, 1000)]),
                "s": rnd.choice([None, "".join(rnd.choices(string.ascii_lowercase, k=rnd.randrange(0, 6)))]),
                "amount": rnd.choice([None, rnd.randrange(0, 100)]),
                "flag": rnd.choice([None, True, False]),
                # unique inside a batch, random across batches: later batches may hold older versions
                "seq": rnd.randrange(0, 1_000) * 1_000 + i,
            })
        out.append(rows)
    return out
