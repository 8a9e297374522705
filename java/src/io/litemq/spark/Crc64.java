package io.litemq.spark;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * CRC-64/XZ (docs/FORMAT.md, "CRC"): polynomial 0x42F0E1EBA9EA3693 reflected, init and final
 * XOR all ones; check value of "123456789" is 0x995DC9BBDF1939FA. Slicing-by-8, the same
 * tables as rust/format/crc.rs update_table, reading 8 bytes at a time as one little-endian
 * long from the (mapped) buffer.
 */
public final class Crc64 {
  private static final long POLY_REFLECTED = 0xC96C5795D7870F42L;
  private static final long[] T0 = new long[256], T1 = new long[256], T2 = new long[256],
      T3 = new long[256], T4 = new long[256], T5 = new long[256], T6 = new long[256],
      T7 = new long[256];

  static {
    long[][] t = {T0, T1, T2, T3, T4, T5, T6, T7};
    for (int i = 0; i < 256; i++) {
      long c = i;
      for (int b = 0; b < 8; b++) c = (c & 1) != 0 ? (c >>> 1) ^ POLY_REFLECTED : c >>> 1;
      T0[i] = c;
    }
    for (int k = 1; k < 8; k++)
      for (int i = 0; i < 256; i++) t[k][i] = (t[k - 1][i] >>> 8) ^ T0[(int) (t[k - 1][i] & 0xff)];
  }

  private Crc64() {}

  /** CRC of {@code len} bytes of {@code buf} from absolute index {@code pos}. */
  public static long crc(ByteBuffer buf, int pos, int len) {
    return ~update(~0L, buf, pos, len);
  }

  /** Continues a raw (not finalised) state over more bytes. */
  public static long update(long crc, ByteBuffer buf, int pos, int len) {
    if (buf.order() != ByteOrder.LITTLE_ENDIAN) throw new IllegalArgumentException("LE buffer");
    int end = pos + len;
    while (end - pos >= 8) {
      long v = crc ^ buf.getLong(pos);
      crc = T7[(int) (v & 0xff)] ^ T6[(int) ((v >>> 8) & 0xff)] ^ T5[(int) ((v >>> 16) & 0xff)]
          ^ T4[(int) ((v >>> 24) & 0xff)] ^ T3[(int) ((v >>> 32) & 0xff)]
          ^ T2[(int) ((v >>> 40) & 0xff)] ^ T1[(int) ((v >>> 48) & 0xff)]
          ^ T0[(int) (v >>> 56)];
      pos += 8;
    }
    while (pos < end) crc = (crc >>> 8) ^ T0[(int) ((crc ^ buf.get(pos++)) & 0xff)];
    return crc;
  }

  /**
   * The CRC of a long range (a sealed file's frames, once): four lanes of slicing-by-8 in one
   * loop, so the four dependency chains overlap, joined with {@link #combine}. 1.0 to 1.3 times
   * the one-lane speed on the (loaded) development machine; {@link #main} prints both. Also
   * used for one large frame: joining the lanes costs three {@link #combine}s, a few µs.
   */
  public static long crcLong(ByteBuffer buf, int pos, int len) {
    if (len < 4096) return crc(buf, pos, len);
    int lane = (len / 4) & ~7;
    int p0 = pos, p1 = pos + lane, p2 = pos + 2 * lane, p3 = pos + 3 * lane;
    long c0 = ~0L, c1 = ~0L, c2 = ~0L, c3 = ~0L;
    for (int i = 0; i < lane; i += 8) {
      long v0 = c0 ^ buf.getLong(p0 + i);
      long v1 = c1 ^ buf.getLong(p1 + i);
      long v2 = c2 ^ buf.getLong(p2 + i);
      long v3 = c3 ^ buf.getLong(p3 + i);
      c0 = step(v0);
      c1 = step(v1);
      c2 = step(v2);
      c3 = step(v3);
    }
    int rest = len - 3 * lane;
    c3 = update(c3, buf, p3 + lane, rest - lane);
    long crc = combine(~c0, ~c1, lane);
    crc = combine(crc, ~c2, lane);
    return combine(crc, ~c3, rest);
  }

  private static long step(long v) {
    return T7[(int) (v & 0xff)] ^ T6[(int) ((v >>> 8) & 0xff)] ^ T5[(int) ((v >>> 16) & 0xff)]
        ^ T4[(int) ((v >>> 24) & 0xff)] ^ T3[(int) ((v >>> 32) & 0xff)]
        ^ T2[(int) ((v >>> 40) & 0xff)] ^ T1[(int) ((v >>> 48) & 0xff)] ^ T0[(int) (v >>> 56)];
  }

  /**
   * {@code a * b} modulo the polynomial, both in the reflected domain (bit 63 is x^0): zlib's
   * multmodp, 64 bits wide.
   */
  private static long multModP(long a, long b) {
    long m = 1L << 63, p = 0;
    for (;;) {
      if ((a & m) != 0) {
        p ^= b;
        if ((a & (m - 1)) == 0) break;
      }
      m >>>= 1;
      b = (b & 1) != 0 ? (b >>> 1) ^ POLY_REFLECTED : b >>> 1;
    }
    return p;
  }

  /** X2N[k] = x^(2^k) modulo the polynomial (reflected). */
  private static final long[] X2N = new long[64];

  static {
    long p = 1L << 62; // x^1
    X2N[0] = p;
    for (int n = 1; n < 64; n++) X2N[n] = p = multModP(p, p);
  }

  /**
   * The CRC of A followed by B, from crc(A), crc(B) and B's length (zlib's crc32_combine_op:
   * crc(A) times x^(8 lenB), then B's CRC added): a few multiplications, cheap enough to join
   * the lanes of every frame.
   */
  public static long combine(long crcA, long crcB, long lenB) {
    if (lenB <= 0) return crcA;
    long p = 1L << 63; // x^0
    int k = 3; // x^(8 lenB) = x^(lenB * 2^3)
    for (long n = lenB; n != 0; n >>>= 1, k++) if ((n & 1) != 0) p = multModP(X2N[k & 63], p);
    return multModP(p, crcA) ^ crcB;
  }

  public static long crc(byte[] b, int off, int len) {
    return crc(ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN), off, len);
  }

  /** Prints the check value, and the speed over a 64 MiB buffer (the bench). */
  public static void main(String[] args) {
    byte[] check = "123456789".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
    System.out.printf("check 0x%016X (want 0x995DC9BBDF1939FA)%n", crc(check, 0, 9));
    ByteBuffer big = ByteBuffer.allocateDirect(64 << 20).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < big.capacity(); i++) big.put(i, (byte) (i * 31));
    for (int round = 0; round < 8; round++) {
      long t = System.nanoTime();
      long c = crc(big, 0, big.capacity());
      double s = (System.nanoTime() - t) / 1e9;
      long t2 = System.nanoTime();
      long c2 = crcLong(big, 0, big.capacity() - 13);
      double s2 = (System.nanoTime() - t2) / 1e9;
      if (c2 != crc(big, 0, big.capacity() - 13)) throw new AssertionError("lanes disagree");
      System.out.printf("64 MiB: one lane %.2f GB/s, four lanes %.2f GB/s (%x)%n",
          big.capacity() / s / 1e9, big.capacity() / s2 / 1e9, c);
    }
  }
}
