"""dbt model contracts' constraints on a Paimon table (contract: {enforced: true}).

- primary_key (on a column, or on the model with `columns`): the Paimon primary key, as unique_key
  is; given both, they must name the same columns.
- not_null: the column is NOT NULL in the Paimon schema and the engine refuses a null before
  anything is written (Paimon's own rule for NOT NULL columns).
- check, unique, foreign_key, custom: a Paimon table cannot enforce them; warned about, as dbt-spark
  warns about constraints its formats cannot enforce.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from dbt.adapters.events.logging import AdapterLogger
from dbt_common.exceptions import DbtRuntimeError

log = AdapterLogger("Paimon")

ENFORCED = ("primary_key", "not_null")


def _columns(constraint: Mapping[str, Any], column: Optional[str]) -> List[str]:
    return [column] if column else [str(c) for c in (constraint.get("columns") or [])]


def from_contract(name: str, model_constraints: Sequence[Mapping[str, Any]],
                  columns: Mapping[str, Mapping[str, Any]], unique_key: Sequence[str]) -> Tuple[List[str], List[str]]:
    """(primary key, NOT NULL columns) of an enforced contract; its other constraints are warned about."""
    found = [(c, None) for c in model_constraints or []]
    found += [(c, col.get("name") or key) for key, col in (columns or {}).items() for c in col.get("constraints") or []]
    primary: List[str] = []
    not_null: List[str] = []
    for constraint, column in found:
        kind = str(constraint.get("type"))
        if kind == "primary_key":
            primary += _columns(constraint, column)
        elif kind == "not_null":
            not_null += _columns(constraint, column)
        else:
            what = f" on {column}" if column else ""
            log.warning(f"{name}: the {kind} constraint{what} is not enforced: a Paimon table enforces only "
                        f"primary_key and not_null")
    primary = list(dict.fromkeys(primary))
    if primary and unique_key and sorted(k.lower() for k in primary) != sorted(k.lower() for k in unique_key):
        raise DbtRuntimeError(f"{name}: the primary_key constraint {primary} and unique_key {list(unique_key)} "
                              f"disagree; both name the Paimon table's primary key (nothing was written)")
    return primary or list(unique_key), list(dict.fromkeys(not_null))
