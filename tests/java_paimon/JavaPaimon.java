import java.io.BufferedReader;
import java.io.File;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.paimon.catalog.Catalog;
import org.apache.paimon.catalog.CatalogContext;
import org.apache.paimon.catalog.CatalogFactory;
import org.apache.paimon.catalog.Identifier;
import org.apache.paimon.data.BinaryRow;
import org.apache.paimon.data.BinaryString;
import org.apache.paimon.data.Decimal;
import org.apache.paimon.data.GenericArray;
import org.apache.paimon.data.GenericMap;
import org.apache.paimon.data.GenericRow;
import org.apache.paimon.data.InternalArray;
import org.apache.paimon.data.InternalMap;
import org.apache.paimon.data.InternalRow;
import org.apache.paimon.data.Timestamp;
import org.apache.paimon.disk.IOManager;
import org.apache.paimon.index.HashBucketAssigner;
import org.apache.paimon.manifest.ManifestEntry;
import org.apache.paimon.options.ExpireConfig;
import org.apache.paimon.options.Options;
import org.apache.paimon.predicate.PredicateBuilder;
import org.apache.paimon.reader.RecordReader;
import org.apache.paimon.schema.Schema;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.paimon.shade.jackson2.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.paimon.table.BucketMode;
import org.apache.paimon.table.FileStoreTable;
import org.apache.paimon.table.Table;
import org.apache.paimon.table.sink.BatchTableCommit;
import org.apache.paimon.table.sink.BatchTableWrite;
import org.apache.paimon.table.sink.BatchWriteBuilder;
import org.apache.paimon.table.sink.RowPartitionKeyExtractor;
import org.apache.paimon.table.source.ReadBuilder;
import org.apache.paimon.table.source.Split;
import org.apache.paimon.table.source.StreamTableScan;
import org.apache.paimon.types.ArrayType;
import org.apache.paimon.types.DataField;
import org.apache.paimon.types.DataType;
import org.apache.paimon.types.DataTypeJsonParser;
import org.apache.paimon.types.DataTypeRoot;
import org.apache.paimon.types.DecimalType;
import org.apache.paimon.types.MapType;
import org.apache.paimon.types.RowKind;
import org.apache.paimon.types.RowType;

/**
 * Apache Paimon's Java core (the release pinned in reference.py, fetched through Maven) as a test oracle for
 * dbt-paimon.
 *
 * <p>One JVM serves a whole test session, because each JVM start costs 1-2 s of CPU: {@code java JavaPaimon}
 * reads one request file's path per line of its standard input and answers {@code done} on its standard output
 * once the file's requests are done ({@code java JavaPaimon requests.json} runs one file and exits). A request file
 * holds a JSON array of requests, each of which may carry {@code "catalog": {...}}: the catalog's options (an
 * object store's settings).
 * <ul>
 *   <li>{@code {"op": "read", "path": P, "out": F, "options": {...}, "equal": {column: value}}}: F gets one JSON
 *       line with the table's fields ({@code {"fields": [{"name", "type"}]}}), then one JSON line per row, each
 *       with {@code _kind} (+I, -U, +U, -D). {@code options} are dynamic options ({@code scan.snapshot-id},
 *       {@code scan.tag-name}); {@code equal}, optional, is a predicate Paimon prunes files with.
 *   <li>{@code {"op": "changes", "path": P, "out": F, "from": N}}: the table's change stream as Paimon's streaming
 *       read gives it from snapshot N on ({@code scan.mode} from-snapshot: the changelog files of each snapshot
 *       that has some, input or lookup): F gets the fields line as {@code read} writes it, then one JSON line per
 *       change with {@code _kind} and {@code _snapshot} (the snapshot it was read from). With
 *       {@code "consumer": id} the read is consumer {@code id}'s: it starts where that consumer stopped, and
 *       records where it stops.
 *   <li>{@code {"op": "write", "path": P, "out": F, "create": {"fields": [{"name", "type"}], "primaryKeys",
 *       "partitionKeys", "options"}, "rows": [{...}], "assignBuckets": true}}: creates the table if {@code create}
 *       is given, then writes the rows (optional {@code _kind}) as one batch commit. F gets {@code {"ok": true}}.
 *   <li>{@code {"op": "maintain", "path": P, "out": F, "action": A, "arg": X}}: what Paimon's procedures do, through
 *       its table API: {@code compact} (a full compaction of every bucket that has files, one COMPACT commit),
 *       {@code expire} (snapshot expiration keeping the newest X), {@code tag} (tag X of the latest snapshot),
 *       {@code rollback} (to tag X). F gets {@code {"ok": true}}.
 * </ul>
 * Values in JSON: numbers, strings, booleans; DECIMAL as a string, BYTES as base64, DATE and TIMESTAMP as
 * ISO-8601 strings (a TIMESTAMP WITH LOCAL TIME ZONE as its UTC wall-clock time).
 * A request that fails writes {@code {"error": "..."}} (the cause chain) to its F and the batch goes on, so a test
 * can assert which failure Paimon reports.
 */
