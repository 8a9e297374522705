package io.litemq.spark;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Queues under the paths given (python/litemq/spark/dataset.py discover_queues, for local
 * queues and datasets) and the partitions that read them: one per data file, a sealed file
 * holding more than rowsPerPartition messages cut at its sparse-index entries.
 */
final class Planner {
  static final String ARCHIVE_MANIFEST = "_litemq_archive.json";
  static final String DATASET_MARKER = "_litemq_dataset";
  private static final Pattern YEAR = Pattern.compile("\\d{4}");
  private static final Pattern DATA = Pattern.compile("(\\d{8})-(\\d+)\\.data");

  /**
   * A queue found: its {@code queue} column value and its directory; for an archive on a path,
   * its data files as the manifest lists them (null for a queue).
   */
  record Ref(String name, String path, List<Archive.Entry> archived) {
    Ref(String name, String path) {
      this(name, path, null);
    }
  }

  /** An encrypted queue's {queue_id, key_check} (metadata.json "encryption"), or null. */
  static String[] encryption(Ref r) {
    try {
      com.fasterxml.jackson.databind.JsonNode meta = new com.fasterxml.jackson.databind.ObjectMapper()
          .readTree(Path.of(r.path(), "metadata.json").toFile());
      com.fasterxml.jackson.databind.JsonNode e = meta.get("encryption");
      if (e == null || e.isNull()) return null;
      return new String[] {e.get("queue_id").asText(), e.get("key_check").asText()};
    } catch (IOException e) {
      return null;
    }
  }

  /** Thrown when the JVM reader does not handle a load (archives): the Python source does. */
  static final class NotForJvm extends Exception {
    NotForJvm(String why) {
      super(why, null, false, false);
    }
  }

  private Planner() {}

  static boolean isQueue(File p) {
    if (!p.isDirectory() || new File(p, ARCHIVE_MANIFEST).exists()) return false;
    if (new File(p, "metadata.json").isFile()) return true;
    for (File y : dirs(p))
      if (YEAR.matcher(y.getName()).matches())
        for (File m : dirs(y))
          for (File d : dirs(m)) {
            String[] names = d.list();
            if (names != null) for (String n : names) if (n.endsWith(".data")) return true;
          }
    return false;
  }

  private static File[] dirs(File p) {
    File[] fs = p.listFiles(File::isDirectory);
    if (fs == null) return new File[0];
    Arrays.sort(fs, Comparator.comparing(File::getName));
    return fs;
  }

  private static void walk(File root, List<File> out) {
    File[] es = root.listFiles();
    if (es == null) return;
    Arrays.sort(es, Comparator.comparing(File::getName));
    for (File e : es) {
      String n = e.getName();
      if (n.startsWith("_") || n.startsWith(".") || !e.isDirectory()) continue;
      if (isQueue(e)) out.add(e);
      else walk(e, out);
    }
  }

  static List<Ref> discover(List<String> paths) throws NotForJvm {
    List<Ref> found = new ArrayList<>();
    for (String raw : paths) {
      if (raw.contains("://")) throw new NotForJvm("archive URI " + raw);
      File p = new File(raw).getAbsoluteFile().toPath().normalize().toFile();
      if (new File(p, ARCHIVE_MANIFEST).isFile()) {
        found.add(new Ref(p.getName(), p.getPath(), Archive.read(p)));
        continue;
      }
      if (!p.exists()) throw new LiteMQException("path does not exist: " + p);
      if (isQueue(p)) {
        found.add(new Ref(p.getName(), p.getPath()));
        continue;
      }
      if (!p.isDirectory()) throw new LiteMQException("not a queue or a directory of queues: " + p);
      List<File> inner = new ArrayList<>();
      walk(p, inner);
      if (inner.isEmpty()) {
        if (hasArchive(p)) throw new NotForJvm("archives under " + p);
        if (!new File(p, DATASET_MARKER).exists())
          throw new LiteMQException("no queue found at " + p + " (expected a queue directory, or a directory of queues written by Spark)");
      }
      for (File q : inner) found.add(new Ref(p.toPath().relativize(q.toPath()).toString(), q.getPath()));
    }
    Set<String> names = new HashSet<>();
    boolean dup = false;
    for (Ref r : found) dup |= !names.add(r.name());
    if (dup) {
      List<Ref> abs = new ArrayList<>();
      for (Ref r : found) abs.add(new Ref(r.path(), r.path(), r.archived()));
      found = abs;
    }
    found.sort(Comparator.comparing(Ref::name).thenComparing(Ref::path));
    return found;
  }

