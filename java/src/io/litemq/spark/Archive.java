package io.litemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.io.IOException;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * An archive on a local or mounted path (docs/FORMAT.md, "Archives"): its manifest, checked,
 * and its data files, which are sealed data files byte for byte, read like a queue's. The
 * manifest rules are python/litemq/archive.py's {@code _parse_manifest}: a manifest this class
 * does not accept whole is left to the Python source ({@link Planner.NotForJvm}), which raises
 * the typed {@code ArchiveError} naming what is wrong, so the two readers never disagree on
 * rows (test_spark_conformance.py checks both with broken manifests).
 */
final class Archive {
  private static final BigInteger U64 = BigInteger.ONE.shiftLeft(64);
  private static final Set<String> KINDS = Set.of("data", "index", "offsets", "key_index", "metadata");

  /** One data file as the manifest lists it: what the file must say when it is read. */
  record Entry(String file, long size, long fileNumber, long firstSeq, long endSeq, long framesEnd,
      long framesCrc, long firstTs, long lastTs) implements java.io.Serializable {}

  private Archive() {}

  /** The data files of the archive at {@code root}, in sequence order, or NotForJvm. */
  static List<Entry> read(File root) throws Planner.NotForJvm {
    JsonNode m;
    try {
      m = new ObjectMapper().readTree(new File(root, Planner.ARCHIVE_MANIFEST));
    } catch (IOException e) {
      throw doubt(root, "does not parse");
    }
    if (m == null || !m.isObject() || !m.path("litemq_archive").isIntegralNumber()
        || m.get("litemq_archive").asLong() != 1) throw doubt(root, "is not a version-1 manifest");
    JsonNode files = m.has("files") ? m.get("files") : new ObjectMapper().createArrayNode();
    if (!files.isArray()) throw doubt(root, "files is not a list");
    List<Entry> data = new ArrayList<>();
    Set<String> seen = new HashSet<>();
    for (JsonNode d : files) {
      if (!d.isObject()) throw doubt(root, "a files entry is not an object");
      String rel = d.path("path").isTextual() ? d.get("path").asText() : null;
      if (rel == null || !plainRelative(rel) || !seen.add(rel)) throw doubt(root, "a path is not plain or listed twice");
      String kind = d.path("kind").isTextual() ? d.get("kind").asText() : null;
      if (kind == null || !KINDS.contains(kind)) throw doubt(root, rel + ": unknown kind");
      boolean isData = kind.equals("data");
      for (String k : new String[] {"size", "crc64", "file_number", "first_seq", "end_seq",
          "first_ts", "last_ts", "frames_end", "frames_crc"}) {
        boolean required = k.equals("size") || k.equals("crc64")
            || (isData && !k.equals("first_ts") && !k.equals("last_ts"));
        JsonNode v = d.get(k);
        if ((v == null || v.isNull()) && !required) continue;
        if (v == null || !u64(v)) throw doubt(root, rel + ": " + k + " is not an integer in 0..2^64");
      }
      if (kind.equals("metadata") && !sameBytes(new File(root, rel), d)) throw doubt(root, rel + " is not the listed file");
      if (!isData) continue;
      Entry e = new Entry(new File(root, rel).getPath(), l(d, "size"), l(d, "file_number"),
          l(d, "first_seq"), l(d, "end_seq"), l(d, "frames_end"), l(d, "frames_crc"),
          l(d, "first_ts"), l(d, "last_ts"));
      if (Long.compareUnsigned(e.endSeq(), e.firstSeq()) < 0) throw doubt(root, rel + ": end_seq before first_seq");
      data.add(e);
    }
    // Sequences and file numbers are below 2^63 in any queue: compare them as signed.
    for (Entry e : data)
      if (e.firstSeq() < 0 || e.endSeq() < 0 || e.fileNumber() < 0) throw doubt(root, "a sequence past 2^63");
    data.sort((a, b) -> Long.compare(a.firstSeq(), b.firstSeq()));
    JsonNode gaps = m.has("gaps") ? m.get("gaps") : null;
    Set<String> declared = new HashSet<>();
    if (gaps != null) {
      if (!gaps.isArray()) throw doubt(root, "gaps is not a list");
      for (JsonNode g : gaps) {
        if (!g.isArray() || g.size() != 2 || !u64(g.get(0)) || !u64(g.get(1))) throw doubt(root, "gaps is malformed");
        declared.add(g.get(0).asText() + "," + g.get(1).asText());
      }
    }
    for (int i = 1; i < data.size(); i++) {
      Entry a = data.get(i - 1), b = data.get(i);
      if (b.fileNumber() <= a.fileNumber() || b.firstSeq() < a.endSeq()) throw doubt(root, "files out of order or overlapping");
      if (b.firstSeq() > a.endSeq() && gaps != null && !declared.contains(a.endSeq() + "," + b.firstSeq()))
        throw doubt(root, "an undeclared gap");
    }
    for (String k : new String[] {"first_seq", "end_seq"}) {
      if (!m.has(k)) continue;
      JsonNode v = m.get(k);
      Long want = data.isEmpty() ? null : k.equals("first_seq") ? data.get(0).firstSeq() : data.get(data.size() - 1).endSeq();
      if (want == null ? !v.isNull() : !(v.isIntegralNumber() && v.canConvertToLong() && v.asLong() == want))
        throw doubt(root, k + " is not its data files'");
    }
    for (String k : new String[] {"consumers", "work_queues"}) {
      JsonNode v = m.get(k);
      if (v == null) continue;
      if (!v.isObject()) throw doubt(root, k + " is not an object");
      for (JsonNode x : v) {
        boolean ok = k.equals("consumers") ? u64(x)
            : x.isObject() && x.has("low") && u64(x.get("low")) && x.has("window") && u64(x.get("window"));
        if (!ok) throw doubt(root, k + " is malformed");
      }
    }
    return data;
  }

