"""One wide table (every atomic type the store writes) for the Java oracle tests, random rows for it,
and a plain model of what a table holds after batches of writes."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pyarrow as pa

# The same table in Arrow (our store) and in Paimon SQL types (for Java's create).
COLUMNS = [
    ("id", pa.int64(), "BIGINT NOT NULL"),
    ("code", pa.string(), "STRING NOT NULL"),
    ("dt", pa.string(), "STRING NOT NULL"),
    ("name", pa.string(), "STRING"),
    ("amount", pa.decimal128(10, 2), "DECIMAL(10, 2)"),
    ("big", pa.decimal128(30, 5), "DECIMAL(30, 5)"),  # wider than 18 digits: stored as bytes, not a long
    ("ts", pa.timestamp("us"), "TIMESTAMP(6)"),
    ("ts3", pa.timestamp("ms"), "TIMESTAMP(3)"),
    ("ltz", pa.timestamp("us", tz="UTC"), "TIMESTAMP(6) WITH LOCAL TIME ZONE"),
    ("day", pa.date32(), "DATE"),
    ("score", pa.float64(), "DOUBLE"),
    ("ratio", pa.float32(), "FLOAT"),
    ("flag", pa.bool_(), "BOOLEAN"),
    ("n", pa.int32(), "INT"),
    ("small", pa.int16(), "SMALLINT"),
    ("tiny", pa.int8(), "TINYINT"),
    ("raw", pa.binary(), "BYTES"),
]
SCHEMA = pa.schema([(name, arrow) for name, arrow, _ in COLUMNS])
# ... and in Spark's DDL, for DataFrames of these rows
SPARK_SCHEMA = ("id bigint, code string, dt string, name string, amount decimal(10,2), big decimal(30,5), "
                "ts timestamp_ntz, ts3 timestamp_ntz, ltz timestamp, day date, score double, ratio float, "
                "flag boolean, n int, small smallint, tiny tinyint, raw binary")
JAVA_FIELDS = [(name, sql) for name, _, sql in COLUMNS]
KEY = ["id", "code", "dt"]
PARTITION = ["dt"]


def random_rows(rng: random.Random, ids, version: int) -> list[dict]:
    """One row per id; `code` mixes strings stored inline in a BinaryRow slot (<= 7 bytes) and longer ones."""
    base = dt.datetime(2024, 1, 1)

    def maybe(value):
        return None if rng.random() < 0.15 else value

    return [{
        "id": i, "code": f"c{i % 4}" + ("-long-code" if i % 5 == 0 else ""), "dt": f"2024-0{i % 3 + 1}",
        "name": maybe(f"n{version}-{i}" + "é" * (i % 3)),
        "amount": maybe(Decimal(rng.randint(-10**7, 10**7)).scaleb(-2)),
        "big": maybe(Decimal(rng.randint(-10**24, 10**24)).scaleb(-5)),
        "ts": maybe(base + dt.timedelta(microseconds=rng.randrange(10**14))),
        "ts3": maybe(base + dt.timedelta(milliseconds=rng.randrange(10**11))),
        "ltz": maybe((base + dt.timedelta(microseconds=rng.randrange(10**14))).replace(tzinfo=dt.timezone.utc)),
        "day": maybe(dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(20000))),
        "score": maybe(rng.uniform(-1e9, 1e9)),
        "ratio": maybe(rng.randrange(-10**6, 10**6) / 64),  # exact in float32
        "flag": maybe(rng.random() < 0.5),
        "n": maybe(rng.randrange(-2**31, 2**31)),
        "small": maybe(rng.randrange(-2**15, 2**15)),
        "tiny": maybe(rng.randrange(-128, 128)),
        "raw": maybe(rng.randbytes(rng.randrange(0, 20))),
    } for i in ids]


class Model:
    """What a deduplicate table holds: the last version of each key; deletes remove the key."""

    def __init__(self, key=KEY):
        self.key = list(key)
        self.rows: dict[tuple, dict] = {}

    def upsert(self, rows: list[dict]) -> None:
        for r in rows:
            self.rows[tuple(r[k] for k in self.key)] = r

    def delete(self, rows: list[dict]) -> None:
        for r in rows:
            self.rows.pop(tuple(r[k] for k in self.key))

    def sorted_rows(self) -> list[dict]:
        return [self.rows[k] for k in sorted(self.rows, key=lambda k: tuple((v is None, v) for v in k))]
