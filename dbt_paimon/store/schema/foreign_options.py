"""Table options other writers store that dbt-paimon does not follow, and that change what a read of
the table returns or what a write into it must do.

dbt-paimon refuses to set options it does not honour (option_validation.py), but a table Java
Paimon, Flink or Spark made may carry any of Paimon's options. Most change nothing a batch reader or
writer must know (caches, parallelism, streaming scans, callbacks). The ones below do: reading or
writing such a table as if they were absent would give wrong rows or leave a table Paimon's own
readers read differently, so every read (FileStoreScan) or every write is refused, naming them.
"""

from __future__ import annotations

from typing import Mapping

from ..common.errors import SchemaError

# option -> (the value that matters, None: any value; why)
READS = {
    "data-evolution.enabled": ("true", "a row's columns live in several files, merged by row id"),
    "chain-table.enabled": ("true", "a read merges the partitions of several branches"),
    "scan.fallback-branch": (None, "a batch read takes the partitions this branch lacks from another branch"),
    "blob-field": (None, "its BLOB columns are stored in separate blob files"),
    "vector-field": (None, "its vector columns are stored in separate files"),
    "aggregation.remove-record-on-delete": ("true", "a -D row removes the key's aggregated row"),
}
WRITES = {
    "row-tracking.enabled": ("true", "every row written must be given a row id"),
    "record-level.expire-time": (None, "a compaction drops the records whose time field has expired"),
    "global-index.enabled": ("true", "every write must keep its global index"),
}


def _found(options: Mapping[str, str], rules: Mapping[str, tuple]) -> list[str]:
    return [f"{key}={options[key]!r} ({why})" for key, (value, why) in rules.items()
            if key in options and (value is None or str(options[key]).lower() == value)]


def check_readable(options: Mapping[str, str], path: str) -> None:
    found = _found(options, READS)
    if found:
        raise SchemaError(f"table {path} has option(s) dbt-paimon does not follow, which change what a read of it "
                          f"returns, so it neither reads nor writes it: {'; '.join(found)}")


def check_writable(options: Mapping[str, str], path: str) -> None:
    check_readable(options, path)
    found = _found(options, WRITES)
    if found:
        raise SchemaError(f"table {path} has option(s) dbt-paimon does not follow, which every write into it must, "
                          f"so it does not write it (it reads it): {'; '.join(found)}")
