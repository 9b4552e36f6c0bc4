"""A model's configs: how they name columns (once for every materialization), the configs dbt-spark
does not know (`PaimonConfig`), and a Paimon upsert's configs read and checked once (`UpsertConfig`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Union

from dbt.adapters.spark.impl import SparkConfig
from dbt_common.exceptions import DbtRuntimeError

from ..engine import EXECUTIONS, Execution, RunSettings
from ..store import SchemaError, did_you_mean


@dataclass
class PaimonConfig(SparkConfig):
    """The configs this adapter adds to dbt-spark's (dbt's AdapterSpecificConfigs)."""

    unique_key: Optional[Union[str, List[str]]] = None
    sequence_by: Optional[str] = None
    execution: Optional[str] = None  # the engine's: auto | local | distributed
    key_index: Optional[bool] = None  # cross-partition tables: bootstrap from the key index (default true)


@dataclass(frozen=True)
class UpsertConfig:
    """The configs of a model kept in a Paimon table (paimon_upsert, table, incremental, seed), as dbt
    gives them, checked once in their dbt names. Column names are resolved later, against the model's
    columns (materializations.py). `options` are the table's own; the run keys and store settings
    given among them (`commit.max-retries`, `s3.endpoint`, ...) are in `settings` with `execution` and
    `key_index`: the engine's settings of the model's runs, built here once."""

    unique_key: List[str]
    partition_by: List[str]
    sequence_by: List[str]
    options: Dict[str, Any]
    settings: RunSettings
    merge_update_columns: Any = None
    merge_exclude_columns: Any = None
    incremental_predicates: Any = None
    incremental_strategy: Optional[str] = None
    event_time: Optional[str] = None  # microbatch: the column whose values place a row in a batch
    batch_start: Any = None  # microbatch: the range of this run's batch, [start, end) (set by dbt)
    batch_end: Any = None

    @classmethod
    def of(cls, name: str, config: Mapping[str, Any]) -> "UpsertConfig":
        execution = config.get("execution")
        if execution is not None and execution not in tuple(Execution):
            raise DbtRuntimeError(f"{name}: execution must be one of {', '.join(EXECUTIONS)}, got {execution!r}")
        key_index = config.get("key_index")
        if key_index not in (None, True, False):
            raise DbtRuntimeError(f"{name}: key_index must be true or false, got {key_index!r}")
        try:
            settings, options = RunSettings.from_options(
                dict(config.get("options") or {}),
                RunSettings(execution=Execution(execution or Execution.AUTO), key_index=key_index is not False))
        except SchemaError as e:
            raise DbtRuntimeError(f"{name}: {e}") from None
        return cls(unique_key=column_list(config.get("unique_key")),
                   partition_by=column_list(config.get("partition_by")),
                   sequence_by=column_list(config.get("sequence_by")),
                   options=options, settings=settings,
                   merge_update_columns=config.get("merge_update_columns"),
                   merge_exclude_columns=config.get("merge_exclude_columns"),
                   incremental_predicates=config.get("incremental_predicates") or config.get("predicates"),
                   incremental_strategy=config.get("incremental_strategy"),
                   event_time=config.get("event_time"),
                   batch_start=config.get("__dbt_internal_microbatch_event_time_start"),
                   batch_end=config.get("__dbt_internal_microbatch_event_time_end"))


def column_list(value: Any) -> List[str]:
    """A config naming columns: one name, a comma-separated string or a list (None: none)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v).strip() for v in value if str(v).strip()]


def quoted(name: str) -> str:
    """A column name as a Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


# The configs a Paimon model's or snapshot's run reads. A config dbt and this adapter do not know
# that is a near miss of one of these is a typo dbt would pass over in silence (`unique_keys`,
# `partiton_by`): the run stops, naming both.
READ_CONFIGS = ("materialized", "unique_key", "partition_by", "sequence_by", "options", "execution", "key_index",
                "incremental_strategy", "on_schema_change", "merge_update_columns", "merge_exclude_columns",
                "incremental_predicates", "file_format", "full_refresh", "strategy", "updated_at", "check_cols",
                "hard_deletes", "snapshot_meta_column_names", "dbt_valid_to_current")


# Configs known elsewhere that are near misses of ours: dbt's hook spellings and internal names,
# dbt-spark's and the configs of other adapters a project may target too (BigQuery's partitions)
OTHER_CONFIGS = ("pre-hook", "post-hook", "predicates", "snapshot_table_column_names", "invalidate_hard_deletes",
                 "tblproperties", "unique_key_nulls", "partitions", "cluster_by", "partition_expiration_days",
                 "require_partition_filter", "sql_header")


def check_names(config: Mapping[str, Any], materialization: str) -> None:
    """Raise on a config that is a near miss of one the run reads (READ_CONFIGS)."""
    known = _known_configs()
    for key in config:
        if key not in known:
            hint = did_you_mean(str(key), READ_CONFIGS)
            if hint:
                raise DbtRuntimeError(f"{materialization}: unknown config {key!r}{hint}")


@functools.lru_cache(maxsize=None)
def _known_configs() -> frozenset:
    names = set(PaimonConfig.__dataclass_fields__) | set(READ_CONFIGS) | set(OTHER_CONFIGS)
    try:  # dbt's own configs of models, seeds, snapshots and tests
        from dbt.artifacts.resources import NodeConfig, SeedConfig, SnapshotConfig, TestConfig
    except ImportError:  # dbt-core absent: the adapter's unit tests
        return frozenset(names)
    for cls in (NodeConfig, SeedConfig, SnapshotConfig, TestConfig):
        names |= set(cls.__dataclass_fields__)
    return frozenset(names)
