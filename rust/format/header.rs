//! Fixed headers at the start of data files and sparse-index files.

use super::crc::crc64;
use super::typed::{RowLayout, Schema, HEADER_SCHEMA_AT, HEADER_SCHEMA_LEN_AT, MAX_SCHEMA_JSON};
use super::{le_u32, le_u64, FORMAT_VERSION, OLDEST_READABLE_VERSION};

/// First eight bytes of every data file.
pub const DATA_MAGIC: [u8; 8] = *b"LMQDATA\0";
/// First eight bytes of every sparse-index file.
pub const INDEX_MAGIC: [u8; 8] = *b"LMQSIDX\0";
/// Where a data file's removal mark lies (bytes 64..72 of its header,
/// outside the header's CRC): zero while the file is the queue's.
pub const REMOVAL_MARK_AT: usize = 64;
/// The removal mark: stored by litemq before it deletes a data file or
/// puts another in its place, so that readers in other processes, which
/// may keep the file mapped, notice without asking the file system.
pub const REMOVAL_MARK: [u8; 8] = *b"LMQGONE\0";
/// First format version whose files are always marked before litemq
/// deletes or replaces them (older litemq builds did not mark, and cannot
/// open a queue of this version).
pub const REMOVAL_MARKED_SINCE: u32 = 10;
/// Bytes before the first sparse-index entry.
pub const INDEX_HEADER_LEN: usize = 256;
/// Bytes of one sparse-index entry: seq, timestamp, CRC, offset.
pub const INDEX_ENTRY_LEN: usize = 32;

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// Fewer bytes than a header.
    Truncated,
    /// The magic number is not the expected one.
    BadMagic,
    /// The stored CRC does not match the header bytes.
    BadCrc,
    /// Written by a format version this build does not read.
    Version(u32),
    /// A field is out of its range.
    Invalid(&'static str),
}

impl std::fmt::Display for HeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeaderError::Truncated => f.write_str("header truncated"),
            HeaderError::BadMagic => f.write_str("bad magic number"),
            HeaderError::BadCrc => f.write_str("header CRC mismatch"),
            HeaderError::Version(v) => write!(f, "unsupported format version {v}"),
            HeaderError::Invalid(what) => write!(f, "invalid header field: {what}"),
        }
    }
}

/// The first `len` bytes of `b`, once they are there, start with `magic`
/// and match the CRC-64 stored at `crc_at` (over the bytes before it): the
/// checks every fixed header and the footer share, in this order.
pub(super) fn checked<'a>(
    b: &'a [u8],
    len: usize,
    magic: &[u8; 8],
    crc_at: usize,
) -> Result<&'a [u8], HeaderError> {
    let head = b.get(..len).ok_or(HeaderError::Truncated)?;
    if head[0..8] != *magic {
        return Err(HeaderError::BadMagic);
    }
    let stored = le_u64(head, crc_at).ok_or(HeaderError::Truncated)?;
    if crc64(&[&head[..crc_at]]) != stored {
        return Err(HeaderError::BadCrc);
    }
    Ok(head)
}

/// The 4 KiB header of a data file: the first 64 bytes, and in a typed
/// file (format 12) the schema at 72.. (see [`TypedFile`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Format version the file is written in: [`FORMAT_VERSION`] for new
    /// files; 3 for files made before sealed files were trimmed.
    pub version: u32,
    /// Sequence of the file's first message.
    pub first_seq: u64,
    /// When the file was created, µs since the Unix epoch.
    pub created_us: u64,
    /// Position of the file in the queue: 1, 2, 3, … across days.
    pub file_number: u64,
    /// Largest size of the file in bytes: its length while it is written
    /// (from version 4 a sparse file whose blocks are allocated as it
    /// fills); a sealed version-4 file is trimmed shorter.
    pub file_size: u64,
    /// Sparse-index interval the file was written with.
    pub index_interval: u32,
    /// The schema version of the file's rows (format 12); 0 for an untyped
    /// file (and every file before version 12, whose bytes 52..56 are 0).
    pub schema_version: u32,
}

const DATA_CRC_AT: usize = 56;

