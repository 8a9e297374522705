package io.litemq.spark;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.util.zip.GZIPInputStream;

/**
 * Compressed payloads and batch blocks (docs/FORMAT.md, "Compressed payloads"): zstd (one
 * frame, zstd-jni), lz4 (one raw block, lz4-java), gzip (one member, the JDK). Output is
 * exactly {@code rawLen} bytes; a larger {@code rawLen} than the limit is refused before
 * anything is allocated, as in rust/format/compression.rs.
 */
final class Codecs {
  /** The Rust reader's default max_decompressed_size. */
  static final long LIMIT = 100L << 20;

  private Codecs() {}

  static String name(int codec) {
    return codec == 1 ? "zstd" : codec == 2 ? "lz4" : codec == 3 ? "gzip" : "codec " + codec;
  }

  /** Decompresses, or returns the reason it cannot (the caller names file and offset). */
  static byte[] decompress(int codec, byte[] src, int off, int len, long rawLen, String[] why) {
    if (codec < 1 || codec > 3) {
      why[0] = "unknown compression codec " + codec;
      return null;
    }
    if (rawLen > LIMIT) {
      why[0] = "compressed payload declares " + rawLen + " bytes, above the decompression limit of " + LIMIT + " bytes";
      return null;
    }
    int raw = (int) rawLen;
    byte[] out = new byte[raw];
    int got;
    try {
      switch (codec) {
        case 1: {
          long fcs = com.github.luben.zstd.Zstd.getFrameContentSize(src, off, len);
          if (fcs >= 0 && fcs != rawLen) {
            why[0] = "zstd payload inflates to " + fcs + " bytes, not the " + rawLen + " its record declares";
            return null;
          }
          long n = com.github.luben.zstd.Zstd.decompressByteArray(out, 0, raw, src, off, len);
          if (com.github.luben.zstd.Zstd.isError(n)) {
            why[0] = "zstd payload does not decompress into " + rawLen + " bytes: " + com.github.luben.zstd.Zstd.getErrorName(n);
            return null;
          }
          got = (int) n;
          break;
        }
        case 2:
          got = net.jpountz.lz4.LZ4Factory.fastestInstance().safeDecompressor().decompress(src, off, len, out, 0, raw);
          break;
        default: {
          try (GZIPInputStream in = new GZIPInputStream(new ByteArrayInputStream(src, off, len))) {
            got = 0;
            while (got < raw) {
              int n = in.read(out, got, raw - got);
              if (n < 0) break;
              got += n;
            }
            if (got == raw && in.read() >= 0) got = raw + 1;
          }
        }
      }
    } catch (IOException | RuntimeException e) {
      why[0] = name(codec) + " payload does not decompress into " + rawLen + " bytes: " + e.getMessage();
      return null;
    }
    if (got != raw) {
      why[0] = name(codec) + " payload inflates to " + (got > raw ? "more than " + raw : Integer.toString(got))
          + " bytes, not the " + rawLen + " its record declares";
      return null;
    }
    return out;
  }
}
