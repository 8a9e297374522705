package io.litemq.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * One data file (docs/FORMAT.md, "Data files"): header, footer, and frames read through
 * read-only mappings. A file up to 1 GiB is mapped whole; a larger one (up to 2^40 bytes) is
 * mapped in windows of 1 GiB that move with the reader, so files past 2 GiB read as well.
 */
public final class DataFile implements AutoCloseable {
  static final int HEADER_LEN = 4096;
  static final int FOOTER_LEN = 128;
  static final long END_OF_FILE = 0xFFFFFFFFL;
  /** The newest data-file version this reader reads (12: typed records). */
  static final int MAX_VERSION = 12;
  /** Where a typed file's header holds its schema JSON's length, CRC-64 and bytes. */
  static final int SCHEMA_LEN_AT = 72, SCHEMA_CRC_AT = 76, SCHEMA_AT = 84;
  /**
   * Bytes mapped at a time for a file larger than this (1 GiB; the system property
   * {@code litemq.mapWindow} sets it smaller, so tests move windows over small files).
   */
  static final long WINDOW = Math.max(4096, Long.getLong("litemq.mapWindow", 1L << 30));

  final String path;
  final FileChannel ch;
  /**
   * The file's length when last looked at. An active file grows while it is written (format
   * version 11: only as long as its data and a chunk); {@link #has} looks again.
   */
  long length;
  final int version;
  final long firstSeq, createdUs, fileNumber, fileSize;
  final int indexInterval;
  /** A typed file's schema version (header bytes 52..56 and 72..), or null (an untyped file). */
  final TypedSchema schema;
  /** Bytes held in memory (test vectors): file offsets {@code [memStart, length)}. */
  private final ByteBuffer mem;
  private final long memStart;
  /** Offset of the end-of-file marker from a valid footer, or -1 (active file, version 3). */
  long framesEnd = -1;
  long framesCrc, endSeq, firstTs, lastTs;
  /** The footer's {@code content_flags} (bit 0: some record carries a topic), or 0. */
  long contentFlags;

  private MappedByteBuffer win;
  private long winStart, winLen;

  private DataFile(String path, FileChannel ch) throws IOException {
    this.path = path;
    this.ch = ch;
    this.mem = null;
    this.memStart = 0;
    this.length = ch.size();
    if (length < HEADER_LEN) throw damage(0, "file is " + length + " bytes, shorter than its 4096-byte header");
    ByteBuffer h = ByteBuffer.allocate(72).order(ByteOrder.LITTLE_ENDIAN);
    readFully(h, 0);
    if (h.getLong(0) != 0x0041544144514D4CL) throw damage(0, "not a litemq data file (bad magic)");
    if (~Crc64.update(~0L, h, 0, 56) != h.getLong(56)) throw damage(0, "header CRC mismatch");
    version = h.getInt(8);
    if (h.getInt(12) != HEADER_LEN) throw damage(0, "header length " + h.getInt(12) + ", expected 4096");
    if (version < 3 || version > MAX_VERSION)
      throw new LiteMQException(path + ": unsupported data-file version " + version + " (this reader reads 3 to " + MAX_VERSION + ")");
    firstSeq = h.getLong(16);
    createdUs = h.getLong(24);
    fileNumber = h.getLong(32);
    fileSize = h.getLong(40);
    indexInterval = h.getInt(48);
    if (version < 12 && h.getInt(52) != 0)
      throw damage(52, "schema_version " + (h.getInt(52) & 0xFFFFFFFFL) + " in a file of version " + version + " (reserved, 0, before 12)");
    schema = version >= 12 ? readSchema(h.getInt(52) & 0xFFFFFFFFL) : null;
    if (version == 3 ? length != fileSize
        : (length > fileSize || length % 8 != 0 || length < HEADER_LEN + 8 + FOOTER_LEN))
      throw damage(0, "file length " + length + " does not fit its header (file_size " + fileSize + ")");
    if (version >= 4) readFooter();
  }

  /** Frames held in memory from file offset {@code start} on (the frame test vectors). */
  private DataFile(String name, byte[] bytes, long start, int version, long firstSeq) {
    this.path = name;
    this.ch = null;
    this.mem = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
    this.memStart = start;
    this.length = start + bytes.length;
    this.version = version;
    this.firstSeq = firstSeq;
    this.createdUs = 0;
    this.fileNumber = 1;
    this.fileSize = length;
    this.indexInterval = 0;
    this.schema = null;
  }

  static DataFile inMemory(String name, byte[] bytes, long start, int version, long firstSeq) {
    return new DataFile(name, bytes, start, version, firstSeq);
  }

  public static DataFile open(String path) throws IOException {
    FileChannel ch;
    try {
      ch = FileChannel.open(Path.of(path), StandardOpenOption.READ);
    } catch (NoSuchFileException e) {
      throw new LiteMQException(path + ": data file is missing (deleted since the read was planned?)");
    }
    try {
      return new DataFile(path, ch);
    } catch (IOException | RuntimeException e) {
      ch.close();
      throw e;
    }
  }

