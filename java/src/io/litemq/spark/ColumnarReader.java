package io.litemq.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnarBatch;

/** Fills Spark column vectors straight from the mapped frames, {@code batchRows} at a time. */
final class ColumnarReader implements PartitionReader<ColumnarBatch>, Scanner.RowSink {
  static final int SEQ = 0, TIMESTAMP = 1, KEY = 2, HEADERS = 3, PAYLOAD = 4, QUEUE = 5,
      TOPIC = 6, QUEUE_ID = 7, TAGS = 8, KEY_TEXT = 9, HEADERS_TEXT = 10, FIELD_STR = 11,
      FIELD_INT = 12, TYPED = 13;

  private final LiteMQPartition part;
  private final int[] kinds;
  private final String[] fieldNames; // header name, for FIELD_* columns
  private final boolean[] asLong; // queue_id read as bigint
  private final OnHeapColumnVector[] vecs;
  private final ColumnarBatch batch;
  private final int batchRows;
  private long remaining;
  private final byte[] queueName;
  private Scanner scanner;
  private int rows;
  /** A typed load's current schema, the filters on its columns the reader applies, or null. */
  private final TypedSchema typed;
  private final Filter[] typedFilters;
  /** Per column of kind TYPED: its field in the current schema. */
  private final int[] typedField;
  /** The file's rows read as the current schema's columns, and the filters compiled for it. */
  private TypedColumns columns;
  private TypedColumns.Pred pred;
  /** Whether every column is seq, timestamp or a schema field: row batches fill them in bulk. */
  private final boolean bulk;
  /** The rows of a row batch that go into the batch being filled (indexes into its starts). */
  private final int[] sel;

  ColumnarReader(LiteMQPartition part, StructType schema, int batchRows, long limit) {
    this(part, schema, batchRows, limit, null, new Filter[0]);
  }

  ColumnarReader(LiteMQPartition part, StructType schema, int batchRows, long limit, TypedSchema typed,
      Filter[] typedFilters) {
    this.part = part;
    this.batchRows = batchRows;
    this.remaining = limit;
    this.typed = typed;
    this.typedFilters = typedFilters;
    StructField[] fs = schema.fields();
    kinds = new int[fs.length];
    fieldNames = new String[fs.length];
    asLong = new boolean[fs.length];
    typedField = new int[fs.length];
    for (int i = 0; i < fs.length; i++) {
      String n = fs[i].name();
      typedField[i] = typed == null ? -1 : typed.indexOf(n);
      if (typedField[i] >= 0) {
        kinds[i] = TYPED;
        continue;
      }
      if (fs[i].metadata().contains(LiteMQScanBuilder.FIELD_METADATA)) {
        fieldNames[i] = fs[i].metadata().getString(LiteMQScanBuilder.FIELD_METADATA);
        kinds[i] = fs[i].dataType() instanceof LongType ? FIELD_INT : FIELD_STR;
        continue;
      }
      kinds[i] = LiteMQScanBuilder.COLUMNS.indexOf(n);
      if (kinds[i] < 0) throw new LiteMQException("cannot produce column " + n);
      asLong[i] = fs[i].dataType() instanceof LongType;
    }
    boolean b = typed != null;
    for (int k : kinds) b &= k == SEQ || k == TIMESTAMP || k == QUEUE || k == TYPED;
    bulk = b;
    sel = bulk ? new int[batchRows] : null;
    vecs = OnHeapColumnVector.allocateColumns(batchRows, schema);
    batch = new ColumnarBatch(vecs);
    queueName = part.queue.getBytes(StandardCharsets.UTF_8);
  }

  @Override
  public boolean next() throws IOException {
    if (scanner == null) {
      DataFile f = DataFile.open(part.file);
      if (part.listed != null) {
        try {
          Archive.check(f, part.listed);
        } catch (RuntimeException e) {
          f.close();
          throw e;
        }
      }
      if (typed != null) openTyped(f);
      scanner = new Scanner(f, part.startOffset, part.startSeq, part.seqLo, part.seqHi,
          part.timeLo, part.timeHi, part.wholeFile);
      if (part.keyFile != null)
        scanner.crypto = Crypto.forQueue(part.file, part.queueIdHex, part.keyCheckHex, part.keyFile);
      if (part.topics != null) {
        scanner.topics = new byte[part.topics.length][];
        for (int i = 0; i < part.topics.length; i++)
          scanner.topics[i] = part.topics[i].getBytes(StandardCharsets.UTF_8);
      }
    }
    for (OnHeapColumnVector v : vecs) v.reset();
    rows = 0;
    while (rows < batchRows && remaining > 0 && !scanner.done()) scanner.scan(this);
    batch.setNumRows(rows);
    return rows > 0;
  }

