//! Encryption at rest (format 8): how a record's payload is sealed, and the
//! keyed hash the key index stores instead of a plain one.
//!
//! The cipher is XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`): its
//! 192-bit nonce can be drawn at random for every message, by any number of
//! writer processes, with no counter to keep and no realistic chance of a
//! repeat; it is constant-time in software (no AES-NI needed).
//!
//! A queue's 32-byte key is never used directly: three subkeys are derived
//! from it with HMAC-SHA256 under fixed labels ([`LABEL_SEAL`],
//! [`LABEL_INDEX`], [`LABEL_CHECK`]): the AEAD key, the key-index MAC key,
//! and the key check value stored in `metadata.json` (a wrong key is told
//! at open, not by garbage).
//!
//! A sealed record (extension bit [`super::record::EXT_ENCRYPTED`]) is
//! `... | extension | nonce:24 | ciphertext | tag:16`. The associated data
//! is [`AAD_DOMAIN`], the queue's random 16-byte id, the message's sequence
//! (u64 LE), then every record byte before the nonce (flags, timestamp,
//! key, headers, topic, expiry, priority, compression field, extension
//! byte): a frame moved to another sequence, another queue, or with any of
//! those fields changed fails authentication.

use chacha20poly1305::aead::rand_core::RngCore;
use chacha20poly1305::aead::{Aead, AeadInPlace, KeyInit, OsRng, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of a key.
pub const KEY_LEN: usize = 32;
/// Bytes of a nonce (XChaCha20).
pub const NONCE_LEN: usize = 24;
/// Bytes of the Poly1305 tag after the ciphertext.
pub const TAG_LEN: usize = 16;
/// Bytes of a queue id.
pub const QUEUE_ID_LEN: usize = 16;
/// Bytes sealing adds to a record: the nonce and the tag (plus the
/// extension byte when the record had none).
pub const SEAL_OVERHEAD: usize = NONCE_LEN + TAG_LEN;
/// The cipher's name in `metadata.json`.
pub const CIPHER_NAME: &str = "xchacha20poly1305";
/// Label of the AEAD subkey.
pub const LABEL_SEAL: &[u8] = b"litemq v8 payload key";
/// Label of the key-index MAC subkey.
pub const LABEL_INDEX: &[u8] = b"litemq v8 key index";
/// Label of the key check value.
pub const LABEL_CHECK: &[u8] = b"litemq v8 key check";
/// Label of the synthetic-nonce subkey ([`QueueKey::with_synthetic_nonces`]).
pub const LABEL_SYNTHETIC: &[u8] = b"litemq v8 synthetic nonce";
/// First bytes of every record's associated data.
pub const AAD_DOMAIN: &[u8] = b"litemq-record-v8";

type HmacSha256 = Hmac<Sha256>;

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut m = <HmacSha256 as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The key check value stored in `metadata.json`: HMAC-SHA256 of
/// [`LABEL_CHECK`] under the queue key. It tells a wrong key apart; it
/// reveals nothing of the key.
pub fn key_check(key: &[u8; KEY_LEN]) -> [u8; 32] {
    hmac(key, &[LABEL_CHECK])
}

/// A queue's key, its derived subkeys and its id: everything needed to seal
/// and open its records and to hash keys for its key index.
#[derive(Clone)]
pub struct QueueKey {
    aead: XChaCha20Poly1305,
    index_key: [u8; 32],
    queue_id: [u8; QUEUE_ID_LEN],
    /// Nonces derived from the sealed input instead of drawn (fixtures).
    synthetic: Option<[u8; 32]>,
}

impl std::fmt::Debug for QueueKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueueKey").finish_non_exhaustive()
    }
}

impl QueueKey {
    /// The key of the queue with id `queue_id`.
    pub fn new(key: &[u8; KEY_LEN], queue_id: [u8; QUEUE_ID_LEN]) -> QueueKey {
        let seal = hmac(key, &[LABEL_SEAL]);
        QueueKey {
            aead: XChaCha20Poly1305::new(&seal.into()),
            index_key: hmac(key, &[LABEL_INDEX]),
            queue_id,
            synthetic: None,
        }
    }

    /// The same key, but each nonce is HMAC-SHA256 (under a subkey) of the
    /// sequence, the record head and the plaintext, truncated to 24 bytes,
    /// instead of random: a synthetic IV, as in SIV modes, so the same input
    /// always seals to the same bytes. Only for writing reproducible
    /// fixtures (`QueueBuilder::synthetic_nonces_for_fixtures`); nonces
    /// stay unique as long as no message is written twice with the same
    /// sequence, timestamp and payload.
    pub fn with_synthetic_nonces(mut self, key: &[u8; KEY_LEN]) -> QueueKey {
        self.synthetic = Some(hmac(key, &[LABEL_SYNTHETIC]));
        self
    }

    /// The queue id bound into every record's associated data.
    pub fn queue_id(&self) -> [u8; QUEUE_ID_LEN] {
        self.queue_id
    }