  /**
   * Fails unless the data file {@code f} is the one its manifest entry lists: its length, and
   * its header's and footer's numbers (a version-3 file has no footer: its header's).
   */
  static void check(DataFile f, Entry e) {
    boolean same = f.length == e.size() && f.fileNumber == e.fileNumber() && f.firstSeq == e.firstSeq()
        && (f.version == 3 || (f.sealed() && f.endSeq == e.endSeq() && f.framesEnd == e.framesEnd()
            && f.framesCrc == e.framesCrc()));
    if (!same)
      throw new LiteMQException(e.file() + ": not the file the archive manifest lists (length "
          + f.length + ", file number " + f.fileNumber + ", first_seq " + f.firstSeq
          + (f.sealed() ? ", end_seq " + f.endSeq + ", frames_crc " + Long.toUnsignedString(f.framesCrc) : ", no valid footer")
          + "; listed: length " + e.size() + ", file number " + e.fileNumber() + ", first_seq "
          + e.firstSeq() + ", end_seq " + e.endSeq() + ", frames_crc " + Long.toUnsignedString(e.framesCrc()) + ")");
  }

  private static boolean u64(JsonNode v) {
    if (v == null || !v.isIntegralNumber()) return false;
    BigInteger b = v.bigIntegerValue();
    return b.signum() >= 0 && b.compareTo(U64) < 0;
  }

  private static long l(JsonNode d, String k) {
    JsonNode v = d.get(k);
    return v == null || v.isNull() ? 0 : v.bigIntegerValue().longValue();
  }

  private static boolean plainRelative(String rel) {
    if (rel.isEmpty() || rel.contains("\\") || rel.contains("\0")) return false;
    for (String p : rel.split("/", -1)) if (p.isEmpty() || p.equals(".") || p.equals("..")) return false;
    return true;
  }

  /** Whether a small listed file (metadata.json) has its listed size and CRC-64. */
  private static boolean sameBytes(File f, JsonNode d) {
    try {
      byte[] b = Files.readAllBytes(f.toPath());
      return b.length == l(d, "size") && Crc64.crc(ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN), 0, b.length) == l(d, "crc64");
    } catch (IOException e) {
      return false;
    }
  }

  private static Planner.NotForJvm doubt(File root, String what) {
    return new Planner.NotForJvm("archive " + root + ": its manifest " + what + " (the Python source checks it)");
  }
}
