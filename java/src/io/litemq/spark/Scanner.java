package io.litemq.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * Walks the frames of one data file from a start offset and decodes each record
 * (docs/FORMAT.md, "Frames", "Records", "Batches compressed together", "Holes") into a
 * {@link Msg} handed to a {@link Sink}. Every frame is CRC-checked: per frame, or, for a sealed
 * file read whole, once against the footer's frames_crc (a mismatch falls back to per-frame
 * checks, so the damaged frame is named with its sequence).
 */
final class Scanner implements AutoCloseable {
  static final int F_KEY = 0x01, F_HEADERS = 0x02, F_KEY_TEXT = 0x04, F_TOPIC = 0x08,
      F_EXPIRY = 0x10, F_PRIORITY = 0x20, F_COMPRESSED = 0x40, F_EXT = 0x80;
  static final int X_TOMBSTONE = 0x01, X_ENCRYPTED = 0x02, X_HOLE = 0x04, X_BATCH = 0x08,
      X_ROWS = 0x10, X_ROW_BATCH = X_BATCH | X_ROWS;

  /** One decoded message; positions index {@link #buf} (a mapping window or a batch block). */
  static final class Msg {
    long seq, ts;
    ByteBuffer buf;
    int keyAt, keyLen; // keyLen -1: no key
    boolean keyText;
    int hdrAt, hdrCount; // hdrCount -1: no headers
    int topicAt, topicLen; // topicLen 0: no topic
    int queueId;
    int tagAt, tagCount;
    byte[] payloadArr; // decompressed payload, or null: payload is buf[payloadAt, +payloadLen)
    int payloadAt, payloadLen;
    boolean tombstone;
    /** A typed file's event: its row, checked, at rowBuf[rowAt, +rowLen); rowLen -1: none (a tombstone). */
    ByteBuffer rowBuf;
    int rowAt, rowLen = -1;
  }

  /** Sees every frame walked (the frame test vectors): kind plain, hole or batch. */
  interface FrameListener {
    void frame(long at, int recordLen, long next, String kind, long seq, int count, long batchFirstSeq);
  }

  /** Set for a walk over frames only (VectorCheck): plain records are reported, not decoded. */
  FrameListener listener;
  /** Decrypts sealed payloads (an encrypted queue read with its key), or null. */
  Crypto crypto;

  interface Sink {
    /** Takes one message; returns false to stop the scan (a batch is full). */
    boolean accept(Msg m);
  }

  /** A sink that also takes a row batch's rows many at a time (the typed columns' hot path). */
  interface RowSink extends Sink {
    /** Whether {@link #rows} may be called (else every row goes through {@link #accept}). */
    boolean bulk();

    /**
     * Takes rows {@code [from, to)} of a checked row batch (row {@code i} at
     * {@code buf[starts[i], starts[i + 1])}, sequence {@code firstSeq + i}, timestamp
     * {@code ts}), or as many as fit; returns how many it took (fewer: it is full).
     */
    int rows(ByteBuffer buf, int[] starts, int from, int to, long firstSeq, long ts);
  }

  final DataFile file;
  private long off;
  private long seq;
  private final long seqHi, timeLo, timeHi;
  /** Frames ending at or before this offset are covered by a checked CRC (no per-frame CRC). */
  long trustedEnd = -1;
  private long limitEnd;
  private boolean done;
  private boolean exactStart; // seq at off is a frame's own sequence (not a sparse entry's member)
  private final Msg msg = new Msg();
  private final String[] why = new String[1];
  // A batch frame being handed out member by member.
  private ByteBuffer block;
  private int blockPos, blockMembers, blockNext;
  private long blockTs, blockSeq;
  // A row batch being handed out row by row: its block (the mapping, or the decompressed
  // bytes) and where each row starts (rowStarts[count] is the block's end).
  private ByteBuffer rowBlock;
  private int[] rowStarts = new int[0];
  private int rowCount, rowNext;
  private long rowTs, rowSeq;

