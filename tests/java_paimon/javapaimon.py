"""Java Paimon (the release pinned in reference.py) as an oracle: compile JavaPaimon.java once, run
batches of read/write requests in one JVM.

A JVM start costs 1-2 s of CPU, so one JVM serves the test session (started at the first request,
stopped by close()), and a test gathers its requests into batches. Rows cross as JSON lines typed by
the table's fields as Java reports them, and come back as Arrow tables comparable with our reader's
`FileStoreTable.to_arrow()`.
"""

from __future__ import annotations

import base64
import datetime as dt
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from decimal import Decimal

import pyarrow as pa

from dbt_paimon.store.common.types import type_from_json
from tests.oracle import rows

from .fetch_jar import CACHE

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "JavaPaimon.java")
# Paimon's bundle leaves out Hadoop (its Configuration and FileSystem classes) and the SLF4J API, as an
# engine provides them; pyspark ships both.
HADOOP_JARS = ("hadoop-client-api-*.jar", "hadoop-client-runtime-*.jar", "slf4j-api-*.jar")


class JavaError(Exception):
    """A request Java Paimon failed; the message is Java's exception chain."""


@dataclass(frozen=True)
class Read:
    path: str
    options: dict | None = None  # Paimon dynamic options: scan.snapshot-id, scan.tag-name, ...
    equal: dict | None = None  # {column: value}: a predicate Paimon prunes files with (by their stats)
    catalog: dict | None = None  # the catalog's options: an object store's settings (s3.endpoint, ...)
    # the read returns records with their kinds (an incremental read: -U and -D records are its
    # answer): a list of dicts, each with `_kind`, instead of an Arrow table
    records: bool = False


@dataclass(frozen=True)
class Changes:
    """The table's change stream from snapshot `start` on, as Paimon's streaming read gives it (the
    changelog files of each snapshot that has some, whatever its changelog-producer): a list of
    dicts, each change's fields with `_kind` (+I/-U/+U/-D) and `_snapshot` (the snapshot read)."""
    path: str
    start: int = 1
    catalog: dict | None = None
    consumer: str | None = None  # a consumer-id: the read starts where it stopped, and records where it stops


@dataclass(frozen=True)
class Write:
    """Rows written by one BatchWriteBuilder commit; `create` (fields as [(name, Paimon SQL type)],
    primary_keys, partition_keys, options) creates the table first. A row may hold `_kind` (+I/-U/+U/-D).
    On a dynamic-bucket table Java assigns buckets with its HashBucketAssigner unless assign_buckets is
    False (then BatchTableWrite.write(row) is left to pick the bucket, which Java refuses)."""
    path: str
    rows: list
    create: dict | None = None
    assign_buckets: bool = True


@dataclass(frozen=True)
class Maintain:
    """What Paimon's procedures do, through its table API: `compact` (full, every bucket, one COMPACT
    commit), `expire` (snapshots, keeping the newest `arg`), `tag` (tag `arg` of the latest snapshot),
    `rollback` (to tag `arg`), `create_branch` (arg {"name": B[, "tag": T]}), `fast_forward` and
    `delete_branch` (branch `arg`). A path `<table>$branch_<b>` is that branch of the table, for every
    request, as Paimon's catalog names it."""
    path: str
    action: str
    arg: object = None
    catalog: dict | None = None


def _classpath(jar: str) -> list[str]:
    import pyspark

    jars_dir = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    hadoop = [p for pattern in HADOOP_JARS for p in glob.glob(os.path.join(jars_dir, pattern))]
    if len(hadoop) != len(HADOOP_JARS):
        raise RuntimeError(f"pyspark's {jars_dir} lacks one of {HADOOP_JARS}: found {hadoop}")
    return [jar] + hadoop


