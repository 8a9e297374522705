package io.litemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.io.Serializable;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;

/**
 * One version of a typed queue's schema and the layout of its rows (docs/FORMAT.md, "Typed
 * records (version 12)"): the JVM twin of rust/format/typed/schema.rs and row.rs. Parsed from
 * the JSON a data file's header or metadata.json holds; checks a row as the Rust reader does
 * ({@link #rowLen}, {@link #checkRow}, with the same reasons) and gives each field's Spark type.
 */
final class TypedSchema implements Serializable {
  private static final long serialVersionUID = 1L;

  /** A field's type: what its fixed slot holds. */
  enum Type {
    BOOL("bool", 1), INT8("int8", 1), INT16("int16", 2), INT32("int32", 4), INT64("int64", 8),
    UINT8("uint8", 1), UINT16("uint16", 2), UINT32("uint32", 4), UINT64("uint64", 8),
    FLOAT32("float32", 4), FLOAT64("float64", 8), TIMESTAMP_US("timestamp_us", 8),
    DATE32("date32", 4), DECIMAL128("decimal128", 16), STRING("string", 4), BINARY("binary", 4);

    final String json;
    final int width;

    Type(String json, int width) {
      this.json = json;
      this.width = width;
    }

    boolean isVar() {
      return this == STRING || this == BINARY;
    }

    boolean isSigned() {
      return this == INT8 || this == INT16 || this == INT32 || this == INT64;
    }

    boolean isUnsigned() {
      return this == UINT8 || this == UINT16 || this == UINT32 || this == UINT64;
    }
  }

  /** Names a field may not have: the columns every read has already (schema.rs RESERVED_NAMES). */
  static final Set<String> RESERVED = Set.of("seq", "timestamp", "key", "headers", "payload", "topic",
      "queue_id", "tags", "priority", "expires_at", "codec", "raw_len", "key_text", "headers_text");
  static final int MAX_FIELDS = 1024;

  /** One field: name, type (with precision and scale for decimals), nullability, old names. */
  static final class Field implements Serializable {
    private static final long serialVersionUID = 1L;
    final String name;
    final Type type;
    final int precision, scale;
    final boolean nullable;
    final List<String> aliases;

    Field(String name, Type type, int precision, int scale, boolean nullable, List<String> aliases) {
      this.name = name;
      this.type = type;
      this.precision = precision;
      this.scale = scale;
      this.nullable = nullable;
      this.aliases = aliases;
    }

    /** The type as the schema JSON names it ({@code int64}, {@code decimal128(10,2)}). */
    String typeName() {
      return type == Type.DECIMAL128 ? "decimal128(" + precision + "," + scale + ")" : type.json;
    }

    /** Same name, type and nullability. */
    boolean sameAs(Field o) {
      return name.equals(o.name) && type == o.type && precision == o.precision && scale == o.scale
          && nullable == o.nullable;
    }

    /**
     * The Spark type of the column: integers of the same width, unsigned ones in the next
     * wider signed type, uint64 as decimal(20,0) (exact, as Spark's Parquet reader reads
     * UINT_64), timestamp_us as timestamp, date32 as date.
     */
    DataType sparkType() {
      switch (type) {
        case BOOL: return DataTypes.BooleanType;
        case INT8: return DataTypes.ByteType;
        case INT16: case UINT8: return DataTypes.ShortType;
        case INT32: case UINT16: return DataTypes.IntegerType;
        case INT64: case UINT32: return DataTypes.LongType;
        case UINT64: return DataTypes.createDecimalType(20, 0);
        case FLOAT32: return DataTypes.FloatType;
        case FLOAT64: return DataTypes.DoubleType;
        case TIMESTAMP_US: return DataTypes.TimestampType;
        case DATE32: return DataTypes.DateType;
        case DECIMAL128: return DataTypes.createDecimalType(precision, scale);
        case STRING: return DataTypes.StringType;
        default: return DataTypes.BinaryType;
      }
    }