  /**
   * @param startOffset where to start (4096, or a sparse-index entry's frame)
   * @param startSeq the sequence of that frame (a member's, for a batch frame)
   * @param seqLo, seqHi only messages with lo <= seq < hi
   * @param verifyWhole a sealed file read from its start: check frames_crc once
   */
  Scanner(DataFile file, long startOffset, long startSeq, long seqLo, long seqHi, long timeLo,
      long timeHi, boolean verifyWhole) throws IOException {
    this.file = file;
    this.off = startOffset;
    this.seq = startSeq;
    this.seqLo = seqLo;
    this.seqHi = seqHi;
    this.timeLo = timeLo;
    this.timeHi = timeHi;
    // A sparse entry may point at the file's first frame for a later sequence: a member of a
    // batch frame there (the batch fixtures' entries do); only the file's first sequence is exact.
    this.exactStart = startOffset == DataFile.HEADER_LEN && startSeq == file.firstSeq;
    if (!exactStart && !probe(startOffset)) {
      // A sparse-index entry is a hint (docs/FORMAT.md): one that does not land on a frame
      // passing its CRC (an entry into a hole's filler, damage) means a scan from the start.
      this.off = DataFile.HEADER_LEN;
      this.seq = file.firstSeq;
      this.exactStart = true;
    } else {
      startedAtEntry = true;
    }
    if (file.sealed() && verifyWhole && startOffset == DataFile.HEADER_LEN) {
      if (file.crcRange(DataFile.HEADER_LEN, file.framesEnd) == file.framesCrc) trustedEnd = file.framesEnd;
    }
    limitEnd = file.sealed() ? file.framesEnd : file.length;
  }

  private final long seqLo;
  /** Topics wanted (UTF-8), or null for every message. */
  byte[][] topics;
  private boolean startedAtEntry;

  /** Whether the start offset given was used (a sparse entry that checks out). */
  boolean startsAtEntry() {
    return startedAtEntry;
  }

  private boolean probe(long at) throws IOException {
    if (!file.has(at + 4)) return false;
    ByteBuffer b = file.window(at, 4);
    long len = b.getInt((int) (at - file.base())) & 0xFFFFFFFFL;
    if (len < 9 || len == DataFile.END_OF_FILE || !file.has(at + 4 + len + 8)) return false;
    b = file.window(at, 4 + len + 8);
    int p = (int) (at - file.base());
    return Crc64.crc(b, p, 4 + (int) len) == b.getLong(p + 4 + (int) len);
  }

  private String stop = "empty";

  /** For the vectors: walk from {@code at} as the frame of sequence {@code s} (no probe). */
  void exactFrom(long at, long s) {
    off = at;
    seq = s;
    exactStart = true;
  }

  /** Where the walk stands (the frame being read when damage was found). */
  long position() {
    return frameAt;
  }

  private long frameAt;

  /** How the walk ended: "empty@OFFSET" (length 0) or "end_of_file@OFFSET" (the marker). */
  String stopEvent() {
    return stop + "@" + frameAt;
  }

  boolean done() {
    return done;
  }

