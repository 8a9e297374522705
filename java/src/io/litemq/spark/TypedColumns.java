package io.litemq.spark;

import io.litemq.spark.TypedSchema.Field;
import io.litemq.spark.TypedSchema.Type;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.sources.And;
import org.apache.spark.sql.sources.EqualNullSafe;
import org.apache.spark.sql.sources.EqualTo;
import org.apache.spark.sql.sources.Filter;
import org.apache.spark.sql.sources.GreaterThan;
import org.apache.spark.sql.sources.GreaterThanOrEqual;
import org.apache.spark.sql.sources.In;
import org.apache.spark.sql.sources.IsNotNull;
import org.apache.spark.sql.sources.IsNull;
import org.apache.spark.sql.sources.LessThan;
import org.apache.spark.sql.sources.LessThanOrEqual;
import org.apache.spark.sql.sources.Or;
import org.apache.spark.sql.sources.StringContains;
import org.apache.spark.sql.sources.StringEndsWith;
import org.apache.spark.sql.sources.StringStartsWith;

/**
 * The current schema's columns read from the rows of one data file's schema version: each
 * value straight from its fixed slot (or the var area) into a Spark column vector, through
 * the file's projection (a field the file lacks is null, a narrower integer or float32 widened).
 * Also the filters on schema columns the reader applies itself ({@link #compile}), with
 * Spark's semantics: a null value passes no comparison, doubles compare as Spark compares
 * them (NaN equals NaN and is the largest, -0.0 equals 0.0), strings and binaries by unsigned
 * bytes.
 */
final class TypedColumns {
  final TypedSchema current, file;
  /** Per current field: its index in the file's version, or -1 (read as null). */
  private final int[] proj;

  TypedColumns(TypedSchema current, TypedSchema file, int[] proj) {
    this.current = current;
    this.file = file;
    this.proj = proj;
  }

  /** The current schema read through itself: to decide which filters the reader can apply. */
  static TypedColumns identity(TypedSchema current) {
    int[] p = new int[current.fields.length];
    for (int i = 0; i < p.length; i++) p[i] = i;
    return new TypedColumns(current, current, p);
  }

  /** Writes current field {@code cur} of the row at {@code b[row]} into {@code v} at {@code r}. */
  void put(WritableColumnVector v, int r, int cur, ByteBuffer b, int row) {
    int i = proj[cur];
    if (i < 0 || !file.valid(b, row, i)) {
      v.putNull(r);
      return;
    }
    Field want = current.fields[cur];
    Type src = file.fields[i].type;
    int p = row + file.slotAt[i];
    switch (want.type) {
      case BOOL: v.putBoolean(r, b.get(p) != 0); break;
      case INT8: v.putByte(r, b.get(p)); break;
      case INT16: case UINT8: v.putShort(r, (short) integer(b, p, src)); break;
      case INT32: case UINT16: case DATE32: v.putInt(r, (int) integer(b, p, src)); break;
      case INT64: case UINT32: case TIMESTAMP_US: v.putLong(r, integer(b, p, src)); break;
      case UINT64: v.putByteArray(r, unsigned(integer(b, p, src)).toByteArray()); break;
      case FLOAT32: v.putFloat(r, b.getFloat(p)); break;
      case FLOAT64: v.putDouble(r, src == Type.FLOAT32 ? b.getFloat(p) : b.getDouble(p)); break;
      case DECIMAL128:
        // Spark keeps decimals of up to 9 digits as ints, up to 18 as longs, else as the
        // unscaled value's big-endian bytes (WritableColumnVector.putDecimal).
        if (want.precision <= 9) v.putInt(r, (int) b.getLong(p));
        else if (want.precision <= 18) v.putLong(r, b.getLong(p));
        else v.putByteArray(r, i128(b, p).toByteArray());
        break;
      default: {
        int s = file.varStart(b, row, i);
        v.putByteArray(r, b, row + file.fixedLen + s, b.getInt(p) - s);
      }
    }
  }

