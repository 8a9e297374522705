package io.litemq.spark;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Checks the JVM reader's frame walker against the shared frame test vectors
 * (tests/vectors/frames.json, tests/vectors/README.md): for every case, walks the bytes from
 * {@code start} with the reader's own {@link Scanner} and compares each event (frame: offset,
 * record length, next offset, kind, sequence, count, batch first sequence; empty; end_of_file;
 * damage and its reason) with the case's {@code walk}. Prints one line per failing case and
 * exits 1 when any fails. Usage: {@code java -cp litemq-spark.jar:SPARK_JARS/*
 * io.litemq.spark.VectorCheck tests/vectors/frames.json}.
 */
public final class VectorCheck {
  private VectorCheck() {}

  public static void main(String[] args) throws Exception {
    JsonNode root = new ObjectMapper().readTree(new File(args[0]));
    int failed = 0, n = 0;
    for (JsonNode c : root.get("cases")) {
      n++;
      String name = c.get("name").asText();
      List<String> got = walk(c);
      List<String> want = new ArrayList<>();
      for (JsonNode e : c.get("walk")) want.add(expected(e));
      if (!got.equals(want)) {
        failed++;
        System.out.println("FAIL " + name + "\n  want " + want + "\n  got  " + got);
      }
    }
    System.out.println((n - failed) + " of " + n + " cases pass");
    if (n == 0 || failed > 0) System.exit(1);
  }

  private static String expected(JsonNode e) {
    String ev = e.get("event").asText();
    long at = e.get("at").asLong();
    switch (ev) {
      case "frame":
        return "frame@" + at + " len=" + e.get("record_len").asLong() + " next=" + e.get("next").asLong()
            + " " + e.get("kind").asText() + " seq=" + e.get("seq").asLong() + " count=" + e.get("count").asLong()
            + (e.has("batch_first_seq") && !e.get("batch_first_seq").isNull() ? " first=" + e.get("batch_first_seq").asLong() : "");
      case "damage":
        return "damage@" + at + " " + e.get("reason").asText();
      default:
        return ev + "@" + at;
    }
  }

  static List<String> walk(JsonNode c) throws Exception {
    byte[] bytes = HexFormat.of().parseHex(c.get("hex").asText());
    long start = c.get("start").asLong();
    long firstSeq = c.get("first_seq").asLong();
    int version = c.has("file_version") ? c.get("file_version").asInt() : 11;
    DataFile f = DataFile.inMemory(c.get("name").asText(), bytes, start, version, firstSeq);
    Scanner s = new Scanner(f, start, firstSeq, 0, Long.MAX_VALUE, Long.MIN_VALUE, Long.MAX_VALUE, false);
    s.exactFrom(start, firstSeq);
    JsonNode ve = c.get("verified_end");
    if (ve != null && !ve.isNull()) s.trustedEnd = ve.asLong();
    List<String> out = new ArrayList<>();
    s.listener = (at, len, next, kind, seq, count, bf) -> out.add("frame@" + at + " len=" + len + " next=" + next
        + " " + kind + " seq=" + seq + " count=" + count + (kind.equals("batch") ? " first=" + bf : ""));
    try {
      s.scan(m -> true);
      out.add(s.stopEvent());
    } catch (LiteMQException e) {
      out.add("damage@" + s.position() + " " + e.reason);
    }
    return out;
  }
}