  /** Hands messages to {@code sink} until it says stop or the range ends. */
  void scan(Sink sink) throws IOException {
    if (block != null && !drainBlock(sink)) return;
    if (rowBlock != null && !drainRows(sink)) return;
    while (!done) {
      if (seq >= seqHi) {
        done = true;
        return;
      }
      frameAt = off;
      if (!file.has(off + 4)) throw damage(off, "frame runs past the end of the file: no room for its length word");
      ByteBuffer b = file.window(off, 4);
      long len = b.getInt((int) (off - file.base())) & 0xFFFFFFFFL;
      if (len == 0 || len == DataFile.END_OF_FILE) {
        stop = len == 0 ? "empty" : "end_of_file";
        if (file.sealed() && off != file.framesEnd)
          throw damage(off, len == 0 ? "no frame (length 0) before the footer's end of frames" : "end-of-file marker before the footer's end of frames");
        done = true;
        return;
      }
      long frameSize = (4 + len + 8 + 7) & ~7L;
      // An active file grows (format version 11): the writer made it long enough before it
      // published the frame, so a frame past the length seen at open is looked at again.
      if (off + 4 + len + 8 > limitEnd && !file.sealed() && file.has(off + 4 + len + 8)) limitEnd = file.length;
      if (off + 4 + len + 8 > limitEnd) throw damage(off, "frame length " + len + " runs past the end of the file");
      b = file.window(off, 4 + len + 8);
      int p = (int) (off - file.base());
      int rl = (int) len;
      if (trustedEnd >= 0 && off + 4 + len + 8 > trustedEnd)
        // Frames before a verified end are trusted; none may cross it (the walker's Check::Trusted).
        throw damage(off, "frame length " + len + " runs past the verified end of frames " + trustedEnd);
      if (trustedEnd < 0) {
        long stored = b.getLong(p + 4 + rl);
        // A large frame (a batch, a row batch) in four lanes joined by combination.
        long computed = rl >= 16384 ? Crc64.crcLong(b, p, 4 + rl) : Crc64.crc(b, p, 4 + rl);
        if (stored != computed)
          throw damage(off, String.format("CRC mismatch: stored %#018x, computed %#018x", stored, computed));
      }
      long at = off;
      off += frameSize;
      if (!record(b, p + 4, rl, at, sink)) return;
    }
  }

  private LiteMQException damage(long at, String what) {
    String reason = what.startsWith("CRC") ? "crc"
        : what.contains("no room for its length word") ? "truncated"
        : what.contains("runs past the") ? "length_out_of_bounds"
        : what.startsWith("batch frame says") ? "batch_seq_mismatch" : "record_malformed";
    return new LiteMQException("corrupted data in " + file.path + " at offset " + at + " (seq " + seq + "): " + what, reason);
  }

  private static int u8(ByteBuffer b, int i) {
    return b.get(i) & 0xff;
  }

  private static int u16(ByteBuffer b, int i) {
    return b.getShort(i) & 0xffff;
  }

  /** Decodes the record at {@code [r, r + n)}; false when the sink asked to stop. */
  private boolean record(ByteBuffer b, int r, int n, long at, Sink sink) throws IOException {
    if (n < 9) throw damage(at, "record malformed: " + n + " bytes, shorter than flags and timestamp");
    int flags = u8(b, r);
    long ts = b.getLong(r + 1);
    if (flags == F_EXT && n >= 12) {
      int ext = u8(b, r + 9);
      if (ext == X_HOLE) {
        int count = u16(b, r + 10);
        if (count == 0) throw damage(at, "record malformed: hole of 0 sequences");
        if (listener != null) listener.frame(at, n, off, "hole", seq, count, -1);
        seq += count;
        exactStart = true;
        return true;
      }
      if (ext == X_ROW_BATCH) return rowBatch(b, r, n, at, ts, sink);
      if (ext == X_BATCH) {
        if (n < 25) throw damage(at, "record malformed: batch frame of " + n + " bytes");
        int count = u16(b, r + 10);
        long first = b.getLong(r + 12);
        int codec = u8(b, r + 20);
        long raw = b.getInt(r + 21) & 0xFFFFFFFFL;
        if (count == 0 || (exactStart ? first != seq : (seq < first || seq >= first + count)))
          throw damage(at, "batch frame says its first message is " + first + ", where message " + seq + " stands");
        long batchFirst = first;
        exactStart = true;
        if (topics != null || batchFirst + count <= seqLo || batchFirst >= seqHi || (ts < timeLo) || ts >= timeHi) {
          seq = batchFirst + count;
          return true;
        }
        byte[] src = new byte[n - 25];
        b.get(r + 25, src, 0, src.length);
        byte[] out = Codecs.decompress(codec, src, 0, src.length, raw, why);
        if (out == null) throw damage(at, why[0]);
        block = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
        // The members must tile the block exactly.
        int q = 0;
        for (int i = 0; i < count; i++) {
          if (q + 4 > out.length) throw damage(at, "batch members do not tile the block");
          long ml = block.getInt(q) & 0xFFFFFFFFL;
          if (ml > out.length - q - 4) throw damage(at, "batch members do not tile the block");
          q += 4 + (int) ml;
        }
        if (q != out.length) throw damage(at, "batch members do not tile the block");
        if (listener != null) listener.frame(at, n, off, "batch", first, count, first);
        blockPos = 0;
        blockMembers = count;
        blockNext = 0;
        blockTs = ts;
        blockSeq = batchFirst;
        blockAt = at;
        seq = batchFirst + count;
        return drainBlock(sink);
      }
    }
    long s = seq++;
    exactStart = true;
    // The walker's contract is frame-level: a plain record is a frame of one
    // sequence whatever its fields hold (an encrypted one without the key too).
    if (listener != null) {
      listener.frame(at, n, off, "plain", s, 1, -1);
      return true; // a walk (VectorCheck): frames only, no message decoded
    }
    if (s < seqLo || ts < timeLo || ts >= timeHi) {
      // Outside the range: not decoded (its frame's CRC was checked), as the Rust reader does.
      return true;
    }
    decode(b, r, n, s, ts, at, false);
    if (topics != null && !topicWanted(msg)) return true;
    if (file.schema != null) typedRow(msg, at);
    return sink.accept(msg);
  }