def compile_java(class_name: str, source: str, classpath: list[str], prefix: str) -> str:
    """Classes of one Java source (its text) under .work/java-paimon/<prefix>-<digest>/, keyed by the
    source's digest so an edit recompiles (javac costs seconds); older builds are removed."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:12]
    out = os.path.join(CACHE, f"{prefix}-{digest}")
    if os.path.exists(os.path.join(out, f"{class_name}.class")):
        return out
    tmp = tempfile.mkdtemp(dir=CACHE)
    java = os.path.join(tmp, f"{class_name}.java")
    with open(java, "w") as f:
        f.write(source)
    done = subprocess.run(["javac", "-nowarn", "-d", tmp, "-cp", os.pathsep.join(classpath), java],
                          capture_output=True, text=True)
    os.remove(java)
    if done.returncode != 0:
        shutil.rmtree(tmp)
        raise RuntimeError(f"javac failed on {class_name}:\n{done.stderr[-3000:]}")
    if os.path.exists(out):  # another run compiled it meanwhile
        shutil.rmtree(tmp)
    else:
        os.replace(tmp, out)
    for stale in glob.glob(os.path.join(CACHE, f"{prefix}-*")):  # builds of earlier versions of the source
        if stale != out:
            shutil.rmtree(stale, ignore_errors=True)
    return out


def _compile(classpath: list[str]) -> str:
    with open(SOURCE) as f:
        return compile_java("JavaPaimon", f.read(), classpath, "classes")


_SIMPLE = {"BOOLEAN": pa.bool_(), "TINYINT": pa.int8(), "SMALLINT": pa.int16(), "INT": pa.int32(),
           "BIGINT": pa.int64(), "FLOAT": pa.float32(), "DOUBLE": pa.float64(), "STRING": pa.string(),
           "BYTES": pa.binary(), "DATE": pa.date32()}


def _arrow_type(sql) -> pa.DataType:
    """Arrow type of a Paimon type as Java prints it (`BIGINT NOT NULL`, `DECIMAL(10, 2)`, `TIMESTAMP(6)`,
    `TIMESTAMP(6) WITH LOCAL TIME ZONE`; a nested type as the schema file's object), as our reader maps it."""
    if isinstance(sql, dict):  # its children's names and nullability as Java gives them
        return type_from_json(sql).to_arrow()
    sql = sql.removesuffix(" NOT NULL")
    if sql in _SIMPLE:
        return _SIMPLE[sql]
    m = re.fullmatch(r"DECIMAL\((\d+), (\d+)\)", sql)
    if m:
        return pa.decimal128(int(m.group(1)), int(m.group(2)))
    m = re.fullmatch(r"TIMESTAMP\(([0-6])\)( WITH LOCAL TIME ZONE)?", sql)
    if m:
        return pa.timestamp("us" if int(m.group(1)) > 3 else "ms", tz="UTC" if m.group(2) else None)
    raise ValueError(f"the Java oracle does not compare type {sql}")


def _from_json(value, arrow: pa.DataType):
    if value is None:
        return None
    if pa.types.is_map(arrow):  # [[key, value], ...]
        return [(_from_json(k, arrow.key_type), _from_json(v, arrow.item_type)) for k, v in value]
    if pa.types.is_list(arrow):
        return [_from_json(e, arrow.value_type) for e in value]
    if pa.types.is_struct(arrow):
        return {arrow.field(i).name: _from_json(value[arrow.field(i).name], arrow.field(i).type)
                for i in range(arrow.num_fields)}
    if pa.types.is_decimal(arrow):
        return Decimal(value)
    if pa.types.is_binary(arrow):
        return base64.b64decode(value)
    if pa.types.is_date(arrow):
        return dt.date.fromisoformat(value)
    if pa.types.is_timestamp(arrow):
        wall = dt.datetime.fromisoformat(value)
        return wall.replace(tzinfo=dt.timezone.utc) if arrow.tz else wall
    return value


def _to_json(value):
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dt.datetime) and value.tzinfo is not None:  # Java takes UTC wall-clock time
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat()
    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    raise TypeError(f"no JSON form for {value!r}")


def _parse_changes(lines: list[str]) -> list[dict]:
    fields = [(f["name"], _arrow_type(f["type"])) for f in json.loads(lines[0])["fields"]]
    changes = []
    for line in lines[1:]:
        r = json.loads(line)
        changes.append({**({"_snapshot": r["_snapshot"]} if "_snapshot" in r else {}), "_kind": r["_kind"],
                        **{name: _from_json(r[name], arrow) for name, arrow in fields}})
    return changes


def _parse_read(lines: list[str]) -> pa.Table:
    header = json.loads(lines[0])
    fields = [pa.field(f["name"], _arrow_type(f["type"])) for f in header["fields"]]
    rows = [json.loads(line) for line in lines[1:]]
    # A batch read merges versions and drops retractions: a -D or -U row here means Java misread the merge.
    retracted = [r for r in rows if r["_kind"] in ("-D", "-U")]
    if retracted:
        raise AssertionError(f"Java's batch read returned retracting rows: {retracted[:3]}")
    columns = [[_from_json(r[f.name], f.type) for r in rows] for f in fields]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, fields)], schema=pa.schema(fields))