  /**
   * The schema a typed file's header holds (docs/FORMAT.md, "Data-file header of a typed
   * file"): length at 72 (at most 4012), CRC-64 at 76, JSON at 84, whose {@code version} must
   * be {@code schema_version}. Null for {@code schema_version} 0.
   */
  private TypedSchema readSchema(long schemaVersion) throws IOException {
    if (schemaVersion == 0) return null;
    ByteBuffer h = ByteBuffer.allocate(SCHEMA_AT).order(ByteOrder.LITTLE_ENDIAN);
    readFully(h, 0);
    long n = h.getInt(SCHEMA_LEN_AT) & 0xFFFFFFFFL;
    if (n == 0 || n > HEADER_LEN - SCHEMA_AT)
      throw damage(SCHEMA_LEN_AT, "schema JSON length " + n + " (a typed header holds 1 to " + (HEADER_LEN - SCHEMA_AT) + " bytes)");
    ByteBuffer j = ByteBuffer.allocate((int) n).order(ByteOrder.LITTLE_ENDIAN);
    readFully(j, SCHEMA_AT);
    long crc = ~Crc64.update(~0L, j, 0, (int) n);
    if (crc != h.getLong(SCHEMA_CRC_AT))
      throw damage(SCHEMA_CRC_AT, String.format("schema JSON CRC mismatch: stored %#018x, computed %#018x", h.getLong(SCHEMA_CRC_AT), crc));
    String json = java.nio.charset.StandardCharsets.UTF_8.decode(j.duplicate()).toString();
    TypedSchema s;
    try {
      s = TypedSchema.parse(json);
    } catch (IllegalArgumentException e) {
      throw damage(SCHEMA_AT, "schema JSON: " + e.getMessage());
    }
    if (s.version != schemaVersion)
      throw damage(SCHEMA_AT, "schema JSON says version " + s.version + ", the header's schema_version is " + schemaVersion);
    return s;
  }

  private void readFully(ByteBuffer b, long at) throws IOException {
    while (b.hasRemaining()) {
      int n = ch.read(b, at + b.position());
      if (n < 0) throw damage(at, "file ends early");
    }
    b.flip();
  }

  /** The footer, used only when valid as FORMAT.md says (and the marker is at frames_end). */
  private void readFooter() throws IOException {
    ByteBuffer f = ByteBuffer.allocate(FOOTER_LEN).order(ByteOrder.LITTLE_ENDIAN);
    readFully(f, length - FOOTER_LEN);
    if (f.getLong(0) != 0x00544F4F46514D4CL || f.getInt(8) != 1 || f.getInt(12) != FOOTER_LEN) return;
    if (~Crc64.update(~0L, f, 0, 120) != f.getLong(120)) return;
    long e = f.getLong(16);
    if (f.getLong(32) != fileNumber || f.getLong(40) != firstSeq || e % 8 != 0 || e < HEADER_LEN) return;
    long t = Math.min(((e + 8 + FOOTER_LEN + 4095) / 4096) * 4096, fileSize);
    if (t != length) return;
    ByteBuffer m = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
    readFully(m, e);
    if ((m.getInt(0) & 0xFFFFFFFFL) != END_OF_FILE) return;
    framesEnd = e;
    framesCrc = f.getLong(24);
    endSeq = f.getLong(48);
    firstTs = f.getLong(56);
    lastTs = f.getLong(64);
    contentFlags = f.getLong(72);
  }

  boolean sealed() {
    return framesEnd >= 0;
  }

  /**
   * Whether bytes {@code [0, end)} exist: the length seen, or, for an active file that grew
   * since (a frame published after it was opened), its length now. Nothing past the file's
   * length is ever mapped ({@code FileChannel.map} READ_ONLY past the end throws).
   */
  boolean has(long end) throws IOException {
    if (end <= length) return true;
    if (ch == null || sealed()) return false;
    long now = ch.size();
    if (now > length) length = now;
    return end <= length;
  }

  /**
   * A buffer holding bytes {@code [at, at + len)} of the file; {@link #base()} is the file
   * offset of its index 0 afterwards.
   */
  ByteBuffer window(long at, long len) throws IOException {
    if (mem != null) {
      if (at < memStart || at + len > length) throw damage(at, "frame runs past the end of the file");
      winStart = memStart;
      return mem;
    }
    if (win != null && at >= winStart && at + len <= winStart + winLen) return win;
    long start, size;
    if (length <= WINDOW) {
      start = 0;
      size = length;
    } else {
      start = at & ~4095L;
      size = Math.min(length - start, Math.max(WINDOW, at - start + len));
    }
    if (at + len > length) throw damage(at, "frame runs past the end of the file");
    if (size > Integer.MAX_VALUE) throw damage(at, "frame of " + len + " bytes is larger than this reader maps");
    win = ch.map(FileChannel.MapMode.READ_ONLY, start, size);
    win.order(ByteOrder.LITTLE_ENDIAN);
    winStart = start;
    winLen = size;
    return win;
  }

  long base() {
    return winStart;
  }

  /** The CRC of bytes [from, to), through windows. */
  long crcRange(long from, long to) throws IOException {
    long c = 0;
    boolean first = true;
    long at = from;
    while (at < to) {
      long n = Math.min(to - at, 256L << 20);
      ByteBuffer b = window(at, n);
      long part = Crc64.crcLong(b, (int) (at - base()), (int) n);
      c = first ? part : Crc64.combine(c, part, n);
      first = false;
      at += n;
    }
    return c;
  }

  LiteMQException damage(long offset, String what) {
    return new LiteMQException("corrupted data in " + path + " at offset " + offset + ": " + what);
  }

  @Override
  public void close() throws IOException {
    win = null;
    if (ch != null) ch.close();
  }
}