    /** Whether every value of this field's type is a value of {@code to} (schema.rs widens_to). */
    boolean widensTo(Field to) {
      if (type == to.type) return type != Type.DECIMAL128 || (precision == to.precision && scale == to.scale);
      if ((type.isSigned() || type.isUnsigned()) && (to.type.isSigned() || to.type.isUnsigned()))
        return to.type.width > type.width && (type.isUnsigned() || to.type.isSigned());
      return type == Type.FLOAT32 && to.type == Type.FLOAT64;
    }
  }

  final int version;
  final Field[] fields;
  /** Layout (row.rs RowLayout): bitmap bytes, fixed length, each slot's offset and null bit. */
  final int bitmapLen, fixedLen, nullableCount, lastVar;
  final int[] slotAt, nullBit, prevVar;
  /** Fields the row check visits: var fields, bools, nullable fixed fields. */
  private final int[] varFields, boolFields, nullableFixed;
  /** The JSON this schema was parsed from (what a data file's header holds). */
  final String json;

  private TypedSchema(int version, Field[] fields, String json) {
    this.version = version;
    this.fields = fields;
    this.json = json;
    int n = fields.length;
    slotAt = new int[n];
    nullBit = new int[n];
    prevVar = new int[n];
    int nullable = 0, lv = -1;
    for (Field f : fields) if (f.nullable) nullable++;
    nullableCount = nullable;
    bitmapLen = (nullable + 7) / 8;
    int at = bitmapLen, bit = 0;
    List<Integer> vars = new ArrayList<>(), bools = new ArrayList<>(), nfix = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Field f = fields[i];
      slotAt[i] = at;
      nullBit[i] = f.nullable ? bit++ : -1;
      prevVar[i] = lv;
      if (f.type.isVar()) {
        lv = i;
        vars.add(i);
      } else {
        if (f.type == Type.BOOL) bools.add(i);
        if (f.nullable) nfix.add(i);
      }
      at += f.type.width;
    }
    fixedLen = at;
    lastVar = lv;
    varFields = vars.stream().mapToInt(Integer::intValue).toArray();
    boolFields = bools.stream().mapToInt(Integer::intValue).toArray();
    nullableFixed = nfix.stream().mapToInt(Integer::intValue).toArray();
  }

  /** Parses and checks one schema version's JSON text; IllegalArgumentException says why. */
  static TypedSchema parse(String json) {
    JsonNode v;
    try {
      v = new ObjectMapper().readTree(json);
    } catch (IOException e) {
      throw new IllegalArgumentException("schema JSON does not parse: " + e.getMessage());
    }
    return parse(v, json);
  }

  /** Parses and checks one schema version (schema.rs Schema::from_json_value). */
  static TypedSchema parse(JsonNode v, String json) {
    if (v == null || !v.isObject()) throw new IllegalArgumentException("schema JSON is not an object");
    JsonNode ver = v.get("version");
    if (ver == null || !ver.isIntegralNumber() || ver.asLong() < 0 || ver.asLong() > 0xFFFFFFFFL)
      throw new IllegalArgumentException("schema without a version number");
    JsonNode fs = v.get("fields");
    if (fs == null || !fs.isArray()) throw new IllegalArgumentException("schema without a list of fields");
    List<Field> out = new ArrayList<>();
    for (JsonNode f : fs) out.add(field(f));
    long version = ver.asLong();
    if (out.isEmpty() || out.size() > MAX_FIELDS)
      throw new IllegalArgumentException("a schema has 1 to " + MAX_FIELDS + " fields, not " + out.size());
    if (version == 0) throw new IllegalArgumentException("schema versions start at 1");
    Set<String> seen = new HashSet<>();
    for (Field f : out) {
      int len = f.name.getBytes(StandardCharsets.UTF_8).length;
      if (len < 1 || len > 255) throw new IllegalArgumentException("field name \"" + f.name + "\": names are 1 to 255 bytes of UTF-8");
      if (RESERVED.contains(f.name)) throw new IllegalArgumentException("field \"" + f.name + "\": the name is a column every read has already");
      if (!seen.add(f.name)) throw new IllegalArgumentException("field \"" + f.name + "\" appears twice");
    }
    for (Field f : out)
      for (String a : f.aliases)
        if (!a.equals(f.name) && seen.contains(a))
          throw new IllegalArgumentException("field \"" + f.name + "\": its alias \"" + a + "\" is the name of another field");
    return new TypedSchema((int) version, out.toArray(new Field[0]), json != null ? json : v.toString());
  }

  private static Field field(JsonNode f) {
    JsonNode nameNode = f.get("name");
    if (nameNode == null || !nameNode.isTextual()) throw new IllegalArgumentException("a field without a name");
    String name = nameNode.asText();
    JsonNode t = f.get("type");
    if (t == null || !t.isTextual()) throw new IllegalArgumentException("field \"" + name + "\" has no type");
    String ty = t.asText();
    Type type = null;
    int precision = 0, scale = 0;
    for (Type k : Type.values()) if (k != Type.DECIMAL128 && k.json.equals(ty)) type = k;
    if (type == null) {
      java.util.regex.Matcher m = java.util.regex.Pattern.compile("decimal128\\((\\d{1,3}),(\\d{1,3})\\)").matcher(ty);
      if (!m.matches()) throw new IllegalArgumentException("field \"" + name + "\": unknown field type \"" + ty + "\"");
      precision = Integer.parseInt(m.group(1));
      scale = Integer.parseInt(m.group(2));
      if (precision < 1 || precision > 38 || scale > precision)
        throw new IllegalArgumentException("field \"" + name + "\": unknown field type \"" + ty + "\"");
      type = Type.DECIMAL128;
    }
    boolean nullable = true;
    JsonNode nb = f.get("nullable");
    if (nb != null) {
      if (!nb.isBoolean()) throw new IllegalArgumentException("field \"" + name + "\": nullable is not a bool");
      nullable = nb.asBoolean();
    }
    List<String> aliases = new ArrayList<>();
    JsonNode al = f.get("aliases");
    if (al != null) {
      if (!al.isArray()) throw new IllegalArgumentException("field \"" + name + "\": aliases is not a list of names");
      for (JsonNode a : al) {
        if (!a.isTextual()) throw new IllegalArgumentException("field \"" + name + "\": aliases is not a list of names");
        aliases.add(a.asText());
      }
    }
    return new Field(name, type, precision, scale, nullable, aliases);
  }

  /** The index of the field named {@code name}, or -1. */
  int indexOf(String name) {
    for (int i = 0; i < fields.length; i++) if (fields[i].name.equals(name)) return i;
    return -1;
  }

  /** Same fields (names, types, nullability, aliases), versions aside. */
  boolean sameFields(TypedSchema o) {
    if (o.fields.length != fields.length) return false;
    for (int i = 0; i < fields.length; i++)
      if (!fields[i].sameAs(o.fields[i]) || !fields[i].aliases.equals(o.fields[i].aliases)) return false;
    return true;
  }

  /**
   * The field of {@code older} that {@code f} (of the version after it) continues: the first
   * with its name or one of its aliases, as schema.rs check_evolution matches them; or -1.
   */
  static int predecessor(TypedSchema older, Field f) {
    for (int i = 0; i < older.fields.length; i++) {
      Field of = older.fields[i];
      if (of.name.equals(f.name) || f.aliases.contains(of.name)) return i;
    }
    return -1;
  }

  @Override
  public String toString() {
    StringBuilder s = new StringBuilder("{");
    for (Field f : fields) {
      if (s.length() > 1) s.append(", ");
      s.append(f.name).append(": ").append(f.typeName()).append(f.nullable ? "" : " not null");
    }
    return s.append('}').toString();
  }

  // ---------------------------------------------------------------------------------------
  // Rows (row.rs): a row's length, and every check FORMAT.md asks of one.

  /**
   * The length of the row at {@code b[at]} with {@code avail} bytes after it (a row batch's
   * block runs on past it): F plus its last var end. Negative when it cannot be: -1 shorter
   * than F, -2 runs past its record ({@link #lenReason}).
   */
  int rowLen(ByteBuffer b, int at, int avail) {
    if (avail < fixedLen) return -1;
    long var = lastVar < 0 ? 0 : b.getInt(at + slotAt[lastVar]) & 0xFFFFFFFFL;
    long len = fixedLen + var;
    return len > avail ? -2 : (int) len;
  }

  static String lenReason(int code) {
    return code == -1 ? "typed row shorter than its schema's fixed part" : "typed row runs past its record";
  }

  /** Whether field {@code i} has a value in the row at {@code at}. */
  boolean valid(ByteBuffer b, int at, int i) {
    int bit = nullBit[i];
    return bit < 0 || (b.get(at + (bit >>> 3)) & (1 << (bit & 7))) != 0;
  }

  /** The start of var field {@code i}'s bytes relative to the var area. */
  int varStart(ByteBuffer b, int at, int i) {
    int p = prevVar[i];
    return p < 0 ? 0 : b.getInt(at + slotAt[p]);
  }

  /**
   * Checks the row at {@code b[at, at + len)} whose length {@link #rowLen} gave: bitmap bits
   * past the nullable fields zero, var ends that never decrease, nulls with zero slots (a null
   * string repeats the previous end), bools 0 or 1, strings UTF-8. Null when it passes, else
   * the reason, worded as row.rs words it.
   */
  String checkRow(ByteBuffer b, int at, int len) {
    for (int bit = nullableCount; bit < bitmapLen * 8; bit++)
      if ((b.get(at + (bit >>> 3)) & (1 << (bit & 7))) != 0) return "typed row sets a null-bitmap bit past its nullable fields";
    long prev = 0;
    for (int i : varFields) {
      long end = b.getInt(at + slotAt[i]) & 0xFFFFFFFFL;
      if (end < prev) return "typed row's var ends decrease";
      if (!valid(b, at, i) && end != prev) return "typed row's null string or binary has bytes";
      if (fields[i].type == Type.STRING && !utf8(b, at + fixedLen + (int) prev, (int) (end - prev)))
        return "typed row's string is not UTF-8";
      prev = end;
    }
    for (int i : nullableFixed) {
      if (valid(b, at, i)) continue;
      int p = at + slotAt[i];
      for (int k = 0; k < fields[i].type.width; k++)
        if (b.get(p + k) != 0) return "typed row's null value has a non-zero slot";
    }
    for (int i : boolFields)
      if (valid(b, at, i) && (b.get(at + slotAt[i]) & 0xff) > 1) return "typed row's bool is neither 0 nor 1";
    return null;
  }

  /** Whether {@code b[at, at + n)} is UTF-8 as Rust's from_utf8 accepts it. */
  static boolean utf8(ByteBuffer b, int at, int n) {
    int i = at, end = at + n;
    while (end - i >= 8 && (b.getLong(i) & 0x8080808080808080L) == 0) i += 8; // ASCII, 8 at a time
    while (i < end) {
      int c = b.get(i) & 0xff;
      if (c < 0x80) {
        i++;
        continue;
      }
      int need, min;
      if (c >= 0xC2 && c <= 0xDF) { need = 1; min = 0x80; }
      else if (c >= 0xE0 && c <= 0xEF) { need = 2; min = 0x800; }
      else if (c >= 0xF0 && c <= 0xF4) { need = 3; min = 0x10000; }
      else return false;
      if (i + need >= end) return false;
      int cp = c & (0x3F >> need);
      for (int k = 1; k <= need; k++) {
        int d = b.get(i + k) & 0xff;
        if ((d & 0xC0) != 0x80) return false;
        cp = (cp << 6) | (d & 0x3F);
      }
      if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
      i += need + 1;
    }
    return true;
  }

  /** For error messages: the fields' names. */
  List<String> names() {
    List<String> out = new ArrayList<>();
    for (Field f : fields) out.add(f.name);
    return out;
  }
}
