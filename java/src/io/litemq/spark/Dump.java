package io.litemq.spark;

import java.util.HexFormat;
import java.util.List;

/**
 * Prints every message of the queues under a path as the JVM reader reads them, one line each:
 * {@code queue seq timestamp payload-hex}. A check of the reader without Spark (tests compare it
 * with the Rust reader); {@code -Dlitemq.mapWindow=8192} maps files in small windows.
 * Usage: {@code java -cp litemq-spark.jar:SPARK_JARS/* io.litemq.spark.Dump PATH [KEY_FILE]}.
 */
public final class Dump {
  private Dump() {}

  public static void main(String[] args) throws Exception {
    List<Planner.Ref> refs = Planner.discover(List.of(args[0]));
    String keyFile = args.length > 1 ? args[1] : null;
    StringBuilder out = new StringBuilder();
    HexFormat hex = HexFormat.of();
    for (LiteMQPartition p : Planner.plan(refs, 0, Long.MAX_VALUE, Long.MIN_VALUE, Long.MAX_VALUE,
        Long.MAX_VALUE, null, null, keyFile, null)) {
      try (Scanner s = new Scanner(DataFile.open(p.file), p.startOffset, p.startSeq, p.seqLo, p.seqHi,
          p.timeLo, p.timeHi, p.wholeFile)) {
        if (p.keyFile != null) s.crypto = Crypto.forQueue(p.file, p.queueIdHex, p.keyCheckHex, p.keyFile);
        while (!s.done()) {
          s.scan(m -> {
            byte[] b = new byte[m.payloadLen];
            if (m.payloadArr != null) System.arraycopy(m.payloadArr, m.payloadAt, b, 0, m.payloadLen);
            else m.buf.get(m.payloadAt, b, 0, m.payloadLen);
            out.append(p.queue).append(' ').append(m.seq).append(' ').append(m.ts).append(' ')
                .append(hex.formatHex(b)).append('\n');
            return true;
          });
        }
      }
    }
    System.out.print(out);
  }
}
