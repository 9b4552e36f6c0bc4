"""Table options by their Paimon names (CoreOptions), with Paimon's defaults.

Unlike Paimon, which stores any key it is given, we reject a key we do not know or do not honour:
a silently ignored option (a typo, or `changelog-producer` we do not implement) is a wrong table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from .errors import SchemaError

MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
AGGREGATE_FUNCTIONS = (
    "sum", "min", "max", "count", "last_value", "last_non_null_value", "first_value",
    "first_non_null_value", "bool_and", "bool_or", "product", "listagg",
)

_MEMORY_UNITS = {"b": 1, "kb": 1 << 10, "k": 1 << 10, "mb": 1 << 20, "m": 1 << 20, "gb": 1 << 30, "g": 1 << 30,
                 "tb": 1 << 40, "t": 1 << 40, "bytes": 1}
_DURATION_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000, "h": 3_600_000,
                   "d": 86_400_000, "": 1}


def _int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SchemaError(f"option {key!r} must be an integer, got {value!r}") from None


def parse_memory(key: str, value: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    if not m or m.group(2).lower() not in _MEMORY_UNITS | {"": 1}:
        raise SchemaError(f"option {key!r} must be a size such as '128mb', got {value!r}")
    return int(m.group(1)) * (_MEMORY_UNITS.get(m.group(2).lower(), 1))


def parse_duration_ms(key: str, value: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", value)
    if not m or m.group(2).lower() not in _DURATION_UNITS:
        raise SchemaError(f"option {key!r} must be a duration such as '1h' or '30 min', got {value!r}")
    return int(m.group(1)) * _DURATION_UNITS[m.group(2).lower()]


def _choice(*allowed: str, why: str = ""):
    def check(key: str, value: str) -> str:
        if value not in allowed:
            raise SchemaError(f"option {key!r} must be one of {', '.join(allowed)}{why}, got {value!r}")
        return value
    return check


def _bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false"):
        raise SchemaError(f"option {key!r} must be true or false, got {value!r}")
    return value.lower() == "true"


# key -> validator of its value (None: any string)
_KNOWN: dict[str, object] = {
    "bucket": _int,
    "bucket-key": None,
    "merge-engine": _choice(*MERGE_ENGINES),
    "ignore-delete": _bool,
    "partial-update.remove-record-on-delete": _bool,
    "rowkind.field": None,
    "sequence.field": None,
    "dynamic-bucket.target-row-num": _int,
    "dynamic-bucket.initial-buckets": _int,
    "dynamic-bucket.max-buckets": _int,
    "dynamic-bucket.assigner-parallelism": _int,
    "cross-partition-upsert.bootstrap-parallelism": _int,
    "cross-partition-upsert.index-ttl": parse_duration_ms,
    "num-sorted-run.compaction-trigger": _int,
    "num-sorted-run.stop-trigger": _int,
    "full-compaction.delta-commits": _int,
    "compaction.max-size-amplification-percent": _int,
    "compaction.size-ratio": _int,
    "write-only": _bool,
    "target-file-size": parse_memory,
    "file.format": _choice("parquet", why=" (the only format dbt-paimon writes)"),
    "file.compression": _choice("zstd", "snappy", "gzip", "lz4", "none", "uncompressed"),
    "file.compression.zstd-level": _int,
    "manifest.merge-min-count": _int,
    "manifest.target-file-size": parse_memory,
    "snapshot.num-retained.min": _int,
    "snapshot.num-retained.max": _int,
    "snapshot.time-retained": parse_duration_ms,
    "snapshot.expire.limit": _int,
    "commit.max-retries": _int,
    "partition.default-name": None,
    "partition.legacy-name": _choice("true", why=" (non-legacy partition names are not supported)"),
    "fields.default-aggregate-function": None,
}
_FIELD_OPTION = re.compile(r"^fields\.(?P<field>.+)\.(?P<what>aggregate-function|ignore-retract|sequence-group)$")


def validate(options: Mapping[str, str], columns: list[str]) -> dict[str, str]:
    """Checked copy of user options (values as strings, as Paimon stores them)."""
    out: dict[str, str] = {}
    for key, raw in options.items():
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        m = _FIELD_OPTION.match(key)
        if m:
            if m.group("field") not in columns:
                raise SchemaError(f"option {key!r} names column {m.group('field')!r}, which the table does not have")
            if m.group("what") == "aggregate-function" and value not in AGGREGATE_FUNCTIONS:
                raise SchemaError(f"option {key!r}: unknown aggregate function {value!r} "
                                  f"(known: {', '.join(AGGREGATE_FUNCTIONS)})")
        elif key not in _KNOWN:
            raise SchemaError(f"unknown table option {key!r} (dbt-paimon rejects options it does not honour; "
                              f"known: {', '.join(sorted(_KNOWN))}, fields.<column>.aggregate-function)")
        else:
            check = _KNOWN[key]
            if callable(check):
                check(key, value)
        out[key] = value
    if "fields.default-aggregate-function" in out and out["fields.default-aggregate-function"] not in AGGREGATE_FUNCTIONS:
        raise SchemaError(f"option 'fields.default-aggregate-function': unknown function "
                          f"{out['fields.default-aggregate-function']!r}")
    return out


@dataclass(frozen=True)
class CoreOptions:
    """Typed view of a table's stored options with Paimon's defaults."""

    raw: Mapping[str, str]

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.raw.get(key, default)

    @property
    def bucket(self) -> int:
        return int(self.raw.get("bucket", "-1"))

    @property
    def bucket_key(self) -> list[str]:
        v = self.raw.get("bucket-key")
        return [s.strip() for s in v.split(",")] if v else []

    @property
    def merge_engine(self) -> str:
        return self.raw.get("merge-engine", "deduplicate")

    @property
    def ignore_delete(self) -> bool:
        return self.raw.get("ignore-delete", "false").lower() == "true"

    @property
    def target_file_size(self) -> int:
        return parse_memory("target-file-size", self.raw.get("target-file-size", "128mb"))

    @property
    def file_compression(self) -> str:
        return self.raw.get("file.compression", "zstd")

    @property
    def zstd_level(self) -> int:
        return int(self.raw.get("file.compression.zstd-level", "1"))

    @property
    def commit_max_retries(self) -> int:
        return int(self.raw.get("commit.max-retries", "10"))

    @property
    def partition_default_name(self) -> str:
        return self.raw.get("partition.default-name", "__DEFAULT_PARTITION__")

    @property
    def manifest_merge_min_count(self) -> int:
        return int(self.raw.get("manifest.merge-min-count", "30"))

    @property
    def target_row_num(self) -> int:
        return int(self.raw.get("dynamic-bucket.target-row-num", "2000000"))

    def aggregate_function(self, field: str) -> str | None:
        return self.raw.get(f"fields.{field}.aggregate-function", self.raw.get("fields.default-aggregate-function"))