  private static boolean hasArchive(File p) {
    if (new File(p, ARCHIVE_MANIFEST).isFile()) return true;
    File[] es = p.listFiles(File::isDirectory);
    if (es != null) for (File e : es) if (!e.getName().startsWith(".") && hasArchive(e)) return true;
    return false;
  }

  static boolean encrypted(Ref r) {
    try {
      String meta = Files.readString(Path.of(r.path(), "metadata.json"));
      return meta.contains("\"encryption\"");
    } catch (IOException e) {
      return false;
    }
  }

  /** The data files of a queue, in (day, counter) order. */
  static List<File> dataFiles(String queue) {
    List<long[]> keys = new ArrayList<>();
    List<File> files = new ArrayList<>();
    for (File y : dirs(new File(queue))) {
      if (!YEAR.matcher(y.getName()).matches()) continue;
      for (File m : dirs(y))
        for (File d : dirs(m)) {
          String[] names = d.list();
          if (names == null) continue;
          for (String n : names) {
            Matcher mt = DATA.matcher(n);
            if (!mt.matches()) continue;
            files.add(new File(d, n));
            keys.add(new long[] {Long.parseLong(mt.group(1)), Long.parseLong(mt.group(2)), keys.size()});
          }
        }
    }
    keys.sort((a, b) -> a[0] != b[0] ? Long.compare(a[0], b[0]) : Long.compare(a[1], b[1]));
    List<File> out = new ArrayList<>();
    for (long[] k : keys) out.add(files.get((int) k[2]));
    return out;
  }

  /** Valid sparse-index entries of a data file: {seq, offset} pairs in order. */
  static List<long[]> sparseEntries(DataFile f, String dataPath) {
    List<long[]> out = new ArrayList<>();
    String idx = dataPath.substring(0, dataPath.length() - ".data".length()) + ".index";
    try (FileChannel ch = FileChannel.open(Path.of(idx), StandardOpenOption.READ)) {
      long size = ch.size();
      if (size < 256) return out;
      ByteBuffer h = ByteBuffer.allocate(48).order(ByteOrder.LITTLE_ENDIAN);
      ch.read(h, 0);
      if (h.getLong(0) != 0x0058444953514D4CL || ~Crc64.update(~0L, h, 0, 40) != h.getLong(40)) return out;
      int interval = h.getInt(12);
      if (interval <= 0 || h.getLong(16) != f.firstSeq || h.getLong(24) != f.fileNumber) return out;
      long cap = Math.min(h.getLong(32), (size - 256) / 32);
      ByteBuffer e = ByteBuffer.allocate(32 * 4096).order(ByteOrder.LITTLE_ENDIAN);
      for (long i = 0; i < cap; ) {
        e.clear();
        int n = ch.read(e, 256 + 32 * i);
        if (n < 32) break;
        for (int j = 0; j + 32 <= n; j += 32, i++) {
          long seq = e.getLong(j), off = e.getLong(j + 24);
          if (off == 0) return out;
          if (seq != f.firstSeq + i * interval || off < 4096 || off % 8 != 0 || off >= f.length) continue;
          if (~Crc64.update(Crc64.update(~0L, e, j, 16), e, j + 24, 8) != e.getLong(j + 16)) continue;
          out.add(new long[] {seq, off});
        }
      }
    } catch (IOException e) {
      // No index, or unreadable: an index is a hint; the file is scanned from its start.
    }
    return out;
  }

  static final long CONTENT_TOPICS = 1;
  /** The Python source's INDEX_ALIGN: partitions of more rows are cut at multiples of it. */
  static final long INDEX_ALIGN = 1024;

