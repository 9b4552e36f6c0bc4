"""paimon_changes: a model reads what changed upstream since it last ran.

    {{ config(materialized='paimon_upsert', unique_key='id', options={'rowkind.field': 'rowkind'}) }}
    select * from {{ paimon_changes(ref('orders')) }}

The model is a Paimon consumer of its upstream table, as a Flink job reading a Paimon table is:
`<upstream>/consumer/consumer-<id>` holds the snapshot it reads next, and snapshot expiration keeps
that snapshot and every later one, so no change is expired before the model has read it. Its id is
`dbt-<schema>.<model>` of the consuming model (or the macro's `consumer_id`).

At compile time the macro reads the consumer's position and the upstream's latest snapshot L and
returns a temporary view of the changes after the position up to L (engine.changes: one record per
key, `rowkind` first: +I, +U or -D). The first run, a run with --full-refresh, a `table` model, or a
model whose table is not there (dropped, never built) reads every row of L instead, as +I. A model
whose table is there but whose consumer the upstream does not keep (an upstream rebuilt since: a new
table, without the old one's consumers) is refused, as a position expired or rolled back past is:
the rows of keys gone upstream would stay.
The consumer moves to L + 1 only after the model's table committed (consume(), called by the
materialization), so a run that fails consumes nothing and the next run reads the changes again.
A downstream primary-key model applies the -D records with Paimon's `rowkind.field` option naming
the `rowkind` column.
"""

from __future__ import annotations

import re
import threading
from typing import Any, Dict, List, Optional, Tuple

from dbt.adapters.base.relation import BaseRelation
from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

from pyspark.sql.types import StringType, StructField, StructType

from ..engine import changes as engine_changes
from ..engine import spark_schema
from ..store import FileStoreTable, PaimonError, check_consumer_id
from .connections import error_message
from .maintenance import open_table, view_name
from .tables import Tables

log = AdapterLogger("Paimon")
MACRO = "paimon_changes"
# materializations that write the model into a Paimon table and then call consume()
CONSUMING = ("paimon_upsert", "incremental", "table")

# (model's table path, its name) -> what it read: (upstream path, consumer id, next snapshot)
_pending: Dict[Tuple[str, str], List[Tuple[str, str, int]]] = {}
_lock = threading.Lock()


def consumer_id(model: BaseRelation) -> str:
    """The consumer id of a model: `dbt-<schema>.<name>`, in the characters a consumer file name takes."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", f"dbt-{model.schema}.{model.identifier}")


def changes_view(tables: Tables, upstream: Any, model: BaseRelation, materialized: str, table_format: str,
                 given_id: Optional[str] = None, full_refresh: bool = False) -> BaseRelation:
    """A temporary view of the upstream's changes for `model` (see above)."""
    name = f"{model.schema}.{model.identifier}"
    if materialized not in CONSUMING or table_format != "paimon":
        raise DbtRuntimeError(
            f"{MACRO} in {name}: a {materialized!r} model cannot keep a consumer's position; read changes from a "
            f"model kept in a Paimon table: materialized {', '.join(repr(m) for m in CONSUMING)}")
    rel, path, table = open_table(tables, upstream, MACRO)
    what = f"{MACRO}({rel.schema}.{rel.identifier}) in {name}"
    try:
        consumer = check_consumer_id(given_id) if given_id else consumer_id(model)
        latest = table.snapshots.latest_id()
        positions = table.consumers()
    except PaimonError as e:
        raise DbtRuntimeError(f"{what}: {e}") from e
    start = None
    if not full_refresh and materialized != "table" and tables.exists(model):
        if consumer not in positions:
            # the model's table holds rows read before, but the upstream keeps no position for it:
            # a rebuilt upstream (a full refresh or a `table` run makes a new table, without the old
            # one's consumers or snapshots), or a model that never read it. Every row read as +I would
            # leave the rows of keys gone upstream in place: refused, as an expired position is
            raise DbtRuntimeError(
                f"{what}: {name} exists but the table keeps no position for the consumer {consumer!r} (it was "
                f"rebuilt since {name} read it, or {name} never read it); run {name} with --full-refresh to "
                f"read the table anew")
        start = positions[consumer] - 1
        earliest = table.snapshots.earliest_id()
        if earliest is not None and start + 1 < earliest:
            raise DbtRuntimeError(
                f"{what}: the consumer {consumer!r} reads snapshot {start + 1} next, which has expired (the table "
                f"has snapshots {earliest}..{latest}); run {name} with --full-refresh to read the table anew")
        if latest is None or start > latest:  # rolled back past what the model read: no record of that
            raise DbtRuntimeError(
                f"{what}: the consumer {consumer!r} reads snapshot {start + 1} next, but the table's latest is "
                f"{latest} (rolled back since?); run {name} with --full-refresh to read the table anew")
    if latest is None or (start is not None and start >= latest):  # nothing (committed since): no rows
        frame = tables.spark().createDataFrame([], StructType(
            [StructField("rowkind", StringType(), False)] + spark_schema(table.schema).fields))
    else:
        try:
            frame = engine_changes(tables.spark(), path, start, latest)
        except PaimonError as e:
            raise DbtRuntimeError(f"{what}: {e}") from e
        except Exception as e:  # noqa: BLE001 - any failure to plan the read: an error naming both tables
            raise DbtRuntimeError(f"{what}: {error_message(e)}") from e
    if latest is not None:
        with _lock:
            entry = (path, consumer, latest + 1)
            waiting = [p for p in _pending.get(_key(tables, model), []) if p[:2] != entry[:2]]
            _pending[_key(tables, model)] = waiting + [entry]
    view = view_name(rel, f"changes_for_{consumer.replace('.', '_').replace('-', '_')}")
    frame.createOrReplaceTempView(view)
    return tables.Relation.create(identifier=view, type="view")


def consume(tables: Tables, model: BaseRelation) -> None:
    """Move the consumers the model's changes_view() calls read up to the snapshots they read: called
    once the model's table committed."""
    with _lock:
        done = _pending.pop(_key(tables, model), [])
    for path, consumer, next_snapshot in done:
        FileStoreTable.open(path).reset_consumer(consumer, next_snapshot)
        log.debug(f"{MACRO}: consumer {consumer} of {path} reads snapshot {next_snapshot} next")


def _key(tables: Tables, model: BaseRelation) -> Tuple[str, str]:
    return tables.path(model), f"{model.schema}.{model.identifier}"
