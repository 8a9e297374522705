package io.litemq.spark;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.time.format.DateTimeParseException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownFilters;
import org.apache.spark.sql.connector.read.SupportsPushDownLimit;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.datasources.v2.python.PythonDataSourceV2;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.types.ArrayType;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.MapType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/**
 * Column pruning, seq and timestamp pushdown (options and filters) and LIMIT, then the scan:
 * partitions from {@link Planner}, read by {@link ColumnarReader}.
 */
final class LiteMQScanBuilder
    implements ScanBuilder, SupportsPushDownRequiredColumns, SupportsPushDownFilters, SupportsPushDownLimit {
  static final String FIELD_METADATA = "litemq.indexedHeader";
  static final List<String> COLUMNS = Arrays.asList("seq", "timestamp", "key", "headers", "payload",
      "queue", "topic", "queue_id", "tags", "key_text", "headers_text");

  private final StructType tableSchema;
  private final CaseInsensitiveStringMap options;
  private final SupportsRead pyTable;
  private StructType schema;
  private long seqLo = 0, seqHi = Long.MAX_VALUE, timeLo = Long.MIN_VALUE, timeHi = Long.MAX_VALUE;
  private Filter[] pushed = new Filter[0];
  /** A typed load (its current schema and versions), or null; the filters the reader applies on its columns. */
  private final TypedLoad typed;
  private Filter[] typedFilters = new Filter[0];
  private long limit = Long.MAX_VALUE;
  private final List<Planner.Ref> refs;
  private java.util.Set<String> queues; // pushed queue = / IN, or null
  private java.util.Set<String> topics; // pushed topic = / IN, or null
  /** Filters the Python source pushes through its indexes (key, indexed headers): it reads. */
  private ScanBuilder delegate;

  /**
   * Why the JVM does not read this load (the Python source does), or null. Options the JVM
   * reader lacks, archives, encrypted queues, or {@code .option("reader", "python")}.
   */
  static String notForJvm(CaseInsensitiveStringMap options) {
    String r = options.get("reader");
    if (r != null && r.equalsIgnoreCase("python")) return "option reader=python";
    for (String o : new String[] {"key", "where"})
      if (options.containsKey(o)) return "option " + o;
    try {
      for (Planner.Ref ref : Planner.discover(paths(options)))
        if (!options.containsKey("encryptionKeyFile") && Planner.encrypted(ref))
          return "encrypted queue without a key (the Python source raises EncryptionError)";
    } catch (Planner.NotForJvm e) {
      return e.getMessage();
    } catch (RuntimeException e) {
      return "python checks the paths: " + e.getMessage();
    }
    return null;
  }

  static List<String> paths(CaseInsensitiveStringMap options) {
    List<String> out = new ArrayList<>();
    String many = options.get("paths");
    if (many != null && !many.isEmpty()) {
      try {
        String[] ps = new com.fasterxml.jackson.databind.ObjectMapper().readValue(many, String[].class);
        out.addAll(Arrays.asList(ps));
      } catch (IOException e) {
        for (String p : many.split(",")) if (!p.isEmpty()) out.add(p);
      }
    }
    String one = options.get("path");
    if (one != null && !one.isEmpty()) out.add(one);
    if (out.isEmpty()) throw new LiteMQException("no path given: use spark.read.format('litemq').load(path)");
    return out;
  }

  LiteMQScanBuilder(StructType schema, CaseInsensitiveStringMap options, SupportsRead pyTable,
      List<Planner.Ref> refs, TypedLoad typed) {
    this.tableSchema = schema;
    this.schema = schema;
    this.options = options;
    this.pyTable = pyTable;
    this.refs = refs;
    this.typed = typed;
    Long v = optLong("startSeq");
    if (v != null) seqLo = v;
    v = optLong("endSeq");
    if (v != null) seqHi = v;
    String t = options.get("startTime");
    if (t != null && !t.isEmpty()) timeLo = parseTime(t, "startTime");
    t = options.get("endTime");
    if (t != null && !t.isEmpty()) timeHi = parseTime(t, "endTime");
    if (seqHi < seqLo) throw new LiteMQException("endSeq=" + seqHi + " is before startSeq=" + seqLo);
    String topic = options.get("topic");
    if (topic != null) {
      int n = topic.getBytes(java.nio.charset.StandardCharsets.UTF_8).length;
      if (n < 1 || n > 255)
        throw new LiteMQException("option topic='" + topic + "' must be a topic name (1 to 255 bytes of UTF-8)");
      topics = new java.util.HashSet<>(java.util.List.of(topic));
    }
  }

  /**
   * Whether every column of the table schema is one this reader produces, as Python would; for
   * a typed load, also the schema's fields, each as its Spark type.
   */
  static boolean readable(StructType s, TypedLoad typed) {
    for (StructField f : s.fields()) {
      DataType t = f.dataType();
      int j = typed == null ? -1 : typed.current.indexOf(f.name());
      if (j >= 0) {
        if (!typed.current.fields[j].sparkType().sameType(t)) return false;
        continue;
      }
      if (f.metadata().contains(FIELD_METADATA)) {
        if (!(t instanceof LongType || t instanceof StringType)) return false;
        continue;
      }
      boolean ok;
      switch (f.name()) {
        case "seq": ok = t instanceof LongType; break;
        case "timestamp": ok = t instanceof TimestampType; break;
        case "key": case "payload": ok = t instanceof BinaryType || t instanceof StringType; break;
        case "key_text": case "queue": case "topic": ok = t instanceof StringType; break;
        case "queue_id": ok = t instanceof IntegerType || t instanceof LongType; break;
        case "tags": ok = t instanceof ArrayType && ((ArrayType) t).elementType() instanceof StringType; break;
        case "headers":
        case "headers_text": {
          ok = t instanceof MapType && ((MapType) t).keyType() instanceof StringType
              && (((MapType) t).valueType() instanceof StringType
                  || (f.name().equals("headers") && ((MapType) t).valueType() instanceof BinaryType));
          break;
        }
        default: ok = false;
      }
      if (!ok) return false;
    }
    return true;
  }

  private Long optLong(String name) {
    String raw = options.get(name);
    if (raw == null || raw.isEmpty()) return null;
    try {
      long v = Long.parseLong(raw.trim());
      if (v < 0) throw new LiteMQException("option " + name + "='" + raw + "' must be >= 0");
      return v;
    } catch (NumberFormatException e) {
      throw new LiteMQException("option " + name + "='" + raw + "' is not an integer");
    }
  }

  /** ISO 8601 (no offset: UTC) or µs since the epoch, as options.py parse_time_us. */
  static long parseTime(String raw, String name) {
    String s = raw.trim();
    if (s.matches("-?\\d+")) return Long.parseLong(s);
    String iso = s.replace('z', 'Z').replace(' ', 'T');
    Instant i;
    try {
      i = OffsetDateTime.parse(iso.replace("Z", "+00:00")).toInstant();
    } catch (DateTimeParseException e) {
      try {
        i = LocalDateTime.parse(iso).toInstant(ZoneOffset.UTC);
      } catch (DateTimeParseException e2) {
        try {
          i = java.time.LocalDate.parse(iso).atStartOfDay().toInstant(ZoneOffset.UTC);
        } catch (DateTimeParseException e3) {
          throw new LiteMQException("option " + name + "='" + raw + "' is not a time: use ISO 8601 "
              + "(2025-11-21T22:45:00Z) or microseconds since the Unix epoch");
        }
      }
    }
    return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
  }

  @Override
  public void pruneColumns(StructType required) {
    schema = required;
  }

  static Long micros(Object v) {
    if (v instanceof java.sql.Timestamp) {
      java.sql.Timestamp t = (java.sql.Timestamp) v;
      return Math.floorDiv(t.getTime(), 1000L) * 1_000_000L + t.getNanos() / 1000;
    }
    if (v instanceof Instant) {
      Instant i = (Instant) v;
      return i.getEpochSecond() * 1_000_000L + i.getNano() / 1000;
    }
    return null;
  }

  private static java.util.Set<String> strings(Filter f, String attr) {
    Object[] vs = null;
    if (f instanceof EqualTo && ((EqualTo) f).attribute().equals(attr)) vs = new Object[] {((EqualTo) f).value()};
    if (f instanceof In && ((In) f).attribute().equals(attr)) vs = ((In) f).values();
    if (vs == null) return null;
    java.util.Set<String> out = new java.util.HashSet<>();
    for (Object v : vs) {
      if (v instanceof String) out.add((String) v);
      else if (v != null) return null;
    }
    return out;
  }

  private static java.util.Set<String> and(java.util.Set<String> a, java.util.Set<String> b) {
    if (a == null) return b;
    java.util.Set<String> out = new java.util.HashSet<>(a);
    out.retainAll(b);
    return out;
  }

  private boolean indexedFilter(Filter f) {
    for (String ref : f.references()) {
      if (ref.equals("key")) return true;
      for (StructField sf : tableSchema.fields())
        if (sf.name().equals(ref) && sf.metadata().contains(FIELD_METADATA)) return true;
    }
    return false;
  }

  @Override
  public Filter[] pushFilters(Filter[] filters) {
    String fp = options.get("filterPushdown");
    if (fp == null || !fp.trim().equalsIgnoreCase("true")) {
      // As the Python source: filters are pushed only with filterPushdown=true.
      return filters;
    }
    {
      for (Filter f : filters) {
        if (indexedFilter(f)) {
          // Key and indexed-header filters go through the key and secondary indexes: the
          // Python source reads those (one small task per queue).
          delegate = pyTable.newScanBuilder(options);
          return ((SupportsPushDownFilters) delegate).pushFilters(filters);
        }
      }
    }
    List<Filter> used = new ArrayList<>(), typedUsed = new ArrayList<>(), rest = new ArrayList<>();
    for (Filter f : filters) {
      if (typed != null && TypedColumns.pushable(f, typed.current)) {
        // On schema columns: the reader applies it exactly and returns only the rows it keeps.
        typedUsed.add(f);
        continue;
      }
      rest.add(f);
      java.util.Set<String> q = strings(f, "queue"), t = strings(f, "topic");
      if (q != null) {
        queues = and(queues, q);
        used.add(f);
        continue;
      }
      if (t != null) {
        topics = and(topics, t);
        used.add(f);
        continue;
      }
      String attr = null;
      Object value = null;
      int op = 0; // 1 =, 2 >, 3 >=, 4 <, 5 <=
      if (f instanceof EqualTo) { attr = ((EqualTo) f).attribute(); value = ((EqualTo) f).value(); op = 1; }
      else if (f instanceof GreaterThan) { attr = ((GreaterThan) f).attribute(); value = ((GreaterThan) f).value(); op = 2; }
      else if (f instanceof GreaterThanOrEqual) { attr = ((GreaterThanOrEqual) f).attribute(); value = ((GreaterThanOrEqual) f).value(); op = 3; }
      else if (f instanceof LessThan) { attr = ((LessThan) f).attribute(); value = ((LessThan) f).value(); op = 4; }
      else if (f instanceof LessThanOrEqual) { attr = ((LessThanOrEqual) f).attribute(); value = ((LessThanOrEqual) f).value(); op = 5; }
      Long x = null;
      boolean isSeq = "seq".equals(attr), isTs = "timestamp".equals(attr);
      if (isSeq && value instanceof Number) x = ((Number) value).longValue();
      if (isTs) x = micros(value);
      if (x == null) continue;
      long lo, hi;
      switch (op) {
        case 1: lo = x; hi = x == Long.MAX_VALUE ? x : x + 1; break;
        case 2: lo = x == Long.MAX_VALUE ? x : x + 1; hi = Long.MAX_VALUE; break;
        case 3: lo = x; hi = Long.MAX_VALUE; break;
        case 4: lo = Long.MIN_VALUE; hi = x; break;
        default: lo = Long.MIN_VALUE; hi = x == Long.MAX_VALUE ? x : x + 1;
      }
      if (isSeq) { seqLo = Math.max(seqLo, lo); seqHi = Math.min(seqHi, hi); }
      else { timeLo = Math.max(timeLo, lo); timeHi = Math.min(timeHi, hi); }
      used.add(f);
    }
    typedFilters = typedUsed.toArray(new Filter[0]);
    used.addAll(typedUsed);
    pushed = used.toArray(new Filter[0]);
    // Spark checks the others again (seq, timestamp, queue and topic filters only narrow the read).
    return rest.toArray(new Filter[0]);
  }

  @Override
  public Filter[] pushedFilters() {
    if (delegate != null) return ((SupportsPushDownFilters) delegate).pushedFilters();
    return pushed;
  }

  @Override
  public boolean pushLimit(int n) {
    if (delegate != null) return false;
    limit = Math.min(limit, n);
    return true;
  }

  @Override
  public boolean isPartiallyPushed() {
    return true;
  }

  @Override
  public Scan build() {
    if (delegate != null) return delegate.build();
    return new LiteMQScan(this);
  }

  /** The scan: a batch read, or a streaming read, in the JVM. */
  static final class LiteMQScan implements Scan, Batch {
    private final LiteMQScanBuilder b;
    private final StructType schema;
    private final int batchRows;
    private final long rowsPerPartition;

    LiteMQScan(LiteMQScanBuilder b) {
      this.b = b;
      this.schema = b.schema;
      String br = b.options.get("batchRows");
      batchRows = br == null || br.isEmpty() ? 8192 : Math.max(1, Math.min(Integer.parseInt(br.trim()), 1 << 20));
      String rp = b.options.get("rowsPerPartition");
      rowsPerPartition = rp == null || rp.isEmpty() ? 1_000_000L : Math.max(1, Long.parseLong(rp.trim()));
    }

    @Override
    public StructType readSchema() {
      return schema;
    }

    @Override
    public String description() {
      return "litemq (JVM reader) " + b.refs.size() + " queue(s), seq [" + b.seqLo + ", "
          + (b.seqHi == Long.MAX_VALUE ? "end" : b.seqHi) + ")" + (b.limit != Long.MAX_VALUE ? " limit " + b.limit : "")
          + (b.typed == null ? "" : " typed " + b.typed.current.fields.length + " fields")
          + (b.typedFilters.length == 0 ? "" : " applying " + java.util.Arrays.toString(b.typedFilters));
    }

    @Override
    public Batch toBatch() {
      return this;
    }

    /**
     * A streaming read in the JVM ({@link LiteMQStream}), unless it names an option the Python
     * streaming source serves (and refuses: the batch-only ones, with its error).
     */
    @Override
    public MicroBatchStream toMicroBatchStream(String checkpointLocation) {
      // Archives are for batch reads: the Python source refuses a stream of one, by name.
      if (LiteMQStream.forPython(b.options) || b.refs.stream().anyMatch(r -> r.archived() != null))
        return b.pyTable.newScanBuilder(b.options).build().toMicroBatchStream(checkpointLocation);
      return new LiteMQStream(b.tableSchema, b.options, b.typed);
    }

    @Override
    public InputPartition[] planInputPartitions() {
      try {
        return Planner.plan(b.refs, b.seqLo, b.seqHi, b.timeLo, b.timeHi, rowsPerPartition,
                b.queues, b.topics == null ? null : b.topics.toArray(new String[0]),
                b.options.get("encryptionKeyFile"), b.typed)
            .toArray(new InputPartition[0]);
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
      return new Factory(schema, batchRows, b.limit, b.typed == null ? null : b.typed.current, b.typedFilters);
    }
  }

  static final class Factory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    private final StructType schema;
    private final int batchRows;
    private final long limit;
    private final TypedSchema typed;
    private final Filter[] typedFilters;

    Factory(StructType schema, int batchRows, long limit, TypedSchema typed, Filter[] typedFilters) {
      this.schema = schema;
      this.batchRows = batchRows;
      this.limit = limit;
      this.typed = typed;
      this.typedFilters = typedFilters;
    }

    @Override
    public boolean supportColumnarReads(InputPartition p) {
      return true;
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition p) {
      return new ColumnarReader((LiteMQPartition) p, schema, batchRows, limit, typed, typedFilters);
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition p) {
      throw new UnsupportedOperationException("litemq: the JVM reader is columnar");
    }
  }
}