  /**
   * A plain record of a typed file: its payload (decrypted, decompressed) is exactly one row of
   * the file's schema version, checked; a tombstone has none.
   */
  private void typedRow(Msg m, long at) {
    m.rowLen = -1;
    if (m.tombstone) return;
    TypedSchema ts = file.schema;
    ByteBuffer rb = m.payloadArr != null ? ByteBuffer.wrap(m.payloadArr).order(ByteOrder.LITTLE_ENDIAN) : m.buf;
    int len = ts.rowLen(rb, m.payloadAt, m.payloadLen);
    if (len < 0) throw malformed(at, m.seq, TypedSchema.lenReason(len));
    if (len != m.payloadLen) throw malformed(at, m.seq, "typed row longer than its fields");
    String why = ts.checkRow(rb, m.payloadAt, len);
    if (why != null) throw malformed(at, m.seq, why);
    m.rowBuf = rb;
    m.rowAt = m.payloadAt;
    m.rowLen = len;
  }

  /**
   * A row batch (ext 0x18, docs/FORMAT.md "In a data file"): {@code count} rows of the file's
   * schema version back to back in its block, stored ({@code codec} 0: read in place, from the
   * mapping) or compressed. Every row is checked and the rows must tile the block exactly
   * before any is handed out: a batch that fails is damage for every member.
   */
  private boolean rowBatch(ByteBuffer b, int r, int n, long at, long ts, Sink sink) throws IOException {
    if (n < 25) throw damage(at, "record malformed: batch frame of " + n + " bytes");
    int count = u16(b, r + 10);
    long first = b.getLong(r + 12);
    int codec = u8(b, r + 20);
    long raw = b.getInt(r + 21) & 0xFFFFFFFFL;
    if (count == 0 || (exactStart ? first != seq : (seq < first || seq >= first + count)))
      throw damage(at, "batch frame says its first message is " + first + ", where message " + seq + " stands");
    exactStart = true;
    if (listener != null) {
      listener.frame(at, n, off, "batch", first, count, first);
      seq = first + count;
      return true;
    }
    if (file.schema == null) throw damage(at, "record malformed: a row batch in an untyped file");
    if (topics != null || first + count <= seqLo || first >= seqHi || ts < timeLo || ts >= timeHi) {
      seq = first + count;
      return true;
    }
    ByteBuffer blk;
    int base, len;
    if (codec == 0) {
      if (raw != n - 25) throw damage(at, "row batch stores " + (n - 25) + " bytes and says raw_len " + raw);
      blk = b;
      base = r + 25;
      len = n - 25;
    } else {
      byte[] src = new byte[n - 25];
      b.get(r + 25, src, 0, src.length);
      byte[] out = Codecs.decompress(codec, src, 0, src.length, raw, why);
      if (out == null) throw damage(at, why[0]);
      blk = ByteBuffer.wrap(out).order(ByteOrder.LITTLE_ENDIAN);
      base = 0;
      len = out.length;
    }
    splitRows(blk, base, len, count, first, at);
    rowBlock = blk;
    rowCount = count;
    rowNext = 0;
    rowTs = ts;
    rowSeq = first;
    seq = first + count;
    return drainRows(sink);
  }