class JavaPaimon:
    def __init__(self, jars: str | list[str], workdir: str):
        """jars: Paimon's jar first, then its file systems' (paimon-s3)."""
        jars = [jars] if isinstance(jars, str) else list(jars)
        classpath = _classpath(jars[0]) + jars[1:]
        self.classpath = os.pathsep.join([_compile(classpath)] + classpath)
        self.workdir = workdir
        self._jvm: subprocess.Popen | None = None
        self._log = os.path.join(workdir, "java.log")

    def _serve(self, request_file: str) -> None:
        """Has the session's JVM run one request file (started first if it is not running)."""
        if self._jvm is None or self._jvm.poll() is not None:
            # A JVM on a loaded 2-core machine: C1 only and the serial GC cost ~40% less CPU
            with open(self._log, "a") as log:
                self._jvm = subprocess.Popen(
                    ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", self.classpath, "JavaPaimon"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            self._jvm.stdin.write(request_file + "\n")
            self._jvm.stdin.flush()
            answer = self._jvm.stdout.readline()
        except BrokenPipeError:
            answer = ""
        if answer != "done\n":
            code = self._jvm.wait(10)
            with open(self._log) as f:
                raise RuntimeError(f"the Java oracle exited with {code}:\n{f.read()[-3000:]}")

    def close(self) -> None:
        if self._jvm is not None:
            self._jvm.stdin.close()
            try:
                self._jvm.wait(10)
            except subprocess.TimeoutExpired:
                self._jvm.kill()
            self._jvm = None

    def run(self, requests: list[Read | Changes | Write | Maintain]) -> list:
        """Run the requests in order in the session's JVM. Per request: an Arrow table (Read), a list of
        changes (Changes), None (Write, Maintain), or
        the JavaError it failed with, returned rather than raised so a batch can hold expected failures."""
        batch = tempfile.mkdtemp(dir=self.workdir)
        encoded = []
        for i, r in enumerate(requests):
            out = os.path.join(batch, f"out-{i}.jsonl")
            if isinstance(r, Read):
                encoded.append({"op": "read", "path": r.path, "out": out, "options": r.options or {}, "equal": r.equal,
                                "catalog": r.catalog or {}})
            elif isinstance(r, Changes):
                encoded.append({"op": "changes", "path": r.path, "out": out, "from": r.start,
                                "catalog": r.catalog or {}, "consumer": r.consumer})
            elif isinstance(r, Maintain):
                encoded.append({"op": "maintain", "path": r.path, "out": out, "action": r.action, "arg": r.arg,
                                "catalog": r.catalog or {}})
            else:
                create = None if r.create is None else {
                    "fields": [{"name": n, "type": t} for n, t in r.create["fields"]],
                    "primaryKeys": r.create.get("primary_keys", []),
                    "partitionKeys": r.create.get("partition_keys", []),
                    "options": r.create.get("options", {})}
                encoded.append({"op": "write", "path": r.path, "out": out, "create": create, "rows": r.rows,
                                "assignBuckets": r.assign_buckets})
        request_file = os.path.join(batch, "requests.json")
        with open(request_file, "w") as f:
            json.dump(encoded, f, default=_to_json)
        self._serve(request_file)
        results = []
        for r, e in zip(requests, encoded):
            with open(e["out"]) as f:
                lines = f.read().splitlines()
            first = json.loads(lines[0])
            if "error" in first:
                results.append(JavaError(first["error"]))
            elif isinstance(r, Changes) or (isinstance(r, Read) and r.records):
                results.append(_parse_changes(lines))
            else:
                results.append(_parse_read(lines) if isinstance(r, Read) else None)
        return results

    def read(self, *requests: Read | str) -> list[pa.Table]:
        """Read tables (a path or a Read each) in one JVM; raise the first failure."""
        results = self.run([Read(r) if isinstance(r, str) else r for r in requests])
        for r in results:
            if isinstance(r, JavaError):
                raise r
        return results


def assert_same(java_table: pa.Table, ours: pa.Table, key: list[str], expected: list[dict] | None = None) -> None:
    """Java's read equals ours: same columns, same types, same rows; and both equal `expected` (rows
    sorted by key) when given, so a value both readers got wrong still fails."""
    assert java_table.schema.names == ours.schema.names
    assert java_table.schema.types == ours.schema.types
    assert rows(java_table, key) == rows(ours, key)
    if expected is not None:
        assert rows(ours, key) == expected
