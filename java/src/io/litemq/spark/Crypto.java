package io.litemq.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.util.HexFormat;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.Mac;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * Encrypted payloads (docs/FORMAT.md, "Encrypted payloads", version 8): XChaCha20-Poly1305 as
 * HChaCha20 (here) plus the JDK's ChaCha20-Poly1305, under the AEAD key HMAC-SHA256(key,
 * "litemq v8 payload key"); associated data "litemq-record-v8" | queue id (16 bytes) | seq
 * (u64 LE) | the record bytes before the nonce.
 */
final class Crypto {
  private static final byte[] AD_PREFIX = "litemq-record-v8".getBytes(StandardCharsets.US_ASCII);
  private final byte[] aeadKey;
  private final byte[] queueId;
  private Cipher cipher;

  Crypto(byte[] aeadKey, byte[] queueId) {
    this.aeadKey = aeadKey;
    this.queueId = queueId;
  }

  /** The key in a key file: 32 raw bytes or 64 hex digits. */
  static byte[] readKey(String keyFile) throws IOException {
    byte[] raw = Files.readAllBytes(Path.of(keyFile));
    if (raw.length == 32) return raw;
    String hex = new String(raw, StandardCharsets.US_ASCII).strip();
    try {
      byte[] k = HexFormat.of().parseHex(hex);
      if (k.length == 32) return k;
    } catch (IllegalArgumentException e) {
      // fall through
    }
    throw new LiteMQException("encryption key file " + keyFile + " holds neither 32 bytes nor 64 hex digits");
  }

  static byte[] hmac(byte[] key, String label) {
    try {
      Mac m = Mac.getInstance("HmacSHA256");
      m.init(new SecretKeySpec(key, "HmacSHA256"));
      return m.doFinal(label.getBytes(StandardCharsets.US_ASCII));
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException(e);
    }
  }

  /**
   * The payload decryptor of a queue whose metadata.json has {@code encryption}: checks the
   * key against its key_check first (a wrong key fails before anything is read).
   */
  static Crypto forQueue(String queueDir, String queueIdHex, String keyCheckHex, String keyFile) throws IOException {
    byte[] key = readKey(keyFile);
    byte[] check = hmac(key, "litemq v8 key check");
    if (!MessageDigest.isEqual(check, HexFormat.of().parseHex(keyCheckHex)))
      throw new LiteMQException(queueDir + ": wrong encryption key (the key in " + keyFile
          + " does not match the queue's key check)");
    return new Crypto(hmac(key, "litemq v8 payload key"), HexFormat.of().parseHex(queueIdHex));
  }

  private static int rotl(int v, int c) {
    return (v << c) | (v >>> (32 - c));
  }

  /** HChaCha20(key, nonce16): the XChaCha20 subkey. */
  static byte[] hchacha20(byte[] key, byte[] nonce, int nonceOff) {
    ByteBuffer k = ByteBuffer.wrap(key).order(ByteOrder.LITTLE_ENDIAN);
    ByteBuffer n = ByteBuffer.wrap(nonce, nonceOff, 16).order(ByteOrder.LITTLE_ENDIAN);
    int[] x = new int[16];
    x[0] = 0x61707865;
    x[1] = 0x3320646e;
    x[2] = 0x79622d32;
    x[3] = 0x6b206574;
    for (int i = 0; i < 8; i++) x[4 + i] = k.getInt(i * 4);
    for (int i = 0; i < 4; i++) x[12 + i] = n.getInt(nonceOff + i * 4);
    for (int r = 0; r < 10; r++) {
      qr(x, 0, 4, 8, 12);
      qr(x, 1, 5, 9, 13);
      qr(x, 2, 6, 10, 14);
      qr(x, 3, 7, 11, 15);
      qr(x, 0, 5, 10, 15);
      qr(x, 1, 6, 11, 12);
      qr(x, 2, 7, 8, 13);
      qr(x, 3, 4, 9, 14);
    }
    ByteBuffer out = ByteBuffer.allocate(32).order(ByteOrder.LITTLE_ENDIAN);
    for (int i = 0; i < 4; i++) out.putInt(x[i]);
    for (int i = 12; i < 16; i++) out.putInt(x[i]);
    return out.array();
  }

  private static void qr(int[] x, int a, int b, int c, int d) {
    x[a] += x[b];
    x[d] = rotl(x[d] ^ x[a], 16);
    x[c] += x[d];
    x[b] = rotl(x[b] ^ x[c], 12);
    x[a] += x[b];
    x[d] = rotl(x[d] ^ x[a], 8);
    x[c] += x[d];
    x[b] = rotl(x[b] ^ x[c], 7);
  }

  /**
   * Opens a sealed payload: {@code buf[recordAt, nonceAt)} is the record before the nonce,
   * {@code buf[nonceAt, nonceAt + 24)} the nonce, then {@code sealedLen} bytes of ciphertext
   * and tag. Returns the plaintext, or null when it fails authentication.
   */
  byte[] open(ByteBuffer buf, int recordAt, int nonceAt, int sealedLen, long seq) {
    byte[] nonce = new byte[24];
    buf.get(nonceAt, nonce, 0, 24);
    byte[] sub = hchacha20(aeadKey, nonce, 0);
    byte[] iv = new byte[12];
    System.arraycopy(nonce, 16, iv, 4, 8);
    byte[] ad = new byte[16 + 16 + 8 + (nonceAt - recordAt)];
    System.arraycopy(AD_PREFIX, 0, ad, 0, 16);
    System.arraycopy(queueId, 0, ad, 16, 16);
    ByteBuffer.wrap(ad, 32, 8).order(ByteOrder.LITTLE_ENDIAN).putLong(seq);
    buf.get(recordAt, ad, 40, nonceAt - recordAt);
    byte[] sealed = new byte[sealedLen];
    buf.get(nonceAt + 24, sealed, 0, sealedLen);
    try {
      if (cipher == null) cipher = Cipher.getInstance("ChaCha20-Poly1305");
      cipher.init(Cipher.DECRYPT_MODE, new SecretKeySpec(sub, "ChaCha20"), new IvParameterSpec(iv));
      cipher.updateAAD(ad);
      return cipher.doFinal(sealed);
    } catch (AEADBadTagException e) {
      return null;
    } catch (GeneralSecurityException e) {
      throw new IllegalStateException("ChaCha20-Poly1305 is not available in this JDK", e);
    }
  }
}
