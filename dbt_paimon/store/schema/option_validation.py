"""Which table options we accept, and their values: Paimon's SchemaValidation for the options we
honour (options.py reads them, with Paimon's defaults).

Unlike Paimon, which stores any key it is given, we reject a key we do not know or do not honour:
a silently ignored option (a typo, or a `changelog-producer` we do not implement) is a wrong table.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from ..index import file_index
from ..common.errors import SchemaError
from ..common.options import (AGGREGATE_FUNCTIONS, COUNT_MARKER, MERGE_ENGINES, TAG_PERIODS, CoreOptions, MergeEngine,
                              did_you_mean, parse_duration_ms, parse_int, parse_memory, parse_positive)
from .stats_mode import StatsMode


def _choice(*allowed: str, why: str = ""):
    def check(key: str, value: str) -> str:
        if value not in allowed:
            raise SchemaError(f"option {key!r} must be one of {', '.join(allowed)}{why}, got {value!r}")
        return value
    return check


def _refuse(key: str, why: str) -> None:
    raise SchemaError(f"option {key!r} cannot be set: {why}")


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
    return value


# key -> validator of its value (None: any string)
_KNOWN: dict[str, object] = {
    "bucket": parse_int,
    "bucket-key": None,
    # postpone bucket mode (postpone.py): batch writes go to real buckets, as Paimon's batch writers
    "postpone.default-bucket-num": parse_positive,
    "postpone.batch-write-fixed-bucket": _choice("true", why=" (dbt-paimon writes postpone-bucket tables as "
                                                 "Paimon's batch writers do, into real buckets; it does not "
                                                 "write rows into bucket -2)"),
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
    "file.format": _choice("parquet", why=" (the only format dbt-paimon writes; it reads ORC and Avro files "
                           "too, so it continues a table another writer made with them)"),
    "file.format.per.level": lambda key, value: _refuse(key, "dbt-paimon writes Parquet files at every level (it "
                                                        "reads ORC and Avro files too, so it continues a table "
                                                        "another writer made with this option)"),
    "file.compression": _choice("zstd", "snappy", "gzip", "lz4", "none", "uncompressed"),
    "file.compression.zstd-level": parse_int,
    "manifest.merge-min-count": parse_int,
    "manifest.target-file-size": parse_memory,
    "snapshot.num-retained.min": parse_int,
    "snapshot.num-retained.max": parse_int,
    "snapshot.time-retained": parse_duration_ms,
    "snapshot.expire.limit": parse_int,
    "changelog-producer": _changelog_producer,
    "deletion-vectors.enabled": _bool,
    "deletion-vectors.merge-on-read": _bool,
    "deletion-vectors.bitmap64": _bool,
    "deletion-vectors.modifiable": _bool,
    "changelog.num-retained.min": parse_int,
    "changelog.num-retained.max": parse_int,
    "changelog.time-retained": parse_duration_ms,
    # partition_expire.py (check_options: what needs the partition fields)
    "partition.expiration-time": parse_duration_ms,
    "partition.expiration-strategy": _choice("values-time", "update-time"),
    "partition.expiration-check-interval": parse_duration_ms,
    "partition.expiration-max-num": parse_positive,
    "partition.expiration-batch-size": parse_positive,
    "partition.timestamp-formatter": None,
    "partition.timestamp-pattern": None,
    "end-input.check-partition-expire": _bool,
    # tag_creation.py
    "tag.automatic-creation": _choice("none", "batch", "process-time", why=" (watermark tags need the "
                                      "watermarks streaming writers give snapshots)"),
    "tag.creation-period": _choice("daily", "hourly", "two-hours"),
    "tag.period-formatter": _choice("with_dashes", "without_dashes", "without_dashes_and_spaces"),
    "tag.creation-delay": parse_duration_ms,
    "tag.batch.customized-name": None,
    "tag.num-retained-max": parse_positive,
    "tag.default-time-retained": parse_duration_ms,
    "tag.time-expire-enabled": _bool,
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
# Per-column options we honour (and `fields.<f>.sequence-group`, checked with the merge engine);
# `distinct` changes listagg only here (collect with distinct is refused, merge_options.field_agg).
_SEQUENCE_GROUP = re.compile(r"^fields\..+\.sequence-group$")
_FIELD_OPTION = re.compile(
    r"^fields\.(?P<field>.+)\.(?P<what>aggregate-function|ignore-retract|list-agg-delimiter|distinct|stats-mode"
    r"|dbt-paimon\.count)$")


# Options we do not write by but continue a table with, as another writer stored them: the file
# formats (we write Parquet; Paimon's readers tell a file's format by its name, file_format.py)
_CONTINUED = ("file.format", "file.format.per.level")


def validate(options: Mapping[str, str], columns: list[str], stored: Mapping[str, str] | None = None) -> dict[str, str]:
    """Checked copy of user options (values as strings, as Paimon stores them); `stored`: the
    table's current options, whose values of _CONTINUED options stand as they are."""
    out: dict[str, str] = {}
    for key, raw in options.items():
        value = str(raw).lower() if isinstance(raw, bool) else str(raw)
        if key in _CONTINUED and stored is not None and str(stored.get(key)).lower() == value.lower():
            out[key] = value
            continue
        m = _FIELD_OPTION.match(key)
        if m:
            if m.group("field") not in columns:
                raise SchemaError(f"option {key!r} names column {m.group('field')!r}, which the table does not have")
            what = m.group("what")
            if what == "aggregate-function" and value not in AGGREGATE_FUNCTIONS:
                raise SchemaError(f"option {key!r}: unknown aggregate function {value!r} "
                                  f"(known: {', '.join(AGGREGATE_FUNCTIONS)})")
            if what in ("ignore-retract", "distinct", COUNT_MARKER):
                _bool(key, value)
                value = value.lower()
            if what == "stats-mode":
                _stats_mode(key, value)
        elif key.startswith("file-index."):
            pass  # check_file_index, once the columns' types are known
        elif _SEQUENCE_GROUP.match(key):
            pass  # merge_options.check_merge_options (sequence_group.py), with the merge engine
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
    if ("fields.default-aggregate-function" in out
            and out["fields.default-aggregate-function"] not in AGGREGATE_FUNCTIONS):
        raise SchemaError(f"option 'fields.default-aggregate-function': unknown function "
                          f"{out['fields.default-aggregate-function']!r}")
    _check_combinations(out)
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


