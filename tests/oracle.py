"""The official pypaimon reader as an oracle, and small helpers to compare tables."""

from __future__ import annotations

import pyarrow as pa


def pypaimon_table(table_path: str):
    """pypaimon's view of a table at <warehouse>/<db>.db/<name>."""
    from pypaimon import CatalogFactory

    from dbt_paimon.store.common import fileio

    db_dir, name = table_path.rstrip("/").rsplit("/", 1)
    warehouse, db = db_dir.rsplit("/", 1)
    options = {"warehouse": warehouse}
    if fileio.scheme_of(table_path):  # pypaimon's names for the store settings the test configured
        s = fileio.configured()
        options.update({"fs.s3.endpoint": s["s3.endpoint"], "fs.s3.accessKeyId": s["s3.access-key"],
                        "fs.s3.accessKeySecret": s["s3.secret-key"], "fs.s3.region": s["s3.region"]})
    catalog = CatalogFactory.create(options)
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
