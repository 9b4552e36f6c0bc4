"""Demo: a Paimon primary-key table written, updated and read back by the store (no Spark, no dbt yet).

Run with `bash run.sh demo`; the table is left under ./warehouse/demo.db/customers for other tools.
"""

from __future__ import annotations

import argparse
import os
import shutil

import pyarrow as pa

from dbt_paimon.store import FileStoreTable
from dbt_paimon.store.datafile import DELETE, INSERT, UPDATE_AFTER

SCHEMA = pa.schema([("customer_id", pa.int64()), ("country", pa.string()), ("name", pa.string()),
                    ("lifetime_value", pa.decimal128(12, 2))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--warehouse", default=os.path.abspath("warehouse"))
    args = parser.parse_args()
    path = os.path.join(args.warehouse, "demo.db", "customers")
    shutil.rmtree(path, ignore_errors=True)

    table = FileStoreTable.create(path, SCHEMA, ["customer_id", "country"], ["country"], {"bucket": "-1"})
    base = pa.Table.from_pylist([
        {"customer_id": i, "country": ["NL", "DE", "FR"][i % 3], "name": f"customer {i}", "lifetime_value": i * 10}
        for i in range(1, 10)], SCHEMA)
    w = table.new_write()
    w.write(base, buckets=0)
    print(f"snapshot {w.commit().snapshot.id}: inserted {base.num_rows} customers")

    changes = pa.Table.from_pylist([
        {"customer_id": 1, "country": "FR", "name": "customer 1 (gold)", "lifetime_value": 1000},
        {"customer_id": 2, "country": "DE", "name": "customer 2", "lifetime_value": 20},
        {"customer_id": 10, "country": "NL", "name": "customer 10", "lifetime_value": 5},
    ], SCHEMA)
    w = table.new_write()
    w.write(changes, buckets=0, row_kinds=[UPDATE_AFTER, DELETE, INSERT])
    print(f"snapshot {w.commit().snapshot.id}: updated 1, deleted 1, inserted 1")

    current = table.to_arrow().sort_by("customer_id")
    print(current.to_pandas().to_string(index=False))
    first = table.to_arrow(snapshot_id=1)
    print(f"time travel: snapshot 1 had {first.num_rows} rows, the latest has {current.num_rows}")
    print(f"table written to {path}")


if __name__ == "__main__":
    main()
