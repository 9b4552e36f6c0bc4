"""How a model's configs name columns, once for every materialization."""

from __future__ import annotations

from typing import Any, List


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