  /** Where each of {@code count} rows starts in {@code blk[base, base + len)}, every row checked. */
  private void splitRows(ByteBuffer blk, int base, int len, int count, long first, long at) {
    TypedSchema ts = file.schema;
    if (rowStarts.length < count + 1) rowStarts = new int[Math.max(count + 1, 1024)];
    int q = base, end = base + len;
    for (int i = 0; i < count; i++) {
      rowStarts[i] = q;
      int rl = ts.rowLen(blk, q, end - q);
      if (rl < 0) throw malformed(at, first + i, TypedSchema.lenReason(rl));
      String bad = ts.checkRow(blk, q, rl);
      if (bad != null) throw malformed(at, first + i, bad);
      q += rl;
    }
    if (q != end) throw malformed(at, first + count - 1, "row batch longer than its rows");
    rowStarts[count] = q;
  }

  private boolean drainRows(Sink sink) {
    Msg m = msg;
    if (rowNext < seqLo - rowSeq) rowNext = (int) Math.min(rowCount, seqLo - rowSeq);
    if (sink instanceof RowSink && ((RowSink) sink).bulk()) {
      int to = (int) Math.max(0, Math.min(rowCount, seqHi - rowSeq));
      if (rowNext < to) {
        rowNext += ((RowSink) sink).rows(rowBlock, rowStarts, rowNext, to, rowSeq, rowTs);
        if (rowNext < to) return false;
      }
      rowBlock = null;
      return true;
    }
    while (rowNext < rowCount) {
      int i = rowNext++;
      long s = rowSeq + i;
      if (s >= seqHi) break;
      int at = rowStarts[i], len = rowStarts[i + 1] - at;
      m.seq = s;
      m.ts = rowTs;
      m.buf = rowBlock;
      m.keyLen = -1;
      m.hdrCount = -1;
      m.topicLen = 0;
      m.queueId = 0;
      m.tagCount = 0;
      m.tombstone = false;
      m.payloadArr = null;
      m.payloadAt = at;
      m.payloadLen = len;
      m.rowBuf = rowBlock;
      m.rowAt = at;
      m.rowLen = len;
      if (!sink.accept(m)) {
        if (rowNext >= rowCount) rowBlock = null;
        return false;
      }
    }
    rowBlock = null;
    return true;
  }

  private long blockAt;

  private boolean topicWanted(Msg m) {
    if (m.topicLen == 0) return false;
    for (byte[] t : topics) {
      if (t.length != m.topicLen) continue;
      boolean same = true;
      for (int i = 0; same && i < t.length; i++) same = m.buf.get(m.topicAt + i) == t[i];
      if (same) return true;
    }
    return false;
  }

  private boolean drainBlock(Sink sink) {
    while (blockNext < blockMembers) {
      int ml = block.getInt(blockPos);
      int r = blockPos + 4;
      long s = blockSeq + blockNext;
      blockPos = r + ml;
      blockNext++;
      if (s < seqLo) continue;
      if (s >= seqHi) break;
      decode(block, r, ml, s, blockTs, blockAt, true);
      if (!sink.accept(msg)) {
        if (blockNext >= blockMembers) block = null;
        return false;
      }
    }
    block = null;
    return true;
  }