def _check_combinations(o: Mapping[str, str]) -> None:
    """Combinations of options Paimon refuses (its merge functions' factories, SchemaValidation)."""
    core = CoreOptions(o)
    if core.merge_engine == MergeEngine.PARTIAL_UPDATE:
        if core.ignore_delete and core.partial_update_remove_record_on_delete:
            raise SchemaError("options 'ignore-delete' and 'partial-update.remove-record-on-delete' have conflicting "
                              "behavior so should not be enabled at the same time (as in Paimon)")
        for key, value in o.items():
            if (key.endswith(".aggregate-function") or key == "fields.default-aggregate-function") \
                    and value != "last_non_null_value":
                raise SchemaError(f"option {key!r}={value!r}: a partial-update table can only aggregate within a "
                                  "sequence-group (Paimon: 'Must use sequence group for aggregation functions'), "
                                  "which dbt-paimon does not merge; use merge-engine 'aggregation'")
    if core.merge_engine == MergeEngine.FIRST_ROW and core.changelog_producer not in ("none", "lookup"):
        raise SchemaError(f"option 'changelog-producer'={o['changelog-producer']!r} on a first-row table: Paimon only "
                          "supports 'none' and 'lookup' changelog-producer on the FIRST_ROW merge engine")
    if core.changelog_producer == "lookup" and core.merge_engine in (
            MergeEngine.PARTIAL_UPDATE, MergeEngine.AGGREGATION):
        raise SchemaError(f"option 'changelog-producer'='lookup' on a {core.merge_engine.value} table is not supported "
                          "yet: Paimon then merges new rows with the newest stored version of a key only (its "
                          "LookupMergeFunction, on reads too), which dbt-paimon's readers and compactions do not")
    if core.changelog_producer == "lookup" and "full-compaction.delta-commits" in o:
        raise SchemaError("option 'full-compaction.delta-commits' is incompatible with 'changelog-producer'='lookup' "
                          "(as in Paimon): use one or the other")
    if core.deletion_vectors and core.changelog_producer == "full-compaction":
        raise SchemaError("option 'changelog-producer'='full-compaction' with 'deletion-vectors.enabled': Paimon only "
                          "supports 'none', 'input' and 'lookup' changelog-producer with deletion vectors")
    if core.deletion_vectors and core.merge_engine == MergeEngine.FIRST_ROW:
        raise SchemaError("option 'deletion-vectors.enabled' on a first-row table: Paimon refuses it (the first-row "
                          "merge engine does not need deletion vectors: its batch readers already skip level 0)")
    if "tag.creation-delay" in o:
        period = TAG_PERIODS[(o.get("tag.creation-period") or "daily").lower()]
        if parse_duration_ms("tag.creation-delay", o["tag.creation-delay"]) >= period.total_seconds() * 1000:
            raise SchemaError("option 'tag.creation-delay' must be shorter than one tag.creation-period (as in Paimon)")
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


