package io.litemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.streaming.MicroBatchStream;
import org.apache.spark.sql.connector.read.streaming.Offset;
import org.apache.spark.sql.connector.read.streaming.ReadAllAvailable;
import org.apache.spark.sql.connector.read.streaming.ReadLimit;
import org.apache.spark.sql.connector.read.streaming.ReadMaxRows;
import org.apache.spark.sql.connector.read.streaming.ReadMinRows;
import org.apache.spark.sql.connector.read.streaming.SupportsTriggerAvailableNow;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code readStream.format("litemq")} in the JVM: the Python streaming source's offsets,
 * options and behaviour (python/litemq/spark/source.py, LiteMQStreamReader), each micro-batch
 * read by the batch reader's partitions ({@link Planner}, {@link ColumnarReader}).
 *
 * <p>An offset is the JSON object {@code {queue name: next sequence}}, keys sorted, written
 * byte for byte as Python's {@code json.dumps} writes it, so a checkpoint written by either
 * source resumes in the other, and Spark (which compares offsets by their JSON) sees the same
 * offsets from both. A micro-batch reads {@code [start[q], end[q])} of every queue; a queue
 * found later starts at 0; {@code maxRecordsPerTrigger} is shared among the queues with a
 * backlog by the same water filling ({@code _share}); {@code Trigger.AvailableNow} reads up to
 * the ends present when the query started.
 */
final class LiteMQStream implements MicroBatchStream, SupportsTriggerAvailableNow {
  /**
   * Options the JVM stream does not serve: {@link LiteMQScanBuilder.LiteMQScan} hands the stream
   * to the Python source, which refuses these batch-only options with its own error.
   */
  static final String[] PYTHON_OPTIONS = {"key", "where", "topic", "startSeq", "endSeq", "startTime", "endTime"};

  /** Queue names in Python's order for {@code sorted()} of str: by code point. */
  static final Comparator<String> BY_CODE_POINT = (a, b) -> {
    int i = 0, j = 0;
    while (i < a.length() && j < b.length()) {
      int x = a.codePointAt(i), y = b.codePointAt(j);
      if (x != y) return Integer.compare(x, y);
      i += Character.charCount(x);
      j += Character.charCount(y);
    }
    return Boolean.compare(i < a.length(), j < b.length());
  };

  static TreeMap<String, Long> sortedMap() {
    return new TreeMap<>(BY_CODE_POINT);
  }

  /** {@code {queue name: next sequence}}. */
  static final class QueueOffset extends Offset {
    final TreeMap<String, Long> seqs;
    private final String json;

    QueueOffset(Map<String, Long> seqs) {
      this.seqs = sortedMap();
      this.seqs.putAll(seqs);
      this.json = pythonJson(this.seqs);
    }

    @Override
    public String json() {
      return json;
    }

