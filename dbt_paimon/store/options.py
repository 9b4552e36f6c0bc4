"""Table options by their Paimon names (CoreOptions), with Paimon's defaults.

Unlike Paimon, which stores any key it is given, we reject a key we do not know or do not honour:
a silently ignored option (a typo, or a `changelog-producer` we do not implement) is a wrong table.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Mapping

from .errors import SchemaError
from .stats_mode import StatsMode


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


MERGE_ENGINES = tuple(e.value for e in MergeEngine)
INT_MAX = 2**31 - 1
# Paimon's default of each option we read (CoreOptions), written here only; CoreOptions.get falls
# back to it.
DEFAULTS: dict[str, str] = {
    "bucket": "-1",
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
}
# Paimon's aggregate functions (FieldAggregatorFactory identifiers) that the store implements. Paimon
# has no `count`: the engine layer stores `count` as `sum` of 1s plus the marker option
# `fields.<f>.dbt-paimon.count` = 'true'.
AGGREGATE_FUNCTIONS = (
    "sum", "product", "min", "max", "last_value", "last_non_null_value", "first_value",
    "first_non_null_value", "bool_and", "bool_or", "listagg",
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


def _stats_mode(key: str, value: str) -> None:
    StatsMode.parse(value, key)


def _sort_order(key: str, value: str) -> str:
    if value.lower() not in ("ascending", "descending"):  # Paimon parses its enums ignoring case
        raise SchemaError(f"option {key!r} must be ascending or descending, got {value!r}")
    return value


CHANGELOG_PRODUCERS = ("none", "input", "lookup", "full-compaction")


def _changelog_producer(key: str, value: str) -> str:
    v = value.lower()  # Paimon parses its enums ignoring case
    if v not in CHANGELOG_PRODUCERS:
        raise SchemaError(f"option {key!r} must be one of {', '.join(CHANGELOG_PRODUCERS)}, got {value!r}")
    if v == "full-compaction":
        raise SchemaError(f"option {key!r}={value!r}: dbt-paimon writes the 'input' and 'lookup' changelogs, "
                          "not yet the one Paimon's 'full-compaction' producer derives at full compactions")
    return value


# key -> validator of its value (None: any string)
_KNOWN: dict[str, object] = {
    "bucket": parse_int,
    "bucket-key": None,
    "merge-engine": _choice(*MERGE_ENGINES),
    "ignore-delete": _bool,
    "partial-update.remove-record-on-delete": _bool,
    "rowkind.field": None,
    "sequence.field": None,
    "sequence.field.sort-order": _sort_order,
    "dynamic-bucket.target-row-num": parse_int,
    "dynamic-bucket.assigner-parallelism": parse_positive,
    "cross-partition-upsert.bootstrap-parallelism": parse_positive,
    "sink.parallelism": parse_positive,
    "num-sorted-run.compaction-trigger": parse_int,
    "num-levels": parse_int,
    "num-sorted-run.stop-trigger": parse_int,
    "full-compaction.delta-commits": parse_int,
    "compaction.max-size-amplification-percent": parse_int,
    "compaction.size-ratio": parse_int,
    # append tables: what is a small file, and how many of them a compaction waits for (append.py)
    "compaction.min.file-num": parse_positive,
    "compaction.file-size": parse_memory,
    "write-only": _bool,
    "target-file-size": parse_memory,
    "file.format": _choice("parquet", why=" (the only format dbt-paimon writes)"),
    "file.compression": _choice("zstd", "snappy", "gzip", "lz4", "none", "uncompressed"),
    "file.compression.zstd-level": parse_int,
    "manifest.merge-min-count": parse_int,
    "manifest.target-file-size": parse_memory,
    "snapshot.num-retained.min": parse_int,
    "snapshot.num-retained.max": parse_int,
    "snapshot.time-retained": parse_duration_ms,
    "snapshot.expire.limit": parse_int,
    "changelog-producer": _changelog_producer,
    "changelog.num-retained.min": parse_int,
    "changelog.num-retained.max": parse_int,
    "changelog.time-retained": parse_duration_ms,
    "commit.max-retries": parse_int,
    "commit.min-retry-wait": parse_duration_ms,
    "commit.max-retry-wait": parse_duration_ms,
    "partition.default-name": None,
    "partition.legacy-name": _choice("true", why=" (non-legacy partition names are not supported)"),
    "fields.default-aggregate-function": None,
    # Which column stats go into the manifests (stats_collector.py), with Paimon's defaults:
    # truncate(16), dense store true, every column (-1).
    "metadata.stats-mode": _stats_mode,
    "metadata.stats-dense-store": _bool,
    "metadata.stats-keep-first-n-columns": parse_int,
}
# Per-column options we honour. `sequence-group` (partial-update) and `distinct` (listagg) are
# Paimon options we do not implement, so they are refused like any unknown option.
_FIELD_OPTION = re.compile(
    r"^fields\.(?P<field>.+)\.(?P<what>aggregate-function|ignore-retract|list-agg-delimiter|stats-mode|dbt-paimon\.count)$")


def validate(options: Mapping[str, str], columns: list[str]) -> dict[str, str]:
    """Checked copy of user options (values as strings, as Paimon stores them)."""
    out: dict[str, str] = {}
    for key, raw in options.items():
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        m = _FIELD_OPTION.match(key)
        if m:
            if m.group("field") not in columns:
                raise SchemaError(f"option {key!r} names column {m.group('field')!r}, which the table does not have")
            what = m.group("what")
            if what == "aggregate-function" and value not in AGGREGATE_FUNCTIONS:
                raise SchemaError(f"option {key!r}: unknown aggregate function {value!r} "
                                  f"(known: {', '.join(AGGREGATE_FUNCTIONS)})")
            if what in ("ignore-retract", COUNT_MARKER):
                _bool(key, value)
                value = value.lower()
            if what == "stats-mode":
                _stats_mode(key, value)
        elif key not in _KNOWN:
            hint = did_you_mean(key, _KNOWN)
            if hint:
                raise SchemaError(f"unknown table option {key!r}{hint}")
            raise SchemaError(f"unknown table option {key!r} (dbt-paimon rejects options it does not honour; "
                              f"known: {', '.join(sorted(_KNOWN))}, fields.<column>.aggregate-function, "
                              f"fields.<column>.ignore-retract, fields.<column>.list-agg-delimiter, "
                              f"fields.<column>.stats-mode)")
        else:
            check = _KNOWN[key]
            if callable(check):
                check(key, value)
        out[key] = value
    if "fields.default-aggregate-function" in out and out["fields.default-aggregate-function"] not in AGGREGATE_FUNCTIONS:
        raise SchemaError(f"option 'fields.default-aggregate-function': unknown function "
                          f"{out['fields.default-aggregate-function']!r}")
    _check_merge_options(out)
    core = CoreOptions(out)
    rmin, rmax = core.snapshot_num_retained_min, core.snapshot_num_retained_max
    if rmin < 1 or rmin > rmax:
        raise SchemaError(f"snapshot.num-retained.min ({rmin}) must be at least 1 and at most "
                          f"snapshot.num-retained.max ({rmax}), as Paimon requires")
    cmin, cmax = core.changelog_num_retained_min, core.changelog_num_retained_max
    if cmin < 1 or cmin > cmax:
        raise SchemaError(f"changelog.num-retained.min ({cmin}) must be at least 1 and at most "
                          f"changelog.num-retained.max ({cmax}), as Paimon requires")
    if cmin > rmin or cmax > rmax or core.changelog_time_retained_ms > core.snapshot_time_retained_ms:
        raise SchemaError("options changelog.num-retained.* / changelog.time-retained keep the changelog longer than "
                          "the snapshots (Paimon's decoupled changelog, kept under changelog/), which dbt-paimon does "
                          "not write; keep them at most snapshot.num-retained.* / snapshot.time-retained")
    return out


def _check_merge_options(o: Mapping[str, str]) -> None:
    """Combinations Paimon's merge functions refuse (PartialUpdateMergeFunction.Factory)."""
    core = CoreOptions(o)
    if core.merge_engine == MergeEngine.PARTIAL_UPDATE:
        if core.ignore_delete and core.partial_update_remove_record_on_delete:
            raise SchemaError("options 'ignore-delete' and 'partial-update.remove-record-on-delete' have conflicting "
                              "behavior so should not be enabled at the same time (as in Paimon)")
        for key, value in o.items():
            if (key.endswith(".aggregate-function") or key == "fields.default-aggregate-function") \
                    and value != "last_non_null_value":
                raise SchemaError(f"option {key!r}={value!r}: a partial-update table can only aggregate with a "
                                  "sequence-group, which dbt-paimon does not support (Paimon: 'Must use sequence "
                                  "group for aggregation functions'); use merge-engine 'aggregation'")
    if core.merge_engine == MergeEngine.FIRST_ROW and core.changelog_producer not in ("none", "lookup"):
        raise SchemaError(f"option 'changelog-producer'={o['changelog-producer']!r} on a first-row table: Paimon only "
                          "supports 'none' and 'lookup' changelog-producer on the FIRST_ROW merge engine")
    if core.changelog_producer == "lookup" and core.merge_engine in (MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATION):
        raise SchemaError(f"option 'changelog-producer'='lookup' on a {core.merge_engine.value} table is not supported "
                          "yet: Paimon then merges new rows with the newest stored version of a key only (its "
                          "LookupMergeFunction, on reads too), which dbt-paimon's readers and compactions do not")
    if core.changelog_producer == "lookup" and "full-compaction.delta-commits" in o:
        raise SchemaError("option 'full-compaction.delta-commits' is incompatible with 'changelog-producer'='lookup' "
                          "(as in Paimon): use one or the other")
    if "num-levels" in o and int(o["num-levels"]) < 2:
        raise SchemaError(f"option 'num-levels' must be at least 2 (level 0 and one sorted level), "
                          f"got {o['num-levels']}")
    for key, value in o.items():
        m = _FIELD_OPTION.match(key)
        if m and m.group("what") == COUNT_MARKER and value == "true":
            field = m.group("field")
            if core.aggregate_function(field) != "sum" or core.merge_engine != MergeEngine.AGGREGATION:
                raise SchemaError(f"option {key!r} marks {field!r} as a count, which is stored as "
                                  f"'fields.{field}.aggregate-function'='sum' on an aggregation table")


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