impl DataHeader {
    /// The 64 bytes of the header (docs/FORMAT.md, "Data files": "Header").
    pub fn encode(&self) -> [u8; 64] {
        let mut b = [0u8; 64];
        b[0..8].copy_from_slice(&DATA_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&(super::frame::DATA_HEADER_LEN as u32).to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.created_us.to_le_bytes());
        b[32..40].copy_from_slice(&self.file_number.to_le_bytes());
        b[40..48].copy_from_slice(&self.file_size.to_le_bytes());
        b[48..52].copy_from_slice(&self.index_interval.to_le_bytes());
        b[52..56].copy_from_slice(&self.schema_version.to_le_bytes());
        let crc = crc64(&[&b[..DATA_CRC_AT]]);
        b[DATA_CRC_AT..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks the first 64 bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<Self, HeaderError> {
        let head = checked(b, 64, &DATA_MAGIC, DATA_CRC_AT)?;
        let version = le_u32(head, 8).ok_or(HeaderError::Truncated)?;
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::Version(version));
        }
        if le_u32(head, 12) != Some(super::frame::DATA_HEADER_LEN as u32) {
            return Err(HeaderError::Invalid("header length"));
        }
        let h = DataHeader {
            version,
            first_seq: le_u64(head, 16).ok_or(HeaderError::Truncated)?,
            created_us: le_u64(head, 24).ok_or(HeaderError::Truncated)?,
            file_number: le_u64(head, 32).ok_or(HeaderError::Truncated)?,
            file_size: le_u64(head, 40).ok_or(HeaderError::Truncated)?,
            index_interval: le_u32(head, 48).ok_or(HeaderError::Truncated)?,
            schema_version: le_u32(head, 52).ok_or(HeaderError::Truncated)?,
        };
        if h.index_interval == 0 {
            return Err(HeaderError::Invalid("index interval"));
        }
        if h.schema_version != 0 && h.version < TYPED_SINCE_VERSION {
            return Err(HeaderError::Invalid(
                "schema version in a file before format 12",
            ));
        }
        Ok(h)
    }
}

/// First format version whose data files may be typed (hold rows of a
/// schema, with the schema in their header).
pub const TYPED_SINCE_VERSION: u32 = 12;

/// A typed data file's schema version and the layout of its rows, read
/// once from its header (see [`typed_schema`]) and shared by every reader
/// of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedFile {
    /// The schema version the file's rows are written in.
    pub schema: Schema,
    /// Where each field lies in a row of that version.
    pub layout: RowLayout,
}

impl TypedFile {
    /// The file description of schema version `schema`.
    pub fn new(schema: Schema) -> TypedFile {
        let layout = RowLayout::of(&schema);
        TypedFile { schema, layout }
    }
}

/// Bytes 72..84+n of a typed file's header: the length of `schema`'s JSON,
/// its CRC-64 and the JSON (FORMAT.md "Data-file header of a typed file").
/// The schema was checked when it was declared (its JSON fits).
pub fn encode_header_schema(schema: &Schema) -> Vec<u8> {
    let json = schema.to_json();
    let mut b = Vec::with_capacity(12 + json.len());
    b.extend_from_slice(&(json.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc64(&[json.as_bytes()]).to_le_bytes());
    b.extend_from_slice(json.as_bytes());
    b
}

/// The schema version a data file's header `head` (its first 4096 bytes,
/// or fewer when the file is untyped) records, checked: `None` for an
/// untyped file (`header.schema_version` 0); else the JSON's length (at
/// most [`MAX_SCHEMA_JSON`]), CRC and content must be right and its
/// `version` must be `header.schema_version`. The error says which.
pub fn typed_schema(head: &[u8], header: &DataHeader) -> Result<Option<Schema>, String> {
    if header.schema_version == 0 {
        return Ok(None);
    }
    let len = le_u32(head, HEADER_SCHEMA_LEN_AT).ok_or("header truncated before its schema")?;
    if len == 0 || len as usize > MAX_SCHEMA_JSON {
        return Err(format!(
            "typed file's schema JSON is {len} bytes (1 to {MAX_SCHEMA_JSON})"
        ));
    }
    let crc = le_u64(head, HEADER_SCHEMA_LEN_AT + 4).ok_or("header truncated before its schema")?;
    let json = head
        .get(HEADER_SCHEMA_AT..HEADER_SCHEMA_AT + len as usize)
        .ok_or("header truncated inside its schema")?;
    if crc64(&[json]) != crc {
        return Err("typed file's schema JSON does not match its CRC".into());
    }
    let text = std::str::from_utf8(json).map_err(|_| "typed file's schema JSON is not UTF-8")?;
    let schema = Schema::from_json(text).map_err(|e| format!("typed file's schema: {e}"))?;
    if schema.version != header.schema_version {
        return Err(format!(
            "typed file's schema JSON is version {}, its header says {}",
            schema.version, header.schema_version
        ));
    }
    Ok(Some(schema))
}

/// The 256-byte header of a sparse-index file (the first 48 bytes are used).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexHeader {
    /// The format version of its data file.
    pub version: u32,
    /// One entry every this many messages.
    pub interval: u32,
    /// First sequence of the data file this index belongs to.
    pub first_seq: u64,
    /// File number of that data file.
    pub file_number: u64,
    /// Entries the file has room for.
    pub capacity: u64,
}

