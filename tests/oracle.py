"""The official pypaimon reader as an oracle, and small helpers to compare tables."""

from __future__ import annotations

import os

import pyarrow as pa


def pypaimon_table(table_path: str):
    """pypaimon's view of a table at <warehouse>/<db>.db/<name>."""
    from pypaimon import CatalogFactory

    db_dir, name = os.path.split(table_path.rstrip("/"))
    warehouse, db = os.path.split(db_dir)
    catalog = CatalogFactory.create({"warehouse": warehouse})
    return catalog.get_table(f"{db[:-3]}.{name}")


def pypaimon_read(table_path: str, snapshot_id: int | None = None) -> pa.Table:
    table = pypaimon_table(table_path)
    if snapshot_id is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot_id)})
    rb = table.new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def rows(table: pa.Table, key: list[str] | str) -> list[dict]:
    """Rows as dicts sorted by key, for equality checks that ignore order and nullability flags."""
    keys = [key] if isinstance(key, str) else key
    out = table.to_pylist()
    return sorted(out, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))


def model_rows(model: dict, columns: list[str], key: list[str] | str) -> list[dict]:
    keys = [key] if isinstance(key, str) else key
    out = [{c: r[c] for c in columns} for r in model.values()]
    return sorted(out, key=lambda r: tuple((r[k] is None, r[k]) for k in keys))