_LETTERS = {"yyyy": "%Y", "MM": "%m", "dd": "%d", "HH": "%H", "mm": "%M", "ss": "%S"}


def strptime_format(formatter: str) -> str:
    """A DateTimeFormatter pattern as strptime's; SchemaError for letters we do not read."""
    out, i = [], 0
    while i < len(formatter):
        for letters, code in _LETTERS.items():
            if formatter.startswith(letters, i):
                out.append(code)
                i += len(letters)
                break
        else:
            ch = formatter[i]
            if ch.isalpha() or ch == "'":
                raise SchemaError(f"option 'partition.timestamp-formatter' {formatter!r}: dbt-paimon reads the "
                                  f"letters {', '.join(_LETTERS)} (and other characters as they are), not {ch!r}")
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


def check_partition_expiration(o: Mapping[str, str], partition_keys: Sequence[str]) -> None:
    """The partition expiration options (partition_expire.py) against the partition fields, at
    create and ALTER."""
    if "partition.timestamp-formatter" in o:
        strptime_format(o["partition.timestamp-formatter"])
    pattern = o.get("partition.timestamp-pattern")
    if pattern:
        unknown = [k for k in re.findall(r"\$([A-Za-z_][A-Za-z0-9_]*)", pattern) if k not in partition_keys]
        if unknown:
            raise SchemaError(f"option 'partition.timestamp-pattern' {pattern!r} names {unknown}, which are not "
                              f"partition fields {list(partition_keys)}")


_FILE_INDEX_COLUMN_OPTIONS = {"bloom-filter": ("items", "fpp"), "bitmap": ("version", "index-block-size")}


def check_file_index(schema_options: Mapping[str, str], columns: Mapping[str, object]) -> None:
    """Paimon 2.x's SchemaValidation.validateFileIndex: named columns exist and have a type the
    index takes; per-column options name an indexed column. `columns`: name -> DataType."""
    for key in schema_options:
        if not key.startswith("file-index."):
            continue
        parts = key.split(".")
        if key in ("file-index.in-manifest-threshold", "file-index.read.enabled") or key.endswith(".columns"):
            if key.endswith(".columns") and (len(parts) != 3 or parts[1] not in file_index.TYPES):
                raise SchemaError(f"option {key!r}: dbt-paimon writes the file indexes {', '.join(file_index.TYPES)}")
            continue
        if len(parts) != 4 or parts[1] not in file_index.TYPES or parts[3] not in _FILE_INDEX_COLUMN_OPTIONS[parts[1]]:
            raise SchemaError(f"unknown table option {key!r} (file index options: file-index.<type>.columns, "
                              f"file-index.bloom-filter.<column>.items / .fpp, file-index.bitmap.<column>.version / "
                              f".index-block-size, file-index.in-manifest-threshold, file-index.read.enabled)")
        named = [n.strip() for n in schema_options.get(f"file-index.{parts[1]}.columns", "").split(",")]
        if parts[2] not in named:
            raise SchemaError(f"option {key!r} is for column {parts[2]!r}, which file-index.{parts[1]}.columns "
                              "does not name")
    for c in file_index.indexed_columns(schema_options):
        if not c.column:
            raise SchemaError(f"option 'file-index.{c.type}.columns' names an empty column")
        if c.column not in columns:
            raise SchemaError(f"option 'file-index.{c.type}.columns' names {c.column!r}, which the table does not have")
        root = columns[c.column].root
        if root not in file_index.TYPES[c.type].SUPPORTED:
            raise SchemaError(f"column {c.column!r} is {root}, which a {c.type} file index does not take "
                              f"(it takes {', '.join(file_index.TYPES[c.type].SUPPORTED)})")
        opts = dict(c.options)
        if c.type == "bitmap" and opts.get("version", "2") != "2":
            raise SchemaError(f"option 'file-index.bitmap.{c.column}.version': dbt-paimon writes version 2 "
                              "(Paimon's default)")