const INDEX_CRC_AT: usize = 40;

impl IndexHeader {
    /// The 48 bytes of the header (docs/FORMAT.md, "Sparse index files": "Header").
    pub fn encode(&self) -> [u8; 48] {
        let mut b = [0u8; 48];
        b[0..8].copy_from_slice(&INDEX_MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12..16].copy_from_slice(&self.interval.to_le_bytes());
        b[16..24].copy_from_slice(&self.first_seq.to_le_bytes());
        b[24..32].copy_from_slice(&self.file_number.to_le_bytes());
        b[32..40].copy_from_slice(&self.capacity.to_le_bytes());
        let crc = crc64(&[&b[..INDEX_CRC_AT]]);
        b[INDEX_CRC_AT..48].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes and checks the first 48 bytes of `b`.
    pub fn decode(b: &[u8]) -> Result<Self, HeaderError> {
        let head = checked(b, 48, &INDEX_MAGIC, INDEX_CRC_AT)?;
        let version = le_u32(head, 8).ok_or(HeaderError::Truncated)?;
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(HeaderError::Version(version));
        }
        let h = IndexHeader {
            version,
            interval: le_u32(head, 12).ok_or(HeaderError::Truncated)?,
            first_seq: le_u64(head, 16).ok_or(HeaderError::Truncated)?,
            file_number: le_u64(head, 24).ok_or(HeaderError::Truncated)?,
            capacity: le_u64(head, 32).ok_or(HeaderError::Truncated)?,
        };
        if h.interval == 0 {
            return Err(HeaderError::Invalid("index interval"));
        }
        Ok(h)
    }

    /// Bytes of an index file with this many entries.
    pub fn file_len(capacity: u64) -> u64 {
        INDEX_HEADER_LEN as u64 + capacity * INDEX_ENTRY_LEN as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_header_round_trip_and_damage() {
        let h = DataHeader {
            version: FORMAT_VERSION,
            first_seq: 42,
            created_us: 7,
            file_number: 3,
            file_size: 65536,
            index_interval: 16,
            schema_version: 0,
        };
        let mut b = h.encode().to_vec();
        assert_eq!(DataHeader::decode(&b), Ok(h));
        b[20] ^= 0xff;
        assert_eq!(DataHeader::decode(&b), Err(HeaderError::BadCrc));
        assert_eq!(DataHeader::decode(&b[..10]), Err(HeaderError::Truncated));
    }

    #[test]
    fn newer_version_is_reported() {
        let h = IndexHeader {
            version: FORMAT_VERSION,
            interval: 4,
            first_seq: 0,
            file_number: 1,
            capacity: 10,
        };
        let mut b = h.encode();
        let newer = FORMAT_VERSION + 1;
        b[8] = newer as u8;
        let crc = crc64(&[&b[..INDEX_CRC_AT]]);
        b[INDEX_CRC_AT..48].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(IndexHeader::decode(&b), Err(HeaderError::Version(newer)));
    }
}