  /**
   * Whether a data file certainly holds no message of these topics, so a topic read skips it
   * (docs/FORMAT.md, "Topic index files"): a file of version 3 to 5 (its records cannot carry
   * topics), a sealed file whose footer lacks {@code CONTENT_TOPICS}, or a sealed file whose
   * topic index checks out and lists none of them. Anything else is read, and the scanner keeps
   * only the topics' frames: the index can make a read shorter, never return other rows.
   */
  static boolean holdsNoneOf(DataFile f, String dataPath, String[] topics) {
    if (f.version < 6) return true;
    if (!f.sealed()) return false;
    if ((f.contentFlags & CONTENT_TOPICS) == 0) return true;
    String idx = dataPath.substring(0, dataPath.length() - ".data".length()) + ".topics";
    try (FileChannel ch = FileChannel.open(Path.of(idx), StandardOpenOption.READ)) {
      ByteBuffer h = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN);
      if (ch.read(h, 0) < 64) return false;
      if (h.getLong(0) != 0x0058504F54514D4CL || h.getInt(8) != 1) return false;
      if (h.getLong(16) != f.fileNumber || h.getLong(24) != f.firstSeq || h.getLong(32) != f.endSeq
          || h.getLong(40) != f.framesCrc) return false;
      int groups = h.getInt(12), dirLen = h.getInt(48);
      if (groups < 0 || dirLen < 0 || 64L + dirLen > ch.size()) return false;
      ByteBuffer d = ByteBuffer.allocate(dirLen).order(ByteOrder.LITTLE_ENDIAN);
      while (d.hasRemaining() && ch.read(d, 64 + d.position()) > 0) {}
      if (d.hasRemaining()) return false;
      if (~Crc64.update(Crc64.update(~0L, h, 0, 56), d, 0, dirLen) != h.getLong(56)) return false;
      Set<String> wanted = new HashSet<>(Arrays.asList(topics));
      int at = 0;
      for (int g = 0; g < groups; g++) {
        if (at + 1 > dirLen) return false;
        int len = d.get(at) & 0xFF;
        if (at + 1 + len + 2 + 24 > dirLen) return false;
        byte[] name = new byte[len];
        d.get(at + 1, name);
        if (wanted.contains(new String(name, StandardCharsets.UTF_8))) return false;
        at += 1 + len + 2 + 24;
      }
      return at == dirLen;
    } catch (IOException e) {
      return false; // no index, or unreadable: an index is a hint; the file is read
    }
  }

  static List<LiteMQPartition> plan(List<Ref> refs, long seqLo, long seqHi, long timeLo,
      long timeHi, long rowsPerPartition, Set<String> queues, String[] topics, String keyFile,
      TypedLoad typed) throws IOException {
    List<LiteMQPartition> parts = new ArrayList<>();
    if (seqLo >= seqHi || timeLo >= timeHi || (topics != null && topics.length == 0)) return parts;
    for (Ref r : refs) {
      if (queues != null && !queues.contains(r.name())) continue;
      String[] enc = encryption(r);
      if (enc != null) {
        if (keyFile == null)
          throw new LiteMQException(r.path() + ": the queue is encrypted; read it with the option encryptionKeyFile");
        Crypto.forQueue(r.path(), enc[0], enc[1], keyFile); // a wrong key fails here, on the driver
      }
      int firstPart = parts.size();
      List<File> files = new ArrayList<>();
      if (r.archived() == null) files = dataFiles(r.path());
      else for (Archive.Entry e : r.archived()) files.add(new File(e.file()));
      for (int i = 0; i < files.size(); i++) {
        String path = files.get(i).getPath();
        Archive.Entry listed = r.archived() == null ? null : r.archived().get(i);
        try (DataFile f = DataFile.open(path)) {
          if (listed != null) Archive.check(f, listed);
          long first = f.firstSeq;
          long end = f.sealed() ? f.endSeq : listed != null ? listed.endSeq() : Long.MAX_VALUE;
          if (i + 1 < files.size() && end == Long.MAX_VALUE) {
            // A sealed file without a (valid) footer: bounded by the next file's first sequence.
            try (DataFile g = DataFile.open(files.get(i + 1).getPath())) {
              end = g.firstSeq;
            }
          }
          List<long[]> entries = null;
          if (end == Long.MAX_VALUE && seqLo < Long.MAX_VALUE) {
            // The active file: a batch read sees the messages published when it was planned.
            entries = sparseEntries(f, path);
            end = publishedEnd(f, entries);
          }
          long lo = Math.max(first, seqLo), hi = Math.min(end, seqHi);
          if (lo >= hi) continue;
          if (topics != null && holdsNoneOf(f, path, topics)) continue;
          int[] projection = null;
          if (typed != null) {
            if (f.schema == null)
              throw new LiteMQException(path + ": an untyped data file holding messages in a typed queue");
            projection = typed.projection(r.path(), f);
          }
          if (f.sealed() && f.endSeq > f.firstSeq && (f.lastTs < timeLo || f.firstTs >= timeHi)) continue;
          if (entries == null)
            entries = (lo > first || hi - lo > rowsPerPartition) ? sparseEntries(f, path) : List.of();
          // Cut points as the Python source's split_range: lo, then while more than
          // rowsPerPartition are left, the next multiple of the step (rowsPerPartition, rounded
          // down to a multiple of 1024 when larger). A task starts at the sparse-index entry at
          // or before its first sequence and steps over the frames before it.
          List<long[]> starts = new ArrayList<>(); // {seq, offset, entrySeq}
          long[] at = startFor(entries, lo, first);
          starts.add(new long[] {lo, at[1], at[0]});
          if (hi != Long.MAX_VALUE) {
            long step = rowsPerPartition >= INDEX_ALIGN ? rowsPerPartition - rowsPerPartition % INDEX_ALIGN : rowsPerPartition;
            for (long c = lo; hi - c > rowsPerPartition; ) {
              c = (c / step + 1) * step;
              at = startFor(entries, c, first);
              starts.add(new long[] {c, at[1], at[0]});
            }
          }
          for (int k = 0; k < starts.size(); k++) {
            long[] s = starts.get(k);
            long e = k + 1 < starts.size() ? starts.get(k + 1)[0] : hi;
            boolean whole = starts.size() == 1 && s[1] == DataFile.HEADER_LEN;
            LiteMQPartition p = new LiteMQPartition(r.name(), path, s[1], s[2], s[0], e, timeLo, timeHi, whole, topics);
            p.listed = listed;
            if (projection != null) {
              p.schemaVersion = f.schema.version;
              p.projection = projection;
            }
            parts.add(p);
          }
        }
      }
      if (enc != null)
        for (LiteMQPartition p : parts.subList(firstPart, parts.size())) {
          p.keyFile = keyFile;
          p.queueIdHex = enc[0];
          p.keyCheckHex = enc[1];
        }
    }
    return parts;
  }

  /**
   * One past the last message published in an active file: a walk by length words (counting
   * holes and batches by their count) from the last sparse entry whose frame checks out.
   */
  static long publishedEnd(DataFile f, List<long[]> entries) throws IOException {
    long off = DataFile.HEADER_LEN, seq = f.firstSeq;
    for (int i = entries.size() - 1; i >= 0; i--) {
      long[] e = entries.get(i);
      Scanner probe = new Scanner(f, e[1], e[0], 0, 0, Long.MIN_VALUE, Long.MAX_VALUE, false);
      if (probe.startsAtEntry()) {
        off = e[1];
        seq = e[0];
        break;
      }
    }
    boolean exact = off == DataFile.HEADER_LEN && seq == f.firstSeq; // not an entry into a batch
    while (off + 4 <= f.length) {
      ByteBuffer b = f.window(off, 4);
      long len = b.getInt((int) (off - f.base())) & 0xFFFFFFFFL;
      if (len == 0 || len == DataFile.END_OF_FILE) break;
      if (off + 4 + len + 8 > f.length) break; // the reader reports it
      b = f.window(off, 4 + len + 8);
      int r = (int) (off - f.base()) + 4;
      if (len >= 12 && (b.get(r) & 0xff) == 0x80 && (b.get(r + 9) & 0xff) == 0x04) {
        seq += b.getShort(r + 10) & 0xffff;
      } else if (len >= 25 && (b.get(r) & 0xff) == 0x80
          && ((b.get(r + 9) & 0xff) == Scanner.X_BATCH || (b.get(r + 9) & 0xff) == Scanner.X_ROW_BATCH)) {
        long first = b.getLong(r + 12);
        int count = b.getShort(r + 10) & 0xffff;
        seq = exact ? seq + count : first + count;
      } else {
        seq++;
      }
      exact = true;
      off += (4 + len + 8 + 7) & ~7L;
    }
    return seq;
  }

  /** The sparse entry at or before {@code seq} ({seq, offset}), or the file's start. */
  private static long[] startFor(List<long[]> entries, long seq, long first) {
    long[] best = {first, DataFile.HEADER_LEN};
    for (long[] e : entries) {
      if (e[0] <= seq) best = e;
      else break;
    }
    return best;
  }
}
