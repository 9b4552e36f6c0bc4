"""The `ro` system table (Paimon's ReadOptimizedTable): a read that merges nothing. A primary-key
table is read from the files of its top level only (level num-levels - 1, where a full compaction
writes; each key there once), so it shows the rows as of the last full compaction, at the cost of
one file read each; an append table reads as it always does."""

from __future__ import annotations

import dataclasses
from typing import Sequence

from ..schema.schema import TableSchema
from .scan import DataSplit

READ_OPTIMIZED = "ro"


def top_level(schema: TableSchema, splits: Sequence[DataSplit]) -> list[DataSplit]:
    """The splits with only their top-level files (a split with none left out)."""
    if schema.is_append:
        return list(splits)
    top = schema.core.num_levels - 1
    out = []
    for split in splits:
        files = [f for f in split.files if f.level == top]
        if files:
            out.append(dataclasses.replace(split, files=files))
    return out