  private void decode(ByteBuffer b, int r, int n, long s, long ts, long at, boolean member) {
    Msg m = msg;
    int end = r + n;
    int flags = u8(b, r);
    int q = r + 9;
    m.seq = s;
    m.ts = ts;
    m.buf = b;
    m.keyLen = -1;
    m.hdrCount = -1;
    m.topicLen = 0;
    m.queueId = 0;
    m.tagCount = 0;
    m.payloadArr = null;
    m.tombstone = false;
    m.rowLen = -1;
    try {
      if (member && (flags & (F_TOPIC | F_COMPRESSED)) != 0)
        throw malformed(at, s, "batch member with topic or compression flags");
      if ((flags & F_KEY) != 0) {
        int kl = u16(b, q);
        m.keyAt = q + 2;
        m.keyLen = kl;
        m.keyText = (flags & F_KEY_TEXT) != 0;
        q += 2 + kl;
      }
      if ((flags & F_HEADERS) != 0) {
        int c = u8(b, q++);
        m.hdrAt = q;
        m.hdrCount = c;
        for (int i = 0; i < c; i++) {
          int nl = u8(b, q);
          q += 1 + nl + 1;
          int vl = u16(b, q);
          q += 2 + vl;
        }
      }
      if ((flags & F_TOPIC) != 0) {
        int tl = u8(b, q);
        m.topicAt = q + 1;
        m.topicLen = tl;
        q += 1 + tl;
        m.queueId = u16(b, q);
        q += 2;
        int tc = u8(b, q++);
        m.tagAt = q;
        m.tagCount = tc;
        for (int i = 0; i < tc; i++) q += 1 + u8(b, q);
      }
      if ((flags & F_EXPIRY) != 0) q += 8;
      if ((flags & F_PRIORITY) != 0) q += 1;
      int codec = 0;
      long raw = 0;
      if ((flags & F_COMPRESSED) != 0) {
        codec = u8(b, q);
        raw = b.getInt(q + 1) & 0xFFFFFFFFL;
        q += 5;
      }
      if ((flags & F_EXT) != 0) {
        int ext = u8(b, q++);
        if ((ext & X_ROWS) != 0)
          throw malformed(at, s, "record malformed: rows bit without the batch bit, or with other extension bits");
        m.tombstone = (ext & X_TOMBSTONE) != 0;
        if ((ext & ~0x07) != 0 || ext == 0)
          throw malformed(at, s, "record uses extension bits this version does not support");
        if ((ext & (X_HOLE | X_BATCH)) != 0) throw malformed(at, s, "record malformed: hole or batch bits with other fields");
        if (member && ext != X_TOMBSTONE) throw malformed(at, s, "batch member with extension bits other than tombstone");
        if ((ext & X_ENCRYPTED) != 0) {
          if ((ext & X_TOMBSTONE) != 0) throw malformed(at, s, "record malformed: an encrypted tombstone");
          if (crypto == null)
            throw malformed(at, s, "payload is encrypted: read with the option encryptionKeyFile");
          if (end - q < 24 + 16) throw malformed(at, s, "record malformed: sealed payload shorter than nonce and tag");
          byte[] plain = crypto.open(b, r, q, end - q - 24, s);
          if (plain == null) throw malformed(at, s, "payload fails authentication");
          if (codec == 0) {
            m.payloadArr = plain;
            m.payloadAt = 0;
            m.payloadLen = plain.length;
            return;
          }
          byte[] out = Codecs.decompress(codec, plain, 0, plain.length, raw, why);
          if (out == null) throw malformed(at, s, why[0]);
          m.payloadArr = out;
          m.payloadAt = 0;
          m.payloadLen = out.length;
          return;
        }
      }
      if (q > end) throw malformed(at, s, "record malformed: fields run past the record");
      if (codec != 0) {
        byte[] src = new byte[end - q];
        b.get(q, src, 0, src.length);
        byte[] out = Codecs.decompress(codec, src, 0, src.length, raw, why);
        if (out == null) throw malformed(at, s, why[0]);
        m.payloadArr = out;
        m.payloadAt = 0;
        m.payloadLen = out.length;
      } else {
        m.payloadAt = q;
        m.payloadLen = end - q;
      }
    } catch (IndexOutOfBoundsException e) {
      throw malformed(at, s, "record malformed: fields run past the record");
    }
  }

  private LiteMQException malformed(long at, long s, String what) {
    String reason = what.contains("authentication") ? "authentication"
        : what.contains("extension bits") || what.contains("unknown compression") || what.contains("encrypted")
        ? "unsupported" : "record_malformed";
    return new LiteMQException("corrupted data in " + file.path + " at offset " + at + " (seq " + s + "): " + what, reason);
  }

  @Override
  public void close() throws IOException {
    file.close();
  }
}
