package io.litemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The schema of a load of typed queues (docs/FORMAT.md, "Typed records", "Evolution"): every
 * queue's schema versions (metadata.json {@code schema.versions}, else the data files' headers),
 * the load's current fields (every queue's current version must have the same fields), and, per
 * data file, where each current field lies in the file's version: a field the file's version
 * lacks reads as null, a renamed one by its current name, a narrower value widened.
 */
final class TypedLoad {
  /** The load's fields, in the current version's order. */
  final TypedSchema current;
  /** Per queue directory: its versions by number (the highest is its current one). */
  private final Map<String, TreeMap<Integer, TypedSchema>> versions;

  private TypedLoad(TypedSchema current, Map<String, TreeMap<Integer, TypedSchema>> versions) {
    this.current = current;
    this.versions = versions;
  }

  /**
   * The typed schema of the queues of a load, or null when none is typed. A load that mixes
   * typed and untyped queues, or typed queues whose current fields differ, is refused naming
   * two of them: one DataFrame has one schema.
   */
  static TypedLoad of(List<Planner.Ref> refs) {
    Map<String, TreeMap<Integer, TypedSchema>> all = new HashMap<>();
    Planner.Ref first = null, untyped = null;
    TypedSchema cur = null;
    for (Planner.Ref r : refs) {
      TreeMap<Integer, TypedSchema> vs = versionsOf(r);
      if (vs.isEmpty()) {
        if (untyped == null) untyped = r;
        continue;
      }
      TypedSchema c = vs.lastEntry().getValue();
      if (cur == null) {
        first = r;
        cur = c;
      } else if (!sameShape(cur, c)) {
        throw new LiteMQException("queues " + first.path() + " " + cur + " and " + r.path() + " " + c
            + " have different schemas: read them apart");
      }
      all.put(r.path(), vs);
    }
    if (cur == null) return null;
    if (untyped != null)
      throw new LiteMQException("a load of typed queues cannot hold untyped queues: " + first.path()
          + " has the schema " + cur + ", " + untyped.path() + " has none; read them apart");
    return new TypedLoad(cur, all);
  }

  /** Same field names, types and nullability, in the same order (the Python source's rule). */
  private static boolean sameShape(TypedSchema a, TypedSchema b) {
    if (a.fields.length != b.fields.length) return false;
    for (int i = 0; i < a.fields.length; i++) if (!a.fields[i].sameAs(b.fields[i])) return false;
    return true;
  }

  /**
   * A queue's schema versions: metadata.json's {@code schema.versions}, with the versions its
   * data files' headers hold added where metadata.json is missing or lacks them (an archive
   * keeps no metadata.json: its files say). Empty for an untyped queue.
   */
  static TreeMap<Integer, TypedSchema> versionsOf(Planner.Ref r) {
    TreeMap<Integer, TypedSchema> out = new TreeMap<>();
    if (r.archived() == null) {
      File meta = new File(r.path(), "metadata.json");
      if (meta.isFile()) {
        JsonNode m;
        try {
          m = new ObjectMapper().readTree(meta);
        } catch (IOException e) {
          throw new LiteMQException(meta + ": does not parse as JSON: " + e.getMessage());
        }
        JsonNode list = m == null ? null : m.path("schema").path("versions");
        if (list != null && list.isArray()) {
          for (JsonNode v : list) {
            try {
              TypedSchema s = TypedSchema.parse(v, null);
              out.put(s.version, s);
            } catch (IllegalArgumentException e) {
              throw new LiteMQException(meta + ": schema: " + e.getMessage());
            }
          }
          if (!out.isEmpty()) return out;
        }
      }
    }
    // No schema in metadata.json: the data files' headers say (an untyped queue's say 0).
    List<File> files = r.archived() == null ? Planner.dataFiles(r.path()) : archivedFiles(r);
    for (int i = files.size() - 1; i >= 0; i--) {
      try (DataFile f = DataFile.open(files.get(i).getPath())) {
        if (f.schema == null) {
          if (i == files.size() - 1) return out; // the last file is untyped: an untyped queue
          continue;
        }
        out.putIfAbsent(f.schema.version, f.schema);
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }
    return out;
  }

  private static List<File> archivedFiles(Planner.Ref r) {
    List<File> out = new java.util.ArrayList<>();
    for (Archive.Entry e : r.archived()) out.add(new File(e.file()));
    return out;
  }

  /**
   * The DataFrame's schema, as the Python source's: {@code seq}, {@code timestamp},
   * {@code queue} (unless a field has that name), then one column per field.
   */
  StructType sparkSchema() {
    org.apache.spark.sql.types.Metadata none = org.apache.spark.sql.types.Metadata.empty();
    StructType s = new StructType()
        .add(new StructField("seq", DataTypes.LongType, false, none))
        .add(new StructField("timestamp", DataTypes.TimestampType, false, none));
    if (current.indexOf("queue") < 0) s = s.add(new StructField("queue", DataTypes.StringType, false, none));
    for (TypedSchema.Field f : current.fields)
      s = s.add(new StructField(f.name, f.sparkType(), f.nullable, org.apache.spark.sql.types.Metadata.empty()));
    return s;
  }

  /**
   * Where each current field lies in a data file of queue {@code queue} holding version
   * {@code file}: its index there, or -1 when the file's version lacks it. Follows the field
   * back through the queue's versions (a rename at each step by its aliases, as schema.rs
   * check_evolution matches them). A type that does not widen to the current one, or a
   * non-nullable current field the file lacks, is damage naming the file.
   */
  int[] projection(String queue, DataFile file) {
    TypedSchema fs = file.schema;
    TreeMap<Integer, TypedSchema> vs = versions.get(queue);
    int[] out = new int[current.fields.length];
    TypedSchema top = vs == null ? current : vs.lastEntry().getValue();
    // The file's version as the queue lists it: followed version by version; a file whose
    // version the queue does not list (or lists with other fields) is matched by name and
    // aliases directly (columns.rs source_field does the same).
    TypedSchema known = vs == null ? null : vs.get(fs.version);
    boolean chain = known != null && known.sameFields(fs);
    for (int j = 0; j < out.length; j++) {
      TypedSchema.Field f = top.fields[j];
      boolean gone = false;
      if (chain)
        for (TypedSchema s : vs.headMap(top.version, false).tailMap(fs.version, false).descendingMap().values()) {
          int i = TypedSchema.predecessor(s, f);
          if (i < 0) {
            gone = true;
            break;
          }
          f = s.fields[i];
        }
      int i = gone ? -1 : TypedSchema.predecessor(fs, f);
      TypedSchema.Field want = current.fields[j];
      if (i < 0 && !want.nullable)
        throw file.damage(72, "schema version " + fs.version + " lacks the non-nullable field \"" + want.name + "\"");
      if (i >= 0 && fs.fields[i].nullable && !want.nullable)
        throw file.damage(72, "schema version " + fs.version + " has field \"" + fs.fields[i].name
            + "\" nullable, the current version does not");
      if (i >= 0 && !fs.fields[i].widensTo(want))
        throw file.damage(72, "schema version " + fs.version + " holds field \"" + fs.fields[i].name + "\" as "
            + fs.fields[i].typeName() + ", which does not widen to the current " + want.typeName());
      out[j] = i;
    }
    return out;
  }
}