  /**
   * Current field {@code cur} of rows {@code starts[sel[k]]}, {@code k < n}, into {@code v}
   * from row {@code r0}: one loop per column, straight from the slots where the file's type is
   * the current one and the field cannot be null.
   */
  void putRows(WritableColumnVector v, int r0, int cur, ByteBuffer b, int[] starts, int[] sel, int n) {
    int i = proj[cur];
    if (i < 0) {
      if (n > 0) v.putNulls(r0, n);
      return;
    }
    Type want = current.fields[cur].type, src = file.fields[i].type;
    int slot = file.slotAt[i];
    if (src == want && file.nullBit[i] < 0) {
      switch (want) {
        case INT64:
        case TIMESTAMP_US:
          for (int k = 0; k < n; k++) v.putLong(r0 + k, b.getLong(starts[sel[k]] + slot));
          return;
        case FLOAT64:
          for (int k = 0; k < n; k++) v.putDouble(r0 + k, b.getDouble(starts[sel[k]] + slot));
          return;
        case INT32:
        case DATE32:
          for (int k = 0; k < n; k++) v.putInt(r0 + k, b.getInt(starts[sel[k]] + slot));
          return;
        case INT8:
          for (int k = 0; k < n; k++) v.putByte(r0 + k, b.get(starts[sel[k]] + slot));
          return;
        case FLOAT32:
          for (int k = 0; k < n; k++) v.putFloat(r0 + k, b.getFloat(starts[sel[k]] + slot));
          return;
        case STRING:
        case BINARY: {
          int fixed = file.fixedLen, prev = file.prevVar[i];
          int prevAt = prev < 0 ? -1 : file.slotAt[prev];
          for (int k = 0; k < n; k++) {
            int row = starts[sel[k]];
            int s = prevAt < 0 ? 0 : b.getInt(row + prevAt);
            v.putByteArray(r0 + k, b, row + fixed + s, b.getInt(row + slot) - s);
          }
          return;
        }
        default:
      }
    }
    for (int k = 0; k < n; k++) put(v, r0 + k, cur, b, starts[sel[k]]);
  }

  /** A fixed slot of an integer type (or bool, date32, timestamp_us) as a long; uint64 as its bits. */
  static long integer(ByteBuffer b, int p, Type t) {
    switch (t) {
      case BOOL: case UINT8: return b.get(p) & 0xff;
      case INT8: return b.get(p);
      case INT16: return b.getShort(p);
      case UINT16: return b.getShort(p) & 0xffff;
      case INT32: case DATE32: return b.getInt(p);
      case UINT32: return b.getInt(p) & 0xFFFFFFFFL;
      default: return b.getLong(p);
    }
  }

  static BigInteger unsigned(long bits) {
    BigInteger x = BigInteger.valueOf(bits);
    return bits >= 0 ? x : x.add(BigInteger.ONE.shiftLeft(64));
  }

  /** The i128 at {@code b[p, p + 16)} (little-endian). */
  static BigInteger i128(ByteBuffer b, int p) {
    byte[] be = new byte[16];
    for (int k = 0; k < 16; k++) be[k] = b.get(p + 15 - k);
    return new BigInteger(be);
  }

  // ---------------------------------------------------------------------------------------
  // Filters on schema columns.

  /** A filter compiled against one file's version: true when the row passes. */
  interface Pred {
    boolean test(ByteBuffer b, int row);
  }

  /** A filter the reader cannot apply exactly: Spark keeps it. */
  static final class NotPushable extends Exception {
    NotPushable(String why) {
      super(why, null, false, false);
    }
  }

  /** Whether the reader applies {@code f} itself (a filter on schema columns it compiles). */
  static boolean pushable(Filter f, TypedSchema current) {
    try {
      identity(current).compile(f);
      return true;
    } catch (NotPushable e) {
      return false;
    }
  }

  /** Every filter of {@code fs} compiled and joined by AND, or null for none. */
  Pred compileAll(Filter[] fs) throws NotPushable {
    Pred out = null;
    for (Filter f : fs) {
      Pred p = compile(f);
      Pred prev = out;
      out = prev == null ? p : (b, row) -> prev.test(b, row) && p.test(b, row);
    }
    return out;
  }