  /**
   * A typed load: the file must hold the schema version it held when the read was planned
   * (the partition's projection is of that version); its filters are compiled for it.
   */
  private void openTyped(DataFile f) throws IOException {
    if (f.schema == null || f.schema.version != part.schemaVersion || part.projection == null) {
      f.close();
      throw new LiteMQException(part.file + ": holds schema version " + (f.schema == null ? 0 : f.schema.version)
          + ", the read was planned for version " + part.schemaVersion + " (replaced since?)");
    }
    columns = new TypedColumns(typed, f.schema, part.projection);
    try {
      pred = columns.compileAll(typedFilters);
    } catch (TypedColumns.NotPushable e) {
      f.close();
      throw new IllegalStateException("litemq: a filter pushed to the reader does not compile: " + e.getMessage());
    }
  }

  @Override
  public ColumnarBatch get() {
    return batch;
  }

  @Override
  public boolean bulk() {
    return bulk;
  }

  /**
   * A row batch's rows, a column at a time: the rows the pushed filters keep (all without
   * filters) are chosen first, then each column is filled in one loop over them.
   */
  @Override
  public int rows(ByteBuffer b, int[] starts, int from, int to, long firstSeq, long ts) {
    int room = (int) Math.min(batchRows - rows, remaining);
    int n = 0, i = from;
    if (pred == null) {
      for (; i < to && n < room; i++) sel[n++] = i;
    } else {
      for (; i < to && n < room; i++) if (pred.test(b, starts[i])) sel[n++] = i;
    }
    int r = rows;
    for (int c = 0; c < kinds.length; c++) {
      WritableColumnVector v = vecs[c];
      switch (kinds[c]) {
        case SEQ:
          for (int k = 0; k < n; k++) v.putLong(r + k, firstSeq + sel[k]);
          break;
        case TIMESTAMP:
          if (n > 0) v.putLongs(r, n, ts);
          break;
        case QUEUE:
          for (int k = 0; k < n; k++) v.putByteArray(r + k, queueName, 0, queueName.length);
          break;
        default:
          columns.putRows(v, r, typedField[c], b, starts, sel, n);
      }
    }
    rows += n;
    remaining -= n;
    return i - from;
  }

