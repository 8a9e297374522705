//! Records: what a frame carries.
//!
//! ```text
//! flags:u8 | timestamp:u64 | [key] | [headers] | [topic] | [expiry] | [priority]
//!          | [compression] | [extension] | payload
//! key      = len:u16 | bytes                      (flag KEY)
//! headers  = count:u8 | count × (name_len:u8 | name | kind:u8 | value_len:u16 | value)
//! topic    = len:u8 | topic | queue_id:u16 | tag_count:u8 | tag_count × (len:u8 | tag)
//!                                                 (flag TOPIC, format 6)
//! expiry   = expires_at:u64, µs since the Unix epoch (flag EXPIRY, format 6)
//! priority = u8, higher is served first          (flag PRIORITY, format 6)
//! compression = codec:u8 | raw_len:u32            (flag COMPRESSED, format 7)
//!                 the payload is compressed; raw_len is its decompressed size
//! extension = u8 of bits: 0x01 tombstone (format 7), 0x02 encrypted,
//!             0x04 hole (format 8), others reserved, never 0
//!                                                 (flag EXTENSION, format 7)
//! encrypted = nonce:[u8; 24], after the extension byte (bit 0x02); the
//!             payload is then ciphertext | tag:[u8; 16] (see `format::crypto`)
//! hole     = flags 0x80 | timestamp | ext 0x04 | count:u16 | zero filler
//!             (format 8: `count` sequences key compaction dropped)
//! batch    = flags 0x80 | timestamp | ext 0x08 | count:u16 | first_seq:u64
//!             | codec:u8 | raw_len:u32 | compressed block
//!             (format 9: `count` messages compressed together; the block
//!             is `count` × (len:u32 | member record), see [`batch_members`])
//! ```
//! Flags announce optional fields, which follow in bit order; a message
//! without them costs nine bytes of record overhead. Every flag bit is in
//! use since format 7; new fields go behind extension bits. A reader that
//! meets a flag or extension bit it does not know reports the frame as
//! unsupported instead of guessing.
//!
//! Files: [`codec`] (flags, fields, [`Record`] and [`RecordView`]),
//! [`hole`], [`batch`], [`seal`]. Everything is re-exported here, so
//! `format::record::X` names each item wherever it lives.

pub mod batch;
pub mod codec;
pub mod hole;
pub mod seal;

pub use self::batch::*;
pub use self::codec::*;
pub use self::hole::*;
pub use self::seal::*;

#[cfg(test)]
mod tests;
