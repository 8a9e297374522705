package io.litemq.spark;

/** A queue that cannot be read as asked: one line naming the file and the offset. */
public class LiteMQException extends RuntimeException {
  /** For damage: crc, length_out_of_bounds, record_malformed, batch_seq_mismatch, unsupported. */
  public final String reason;

  public LiteMQException(String message) {
    this(message, null);
  }

  public LiteMQException(String message, String reason) {
    super("litemq: " + message);
    this.reason = reason;
  }
}