  @Override
  public boolean accept(Scanner.Msg m) {
    if (typed != null) {
      // A typed queue's rows are its events: a tombstone (no row) is none, and a row the
      // pushed filters reject is not returned.
      if (m.rowLen < 0 || (pred != null && !pred.test(m.rowBuf, m.rowAt))) return true;
    }
    int r = rows;
    ByteBuffer b = m.buf;
    for (int c = 0; c < kinds.length; c++) {
      WritableColumnVector v = vecs[c];
      switch (kinds[c]) {
        case TYPED:
          columns.put(v, r, typedField[c], m.rowBuf, m.rowAt);
          break;
        case SEQ:
          v.putLong(r, m.seq);
          break;
        case TIMESTAMP:
          v.putLong(r, m.ts);
          break;
        case KEY:
          if (m.keyLen < 0) v.putNull(r);
          else v.putByteArray(r, b, m.keyAt, m.keyLen);
          break;
        case KEY_TEXT:
          if (m.keyLen < 0 || !m.keyText) v.putNull(r);
          else v.putByteArray(r, b, m.keyAt, m.keyLen);
          break;
        case PAYLOAD:
          if (m.payloadArr != null) v.putByteArray(r, m.payloadArr, m.payloadAt, m.payloadLen);
          else v.putByteArray(r, b, m.payloadAt, m.payloadLen);
          break;
        case QUEUE:
          v.putByteArray(r, queueName, 0, queueName.length);
          break;
        case TOPIC:
          if (m.topicLen == 0) v.putNull(r);
          else v.putByteArray(r, b, m.topicAt, m.topicLen);
          break;
        case QUEUE_ID:
          if (asLong[c]) v.putLong(r, m.queueId);
          else v.putInt(r, m.queueId);
          break;
        case TAGS: {
          WritableColumnVector d = v.arrayData();
          int start = d.getElementsAppended();
          int q = m.tagAt;
          for (int i = 0; i < m.tagCount; i++) {
            int tl = b.get(q) & 0xff;
            appendBytes(d, b, q + 1, tl);
            q += 1 + tl;
          }
          v.putArray(r, start, m.tagCount);
          break;
        }
        case HEADERS:
        case HEADERS_TEXT: {
          if (m.hdrCount < 0) {
            v.putNull(r);
            break;
          }
          WritableColumnVector keys = (WritableColumnVector) v.getChild(0);
          WritableColumnVector vals = (WritableColumnVector) v.getChild(1);
          int start = keys.getElementsAppended();
          int q = m.hdrAt;
          for (int i = 0; i < m.hdrCount; i++) {
            int nl = b.get(q) & 0xff;
            appendBytes(keys, b, q + 1, nl);
            q += 1 + nl;
            int kind = b.get(q) & 0xff;
            int vl = b.getShort(q + 1) & 0xffff;
            if (kinds[c] == HEADERS_TEXT && kind != 1) vals.appendNull();
            else appendBytes(vals, b, q + 3, vl);
            q += 3 + vl;
          }
          v.putArray(r, start, m.hdrCount);
          break;
        }
        case FIELD_STR:
        case FIELD_INT:
          putField(v, r, m, fieldNames[c], kinds[c] == FIELD_INT);
          break;
        default:
          throw new IllegalStateException();
      }
    }
    rows++;
    remaining--;
    return rows < batchRows && remaining > 0;
  }

  private static void appendBytes(WritableColumnVector d, ByteBuffer b, int at, int len) {
    d.reserve(d.getElementsAppended() + 1);
    d.putByteArray(d.getElementsAppended(), b, at, len);
    d.addElementsAppended(1);
  }

  /** An indexed header's column: the first value of the header the index takes. */
  private static void putField(WritableColumnVector v, int r, Scanner.Msg m, String name, boolean isInt) {
    ByteBuffer b = m.buf;
    byte[] want = name.getBytes(StandardCharsets.UTF_8);
    int q = m.hdrAt;
    for (int i = 0; i < Math.max(m.hdrCount, 0); i++) {
      int nl = b.get(q) & 0xff;
      boolean same = nl == want.length;
      for (int j = 0; same && j < nl; j++) same = b.get(q + 1 + j) == want[j];
      q += 1 + nl;
      int kind = b.get(q) & 0xff;
      int vl = b.getShort(q + 1) & 0xffff;
      int va = q + 3;
      q += 3 + vl;
      if (!same) continue;
      if (!isInt) {
        if (kind == 1) {
          v.putByteArray(r, b, va, vl);
          return;
        }
      } else if (kind == 1) {
        byte[] t = new byte[vl];
        b.get(va, t, 0, vl);
        Long x = parseI64(new String(t, StandardCharsets.UTF_8));
        if (x != null) {
          v.putLong(r, x);
          return;
        }
      } else if (vl == 8) {
        v.putLong(r, b.getLong(va));
        return;
      }
    }
    v.putNull(r);
  }

  /** Rust's i64::from_str: an optional sign, then ASCII digits, nothing else. */
  static Long parseI64(String s) {
    if (s.isEmpty()) return null;
    int i = (s.charAt(0) == '+' || s.charAt(0) == '-') ? 1 : 0;
    if (i == s.length()) return null;
    for (int j = i; j < s.length(); j++) if (s.charAt(j) < '0' || s.charAt(j) > '9') return null;
    try {
      return Long.parseLong(s.charAt(0) == '+' ? s.substring(1) : s);
    } catch (NumberFormatException e) {
      return null;
    }
  }

  @Override
  public void close() throws IOException {
    if (scanner != null) scanner.close();
    batch.close();
  }
}
