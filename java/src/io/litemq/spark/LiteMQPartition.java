package io.litemq.spark;

import org.apache.spark.sql.connector.read.InputPartition;

/** What one task reads: messages [seqLo, seqHi) of one data file, from a start frame. */
public final class LiteMQPartition implements InputPartition {
  private static final long serialVersionUID = 1L;
  final String queue;
  final String file;
  final long startOffset, startSeq, seqLo, seqHi, timeLo, timeHi;
  final boolean wholeFile;
  /** Only messages of these topics (pushed-down topic filters), or null for all. */
  final String[] topics;
  /** An encrypted queue: the key file (read where the task runs), queue id and key check. */
  String keyFile, queueIdHex, keyCheckHex;
  /** A file of an archive: its manifest entry, checked again where the task runs. */
  Archive.Entry listed;
  /**
   * A typed load: the schema version the file held when planned, and where each of the load's
   * current fields lies in it ({@link TypedLoad#projection}); null for an untyped load.
   */
  int schemaVersion;
  int[] projection;

  LiteMQPartition(String queue, String file, long startOffset, long startSeq, long seqLo,
      long seqHi, long timeLo, long timeHi, boolean wholeFile, String[] topics) {
    this.queue = queue;
    this.file = file;
    this.startOffset = startOffset;
    this.startSeq = startSeq;
    this.seqLo = seqLo;
    this.seqHi = seqHi;
    this.timeLo = timeLo;
    this.timeHi = timeHi;
    this.wholeFile = wholeFile;
    this.topics = topics;
  }

  @Override
  public String toString() {
    return "litemq " + queue + " " + file + " [" + seqLo + ", " + (seqHi == Long.MAX_VALUE ? "tail" : seqHi) + ")";
  }
}
