"""Writers other than dbt-paimon for tests/engine/test_other_writers.py, and where keys live.

Neither Java Paimon's batch write through the oracle (tests/java_paimon) nor pypaimon 2.1.0 can write a
cross-partition (KEY_DYNAMIC) table: Java's `BatchTableWrite.write(row)` refuses every dynamic-bucket
table, the oracle only assigns buckets itself on a HASH_DYNAMIC one, and pypaimon refuses
CROSS_PARTITION writes outright ("require a persistent global primary-key index"). A real
cross-partition writer (Paimon's Flink sink) decides each row's (partition, bucket) with its own key
index and then calls `TableWrite.write(row, bucket)`. `JavaWriter` is that last call: Java Paimon's
own writer and commit, with the placement given by the test, so the test writes exactly what a
correct cross-partition writer would (an update where the key lives, a move as -D there plus +I in the
new partition). Java also compacts a bucket when it holds too many sorted runs, as any writer does.

One JVM serves the whole test module (a JVM start costs 1-2 s): a request is one JSON line on its stdin,
the answer one JSON line on its stdout.
"""

from __future__ import annotations

import os
import subprocess
from collections import defaultdict

from dbt_paimon.store.table import FileStoreTable
from tests.java_paimon.javapaimon import JavaError, compile_java
from tests.json_lines import ask

CLASS = "OtherWriter"
SOURCE = (r"""
import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.HashMap;
import java.util.Map;

import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.options.Options;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

/** Per stdin line {"path": P, "rows": [{column: value, "_kind": "+I", "_bucket": 3}], "options": {...}}: one
 *  batch commit of the rows, each written into its row's partition and the given bucket, with the dynamic
 *  table options given (optional); answers {"ok": true} or {"error": ...}. */
public class OtherWriter {
    public static void main(String[] args) throws Exception {
        ObjectMapper json = new ObjectMapper();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);  // whatever else prints stays off the answer channel
        for (String line; (line = in.readLine()) != null; ) {
            String answer;
            try {
                write(json.readTree(line));
                answer = "{\"ok\": true}";
            } catch (Throwable e) {
                StringBuilder chain = new StringBuilder();
                for (Throwable t = e; t != null; t = t.getCause()) {
                    chain.append(chain.length() == 0 ? "" : " <- ").append(t).append(" at ")
                         .append(t.getStackTrace().length > 0 ? t.getStackTrace()[0] : "?");
                }
                answer = json.writeValueAsString(Collections.singletonMap("error", chain.toString()));
            }
            answers.println(answer);
        }
    }

    private static void write(JsonNode request) throws Exception {
        File path = new File(request.get("path").asText());
        Options options = new Options();
        options.set("warehouse", path.getParentFile().getParent());
        String db = path.getParentFile().getName();
        FileStoreTable table;
        try (Catalog catalog = CatalogFactory.createCatalog(CatalogContext.create(options))) {
            table = (FileStoreTable) catalog.getTable("""
          r"""Identifier.create(db.substring(0, db.length() - 3), path.getName()));
        }
        JsonNode dynamic = request.get("options");
        if (dynamic != null && !dynamic.isNull()) {
            Map<String, String> given = new HashMap<>();
            dynamic.fields().forEachRemaining(e -> given.put(e.getKey(), e.getValue().asText()));
            table = table.copy(given);
        }
        RowType type = table.rowType();
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
            for (JsonNode r : request.get("rows")) {
                GenericRow row = new GenericRow(RowKind.fromShortString(r.get("_kind").asText()), type.getFieldCount());
                for (int i = 0; i < type.getFieldCount(); i++) {
                    row.setField(i, value(r.get(type.getFields().get(i).name()), type.getTypeAt(i)));
                }
                write.write(row, r.get("_bucket").asInt());
            }
            commit.commit(write.prepareCommit());
        }
    }

    private static Object value(JsonNode v, DataType type) {
        if (v == null || v.isNull()) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN: return v.asBoolean();
            case INTEGER: return v.asInt();
            case BIGINT: return v.asLong();
            case CHAR: case VARCHAR: return BinaryString.fromString(v.asText());
            default: throw new IllegalArgumentException("OtherWriter does not write type " + type);
        }
    }
}
""")


class JavaWriter:
    """Java Paimon's BatchTableWrite/BatchTableCommit, rows placed by the caller. `classpath`:
    the Java oracle's (JavaPaimon.classpath: Paimon's jar and the Hadoop classes it needs)."""

    def __init__(self, classpath: str, workdir: str):
        classes = compile_java(CLASS, SOURCE, classpath.split(os.pathsep), "other-writer")
        self.classpath = os.pathsep.join([classes, classpath])
        self.log = os.path.join(workdir, "other-writer.log")
        self._proc: subprocess.Popen | None = None

    def write(self, path: str, rows: list[dict], options: dict | None = None) -> None:
        """One commit of `rows`, each a dict of the table's columns plus `_kind` (+I, +U, -U, -D) and
        `_bucket`; `options`: dynamic table options (`write-only`: no compaction, so one snapshot).
        Raises JavaError with Java's exception chain when Paimon refuses."""
        if self._proc is None:
            with open(self.log, "ab") as log:  # Java's stderr (its logging) goes to a file, never a full pipe
                self._proc = subprocess.Popen(
                    ["java", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m", "-cp", self.classpath, CLASS],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        answer = ask(self._proc, {"path": path, "rows": rows, "options": options}, self.log, "the Java writer")
        if "error" in answer:
            raise JavaError(answer["error"])

    def close(self) -> None:
        if self._proc is not None:
            self._proc.stdin.close()
            self._proc.wait(timeout=30)
            self._proc = None


def places(path: str) -> dict:
    """Every live row with where it lives: key -> [(partition value, bucket, row)], read split by split
    (one entry per (partition, bucket) the key is live in; a correct table has exactly one)."""
    table = FileStoreTable.open(path)
    [key] = table.schema.primary_keys
    reader = table.new_read()
    out = defaultdict(list)
    for split in table.plan(batch_read=True).splits:
        [part] = split.partition_values
        for row in reader.read_split(split).to_pylist():
            out[row[key]].append((part, split.bucket, row))
    return dict(out)


def buckets_by_partition(path: str) -> dict:
    """partition value -> buckets holding files (live rows or not) in the latest snapshot."""
    out = defaultdict(set)
    for split in FileStoreTable.open(path).plan().splits:
        out[split.partition_values[0]].add(split.bucket)
    return dict(out)
