//! Sealed payloads (format 8, encryption at rest): sealing the payload of
//! a record an appender encoded.

use super::codec::{decode, encode_into, EXT_ENCRYPTED, FLAG_EXTENSION, RECORD_FIXED_LEN};
use crate::format::crypto::QueueKey;

/// Seals the payload of the record an appender encoded (`flags`, `body`)
/// for message `seq` written at `timestamp`: appends the sealed body to
/// `out` (the fields, the extension byte with [`EXT_ENCRYPTED`], the nonce,
/// then ciphertext and tag) and returns its flags (with
/// [`FLAG_EXTENSION`]) and extension byte. A tombstone has no payload and
/// is left as it is.
/// The writer calls this where the sequence is known (the I/O thread).
pub fn seal_body(
    key: &QueueKey,
    seq: u64,
    flags: u8,
    timestamp: u64,
    body: &[u8],
    out: &mut Vec<u8>,
) -> (u8, u8) {
    let mut rec = Vec::with_capacity(RECORD_FIXED_LEN + body.len());
    encode_into(&mut rec, flags, timestamp, body);
    let view = decode(&rec).expect("the appender encoded a valid record");
    if view.is_tombstone() {
        out.extend_from_slice(body);
        return (flags, view.ext);
    }
    let sealed_flags = flags | FLAG_EXTENSION;
    let fields_end = view.payload_at - usize::from(flags & FLAG_EXTENSION != 0);
    let mut head = Vec::with_capacity(fields_end + 1);
    head.push(sealed_flags);
    head.extend_from_slice(&rec[1..fields_end]);
    head.push(view.ext | EXT_ENCRYPTED);
    out.extend_from_slice(&head[RECORD_FIXED_LEN..]);
    key.seal_into(seq, &head, view.payload, out);
    (sealed_flags, view.ext | EXT_ENCRYPTED)
}

/// Bytes [`seal_body`] adds to a record body with `flags` that is not a
/// tombstone: nonce and tag, plus the extension byte when it had none.
pub fn sealed_growth(flags: u8) -> usize {
    crate::format::crypto::SEAL_OVERHEAD + usize::from(flags & FLAG_EXTENSION == 0)
}
