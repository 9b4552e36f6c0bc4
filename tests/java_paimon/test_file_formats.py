"""Tables whose data files Java Paimon wrote as ORC or Avro (`file.format`, `file.format.per.level`):
we read them, upsert, delete and compact in them (writing Parquet, which Paimon's readers tell by the
file name), and Java, pypaimon, the `paimon` Spark source and our reader read the same rows after
each step; Java then writes on top of ours.

Two JVM batches: Java creates and writes the tables; then it reads our steps, writes again and reads.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from dbt_paimon.store import FileStoreTable

from tests.oracle import pypaimon_read, rows

from .data import JAVA_FIELDS, KEY, PARTITION, SCHEMA, SPARK_SCHEMA, Model, random_rows
from .javapaimon import Read, Write, assert_same

TABLES = {
    "orc": ({"bucket": "2", "file.format": "orc"}, KEY),
    "avro": ({"bucket": "-1", "dynamic-bucket.target-row-num": "10", "file.format": "avro"}, KEY),
    # Paimon's advice for write-heavy tables: level-0 files in Avro, the rest in the table's format
    "per_level": ({"bucket": "2", "file.format.per.level": "0:avro"}, KEY),
    "append_orc": ({"bucket": "-1", "file.format": "orc"}, []),
}
APPEND_KEY = SCHEMA.names  # an append table keeps every row: the whole row tells them apart


def _df(spark, batch):
    return spark.createDataFrame([tuple(r[c] for c in SCHEMA.names) for r in batch], SPARK_SCHEMA)


def _extensions(path: str) -> set:
    table = FileStoreTable.open(path)
    return {f.file_name.rsplit(".", 1)[-1] for s in table.plan().splits for f in s.files}


@pytest.fixture(scope="module")
def formats(spark, java, tmp_path_factory):
    from dbt_paimon.engine import compact, write
    from dbt_paimon.engine import delete, upsert

    db = tmp_path_factory.mktemp("formats") / "wh" / "db.db"
    db.mkdir(parents=True)
    rng = random.Random(17)
    out = SimpleNamespace(paths={n: str(db / n) for n in TABLES}, expected={}, ours={}, extensions={})
    first, second = random_rows(rng, range(60), 1), random_rows(rng, range(0, 60, 4), 2)
    models = {n: Model(key if key else APPEND_KEY) for n, (_, key) in TABLES.items()}
    requests = []
    for name, (options, key) in TABLES.items():
        create = {"fields": JAVA_FIELDS, "primary_keys": key, "partition_keys": PARTITION, "options": options}
        models[name].upsert(first)
        models[name].upsert(second)
        gone = [] if not key else [models[name].rows[k] for k in sorted(models[name].rows) if k[0] % 9 == 2]
        models[name].delete(gone)
        out.expected[(name, "java")] = models[name].sorted_rows()
        requests += [Write(out.paths[name], first, create),
                     Write(out.paths[name], second + [{**r, "_kind": "-D"} for r in gone])]
    assert java.run(requests) == [None] * len(requests)
    out.extensions["java"] = {n: _extensions(p) for n, p in out.paths.items()}
    out.read_java = {n: FileStoreTable.open(p).to_arrow() for n, p in out.paths.items()}
    out.spark_java = {n: spark.read.format("paimon").load(p).toArrow() for n, p in out.paths.items()}

    # Ours: an upsert (updates and new keys) and a delete, then a full compaction (or, for the append
    # table, an append); Java reads each table after both, then writes again on top.
    ours = random_rows(rng, list(range(1, 60, 5)) + list(range(60, 80)), 3)
    java_again = random_rows(rng, list(range(2, 80, 7)) + list(range(80, 90)), 4)
    requests = []
    for name, (_, key) in TABLES.items():
        path, model = out.paths[name], models[name]
        if key:
            upsert(_df(spark, ours), path, primary_keys=KEY, partition_keys=PARTITION)
            gone = [model.rows[k] for k in sorted(model.rows) if k[0] % 10 == 3]
            delete(spark, path, f"id in ({', '.join(str(r['id']) for r in gone)})")
            model.upsert(ours)
            model.delete(gone)
            out.expected[(name, "upserted")] = model.sorted_rows()
            out.ours[(name, "upserted")] = FileStoreTable.open(path).to_arrow()
            requests.append(Read(path))
            compact(spark, path)
        else:
            write(_df(spark, ours), path, partition_keys=PARTITION)
            model.upsert(ours)
        out.expected[(name, "ours")] = model.sorted_rows()
        out.ours[(name, "ours")] = FileStoreTable.open(path).to_arrow()
        out.extensions[name] = _extensions(path)
        requests.append(Read(path))
        model.upsert(java_again)
        out.expected[(name, "java again")] = model.sorted_rows()
        requests += [Write(path, java_again), Read(path)]
    results = iter(java.run(requests))
    out.java_read = {}
    for name, (_, key) in TABLES.items():
        if key:
            out.java_read[(name, "upserted")] = next(results)
        out.java_read[(name, "ours")] = next(results)
        assert next(results) is None
        out.java_read[(name, "java again")] = next(results)
    return out


def _key(name):
    return TABLES[name][1] or APPEND_KEY


@pytest.mark.parametrize("name", list(TABLES))
def test_we_read_the_tables_java_wrote_in_orc_and_avro(formats, name):
    want = {"orc": {"orc"}, "avro": {"avro"}, "per_level": {"avro"}, "append_orc": {"orc"}}[name]
    assert formats.extensions["java"][name] == want
    key = _key(name)
    assert rows(formats.read_java[name], key) == formats.expected[(name, "java")]
    assert rows(formats.spark_java[name], key) == rows(formats.read_java[name], key)
    assert rows(pypaimon_read(formats.paths[name], snapshot_id=2), key) == formats.expected[(name, "java")]


@pytest.mark.parametrize("name", list(TABLES))
def test_java_reads_our_writes_beside_its_files(formats, name):
    key = _key(name)
    for step in ("upserted", "ours"):
        if (name, step) in formats.java_read:
            assert_same(formats.java_read[(name, step)], formats.ours[(name, step)], key,
                        formats.expected[(name, step)])
    # compaction rewrote every file of a keyed table as Parquet; the append table mixes both
    assert formats.extensions[name] == ({"parquet"} if TABLES[name][1] else {"orc", "parquet"})


@pytest.mark.parametrize("name", list(TABLES))
def test_java_writes_again_on_top_of_ours(formats, name):
    key = _key(name)
    ours = FileStoreTable.open(formats.paths[name]).to_arrow()
    assert_same(formats.java_read[(name, "java again")], ours, key, formats.expected[(name, "java again")])
    assert rows(pypaimon_read(formats.paths[name]), key) == formats.expected[(name, "java again")]


def test_a_file_of_an_unknown_format_is_named(tmp_path):
    from dbt_paimon.store.common.errors import CorruptTableError
    from dbt_paimon.store.format.file_format import read_file
    from dbt_paimon.store.common.fileio import FileIO

    bad = tmp_path / "data-1.lance"
    bad.write_bytes(b"x")
    with pytest.raises(CorruptTableError, match=r"data-1.lance has no format Paimon writes"):
        read_file(FileIO.get(str(tmp_path)), str(bad))


def test_a_damaged_orc_or_avro_file_is_named(formats, tmp_path):
    """A file cut short fails as unreadable, naming it, whatever its decoder raises (for Avro: EOFError,
    or the codec's own error)."""
    import glob
    from dbt_paimon.store.common.errors import CorruptTableError
    from dbt_paimon.store.format.file_format import read_file
    from dbt_paimon.store.common.fileio import FileIO

    for ext in ("avro", "orc"):
        source = sorted(glob.glob(f"{formats.paths['per_level' if ext == 'avro' else 'append_orc']}/**/*.{ext}",
                                  recursive=True))[0]
        data = open(source, "rb").read()
        cut = tmp_path / f"data-cut.{ext}"
        cut.write_bytes(data[: len(data) * 2 // 3])
        with pytest.raises(CorruptTableError, match=rf"data-cut.{ext} is unreadable"):
            read_file(FileIO.get(str(tmp_path)), str(cut))


def test_their_format_options_are_kept_and_ours_refused(formats, tmp_path):
    """A table's stored format options stand through our option changes (we write Parquet beside
    their files); a table we create is Parquet, and asking for another format is refused by name."""
    from dbt_paimon.store.common.errors import SchemaError

    for name, option in (("orc", "file.format"), ("per_level", "file.format.per.level")):
        table = FileStoreTable.open(formats.paths[name])
        table.alter_options({"snapshot.num-retained.max": "50"})
        options = FileStoreTable.open(formats.paths[name]).schema.options
        assert options[option] == TABLES[name][0][option] and options["snapshot.num-retained.max"] == "50"
        with pytest.raises(SchemaError, match=rf"option '{option}' (must be one of|cannot be set)"):
            table.alter_options({option: "parquet" if option == "file.format.per.level" else "avro"})
    for option, value in (("file.format", "orc"), ("file.format.per.level", "0:avro")):
        with pytest.raises(SchemaError, match=rf"option '{option}' (must be one of|cannot be set).*dbt-paimon writes"):
            FileStoreTable.create(str(tmp_path / option), SCHEMA, KEY, PARTITION, {option: value})
        assert not (tmp_path / option).exists()


def test_orc_instants_a_jvm_in_another_zone_wrote(tmp_path, monkeypatch):
    """Paimon stores an ORC TIMESTAMP WITH LOCAL TIME ZONE as its JVM's local reading of the UTC wall
    clock, and reads it back the same way: a JVM in Asia/Shanghai (its own, for this test) writes, and
    we read it as a Paimon reader on a host in that zone does ($TZ), as that JVM reads it."""
    import datetime as dt
    import os

    from .fetch_jar import oracle_jars
    from .javapaimon import JavaPaimon

    written = [{"k": 1, "ts": dt.datetime(2024, 3, 10, 1, 30, 0, 123456),
                "ltz": dt.datetime(2024, 3, 10, 1, 30, tzinfo=dt.timezone.utc)},
               {"k": 2, "ts": dt.datetime(2001, 7, 1, 23, 0),
                "ltz": dt.datetime(1999, 12, 31, 20, tzinfo=dt.timezone.utc)}]
    path = str(tmp_path / "wh" / "db.db" / "zoned")
    create = {"fields": [("k", "INT NOT NULL"), ("ts", "TIMESTAMP(6)"), ("ltz", "TIMESTAMP(6) WITH LOCAL TIME ZONE")],
              "primary_keys": ["k"], "partition_keys": [], "options": {"bucket": "1", "file.format": "orc"}}
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", f"{os.environ.get('JAVA_TOOL_OPTIONS', '')} -Duser.timezone=Asia/Shanghai")
    (tmp_path / "jvm").mkdir()
    shanghai = JavaPaimon(oracle_jars(), str(tmp_path / "jvm"))
    try:
        done = shanghai.run([Write(path, written, create), Read(path)])
    finally:
        shanghai.close()
    assert done[0] is None, done
    assert done[1].to_pylist() == written  # the JVM there reads back what it wrote
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    assert FileStoreTable.open(path).to_arrow().sort_by("k").to_pylist() == written
    monkeypatch.setenv("TZ", "UTC")  # a reader in another zone reads other instants (Paimon's too)
    assert FileStoreTable.open(path).to_arrow().sort_by("k").column("ltz").to_pylist() != [r["ltz"] for r in written]