    /// What the key index hashes instead of `key`: HMAC-SHA256 of it under
    /// the index subkey. The index stores the XXH32 of this MAC, a function
    /// of the MAC alone: without the queue key it tells nothing of the key.
    pub fn index_key(&self, key: &[u8]) -> [u8; 32] {
        hmac(&self.index_key, &[key])
    }

    fn aad(&self, seq: u64, head: &[u8]) -> Vec<u8> {
        let mut aad = Vec::with_capacity(AAD_DOMAIN.len() + QUEUE_ID_LEN + 8 + head.len());
        aad.extend_from_slice(AAD_DOMAIN);
        aad.extend_from_slice(&self.queue_id);
        aad.extend_from_slice(&seq.to_le_bytes());
        aad.extend_from_slice(head);
        aad
    }

    /// Appends `nonce | ciphertext | tag` of `plain` to `out`, with the
    /// associated data of message `seq` whose record bytes before the nonce
    /// are `head`. The nonce is drawn from the operating system.
    pub fn seal_into(&self, seq: u64, head: &[u8], plain: &[u8], out: &mut Vec<u8>) {
        let mut nonce = [0u8; NONCE_LEN];
        match &self.synthetic {
            Some(k) => {
                nonce.copy_from_slice(&hmac(k, &[&seq.to_le_bytes(), head, plain])[..NONCE_LEN])
            }
            None => OsRng.fill_bytes(&mut nonce),
        }
        self.seal_with_nonce(seq, head, plain, &nonce, out);
    }

    /// [`QueueKey::seal_into`] with a given nonce (tests and fixtures: a
    /// nonce must never be used twice under one key).
    pub fn seal_with_nonce(
        &self,
        seq: u64,
        head: &[u8],
        plain: &[u8],
        nonce: &[u8; NONCE_LEN],
        out: &mut Vec<u8>,
    ) {
        let aad = self.aad(seq, head);
        out.reserve(NONCE_LEN + plain.len() + TAG_LEN);
        out.extend_from_slice(nonce);
        let at = out.len();
        out.extend_from_slice(plain);
        // In place: no second buffer for the ciphertext.
        let tag = self
            .aead
            .encrypt_in_place_detached(XNonce::from_slice(nonce), &aad, &mut out[at..])
            .expect("XChaCha20-Poly1305 seals any length a record holds");
        out.extend_from_slice(&tag);
    }

    /// Opens `sealed` (`ciphertext | tag`) of message `seq`, whose record
    /// bytes before the nonce are `head`. The error says it failed
    /// authentication: wrong key, tampered bytes, or a frame moved from
    /// another sequence or queue.
    pub fn open(
        &self,
        seq: u64,
        head: &[u8],
        nonce: &[u8],
        sealed: &[u8],
    ) -> Result<Vec<u8>, &'static str> {
        if nonce.len() != NONCE_LEN || sealed.len() < TAG_LEN {
            return Err("encrypted payload shorter than its tag");
        }
        let aad = self.aad(seq, head);
        self.aead
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .map_err(|_| {
                "encrypted payload fails authentication (tampered, or moved from another \
                 sequence or queue)"
            })
    }
}

/// A random queue id for a new encrypted queue.
pub fn new_queue_id() -> [u8; QUEUE_ID_LEN] {
    let mut id = [0u8; QUEUE_ID_LEN];
    OsRng.fill_bytes(&mut id);
    id
}

/// Lower-case hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Bytes of lower- or upper-case hex; `None` when malformed.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_and_what_the_associated_data_binds() {
        let k = QueueKey::new(&[7; 32], [1; 16]);
        let mut out = Vec::new();
        k.seal_with_nonce(5, b"head", b"secret", &[9; 24], &mut out);
        assert_eq!(out.len(), 24 + 6 + 16);
        let (nonce, sealed) = out.split_at(24);
        assert_eq!(k.open(5, b"head", nonce, sealed).unwrap(), b"secret");
        assert!(k.open(6, b"head", nonce, sealed).is_err());
        assert!(k.open(5, b"Head", nonce, sealed).is_err());
        let other_queue = QueueKey::new(&[7; 32], [2; 16]);
        assert!(other_queue.open(5, b"head", nonce, sealed).is_err());
        let other_key = QueueKey::new(&[8; 32], [1; 16]);
        assert!(other_key.open(5, b"head", nonce, sealed).is_err());
        let mut bad = sealed.to_vec();
        bad[0] ^= 1;
        assert!(k.open(5, b"head", nonce, &bad).is_err());
        assert!(k.open(5, b"head", nonce, &sealed[..15]).is_err());
    }

    #[test]
    fn key_check_and_index_key_depend_on_the_key() {
        assert_ne!(key_check(&[1; 32]), key_check(&[2; 32]));
        let a = QueueKey::new(&[1; 32], [0; 16]);
        let b = QueueKey::new(&[2; 32], [0; 16]);
        assert_ne!(a.index_key(b"k"), b.index_key(b"k"));
        assert_eq!(a.index_key(b"k"), a.index_key(b"k"));
        assert_eq!(from_hex(&to_hex(&[0, 255, 16])), Some(vec![0, 255, 16]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
    }
}
