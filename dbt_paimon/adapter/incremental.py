"""dbt's table formats and incremental strategies on this adapter, and the merge strategy's column rules.

Which models are Paimon tables (`table_format`):
- materialized='paimon_upsert', or incremental_strategy='paimon_upsert': always;
- file_format='paimon' on a `table` or `incremental` model (a `table` is rebuilt each run);
- incremental_strategy='merge' unless file_format names another format (delta, iceberg, hudi):
  dbt-spark can merge into no other format, and a user coming from dbt-spark or Databricks means an
  upsert on unique_key, which is what a Paimon primary-key table does.
Everything else is dbt-spark's, unchanged. The adapter's default file_format stays dbt-spark's (parquet).

What a run on a Paimon table does (`choose`): a model with unique_key (or a contract's primary key)
is a primary-key table whose rows are upserted (`merge`, the default; `paimon_upsert`; `delete+insert`,
which on a deduplicate table is the same), or replace the rows of their partitions (`insert_overwrite`)
or of their batch's time range (`microbatch`) in the upsert's snapshot (engine/writes/replace.py: a table
that merges rows has its partitions overwritten, and takes no time range); a model
without is an append table (store/write/append.py) whose rows are appended (`append`, the default, and
`delete+insert` without a key, as dbt has it), replace the partitions they fall in (`insert_overwrite`;
without partition_by, the whole table) or their batch's time range (`microbatch`). A `table` model,
or a full refresh, builds the table anew. Combinations that cannot work are refused
before anything runs, in the words the user wrote.

The merge strategy's column rules (`merge_batch`), as dbt-databricks applies them to MERGE:
- merge_update_columns: for a key the table holds, only these columns take the model's values; the
  others keep the stored ones (a partition column not among them keeps the key where it lives);
- merge_exclude_columns: every column but these takes the model's values;
- incremental_predicates (SQL over DBT_INTERNAL_DEST, the table, and DBT_INTERNAL_SOURCE is not
  in scope): narrow the stored rows a run matches; a key whose stored row fails them is written
  whole, as a row that matched nothing. The engine still looks every key up, so a key never lives
  twice (Paimon's primary key), whatever the predicates say.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

from dbt_common.exceptions import DbtRuntimeError
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..engine import APPEND_MODE, OVERWRITE_PARTITIONS, OVERWRITE_TABLE, REPLACE_WHERE, Replace
from ..store import PaimonError, resolve_columns
from .configs import column_list, quoted

PAIMON = "paimon"
UPSERT = "paimon_upsert"
MERGE = "merge"
APPEND = "append"
INSERT_OVERWRITE = "insert_overwrite"
MICROBATCH = "microbatch"
DELETE_INSERT = "delete+insert"
OTHER_FORMATS = ("delta", "iceberg", "hudi")
# strategies a Paimon table takes; None: the default (merge with unique_key, else append)
PAIMON_STRATEGIES = (None, MERGE, UPSERT, APPEND, INSERT_OVERWRITE, MICROBATCH, DELETE_INSERT)


@dataclass(frozen=True)
class Write:
    """What a run does to its Paimon table: upsert on the key, or an append table's write in the
    engine's `mode` (engine/writes/append.py); `code`: the run result's code."""
    upsert: bool
    mode: str = APPEND_MODE
    code: str = "UPSERT"
    where: Optional[str] = None  # REPLACE_WHERE: the rows the run replaces (a microbatch's range)
    replace: Optional[Replace] = None  # an upsert that replaces rows too (engine/writes/replace.py)


def choose(name: str, materialization: str, config, keyed: bool, full_refresh: bool) -> Write:
    """The Write of a run (config: UpsertConfig; keyed: a unique_key or primary-key constraint is
    given); a combination that cannot work is refused naming what the model says."""
    strategy = config.incremental_strategy if materialization == "incremental" else None
    if materialization == UPSERT or strategy in (MERGE, UPSERT):
        if not keyed:
            what = f"a {UPSERT} model" if materialization == UPSERT else f"incremental_strategy '{strategy}'"
            raise DbtRuntimeError(
                f"{name}: {what} needs unique_key (a column or a list of columns): it is the Paimon table's "
                f"primary key. Without one the model is a Paimon append table: use incremental_strategy 'append' "
                f"or 'insert_overwrite'")
        return Write(upsert=True)
    if keyed:
        if strategy == APPEND:
            raise DbtRuntimeError(
                f"{name}: incremental_strategy 'append' keeps every row, which a table with a primary key cannot: "
                f"drop unique_key (the model becomes a Paimon append table), or use 'merge' (an upsert on unique_key)")
        if strategy == DELETE_INSERT and str(
                (config.options or {}).get("merge-engine", "deduplicate")) != "deduplicate":
            raise DbtRuntimeError(
                f"{name}: incremental_strategy 'delete+insert' replaces a key's row whole, which a table with "
                f"merge-engine '{config.options['merge-engine']}' does not do (it merges rows): use 'merge'")
        if strategy == DELETE_INSERT and (config.options or {}).get("sequence.field"):
            raise DbtRuntimeError(
                f"{name}: incremental_strategy 'delete+insert' replaces a key's row whole, which a table ordering "
                f"versions by sequence.field does not do (a row older than the stored one loses): use 'merge'")
        if full_refresh or strategy not in (INSERT_OVERWRITE, MICROBATCH):
            # delete+insert on a deduplicate table is its upsert: the batch's keys end with the batch's rows
            return Write(upsert=True)
        if strategy == INSERT_OVERWRITE:  # the batch's partitions (without partition_by: every row) replaced
            replace = Replace(batch_partitions=True) if config.partition_by else Replace(where="true")
            return Write(upsert=True, code="INSERT OVERWRITE", replace=replace)
        _check_event_time(name, config)
        return Write(upsert=True, code="MICROBATCH", replace=Replace(
            where=batch_range(name, config.event_time, config.batch_start, config.batch_end),
            what="a microbatch's time range"))
    if config.sequence_by:
        raise DbtRuntimeError(f"{name}: sequence_by orders the versions of a key and needs unique_key; a model "
                              f"without unique_key is a Paimon append table, which keeps every row")
    for merge_only in ("merge_update_columns", "merge_exclude_columns", "incremental_predicates"):
        if getattr(config, merge_only):
            raise DbtRuntimeError(f"{name}: {merge_only} applies to the merge strategy, which needs unique_key; "
                                  f"a model without unique_key is a Paimon append table")
    if strategy == MICROBATCH:
        _check_event_time(name, config)
        if not full_refresh:  # a batch replaces its time range; the first of a full refresh builds the table
            return Write(upsert=False, mode=REPLACE_WHERE, code="MICROBATCH",
                         where=batch_range(name, config.event_time, config.batch_start, config.batch_end))
    if strategy == INSERT_OVERWRITE and not full_refresh:
        mode = OVERWRITE_PARTITIONS if config.partition_by else OVERWRITE_TABLE
        return Write(upsert=False, mode=mode, code="INSERT OVERWRITE")
    return Write(upsert=False, mode=APPEND_MODE, code="APPEND" if materialization == "incremental" and not
                 full_refresh else "CREATE TABLE")


def table_format(materialization: str, file_format: Optional[str], strategy: Optional[str] = None) -> str:
    """PAIMON or "spark" (dbt-spark's materialization); a combination no format can do is refused
    here, before anything runs."""
    file_format = (file_format or "").lower() or None
    if materialization == UPSERT or strategy == UPSERT:
        return PAIMON
    if materialization == "incremental":
        if file_format == PAIMON:
            if strategy not in PAIMON_STRATEGIES:
                raise DbtRuntimeError(
                    f"incremental_strategy '{strategy}' is not supported on a Paimon table (file_format='paimon'); "
                    f"use 'merge' (the default with unique_key: an upsert), 'paimon_upsert' (the same), 'append' "
                    f"(the default without), 'insert_overwrite', 'microbatch' or 'delete+insert'")
            return PAIMON
        if strategy == MERGE and file_format not in OTHER_FORMATS:
            return PAIMON
        return "spark"
    if materialization in ("table", "seed") and file_format == PAIMON:
        return PAIMON
    return "spark"


def _check_event_time(name: str, config) -> None:
    if not config.event_time:
        raise DbtRuntimeError(f"{name}: incremental_strategy 'microbatch' needs event_time (the column whose "
                              f"values place a row in a batch)")


def batch_range(name: str, event_time: str, start: Any, end: Any) -> str:
    """Spark SQL holding for the rows of a microbatch's range [start, end) of event_time."""
    if start is None or end is None:
        raise DbtRuntimeError(f"{name}: a microbatch run without its batch's range (dbt sets it for each batch)")
    bounds = [b.isoformat(sep=" ") if hasattr(b, "isoformat") else str(b) for b in (start, end)]
    column = quoted(event_time)
    return (f"{column} >= CAST('{bounds[0]}' AS TIMESTAMP) AND {column} < CAST('{bounds[1]}' AS TIMESTAMP)")


def _predicates(value: Any) -> List[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else [str(v) for v in value]


def check_merge_config(name: str, columns: Sequence[str], keys: Sequence[str], update_columns: Any,
                       exclude_columns: Any) -> Optional[List[str]]:
    """The model's columns a matched key takes from the model (None: all), per merge_update_columns
    or merge_exclude_columns; a bad config is refused here, before anything is written."""
    update, exclude = column_list(update_columns), column_list(exclude_columns)
    if update and exclude:
        raise DbtRuntimeError(f"{name}: give merge_update_columns or merge_exclude_columns, not both")
    if not update and not exclude:
        return None
    try:
        if update:
            chosen = resolve_columns("merge_update_columns", update, columns)
        else:
            excluded = {c.lower() for c in resolve_columns("merge_exclude_columns", exclude, columns)}
            chosen = [c for c in columns if c.lower() not in excluded]
    except PaimonError as e:
        raise DbtRuntimeError(f"{name}: {e}") from None
    key_set = {k.lower() for k in keys}
    return [c for c in chosen if c.lower() not in key_set]


def merge_batch(name: str, batch: DataFrame, stored: DataFrame, keys: Sequence[str],
                updated: Optional[List[str]], predicates: Any) -> DataFrame:
    """The rows to upsert: for a key whose stored row matches (and passes the predicates), the
    columns outside `updated` take the stored values; other rows as the model gives them."""
    predicates = _predicates(predicates)
    if updated is None and not predicates:
        return batch
    stored_cols = {c.lower(): c for c in stored.columns}
    update_set = {c.lower() for c in (updated if updated is not None else batch.columns)}
    key_set = {k.lower() for k in keys}
    kept = [c for c in batch.columns if c.lower() not in update_set and c.lower() not in key_set
            and c.lower() in stored_cols]
    if not kept:  # every column takes the model's value: the predicates change nothing
        return batch
    matched = "__dbt_paimon_matched"
    # the predicates see every stored column (one the model overwrites too), as in dbt-spark's
    # MERGE ON: those over the table alone narrow the stored rows first; those naming the model's
    # rows (DBT_INTERNAL_SOURCE) as well are applied to each pair the join makes
    dest = stored.alias("DBT_INTERNAL_DEST")
    on_pairs = []
    for p in predicates:
        try:
            dest.select(F.expr(p))  # analysed over the table alone
            dest = dest.where(F.expr(p))
        except Exception:  # noqa: BLE001 - it names the model's rows too (or nothing Spark reads: below)
            on_pairs.append(p)
    # each column aliased to itself: new attributes, so that a model reading its own table (the
    # batch's plan holding the table's) joins two sides Spark tells apart
    dest = dest.select(*[F.col(quoted(c)).alias(c) for c in stored.columns], F.lit(True).alias(matched)) \
        .alias("DBT_INTERNAL_DEST")
    source = batch.alias("DBT_INTERNAL_SOURCE")
    on = [source[quoted(k)] == dest[quoted(stored_cols[k.lower()])] for k in keys]
    joined = source.join(dest, on, "left")
    is_matched = F.coalesce(dest[matched], F.lit(False))
    try:
        for p in on_pairs:
            is_matched = is_matched & F.coalesce(F.expr(p), F.lit(False))
        joined.select(is_matched)
    except Exception as e:  # noqa: BLE001 - a predicate Spark cannot read: its words name the problem
        raise DbtRuntimeError(f"{name}: incremental_predicates {predicates} are not valid Spark SQL over the "
                              f"table (DBT_INTERNAL_DEST) and the model's rows (DBT_INTERNAL_SOURCE): "
                              f"{str(e).splitlines()[0]}") from None
    kept_set = {c.lower() for c in kept}
    return joined.select(*[F.when(is_matched, dest[quoted(stored_cols[c.lower()])])
                           .otherwise(source[quoted(c)]).alias(c)
                           if c.lower() in kept_set else source[quoted(c)].alias(c) for c in batch.columns])