  /**
   * {@code =}, {@code <=>}, {@code <}, {@code <=}, {@code >}, {@code >=}, {@code IN},
   * {@code IS NULL}, {@code IS NOT NULL} on a schema column with a literal of the column's
   * Spark type, {@code startswith}, {@code endswith} and {@code contains} on a string column,
   * and AND / OR of such filters.
   */
  Pred compile(Filter f) throws NotPushable {
    if (f instanceof And) {
      Pred l = compile(((And) f).left()), r = compile(((And) f).right());
      return (b, row) -> l.test(b, row) && r.test(b, row);
    }
    if (f instanceof Or) {
      // Two-valued OR is exact in a WHERE: NULL OR TRUE passes, NULL OR FALSE does not.
      Pred l = compile(((Or) f).left()), r = compile(((Or) f).right());
      return (b, row) -> l.test(b, row) || r.test(b, row);
    }
    if (f instanceof IsNull) {
      Value v = value(((IsNull) f).attribute());
      return (b, row) -> v.isNull(b, row);
    }
    if (f instanceof IsNotNull) {
      Value v = value(((IsNotNull) f).attribute());
      return (b, row) -> !v.isNull(b, row);
    }
    if (f instanceof In) {
      In in = (In) f;
      Value v = value(in.attribute());
      List<Object> keys = new ArrayList<>();
      for (Object x : in.values()) if (x != null) keys.add(v.key(x));
      Object[] ks = keys.toArray();
      return (b, row) -> {
        if (v.isNull(b, row)) return false;
        for (Object k : ks) if (v.compare(b, row, k) == 0) return true;
        return false;
      };
    }
    if (f instanceof StringStartsWith || f instanceof StringEndsWith || f instanceof StringContains) {
      String attr = f instanceof StringStartsWith ? ((StringStartsWith) f).attribute()
          : f instanceof StringEndsWith ? ((StringEndsWith) f).attribute() : ((StringContains) f).attribute();
      String lit = f instanceof StringStartsWith ? ((StringStartsWith) f).value()
          : f instanceof StringEndsWith ? ((StringEndsWith) f).value() : ((StringContains) f).value();
      Value v = value(attr);
      if (v.want.type != Type.STRING || lit == null) throw new NotPushable(f.toString());
      byte[] k = lit.getBytes(StandardCharsets.UTF_8);
      int how = f instanceof StringStartsWith ? 0 : f instanceof StringEndsWith ? 1 : 2;
      return (b, row) -> !v.isNull(b, row) && v.matches(b, row, k, how);
    }
    if (f instanceof EqualNullSafe) {
      EqualNullSafe e = (EqualNullSafe) f;
      Value v = value(e.attribute());
      if (e.value() == null) return (b, row) -> v.isNull(b, row);
      Object k = v.key(e.value());
      return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) == 0;
    }
    String attr;
    Object lit;
    int op; // 0 =, 1 <, 2 <=, 3 >, 4 >=
    if (f instanceof EqualTo) { attr = ((EqualTo) f).attribute(); lit = ((EqualTo) f).value(); op = 0; }
    else if (f instanceof LessThan) { attr = ((LessThan) f).attribute(); lit = ((LessThan) f).value(); op = 1; }
    else if (f instanceof LessThanOrEqual) { attr = ((LessThanOrEqual) f).attribute(); lit = ((LessThanOrEqual) f).value(); op = 2; }
    else if (f instanceof GreaterThan) { attr = ((GreaterThan) f).attribute(); lit = ((GreaterThan) f).value(); op = 3; }
    else if (f instanceof GreaterThanOrEqual) { attr = ((GreaterThanOrEqual) f).attribute(); lit = ((GreaterThanOrEqual) f).value(); op = 4; }
    else throw new NotPushable(f.toString());
    Value v = value(attr);
    if (lit == null) return (b, row) -> false; // a comparison with NULL is never true
    Object k = v.key(lit);
    switch (op) {
      case 0: return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) == 0;
      case 1: return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) < 0;
      case 2: return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) <= 0;
      case 3: return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) > 0;
      default: return (b, row) -> !v.isNull(b, row) && v.compare(b, row, k) >= 0;
    }
  }

  /** The column a filter names: a current field (a quoted name unquoted), else NotPushable. */
  private Value value(String attr) throws NotPushable {
    int j = current.indexOf(attr);
    if (j < 0 && attr.length() > 1 && attr.startsWith("`") && attr.endsWith("`"))
      j = current.indexOf(attr.substring(1, attr.length() - 1).replace("``", "`"));
    if (j < 0) throw new NotPushable("not a schema column: " + attr);
    return new Value(j);
  }

  /** One current field of a row, compared with literals turned into its key space. */
  private final class Value {
    private final Field want;
    private final int i; // in the file's version, or -1
    private final Type src;
    private final int slot;
    private final int domain; // 0 long, 1 double, 2 decimal, 3 bytes, 4 unsigned 64

    Value(int cur) {
      want = current.fields[cur];
      i = proj[cur];
      src = i < 0 ? null : file.fields[i].type;
      slot = i < 0 ? 0 : file.slotAt[i];
      switch (want.type) {
        case FLOAT32: case FLOAT64: domain = 1; break;
        case DECIMAL128: domain = 2; break;
        case STRING: case BINARY: domain = 3; break;
        case UINT64: domain = 4; break;
        default: domain = 0;
      }
    }

    boolean isNull(ByteBuffer b, int row) {
      return i < 0 || !file.valid(b, row, i);
    }

    /** A literal of the column's Spark type as a key {@link #compare} takes; else NotPushable. */
    Object key(Object lit) throws NotPushable {
      switch (domain) {
        case 1:
          if (lit instanceof Float || lit instanceof Double) return ((Number) lit).doubleValue();
          break;
        case 2:
        case 4:
          if (lit instanceof BigDecimal) return lit;
          if (lit instanceof Long || lit instanceof Integer || lit instanceof Short || lit instanceof Byte)
            return BigDecimal.valueOf(((Number) lit).longValue());
          break;
        case 3:
          if (want.type == Type.STRING && lit instanceof String) return ((String) lit).getBytes(StandardCharsets.UTF_8);
          if (want.type == Type.BINARY && lit instanceof byte[]) return lit;
          break;
        default:
          return longKey(lit);
      }
      throw new NotPushable("literal " + lit + " for " + want.name + " (" + want.typeName() + ")");
    }

    private Long longKey(Object lit) throws NotPushable {
      switch (want.type) {
        case BOOL:
          if (lit instanceof Boolean) return ((Boolean) lit) ? 1L : 0L;
          break;
        case TIMESTAMP_US: {
          Long us = LiteMQScanBuilder.micros(lit);
          if (us != null && !(lit instanceof java.sql.Timestamp && us < GREGORIAN_SAFE_US)) return us;
          break;
        }
        case DATE32:
          if (lit instanceof java.time.LocalDate) return ((java.time.LocalDate) lit).toEpochDay();
          if (lit instanceof java.sql.Date) {
            long d = ((java.sql.Date) lit).toLocalDate().toEpochDay();
            if (d >= GREGORIAN_SAFE_DAYS) return d; // older dates: Spark rebases Julian dates
          }
          break;
        default:
          if (lit instanceof Long || lit instanceof Integer || lit instanceof Short || lit instanceof Byte)
            return ((Number) lit).longValue();
      }
      throw new NotPushable("literal " + lit + " for " + want.name + " (" + want.typeName() + ")");
    }

    /**
     * Whether the row's string (not null) starts with ({@code how} 0), ends with (1) or
     * contains (2) the bytes {@code k}: UTF-8 bytes match where the text does.
     */
    boolean matches(ByteBuffer b, int row, byte[] k, int how) {
      int s = file.varStart(b, row, i), n = b.getInt(row + slot) - s, at = row + file.fixedLen + s;
      if (k.length > n) return false;
      int from = how == 1 ? n - k.length : 0, last = how == 2 ? n - k.length : from;
      for (int o = from; o <= last; o++) {
        int q = 0;
        while (q < k.length && b.get(at + o + q) == k[q]) q++;
        if (q == k.length) return true;
      }
      return false;
    }

    /** The row's value against a key (the row's value is not null). */
    int compare(ByteBuffer b, int row, Object key) {
      int p = row + slot;
      switch (domain) {
        case 0:
          return Long.compare(integer(b, p, src), (Long) key);
        case 1: {
          double x = src == Type.FLOAT32 ? b.getFloat(p) : b.getDouble(p), y = (Double) key;
          return x == y ? 0 : Double.compare(x, y); // Spark's SQLOrderingUtil.compareDoubles
        }
        case 2:
          return new BigDecimal(i128(b, p), want.scale).compareTo((BigDecimal) key);
        case 4:
          return new BigDecimal(unsigned(integer(b, p, src))).compareTo((BigDecimal) key);
        default: {
          int s = file.varStart(b, row, i), n = b.getInt(p) - s, at = row + file.fixedLen + s;
          byte[] k = (byte[]) key;
          for (int q = 0; q < n && q < k.length; q++) {
            int c = (b.get(at + q) & 0xff) - (k[q] & 0xff);
            if (c != 0) return c;
          }
          return Integer.compare(n, k.length);
        }
      }
    }
  }

  /** 1900-01-01: from here on a java.sql date or timestamp is the same in Spark's calendar. */
  private static final long GREGORIAN_SAFE_DAYS = -25567, GREGORIAN_SAFE_US = GREGORIAN_SAFE_DAYS * 86_400_000_000L;
}
