//! Pure encoding and decoding of litemq's bytes. No I/O happens here, and no
//! decoder panics or reads past its slice on bad input: it returns an error.
//! `docs/FORMAT.md` is the byte-level contract these functions implement.

pub mod bits;
pub mod compression;
pub mod crc;
pub mod crypto;
pub mod data_file;
pub mod error;
pub mod fields;
pub mod footer;
pub mod frame;
pub mod header;
pub mod kind;
pub mod metadata;
pub mod position;
pub mod record;
pub mod topics;
pub mod typed;
pub mod walk;
pub mod work_queue;

/// Version of the on-disk format written by this build.
pub const FORMAT_VERSION: u32 = 12;
/// Oldest format version this build reads and keeps writing: version-3
/// files (never trimmed, no footer), version-4 files (no dense index) and
/// version-5 files (no topic, expiry or priority fields) and version-6 files
/// (no compressed payloads, no extension byte) and version-7 files (no
/// encrypted payloads, no holes) and version-8 files (no batches) and
/// version-9 files (not marked before litemq removes them: readers check
/// them with the file system) and version-10 files (a compacted one does
/// not count its holes in its footer: readers walk it once) and version-11
/// files (no schema: untyped) stay as they are; new files are version 12. Key compaction rewrites a sealed file
/// of any version with a footer as the current version. A record with a field of a later version than the active
/// file's is written after a roll (see [`record::record_version`]).
pub const OLDEST_READABLE_VERSION: u32 = 3;

/// Reads a little-endian `u16` at `at`, or `None` past the end.
pub(crate) fn le_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}
/// Reads a little-endian `u32` at `at`, or `None` past the end.
pub(crate) fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}
/// Reads a little-endian `u64` at `at`, or `None` past the end.
pub(crate) fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}
