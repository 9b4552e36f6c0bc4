"""Table options by their Paimon names (CoreOptions), with Paimon's defaults, and how their values
read (durations, sizes). Which options a table may have is option_validation.py's."""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping

from .errors import SchemaError


class ValueEnum(str, Enum):
    """A str Enum that is its value everywhere a string is: equal to it, hashed like it, and
    printed (str, format, repr) as it, so messages and dict lookups by the string stay the same."""

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__
    __hash__ = str.__hash__


class MergeEngine(ValueEnum):
    """Paimon's merge-engine option."""

    DEDUPLICATE = "deduplicate"
    PARTIAL_UPDATE = "partial-update"
    AGGREGATION = "aggregation"
    FIRST_ROW = "first-row"


class BucketMode(ValueEnum):
    """Paimon's BucketMode of a table (TableSchema.bucket_mode)."""

    HASH_FIXED = "HASH_FIXED"  # bucket > 0
    HASH_DYNAMIC = "HASH_DYNAMIC"  # bucket = -1, the primary key holds every partition field
    KEY_DYNAMIC = "KEY_DYNAMIC"  # bucket = -1, cross-partition: a key may move partitions
    BUCKET_UNAWARE = "BUCKET_UNAWARE"  # bucket = -1 on an append table: every file in bucket 0
    POSTPONE_MODE = "POSTPONE_MODE"  # bucket = -2: a bucket count per partition (postpone.py)


POSTPONE_BUCKET = -2


MERGE_ENGINES = tuple(e.value for e in MergeEngine)
INT_MAX = 2**31 - 1
# the values of tag.creation-period (snapshot/tag_creation.py) and the time each spans
TAG_PERIODS = {"daily": dt.timedelta(days=1), "hourly": dt.timedelta(hours=1), "two-hours": dt.timedelta(hours=2)}
# Paimon's default of each option we read (CoreOptions), written here only; CoreOptions.get falls
# back to it.
DEFAULTS: dict[str, str] = {
    "bucket": "-1",
    "postpone.default-bucket-num": "1",  # a new partition's buckets in postpone mode (postpone.py)
    "merge-engine": MergeEngine.DEDUPLICATE.value,
    "ignore-delete": "false",
    "partial-update.remove-record-on-delete": "false",
    "num-sorted-run.compaction-trigger": "5",
    "compaction.max-size-amplification-percent": "200",
    "compaction.size-ratio": "1",
    "target-file-size": "128mb",
    "file.compression": "zstd",
    "file.compression.zstd-level": "1",
    "commit.max-retries": "10",
    "commit.min-retry-wait": "10 ms",
    "commit.max-retry-wait": "10 s",
    "partition.default-name": "__DEFAULT_PARTITION__",
    "manifest.merge-min-count": "30",
    "dynamic-bucket.target-row-num": "2000000",
    "snapshot.num-retained.min": "10",
    "snapshot.num-retained.max": str(INT_MAX),
    "snapshot.time-retained": "1h",
    "snapshot.expire.limit": "50",
    "changelog-producer": "none",
    "deletion-vectors.enabled": "false",
    "deletion-vectors.merge-on-read": "false",
    "deletion-vectors.bitmap64": "false",
    "deletion-vectors.modifiable": "false",
    "file-index.read.enabled": "true",
    "partition.expiration-strategy": "values-time",
    "partition.expiration-max-num": "100",
    "tag.automatic-creation": "none",
    "tag.creation-period": "daily",
    "tag.period-formatter": "with_dashes",
    "tag.creation-delay": "0",
    "tag.time-expire-enabled": "true",
}
# Paimon's aggregate functions (FieldAggregatorFactory identifiers) that the store implements. Paimon
# has no `count`: the engine layer stores `count` as `sum` of 1s plus the marker option
# `fields.<f>.dbt-paimon.count` = 'true'.
AGGREGATE_FUNCTIONS = (
    "sum", "product", "min", "max", "last_value", "last_non_null_value", "first_value",
    "first_non_null_value", "bool_and", "bool_or", "listagg", "collect", "merge_map",
)
COUNT_MARKER = "dbt-paimon.count"
_AGG_KEY = re.compile(r"^fields\.(?P<field>.+)\.aggregate-function$")


