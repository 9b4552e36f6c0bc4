"""A table's merge configuration, checked against its schema: the engine, and per value column the
aggregate function with Paimon's type checks (AggregateMergeFunction.getAggFuncName plus the
FieldAggregatorFactory checks).

It needs the schema and its options only, not the KeyValue files merge.py reads, so schema.py checks
a new table with it (build_schema) and merge.py builds its MergeFunction from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..common.errors import SchemaError
from ..common.options import MERGE_ENGINES as ENGINES

PRIMARY_KEY = "primary_key"  # Paimon's aggregator for primary-key fields (FieldPrimaryKeyAgg)
# Field aggregators that override FieldAggregator.retract; the others throw UnsupportedOperationException.
RETRACTABLE = frozenset({"sum", "product", "last_value", "last_non_null_value", PRIMARY_KEY})
_NUMERIC = frozenset({"TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"})


@dataclass(frozen=True)
class FieldAgg:
    """The aggregator of one value column (aggregation engine)."""

    name: str
    function: str
    type: object  # types.DataType
    ignore_retract: bool = False
    delimiter: str = ","
    distinct: bool = False  # listagg: only new tokens are appended


def merge_engine(schema) -> str:
    """The merge engine of a table (a TableSchema); SchemaError for a configuration reads refuse."""
    core = schema.core
    engine = core.merge_engine
    if engine not in ENGINES:
        raise SchemaError(f"merge-engine {engine!r} is not supported")
    if engine == "partial-update" and core.partial_update_remove_record_on_delete and core.ignore_delete:
        raise SchemaError("'ignore-delete' and 'partial-update.remove-record-on-delete' have conflicting behavior "
                          "so should not be enabled at the same time")
    # Options another writer may have stored that change how rows merge, and that we do not merge
    # by: refused by name, so that such a table is never read or written another way.
    options = schema.options
    unmerged = [k for k in options if k == "partial-update.remove-record-on-sequence-group"
                or (engine == "partial-update" and (k.endswith(".aggregate-function")
                                                    or k == "fields.default-aggregate-function")
                    and str(options[k]) != "last_non_null_value")]  # (a partial update's own rule)
    if unmerged:
        raise SchemaError(f"table option(s) {sorted(unmerged)} (merge-engine {engine!r}) change how Paimon merges a "
                          "key's versions in a way dbt-paimon does not, so it neither reads nor writes this table")
    return engine


# the functions that pick one of a key's values whole, whatever its type (Paimon's factories check none)
_ANY_TYPE = (PRIMARY_KEY, "last_value", "last_non_null_value", "first_value", "first_non_null_value")


def field_agg(schema, name: str) -> FieldAgg:
    """Paimon's AggregateMergeFunction.getAggFuncName plus the factories' type checks."""
    core = schema.core
    dtype = schema.field(name).type
    if name in schema.primary_keys:
        fn = PRIMARY_KEY
    elif name in core.sequence_fields:  # Paimon's AggregateMergeFunction.getAggFuncName
        fn = "last_value"
    else:
        fn = core.aggregate_function(name) or "last_non_null_value"
    root = dtype.root
    bad = None
    distinct = core.raw.get(f"fields.{name}.distinct", "false").lower() == "true"
    if fn == "collect" and (root != "ARRAY" or distinct):
        bad = "ARRAY" if root != "ARRAY" else ("no 'distinct' in dbt-paimon (Paimon's result is in its HashSet's "
                                               "order, which no other writer can reproduce)")
    elif fn == "merge_map" and (root != "MAP" or dtype.key.is_nested or dtype.key.root == "BYTES"):
        # (Java's HashMap compares byte[] keys by identity: equal BYTES keys never merge there)
        bad = "MAP (with an atomic key type other than BYTES)"
    elif dtype.is_nested and fn not in _ANY_TYPE + ("collect", "merge_map"):
        bad = "an atomic type (a nested value is kept whole: " + ", ".join(_ANY_TYPE[1:]) + ")"
    elif fn in ("sum", "product") and root not in _NUMERIC:
        bad = "a numeric type"
    elif fn in ("bool_and", "bool_or") and root != "BOOLEAN":
        bad = "BOOLEAN"
    elif fn == "listagg" and (root != "STRING" or (dtype.spelling not in (None, "STRING")
                                                   and dtype.spelling != "VARCHAR(2147483647)")):
        bad = "STRING (unbounded VARCHAR)"
    if bad:
        raise SchemaError(f"column {name!r} is {dtype.sql()}: aggregate function '{fn}' needs {bad}")
    return FieldAgg(name, fn, dtype, core.ignore_retract(name), core.list_agg_delimiter(name), distinct)


def check_merge_options(schema) -> None:
    """Raise SchemaError now for a merge configuration that reads would refuse later."""
    check_sequence_groups(schema, merge_engine(schema))
    if merge_engine(schema) == "aggregation":
        for name in schema.field_names:
            field_agg(schema, name)


# ---- partial-update sequence groups (merged by sequence_group.py) ---------------------------------

_OPTION = re.compile(r"^fields\.(?P<sequence>.+)\.sequence-group$")


@dataclass(frozen=True)
class SequenceGroup:
    sequence: tuple  # the fields that order the group's versions
    members: tuple  # the other fields the group holds

    @property
    def fields(self) -> tuple:
        return self.sequence + self.members


def sequence_groups(schema) -> tuple[SequenceGroup, ...]:
    """The sequence groups a table's options declare (a TableSchema), refused as Paimon 2.0 refuses
    them (its messages): names split on commas as given, a key field in a group, a field in two."""
    options, names, keys = schema.options, schema.field_names, set(schema.primary_keys)
    groups, member_of, ordering = [], {}, {}
    for key in sorted(options):
        m = _OPTION.match(key)
        if not m:
            continue
        sequence = tuple(m.group("sequence").split(","))
        members = tuple(str(options[key]).split(","))
        for name in sequence + members:
            if name not in names:
                raise SchemaError(f"option {key!r} names column {name!r}, which the table does not have")
            if name in keys:
                raise SchemaError(f"The sequence-group '{key}' contains primary key field '{name}', which is not "
                                  "allowed. Primary key columns cannot be put in sequence-group.")
        for name in members:
            if name in member_of:
                raise SchemaError(f"Field {name} is defined repeatedly by multiple groups: {key}")
            member_of[name] = key
        ordering.update({name: key for name in sequence})
        groups.append(SequenceGroup(sequence, tuple(m for m in members if m not in sequence)))
    crossed = sorted(n for n in ordering if n in member_of and member_of[n] != ordering[n])
    if crossed:  # (Paimon's outcome then depends on the order it reads the options in)
        raise SchemaError(f"field(s) {crossed} order one sequence group and belong to another")
    return tuple(groups)


def check_sequence_groups(schema, engine: str) -> tuple[SequenceGroup, ...]:
    """The groups of a table, or SchemaError for a configuration we do not merge as Paimon does: any
    aggregate function with groups (Paimon aggregates group fields, even `last_non_null_value`, in
    ways this merge does not)."""
    groups = sequence_groups(schema)
    if not groups:
        return groups
    options = schema.options
    if engine != "partial-update":
        raise SchemaError("option 'fields.<field>.sequence-group' is for merge-engine 'partial-update' (dbt-paimon "
                          f"merges sequence groups of partial-update tables only), not {engine!r}")
    if str(options.get("partial-update.remove-record-on-delete", "false")).lower() == "true":
        raise SchemaError("sequence-group and partial-update.remove-record-on-delete have conflicting behavior so "
                          "should not be enabled at the same time (as in Paimon)")
    aggregated = sorted(k for k in options
                        if k.endswith(".aggregate-function") or k == "fields.default-aggregate-function")
    if aggregated:
        raise SchemaError(f"option(s) {aggregated} with sequence groups: dbt-paimon does not merge aggregate functions "
                          "of partial-update tables")
    return groups
