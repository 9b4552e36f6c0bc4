"""MERGE INTO a Paimon table in one snapshot: a deduplicate primary-key table by one upsert and its
retractions, an append table by copy-on-write.

    MERGE INTO t [AS x] USING source [AS s] ON cond
      WHEN MATCHED [AND c] THEN UPDATE SET ... | UPDATE SET * | DELETE
      WHEN NOT MATCHED [AND c] THEN INSERT (...) VALUES (...) | INSERT *
      WHEN NOT MATCHED BY SOURCE [AND c] THEN UPDATE SET ... | DELETE

Spark joins the source with the table's live rows on the statement's condition (a full outer join:
each joined row is matched, not matched, or not matched by source), and each row takes the first
action of its kind whose condition holds, as Spark's MERGE does. The rows the actions write are
upserted on the key; the keys they delete, and a matched row's old key when an action gave it a
new one, get -D records in the same snapshot (engine/writes/replace.py, `keys`). On an append table the
files holding a row an action touched are written again with the actions applied (as
engine/writes/rewrite.py does for DELETE and UPDATE), the inserted rows beside them. A table row matched by
more than one source row is an error, as in Spark, and nothing is written (unless the one WHEN MATCHED
action is an unconditional DELETE: the row goes, once).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from ..assign.rows import PAYLOAD
from ..engine.jvm import DATASET, jvm_class, scala_list
from ..engine.writes import commit_loop, store_assignment
from ..engine.runtime import jobs
from ..engine.writes.append_files import append_task
from ..engine.writes.replace import Replace
from ..engine.writes.rewrite import FILE, file_rows
from ..engine.spark_types import check_nested_values, struct_of, to_spark
from ..engine.writes.upsert import upsert
from ..store.schema import foreign_options
from ..store.common.errors import DataError, SchemaError
from ..store.manifest.manifest import DELETE, ManifestEntry
from ..store.common.options import MergeEngine
from ..store.read.scan import next_sequences
from ..store.snapshot.snapshot import APPEND
from ..store.schema.schema import TableSchema, resolve_columns
from ..store.table import FileStoreTable
from ..engine.qualified import named
from .catalog import quote
from .statement import Statement, option
from .target import Target, names

_IN_SOURCE, _IN_TABLE, _CHOICE, _MATCHED = "__dbt_paimon_s", "__dbt_paimon_t", "__dbt_paimon_action", "__dbt_paimon_m"
_ROW = "__dbt_paimon_row"  # an append table's row, told apart from the others
_VALUE = "__dbt_paimon_v"  # a value an action gives a column, before its cast


@dataclass(frozen=True)
class Action:
    when: str  # "matched", "not matched", "not matched by source"
    kind: str  # "update", "update *", "delete", "insert", "insert *"
    condition: str | None
    assignments: dict  # column -> Spark SQL expression (update, insert)


def _actions(statement: Statement, schema: TableSchema) -> list[Action]:
    kinds = {"DeleteAction": "delete", "UpdateAction": "update", "UpdateStarAction": "update *",
             "InsertAction": "insert", "InsertStarAction": "insert *"}
    out = []
    plan = statement.plan
    for when, actions in (("matched", plan.matchedActions()), ("not matched", plan.notMatchedActions()),
                          ("not matched by source", plan.notMatchedBySourceActions())):
        for action in scala_list(actions):
            kind = kinds.get(str(action.getClass().getSimpleName()))
            if kind is None:
                raise SchemaError(f"MERGE INTO {statement.written_name}: {action.getClass().getSimpleName()} is not "
                                  f"supported")
            condition = option(action.condition())
            assignments = {}
            if kind in ("update", "insert"):
                for assignment in scala_list(action.assignments()):
                    parts = [str(p) for p in scala_list(assignment.key().nameParts())]
                    column = resolve_columns("column", [parts[-1]], schema.field_names)[0]
                    if column in assignments:  # Spark's own MERGE refuses it too
                        raise SchemaError(f"MERGE INTO {statement.written_name}: an action gives column {column!r} "
                                          f"two values")
                    assignments[column] = statement.value_text(assignment.value(), schema.field_names)
            out.append(Action(when, kind, statement.source_text(condition) if condition is not None else None,
                              assignments))
    return out


def merge(spark: SparkSession, statement: Statement, target: Target) -> dict[str, int]:
    """Carry out MERGE INTO on the Paimon table `target`; the rows each kind of action changed, as
    Delta's MERGE answers them (num_affected_rows, num_updated_rows, num_deleted_rows,
    num_inserted_rows)."""
    words = f"MERGE INTO {statement.written_name}"
    table = FileStoreTable.open(target.path, branch=target.branch)
    schema = table.schema
    foreign_options.check_writable(schema.options, target.path)  # before anything is written
    if not schema.is_append and schema.core.merge_engine != MergeEngine.DEDUPLICATE:
        raise SchemaError(f"{words}: the table merges rows ({schema.core.merge_engine}), so a merged row would "
                          f"merge again with the stored one; write the rows with INSERT INTO instead")
    if statement.plan.withSchemaEvolution():
        raise SchemaError(f"{words} WITH SCHEMA EVOLUTION is not supported (ALTER TABLE ADD COLUMNS first)")
    actions = _actions(statement, schema)
    keys = list(schema.primary_keys)
    for action in actions:
        changed = [k for k in keys if k in action.assignments] if action.kind == "update" else []
        if changed:
            raise SchemaError(f"{words}: an UPDATE action sets {changed} of the primary key (DELETE the row and "
                              f"INSERT it under the new key)")
    qualified = names(statement, target)
    source = DataFrame(jvm_class(spark, DATASET).ofRows(
        spark._jsparkSession, statement.with_ctes(statement.plan.sourceTable())), spark)
    on = statement.source_text(statement.plan.mergeCondition())
    writes = [i for i, a in enumerate(actions) if a.kind != "delete"]
    if schema.is_append:  # copy-on-write: on a lost race, the whole statement again on the new snapshot
        def attempt(at: commit_loop.Attempt) -> dict[str, int]:
            plan = at.table.plan()
            out = _joined(spark, at.table, plan, source, on, actions, qualified, words)
            counts = _counts(out, actions)  # before the commit: nothing may fail after it
            _rewrite(spark, at, plan, out, writes)
            return counts

        return commit_loop.run(target.path, table.io, words, attempt, branch=target.branch)
    out = _joined(spark, table, None, source, on, actions, qualified, words)
    counts = _counts(out, actions)
    olds = [f"__old{i}" for i in range(len(keys))]
    written = out.filter(F.col(_CHOICE).isin(writes))
    same_key = F.expr(" AND ".join(f"{quote(k)} <=> {o}" for k, o in zip(keys, olds)))
    # deleted rows, and rows an action gave another key (UPDATE SET *): their old key goes
    gone = out.filter(~F.col(_CHOICE).isin(writes) | F.col(olds[0]).isNotNull() & ~same_key).select(
        *[F.col(o).alias(k) for o, k in zip(olds, keys)])
    upsert(written.select(*[quote(f.name) for f in schema.fields]), target.path, primary_keys=keys,
           partition_keys=list(schema.partition_keys), replace=Replace(keys=gone, what=words),
           settings=target.settings)
    return counts


def _counts(out: DataFrame, actions: list[Action]) -> dict[str, int]:
    """The joined rows by the kind of action they took (one pass over the checkpointed rows)."""
    by_kind = {"update": 0, "delete": 0, "insert": 0}
    for choice, n in out.filter(F.col(_CHOICE).isNotNull()).groupBy(_CHOICE).count().collect():
        by_kind[actions[choice].kind.split()[0]] += n  # "update *" is an update
    return {"num_affected_rows": sum(by_kind.values()), "num_updated_rows": by_kind["update"],
            "num_deleted_rows": by_kind["delete"], "num_inserted_rows": by_kind["insert"]}


def _joined(spark: SparkSession, table: FileStoreTable, plan, source: DataFrame, on: str, actions: list[Action],
            qualified: list[str], words: str) -> DataFrame:
    """The source joined with the table's live rows (an append table's: those of `plan`, each with
    the file holding it) on the condition `on`, each joined row once: the action it took (or none),
    the values it writes and which table row it was (`__old0`...: its key, or an append table's row
    id); read once (a checkpoint) so the checks and the writes see the same rows. An append table's
    rows without an action stay: their file may be written again."""
    schema = table.schema
    name = qualified[-1]  # the table's own name, or the alias
    if schema.is_append:  # the rows with the file holding them, and an id of each (no key to tell them apart)
        rows = file_rows(spark, table, plan.splits).withColumn(_ROW, F.monotonically_increasing_id())
        identity = [_ROW]
    else:
        rows = spark.read.format("paimon").load(table.path)
        identity = list(schema.primary_keys)
    rows = named(rows, qualified)
    joined = source.withColumn(_IN_SOURCE, F.lit(True)).join(
        rows.withColumn(_IN_TABLE, F.lit(True)), _expr(on, words), "full_outer")
    matched = F.col(_IN_SOURCE).isNotNull() & F.col(_IN_TABLE).isNotNull()
    kind_of = {"matched": matched, "not matched": F.col(_IN_TABLE).isNull(),
               "not matched by source": F.col(_IN_SOURCE).isNull()}
    choice = F.lit(None).cast("int")
    for i in reversed(range(len(actions))):  # the first action whose condition holds
        a = actions[i]
        holds = kind_of[a.when] & (F.coalesce(_expr(a.condition, words), F.lit(False)) if a.condition else F.lit(True))
        choice = F.when(holds, F.lit(i)).otherwise(choice)
    olds = [f"__old{i}" for i in range(len(identity))]
    extra = [F.col(f"{quote(name)}.{FILE}").alias(FILE)] if schema.is_append else []
    # each action's value of each column, in a DataFrame of their own first (the statement's
    # expressions in the session's mode), then cast as Spark's store assignment does (store_assignment.py)
    branches = {f.name: _branches(actions, f.name, name, source, words) for f in schema.fields}
    staged_name = {(n, i): f"{_VALUE}{j}_{i}" for j, (n, b) in enumerate(branches.items()) for i in b}
    kept = {f.name: f"{_VALUE}{j}_kept" for j, f in enumerate(schema.fields)}  # an append table's row without an action
    staged = joined.select(choice.alias(_CHOICE), matched.alias(_MATCHED), *extra,
                           *[v.alias(staged_name[n, i]) for n, b in branches.items() for i, v in b.items()],
                           *([F.col(f"{quote(name)}.{quote(f.name)}").alias(kept[f.name]) for f in schema.fields]
                             if schema.is_append else []),
                           *[F.col(f"{quote(name)}.{quote(k)}").alias(o) for k, o in zip(identity, olds)])
    rule = store_assignment.policy(spark)
    types = {c.name: c.dataType for c in staged.schema.fields}
    for i in range(len(actions)):
        check_nested_values({n: types[staged_name[n, i]] for n, b in branches.items() if i in b}, schema, words)
    for (n, _), c in staged_name.items():
        store_assignment.check(spark, words, n, types[c], to_spark(schema.field(n).type), rule)
    with store_assignment.casting(spark, rule):
        values = {}
        for f in schema.fields:
            kind = to_spark(f.type)
            value = F.col(kept[f.name]) if schema.is_append else F.lit(None)
            for i in branches[f.name]:
                value = F.when(F.col(_CHOICE) == i, F.col(staged_name[f.name, i]).cast(kind)).otherwise(value)
            values[f.name] = value if branches[f.name] else value.cast(kind)  # each branch is cast already
        out = staged.select(_CHOICE, _MATCHED, *([FILE] if schema.is_append else []),
                            *[values[f.name].alias(f.name) for f in schema.fields], *olds)
    if not schema.is_append:
        out = out.filter(F.col(_CHOICE).isNotNull())
    deletes_every_match = _deletes_every_match(actions)
    if deletes_every_match:  # a table row matched twice is deleted once, as in Spark
        out = out.filter(~F.col(_MATCHED)).unionByName(out.filter(F.col(_MATCHED)).dropDuplicates(olds))
    out = out.localCheckpoint(eager=True)
    if not deletes_every_match:
        _refuse_many_matches(out, olds, words)
    return out


def _deletes_every_match(actions: list[Action]) -> bool:
    """The statement's one WHEN MATCHED action is an unconditional DELETE: then, as in Spark's MERGE,
    a table row two source rows match is no error (it is deleted either way)."""
    matched = [a for a in actions if a.when == "matched"]
    return len(matched) == 1 and matched[0].kind == "delete" and matched[0].condition is None


def _rewrite(spark: SparkSession, attempt: commit_loop.Attempt, plan, out: DataFrame, writes: list[int]) -> None:
    """An append table's MERGE, copy-on-write: the files holding a row an action touched are written
    again with the actions applied, the inserted rows added, in one commit on the planned snapshot."""
    table = attempt.table
    schema = table.schema
    touched = {r[0] for r in out.filter(F.col(_CHOICE).isNotNull() & F.col(FILE).isNotNull())
               .select(FILE).distinct().collect()}
    kept = out.filter(F.col(FILE).isin(list(touched)) & (F.col(_CHOICE).isNull() | F.col(_CHOICE).isin(writes))
                      | F.col(FILE).isNull() & F.col(_CHOICE).isin(writes))
    rows = kept.select(*[quote(f.name) for f in schema.fields])
    payloads = jobs.collect_payloads(spark, rows.mapInArrow(
        append_task(table.path, schema, table.io, next_sequences(plan.splits)), struct_of(PAYLOAD)))
    adds = [e for p in payloads for e in p]
    deletes = [ManifestEntry(DELETE, s.partition, s.bucket, s.total_buckets, f)
               for s in plan.splits for f in s.files if f.file_name in touched]
    if adds or deletes:
        attempt.commit(deletes + adds, APPEND, expected_latest=plan.snapshot.id if plan.snapshot else None)


def _expr(text: str | None, words: str) -> Column:
    try:
        return F.expr(text)
    except Exception as e:  # noqa: BLE001 - Spark's parse error names the problem
        raise SchemaError(f"{words}: {text!r} is not valid Spark SQL: {str(e).splitlines()[0]}") from None


def _branches(actions: list[Action], column: str, table_alias: str, source: DataFrame, words: str) -> dict[int, Column]:
    """The value each action that writes a row gives the table's column `column`, by the action's
    place in the statement."""
    source_columns = {c.lower(): c for c in source.columns}
    values = {}
    for i, a in enumerate(actions):
        if a.kind == "delete":
            continue
        if a.kind in ("update", "insert") and column in a.assignments:
            values[i] = _expr(a.assignments[column], words)
        elif a.kind == "update":  # a column the action does not set keeps its value
            values[i] = F.col(f"{quote(table_alias)}.{quote(column)}")
        elif a.kind in ("update *", "insert *"):
            if column.lower() not in source_columns:
                raise SchemaError(f"{words}: {a.kind.upper()} needs column {column!r} in the source")
            values[i] = source[quote(source_columns[column.lower()])]
        else:  # an INSERT without this column
            values[i] = F.lit(None)
    return values


def _refuse_many_matches(out: DataFrame, olds: list[str], words: str) -> None:
    many = out.filter(F.col(_MATCHED)).groupBy(*olds).count().filter("count > 1").limit(1).collect()
    if many:
        key = [v for k, v in many[0].asDict().items() if k != "count"]
        raise DataError(f"{words}: the table's row with key {key} matches more than one source row; make the "
                        f"source hold one row per key")
