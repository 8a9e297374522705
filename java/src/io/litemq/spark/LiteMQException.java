package io.litemq.spark;

/** A queue that cannot be read as asked: one line naming the file and the offset. */
public class LiteMQException extends RuntimeException {
  public LiteMQException(String message) {
    super("litemq: " + message);
  }
}