    /** An offset from a checkpoint (either source's) or from {@code startingOffsets}. */
    static QueueOffset parse(String json) {
      JsonNode n;
      try {
        n = new ObjectMapper().readTree(json);
      } catch (IOException e) {
        throw new LiteMQException("offset " + json + " is not JSON: " + e.getMessage());
      }
      if (n == null || !n.isObject()) throw new LiteMQException("offset " + json + " is not a JSON object");
      TreeMap<String, Long> out = sortedMap();
      for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
        String name = it.next();
        JsonNode v = n.get(name);
        if (!v.isIntegralNumber() || !v.canConvertToLong() || v.asLong() < 0)
          throw new LiteMQException("offset " + json + ": " + name + " is not a sequence (an integer >= 0)");
        out.put(name, v.asLong());
      }
      return new QueueOffset(out);
    }
  }

  /** {@code json.dumps(d)} of a dict of str to int: separators ", " and ": ", ASCII only. */
  static String pythonJson(TreeMap<String, Long> d) {
    StringBuilder s = new StringBuilder("{");
    boolean first = true;
    for (Map.Entry<String, Long> e : d.entrySet()) {
      if (!first) s.append(", ");
      first = false;
      s.append('"');
      String k = e.getKey();
      for (int i = 0; i < k.length(); i++) {
        char c = k.charAt(i);
        switch (c) {
          case '"': s.append("\\\""); break;
          case '\\': s.append("\\\\"); break;
          case '\n': s.append("\\n"); break;
          case '\r': s.append("\\r"); break;
          case '\t': s.append("\\t"); break;
          case '\b': s.append("\\b"); break;
          case '\f': s.append("\\f"); break;
          default:
            if (c >= ' ' && c <= '~') s.append(c);
            else s.append(String.format("\\u%04x", (int) c)); // UTF-16 units, as Python's
        }
      }
      s.append("\": ").append(e.getValue());
    }
    return s.append('}').toString();
  }

  private final List<String> paths;
  private final StructType schema;
  private final String keyFile;
  private final String starting; // "earliest", "latest" or a JSON object
  private final long maxRows; // 0: every trigger reads all that is available
  private final long rowsPerPartition;
  private final int batchRows;
  /** Every queue seen: name to directory (a queue that disappears keeps its last path). */
  private final Map<String, String> queuePaths = new HashMap<>();
  /** Trigger.AvailableNow: the ends present when the query started, or null. */
  private TreeMap<String, Long> target;

  /** A typed load: its current schema when the query started (the DataFrame's columns), or null. */
  private final TypedSchema typed;

  LiteMQStream(StructType schema, CaseInsensitiveStringMap options, TypedLoad typed) {
    this.schema = schema;
    this.typed = typed == null ? null : typed.current;
    this.paths = LiteMQScanBuilder.paths(options);
    this.keyFile = options.get("encryptionKeyFile");
    String raw = options.get("startingOffsets");
    raw = raw == null || raw.trim().isEmpty() ? "earliest" : raw.trim();
    if (raw.equalsIgnoreCase("earliest") || raw.equalsIgnoreCase("latest")) {
      starting = raw.toLowerCase(java.util.Locale.ROOT);
    } else {
      QueueOffset.parse(raw); // the Python source checked it when the stream was loaded
      starting = raw;
    }
    maxRows = positive(options, "maxRecordsPerTrigger", 0);
    rowsPerPartition = positive(options, "rowsPerPartition", 1_000_000L);
    batchRows = (int) Math.min(positive(options, "batchRows", 8192), 1 << 20);
  }

  /** Whether the Python streaming source serves these options (see {@link #PYTHON_OPTIONS}). */
  static boolean forPython(CaseInsensitiveStringMap options) {
    for (String o : PYTHON_OPTIONS) if (options.containsKey(o)) return true;
    return false;
  }

  private static long positive(CaseInsensitiveStringMap options, String name, long dflt) {
    String raw = options.get(name);
    if (raw == null || raw.trim().isEmpty()) return dflt;
    try {
      long v = Long.parseLong(raw.trim());
      if (v >= 1) return v;
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new LiteMQException("option " + name + "='" + raw + "' must be an integer >= 1");
  }

  /** Every queue's next sequence now, picking up queues created since the last call. */
  private TreeMap<String, Long> refresh() {
    TreeMap<String, Long> out = sortedMap();
    try {
      for (Planner.Ref r : Planner.discover(paths)) {
        queuePaths.put(r.name(), r.path());
        out.put(r.name(), nextSeq(r.path()));
      }
    } catch (Planner.NotForJvm e) {
      // LiteMQTable sent this load to the JVM because it held no archive: one appeared since.
      throw new LiteMQException("streaming reads follow live queues; " + e.getMessage()
          + " is an archive (read archives with spark.read, in batch)");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    return out;
  }

  /**
   * One past the last message published in a queue's files (the Rust reader's
   * {@code end_on_disk}): the last file's footer, or its published tail; 0 without files.
   */
  static long nextSeq(String queue) throws IOException {
    List<File> files = Planner.dataFiles(queue);
    if (files.isEmpty()) return 0;
    String last = files.get(files.size() - 1).getPath();
    try (DataFile f = DataFile.open(last)) {
      if (f.sealed()) return f.endSeq;
      return Planner.publishedEnd(f, Planner.sparseEntries(f, last));
    }
  }

  private static TreeMap<String, Long> seqs(Offset o) {
    if (o == null) return sortedMap();
    if (o instanceof QueueOffset) return ((QueueOffset) o).seqs;
    return QueueOffset.parse(o.json()).seqs;
  }

  @Override
  public Offset initialOffset() {
    TreeMap<String, Long> current = refresh();
    if (starting.equals("latest")) return new QueueOffset(current);
    if (!starting.equals("earliest")) return QueueOffset.parse(starting);
    TreeMap<String, Long> zero = sortedMap();
    for (String n : current.keySet()) zero.put(n, 0L);
    return new QueueOffset(zero);
  }

  @Override
  public Offset latestOffset() {
    throw new UnsupportedOperationException("litemq: latestOffset(Offset, ReadLimit) is the one to call");
  }

  @Override
  public ReadLimit getDefaultReadLimit() {
    return maxRows > 0 ? ReadLimit.maxRows(maxRows) : ReadLimit.allAvailable();
  }

  @Override
  public void prepareForTriggerAvailableNow() {
    target = refresh();
  }

  @Override
  public Offset latestOffset(Offset startOffset, ReadLimit limit) {
    TreeMap<String, Long> current = refresh();
    if (target != null) {
      TreeMap<String, Long> clipped = sortedMap();
      for (Map.Entry<String, Long> e : current.entrySet()) {
        Long t = target.get(e.getKey());
        if (t != null) clipped.put(e.getKey(), Math.min(e.getValue(), t));
      }
      current = clipped;
    }
    TreeMap<String, Long> start = seqs(startOffset);
    TreeMap<String, Long> end = sortedMap();
    for (Map.Entry<String, Long> e : current.entrySet())
      end.put(e.getKey(), Math.max(e.getValue(), start.getOrDefault(e.getKey(), 0L)));
    for (Map.Entry<String, Long> e : start.entrySet()) end.putIfAbsent(e.getKey(), e.getValue());
    if (limit == null || limit instanceof ReadAllAvailable) return new QueueOffset(end);
    TreeMap<String, Long> backlog = sortedMap();
    long total = 0;
    for (Map.Entry<String, Long> e : end.entrySet()) {
      long b = e.getValue() - start.getOrDefault(e.getKey(), 0L);
      backlog.put(e.getKey(), b);
      total += b;
    }
    if (limit instanceof ReadMinRows) {
      if (target == null && total < ((ReadMinRows) limit).minRows()) return new QueueOffset(start);
      return new QueueOffset(end);
    }
    if (limit instanceof ReadMaxRows) {
      TreeMap<String, Long> grant = share(backlog, ((ReadMaxRows) limit).maxRows());
      TreeMap<String, Long> out = sortedMap();
      for (String n : end.keySet()) out.put(n, start.getOrDefault(n, 0L) + grant.get(n));
      return new QueueOffset(out);
    }
    return new QueueOffset(end); // ReadMaxFiles / ReadMaxBytes: not meaningful for a queue
  }

  /** {@code _share}: split {@code budget} rows fairly over queues with a backlog (water filling). */
  static TreeMap<String, Long> share(TreeMap<String, Long> backlog, long budget) {
    TreeMap<String, Long> grant = sortedMap();
    TreeMap<String, Long> left = sortedMap();
    for (Map.Entry<String, Long> e : backlog.entrySet()) {
      grant.put(e.getKey(), 0L);
      if (e.getValue() > 0) left.put(e.getKey(), e.getValue());
    }
    while (budget > 0 && !left.isEmpty()) {
      long each = Math.max(1, budget / left.size());
      for (Map.Entry<String, Long> e : left.entrySet()) {
        long take = Math.min(each, Math.min(e.getValue(), budget));
        grant.merge(e.getKey(), take, Long::sum);
        e.setValue(e.getValue() - take);
        budget -= take;
        if (budget == 0) break;
      }
      left.values().removeIf(v -> v == 0);
    }
    return grant;
  }

  @Override
  public InputPartition[] planInputPartitions(Offset startOffset, Offset endOffset) {
    TreeMap<String, Long> start = seqs(startOffset), end = seqs(endOffset);
    for (String n : end.keySet())
      if (!queuePaths.containsKey(n)) {
        refresh();
        break;
      }
    List<InputPartition> out = new ArrayList<>();
    TypedLoad now = typedNow(end);
    for (Map.Entry<String, Long> e : end.entrySet()) {
      String name = e.getKey();
      long s = start.getOrDefault(name, 0L), hi = e.getValue();
      if (hi <= s) continue;
      String path = queuePaths.get(name);
      if (path == null)
        throw new LiteMQException("queue '" + name + "' of the checkpointed offsets is gone from " + paths);
      try {
        out.addAll(Planner.plan(List.of(new Planner.Ref(name, path)), s, hi, Long.MIN_VALUE,
            Long.MAX_VALUE, rowsPerPartition, null, null, keyFile, now));
      } catch (IOException x) {
        throw new UncheckedIOException(x);
      }
    }
    return out.toArray(new InputPartition[0]);
  }

  /**
   * The typed schema of the queues a micro-batch reads, which must still be the one the query
   * started with: the DataFrame's columns are fixed for the life of a query.
   */
  private TypedLoad typedNow(TreeMap<String, Long> end) {
    List<Planner.Ref> refs = new ArrayList<>();
    for (String n : end.keySet()) if (queuePaths.containsKey(n)) refs.add(new Planner.Ref(n, queuePaths.get(n)));
    TypedLoad now = TypedLoad.of(refs);
    boolean same = (now == null) == (typed == null);
    if (same && now != null) {
      same = now.current.fields.length == typed.fields.length;
      for (int i = 0; same && i < typed.fields.length; i++) same = now.current.fields[i].sameAs(typed.fields[i]);
    }
    if (!same)
      throw new LiteMQException("the queues' schema is " + (now == null ? "none" : now.current.toString())
          + ", the stream started with " + (typed == null ? "none" : typed.toString())
          + ": a query keeps its columns; restart it to read the new schema");
    return now;
  }

  @Override
  public PartitionReaderFactory createReaderFactory() {
    return new LiteMQScanBuilder.Factory(schema, batchRows, Long.MAX_VALUE, typed, new org.apache.spark.sql.sources.Filter[0]);
  }

  @Override
  public Offset deserializeOffset(String json) {
    return QueueOffset.parse(json);
  }

  @Override
  public void commit(Offset end) {}

  @Override
  public void stop() {}

  @Override
  public String toString() {
    return "litemq (JVM reader) stream of " + paths;
  }
}