public class JavaPaimon {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        if (args.length == 1) {
            runFile(args[0]);
            return;
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream answers = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);  // whatever else prints stays off the answer channel
        for (String line; (line = in.readLine()) != null; ) {
            runFile(line);
            answers.println("done");
        }
    }

    private static void runFile(String requests) throws Exception {
        for (JsonNode request : JSON.readTree(new File(requests))) {
            List<String> lines = new ArrayList<>();
            try {
                String op = request.get("op").asText();
                if (op.equals("read")) {
                    read(request, lines);
                } else if (op.equals("changes")) {
                    changes(request, lines);
                } else if (op.equals("write")) {
                    write(request);
                    lines.add("{\"ok\": true}");
                } else if (op.equals("maintain")) {
                    maintain(request);
                    lines.add("{\"ok\": true}");
                } else {
                    throw new IllegalArgumentException("unknown op " + op);
                }
            } catch (Throwable e) {
                lines.clear();
                ObjectNode error = JSON.createObjectNode();
                error.put("error", causes(e));
                lines.add(JSON.writeValueAsString(error));
            }
            Files.write(new File(request.get("out").asText()).toPath(), lines, StandardCharsets.UTF_8);
        }
    }

    /** The exception chain, then where in Paimon the root cause was thrown, so a test can name the failure. */
    private static String causes(Throwable e) {
        StringBuilder out = new StringBuilder();
        Throwable root = e;
        for (Throwable t = e; t != null; t = t.getCause()) {
            out.append(out.length() == 0 ? "" : " <- caused by: ").append(t.getClass().getName()).append(": ")
                    .append(t.getMessage());
            root = t;
        }
        int frames = 0;
        for (StackTraceElement frame : root.getStackTrace()) {
            if (frame.getClassName().startsWith("org.apache.paimon.") && frames++ < 8) {
                out.append("\n  at ").append(frame.getClassName()).append('.').append(frame.getMethodName());
            }
        }
        return out.toString();
    }

    /**
     * The table at <warehouse>/<db>.db/<name> (a local path or a URI such as s3://bucket/...), through the
     * filesystem catalog as a user would open it; {@code options} are the catalog's (an object store's settings).
     */
    private static Catalog catalog(String table, Map<String, String> options) throws Exception {
        Options catalogOptions = Options.fromMap(options);
        catalogOptions.set("warehouse", parent(parent(table)));
        return CatalogFactory.createCatalog(CatalogContext.create(catalogOptions));
    }

    private static String parent(String path) {
        String trimmed = path.endsWith("/") ? path.substring(0, path.length() - 1) : path;
        return trimmed.substring(0, trimmed.lastIndexOf('/'));
    }

    private static Identifier identifier(String table) {
        String db = parent(table).substring(parent(table).lastIndexOf('/') + 1);
        String name = table.substring(table.lastIndexOf('/') + 1);
        return Identifier.create(db.substring(0, db.length() - ".db".length()), name);
    }

    private static Map<String, String> stringMap(JsonNode node) {
        Map<String, String> out = new HashMap<>();
        if (node != null && !node.isNull()) {
            node.fields().forEachRemaining(e -> out.put(e.getKey(), e.getValue().asText()));
        }
        return out;
    }

    private static FileStoreTable open(JsonNode request, Map<String, String> options) throws Exception {
        String path = request.get("path").asText();
        FileStoreTable table;
        try (Catalog catalog = catalog(path, stringMap(request.get("catalog")))) {
            table = (FileStoreTable) catalog.getTable(identifier(path));
        }
        return table.copy(options);
    }

    /** A table or one of its system tables ({@code <path>$audit_log}), with dynamic options. */
    private static Table openAny(JsonNode request, Map<String, String> options) throws Exception {
        String path = request.get("path").asText();
        try (Catalog catalog = catalog(path.split("\\$")[0], stringMap(request.get("catalog")))) {
            return catalog.getTable(identifier(path)).copy(options);
        }
    }

    /** The fields line of {@code read} and {@code changes}. */
    private static void header(RowType rowType, List<String> lines) throws Exception {
        ObjectNode header = JSON.createObjectNode();
        ArrayNode fields = header.putArray("fields");
        for (DataField f : rowType.getFields()) {
            fields.addObject().put("name", f.name()).set("type", typeJson(f.type()));
        }
        lines.add(JSON.writeValueAsString(header));
    }

    /** A type as the schema file holds it: an atomic type's SQL text, a nested type's object. */
    private static JsonNode typeJson(DataType type) {
        if (type instanceof ArrayType) {
            ObjectNode node = JSON.createObjectNode().put("type", type.isNullable() ? "ARRAY" : "ARRAY NOT NULL");
            node.set("element", typeJson(((ArrayType) type).getElementType()));
            return node;
        } else if (type instanceof MapType) {
            ObjectNode node = JSON.createObjectNode().put("type", type.isNullable() ? "MAP" : "MAP NOT NULL");
            node.set("key", typeJson(((MapType) type).getKeyType()));
            node.set("value", typeJson(((MapType) type).getValueType()));
            return node;
        } else if (type instanceof RowType) {
            ObjectNode node = JSON.createObjectNode().put("type", type.isNullable() ? "ROW" : "ROW NOT NULL");
            ArrayNode fields = node.putArray("fields");
            for (DataField f : ((RowType) type).getFields()) {
                fields.addObject().put("id", f.id()).put("name", f.name()).set("type", typeJson(f.type()));
            }
            return node;
        }
        return JSON.getNodeFactory().textNode(type.toString());
    }

    /** One row as a JSON line: its kind, then its fields. */
    private static String rowLine(InternalRow row, RowType rowType, ObjectNode out) {
        out.put("_kind", row.getRowKind().shortString());
        for (int i = 0; i < rowType.getFieldCount(); i++) {
            Object value = InternalRow.createFieldGetter(rowType.getTypeAt(i), i).getFieldOrNull(row);
            out.set(rowType.getFields().get(i).name(), JSON.valueToTree(toJson(value, rowType.getTypeAt(i))));
        }
        return out.toString(); // Jackson's JSON text of the node
    }

    private static void changes(JsonNode request, List<String> lines) throws Exception {
        Map<String, String> options = new HashMap<>();
        options.put("scan.mode", "from-snapshot");
        options.put("scan.snapshot-id", request.get("from").asText());
        JsonNode consumer = request.get("consumer");
        if (consumer != null && !consumer.isNull()) {
            options.put("consumer-id", consumer.asText());
        }
        FileStoreTable table = open(request, options);
        RowType rowType = table.rowType();
        header(rowType, lines);
        Long latest = table.snapshotManager().latestSnapshotId();
        ReadBuilder builder = table.newReadBuilder();
        StreamTableScan scan = builder.newStreamScan();
        // each plan() reads the next snapshot with changes (the first only positions the scan), skipping
        // those without; checkpoint() is then the one after it
        for (int plans = 0; latest != null && plans < 10_000; plans++) {
            Long next = scan.checkpoint();
            if (next != null && next > latest) {
                break;
            }
            List<Split> splits = scan.plan().splits();
            Long snapshot = scan.checkpoint() == null ? null : scan.checkpoint() - 1;
            try (RecordReader<InternalRow> reader = builder.newRead().createReader(splits)) {
                reader.forEachRemaining(row -> {
                    ObjectNode out = JSON.createObjectNode();
                    out.put("_snapshot", snapshot);
                    lines.add(rowLine(row, rowType, out));
                });
            }
        }
        if (consumer != null && !consumer.isNull()) {
            // a consumer records the snapshot it reads next (consumer/consumer-<id>), which expiration keeps
            scan.notifyCheckpointComplete(scan.checkpoint());
        }
    }

    private static void read(JsonNode request, List<String> lines) throws Exception {
        Table table = openAny(request, stringMap(request.get("options")));
        RowType rowType = table.rowType();
        header(rowType, lines);
        ReadBuilder builder = table.newReadBuilder();
        JsonNode filter = request.get("equal");
        if (filter != null && !filter.isNull()) {
            // {"field": value}: Paimon prunes files by their stats with this predicate (rows are not filtered)
            String name = filter.fieldNames().next();
            int index = rowType.getFieldIndex(name);
            Object value = fromJson(filter.get(name), rowType.getTypeAt(index));
            builder.withFilter(new PredicateBuilder(rowType).equal(index, value));
        }
        try (RecordReader<InternalRow> reader = builder.newRead().createReader(builder.newScan().plan())) {
            reader.forEachRemaining(row -> lines.add(rowLine(row, rowType, JSON.createObjectNode())));
        }
    }

    private static Object toJson(Object value, DataType type) {
        if (value instanceof Integer && type.getTypeRoot() == DataTypeRoot.DATE) {
            return LocalDate.ofEpochDay((Integer) value).toString();
        } else if (value instanceof BinaryString) {
            return value.toString();
        } else if (value instanceof Decimal) {
            return ((Decimal) value).toBigDecimal().toPlainString();
        } else if (value instanceof Timestamp) {
            return ((Timestamp) value).toLocalDateTime().toString();
        } else if (value instanceof InternalArray) {
            DataType elementType = ((ArrayType) type).getElementType();
            InternalArray array = (InternalArray) value;
            InternalArray.ElementGetter getter = InternalArray.createElementGetter(elementType);
            List<Object> out = new ArrayList<>();
            for (int i = 0; i < array.size(); i++) {
                out.add(toJson(getter.getElementOrNull(array, i), elementType));
            }
            return out;
        } else if (value instanceof InternalMap) {  // [[key, value], ...] in the map's order
            MapType mapType = (MapType) type;
            InternalMap map = (InternalMap) value;
            List<Object> keys = (List<Object>) toJson(map.keyArray(), new ArrayType(mapType.getKeyType()));
            List<Object> values = (List<Object>) toJson(map.valueArray(), new ArrayType(mapType.getValueType()));
            List<Object> out = new ArrayList<>();
            for (int i = 0; i < keys.size(); i++) {
                out.add(java.util.Arrays.asList(keys.get(i), values.get(i)));
            }
            return out;
        } else if (value instanceof InternalRow) {
            RowType rowType = (RowType) type;
            InternalRow row = (InternalRow) value;
            Map<String, Object> out = new LinkedHashMap<>();
            for (int i = 0; i < rowType.getFieldCount(); i++) {
                Object field = InternalRow.createFieldGetter(rowType.getTypeAt(i), i).getFieldOrNull(row);
                out.put(rowType.getFields().get(i).name(), toJson(field, rowType.getTypeAt(i)));
            }
            return out;
        }
        // Boolean, Byte, Short, Integer, Long, Float, Double; byte[] becomes base64 text. A timestamp with local
        // time zone is written as its UTC wall-clock time.
        return value;
    }

    private static void write(JsonNode request) throws Exception {
        String path = request.get("path").asText();
        try (Catalog catalog = catalog(path, stringMap(request.get("catalog")))) {
            JsonNode create = request.get("create");
            if (create != null && !create.isNull()) {
                Schema.Builder schema = Schema.newBuilder();
                for (JsonNode f : create.get("fields")) {
                    DataType type = DataTypeJsonParser.parseDataType(f.get("type"));
                    schema.column(f.get("name").asText(), type);
                }
                List<String> pk = new ArrayList<>();
                create.path("primaryKeys").forEach(k -> pk.add(k.asText()));
                List<String> partition = new ArrayList<>();
                create.path("partitionKeys").forEach(k -> partition.add(k.asText()));
                schema.primaryKey(pk).partitionKeys(partition).options(stringMap(create.get("options")));
                catalog.createDatabase(identifier(path).getDatabaseName(), true);
                catalog.createTable(identifier(path), schema.build(), false);
            }
            FileStoreTable table = (FileStoreTable) catalog.getTable(identifier(path));
            writeRows(table, request);
        }
    }

    private static void maintain(JsonNode request) throws Exception {
        String path = request.get("path").asText();
        String action = request.get("action").asText();
        JsonNode arg = request.get("arg");
        try (Catalog catalog = catalog(path, stringMap(request.get("catalog")))) {
            FileStoreTable table = (FileStoreTable) catalog.getTable(identifier(path));
            if (action.equals("compact")) {
                // every (partition, bucket) with live files, level 0 included (a batch scan skips it on some tables)
                Map<String, ManifestEntry> buckets = new LinkedHashMap<>();
                for (ManifestEntry e : table.store().newScan().plan().files()) {
                    if (e.bucket() >= 0) {
                        buckets.putIfAbsent(e.partition().toString() + "/" + e.bucket(), e);
                    }
                }
                BatchWriteBuilder builder = table.newBatchWriteBuilder();
                try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit()) {
                    for (ManifestEntry e : buckets.values()) {
                        write.compact(e.partition(), e.bucket(), true);
                    }
                    commit.commit(write.prepareCommit());
                }
            } else if (action.equals("expire")) {
                table.newExpireSnapshots().config(ExpireConfig.builder()
                        .snapshotRetainMax(arg.asInt()).snapshotRetainMin(arg.asInt()).build()).expire();
            } else if (action.equals("tag")) {
                table.createTag(arg.asText());
            } else if (action.equals("rollback")) {
                table.rollbackTo(arg.asText());
            } else if (action.equals("create_branch")) {  // arg: {"name": B} or {"name": B, "tag": T}
                if (arg.hasNonNull("tag")) {
                    table.createBranch(arg.get("name").asText(), arg.get("tag").asText());
                } else {
                    table.createBranch(arg.get("name").asText());
                }
            } else if (action.equals("fast_forward")) {
                table.fastForward(arg.asText());
            } else if (action.equals("delete_branch")) {
                table.deleteBranch(arg.asText());
            } else {
                throw new IllegalArgumentException("unknown maintenance action " + action);
            }
        }
    }

    private static void writeRows(FileStoreTable table, JsonNode request) throws Exception {
        RowType rowType = table.rowType();
        BatchWriteBuilder builder = table.newBatchWriteBuilder();
        // BatchTableWrite.write(row) refuses a dynamic-bucket table; Paimon's own dynamic-bucket sink (Flink)
        // assigns buckets with HashBucketAssigner and calls write(row, bucket): so do we.
        HashBucketAssigner assigner = null;
        RowPartitionKeyExtractor keys = new RowPartitionKeyExtractor(table.schema());
        if (table.bucketMode() == BucketMode.HASH_DYNAMIC && request.path("assignBuckets").asBoolean(true)) {
            assigner = new HashBucketAssigner(table.snapshotManager(), null, table.store().newIndexFileHandler(),
                    1, 1, 0, table.coreOptions().dynamicBucketTargetRowNum(),
                    table.coreOptions().dynamicBucketMaxBuckets());
        }
        try (BatchTableWrite write = builder.newWrite(); BatchTableCommit commit = builder.newCommit();
                IOManager io = IOManager.create(System.getProperty("java.io.tmpdir"))) {
            // the lookup a deletion-vector or changelog-producer 'lookup' table's compaction does
            // spills to local disk, which the writer must be given
            write.withIOManager(io);
            for (JsonNode json : request.get("rows")) {
                GenericRow row = new GenericRow(rowType.getFieldCount());
                for (int i = 0; i < rowType.getFieldCount(); i++) {
                    row.setField(i, fromJson(json.get(rowType.getFields().get(i).name()), rowType.getTypeAt(i)));
                }
                if (json.has("_kind")) {
                    row.setRowKind(RowKind.fromShortString(json.get("_kind").asText()));
                }
                if (assigner != null) {
                    write.write(row, assigner.assign(keys.partition(row), keys.trimmedPrimaryKey(row).hashCode()));
                } else {
                    write.write(row);
                }
            }
            commit.commit(write.prepareCommit());
        }
    }

    private static Object fromJson(JsonNode value, DataType type) {
        if (value == null || value.isNull()) {
            return null;
        }
        switch (type.getTypeRoot()) {
            case BOOLEAN: return value.asBoolean();
            case TINYINT: return (byte) value.asInt();
            case SMALLINT: return (short) value.asInt();
            case INTEGER: return value.asInt();
            case BIGINT: return value.asLong();
            case FLOAT: return (float) value.asDouble();
            case DOUBLE: return value.asDouble();
            case CHAR: case VARCHAR: return BinaryString.fromString(value.asText());
            case DECIMAL:
                DecimalType d = (DecimalType) type;
                return Decimal.fromBigDecimal(new BigDecimal(value.asText()), d.getPrecision(), d.getScale());
            case DATE: return (int) LocalDate.parse(value.asText()).toEpochDay();
            case BINARY: case VARBINARY: return Base64.getDecoder().decode(value.asText());
            // TIMESTAMP WITH LOCAL TIME ZONE arrives as UTC wall-clock time, which is what Paimon stores
            case TIMESTAMP_WITHOUT_TIME_ZONE: case TIMESTAMP_WITH_LOCAL_TIME_ZONE:
                return Timestamp.fromLocalDateTime(LocalDateTime.parse(value.asText()));
            case ARRAY: {
                DataType elementType = ((ArrayType) type).getElementType();
                Object[] elements = new Object[value.size()];
                for (int i = 0; i < elements.length; i++) {
                    elements[i] = fromJson(value.get(i), elementType);
                }
                return new GenericArray(elements);
            }
            case MAP: {  // [[key, value], ...]
                MapType mapType = (MapType) type;
                Map<Object, Object> entries = new LinkedHashMap<>();
                for (JsonNode entry : value) {
                    entries.put(fromJson(entry.get(0), mapType.getKeyType()), fromJson(entry.get(1), mapType.getValueType()));
                }
                return new GenericMap(entries);
            }
            case ROW: {
                RowType rowType = (RowType) type;
                GenericRow row = new GenericRow(rowType.getFieldCount());
                for (int i = 0; i < rowType.getFieldCount(); i++) {
                    row.setField(i, fromJson(value.get(rowType.getFields().get(i).name()), rowType.getTypeAt(i)));
                }
                return row;
            }
            default: throw new IllegalArgumentException("the oracle does not write type " + type);
        }
    }
}