def count_sugar(options: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """Options as stored, and the columns declared `count`. Paimon has no count aggregate: a
    `fields.f.aggregate-function = count` is stored as `sum` plus the marker
    `fields.f.dbt-paimon.count`, and the writer adds 1 per non-null input value, so Paimon itself
    reads and aggregates the table."""
    out: dict[str, str] = {}
    counted: list[str] = []
    for key, raw in options.items():
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        m = _AGG_KEY.match(key)
        if m and value == "count":
            out[key] = "sum"
            out[f"fields.{m.group('field')}.{COUNT_MARKER}"] = "true"
            counted.append(m.group("field"))
        else:
            out[key] = value
    return out, counted

_MEMORY_UNITS = {"b": 1, "kb": 1 << 10, "k": 1 << 10, "mb": 1 << 20, "m": 1 << 20, "gb": 1 << 30, "g": 1 << 30,
                 "tb": 1 << 40, "t": 1 << 40, "bytes": 1}
_DURATION_UNITS = {"ms": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000, "h": 3_600_000,
                   "d": 86_400_000, "": 1}


def parse_int(key: str, value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise SchemaError(f"option {key!r} must be an integer, got {value!r}") from None


def parse_positive(key: str, value: str) -> int:
    n = parse_int(key, value)
    if n <= 0:
        raise SchemaError(f"option {key!r} must be a positive integer, got {value!r}")
    return n


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


@dataclass(frozen=True)
class CoreOptions:
    """Typed view of a table's stored options with Paimon's defaults."""

    raw: Mapping[str, str]

    def get(self, key: str, default: str | None = None) -> str | None:
        """The stored value; else `default`, else Paimon's default (DEFAULTS), else None."""
        v = self.raw.get(key)
        if v is not None:
            return v
        return default if default is not None else DEFAULTS.get(key)

    def _bool(self, key: str) -> bool:
        return self.get(key).lower() == "true"

    @property
    def bucket(self) -> int:
        return int(self.get("bucket"))

    @property
    def bucket_key(self) -> list[str]:
        v = self.raw.get("bucket-key")
        return [s.strip() for s in v.split(",")] if v else []

    @property
    def merge_engine(self) -> MergeEngine | str:
        """The MergeEngine; an engine Paimon has and we do not stays the stored string, for the
        readers to refuse (merge_options.merge_engine)."""
        value = self.get("merge-engine")
        return MergeEngine(value) if value in MERGE_ENGINES else value

    @property
    def ignore_delete(self) -> bool:
        return self._bool("ignore-delete")

    @property
    def sequence_fields(self) -> list[str]:
        """`sequence.field`: the columns that order a key's versions before the sequence number."""
        v = self.raw.get("sequence.field")
        return [s.strip() for s in v.split(",") if s.strip()] if v else []

    @property
    def sequence_ascending(self) -> bool:
        return (self.raw.get("sequence.field.sort-order") or "ascending").lower() == "ascending"

    @property
    def partial_update_remove_record_on_delete(self) -> bool:
        return self._bool("partial-update.remove-record-on-delete")

    @property
    def num_sorted_run_compaction_trigger(self) -> int:
        return int(self.get("num-sorted-run.compaction-trigger"))

    @property
    def max_size_amplification_percent(self) -> int:
        return int(self.get("compaction.max-size-amplification-percent"))

    @property
    def size_ratio(self) -> int:
        return int(self.get("compaction.size-ratio"))

    @property
    def num_levels(self) -> int:
        """Levels 0 .. num-levels - 1; Paimon's default is num-sorted-run.compaction-trigger + 1."""
        v = self.raw.get("num-levels")
        return int(v) if v is not None else self.num_sorted_run_compaction_trigger + 1

    @property
    def target_file_size(self) -> int:
        return parse_memory("target-file-size", self.get("target-file-size"))

    @property
    def file_compression(self) -> str:
        return self.get("file.compression")

    @property
    def zstd_level(self) -> int:
        return int(self.get("file.compression.zstd-level"))

    @property
    def commit_max_retries(self) -> int:
        return int(self.get("commit.max-retries"))

    @property
    def commit_min_retry_wait_ms(self) -> int:
        return parse_duration_ms("commit.min-retry-wait", self.get("commit.min-retry-wait"))

    @property
    def commit_max_retry_wait_ms(self) -> int:
        return parse_duration_ms("commit.max-retry-wait", self.get("commit.max-retry-wait"))

    @property
    def partition_default_name(self) -> str:
        return self.get("partition.default-name")

    @property
    def manifest_merge_min_count(self) -> int:
        return int(self.get("manifest.merge-min-count"))

    @property
    def target_row_num(self) -> int:
        return int(self.get("dynamic-bucket.target-row-num"))

    @property
    def snapshot_num_retained_min(self) -> int:
        return int(self.get("snapshot.num-retained.min"))

    @property
    def snapshot_num_retained_max(self) -> int:
        return int(self.get("snapshot.num-retained.max"))

    @property
    def snapshot_time_retained_ms(self) -> int:
        return parse_duration_ms("snapshot.time-retained", self.get("snapshot.time-retained"))

    @property
    def changelog_producer(self) -> str:
        return self.get("changelog-producer").lower()

    # the changelog's retention: the snapshots' where unset (CoreOptions.changelogNumRetainMin ...)
    @property
    def changelog_num_retained_min(self) -> int:
        return int(self.get("changelog.num-retained.min", self.get("snapshot.num-retained.min")))

    @property
    def changelog_num_retained_max(self) -> int:
        return int(self.get("changelog.num-retained.max", self.get("snapshot.num-retained.max")))

    @property
    def changelog_time_retained_ms(self) -> int:
        return parse_duration_ms("changelog.time-retained",
                                 self.get("changelog.time-retained", self.get("snapshot.time-retained")))

    @property
    def write_only(self) -> bool:
        """`write-only`: writes leave compaction (and partition expiration) to another job."""
        return (self.raw.get("write-only") or "false").lower() == "true"

    @property
    def deletion_vectors(self) -> bool:
        return self._bool("deletion-vectors.enabled")

    @property
    def deletion_vectors_modifiable(self) -> bool:
        return self._bool("deletion-vectors.modifiable")

    @property
    def deletion_vectors_merge_on_read(self) -> bool:
        return self._bool("deletion-vectors.merge-on-read")

    @property
    def deletion_vectors_bitmap64(self) -> bool:
        return self._bool("deletion-vectors.bitmap64")

    @property
    def force_up_level0(self) -> bool:
        """Paimon's needLookup: every level-0 file is compacted up after each write (ForceUpLevel0)
        on first-row tables and tables with changelog-producer 'lookup' or deletion vectors."""
        return (self.merge_engine == MergeEngine.FIRST_ROW or self.changelog_producer == "lookup"
                or self.deletion_vectors)

    @property
    def snapshot_expire_limit(self) -> int:
        return int(self.get("snapshot.expire.limit"))

    def aggregate_function(self, field: str) -> str | None:
        return self.raw.get(f"fields.{field}.aggregate-function", self.raw.get("fields.default-aggregate-function"))

    def ignore_retract(self, field: str) -> bool:
        return self.raw.get(f"fields.{field}.ignore-retract", "false").lower() == "true"

    def list_agg_delimiter(self, field: str) -> str:
        return self.raw.get(f"fields.{field}.list-agg-delimiter", ",")

    def is_count(self, field: str) -> bool:
        """The engine layer's `count` sugar: stored as `sum` with this marker."""
        return self.raw.get(f"fields.{field}.{COUNT_MARKER}", "false").lower() == "true"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` naming the one of `known` that `name` is a near miss of, else ''."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.8)
    return f" (did you mean {match[0]!r}?)" if match else ""
