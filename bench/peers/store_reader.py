"""A table as dbt-paimon's store reader returns it: every peer's table read back by our reader
(dbt-paimon's own read-back, and the second opinion on the others' tables)."""

from __future__ import annotations


def read_parts(path: str):
    """A table as the project's store reader returns it, in parts of about a million rows (a
    100M-row table does not fit in memory at once)."""
    from dbt_paimon.store.table import FileStoreTable
    table = FileStoreTable.open(path)
    plan, read = table.plan(batch_read=True), table.new_read()
    for group in groups(plan.splits, lambda s: s.row_count, 1_000_000):
        yield read.read(group)


def groups(items, size, limit):
    """items in consecutive groups whose sizes add up to about limit."""
    group, total = [], 0
    for item in items:
        group.append(item)
        total += size(item)
        if total >= limit:
            yield group
            group, total = [], 0
    if group:
        yield group
