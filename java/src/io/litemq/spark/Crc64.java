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
      System.out.printf("64 MiB in %.1f ms: %.2f GB/s (%x)%n", s * 1e3, big.capacity() / s / 1e9, c);
    }
  }
}
