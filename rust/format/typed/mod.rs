//! Typed records (format 12): a queue's schema, its versions, and the row
//! encoding of one event (FORMAT.md "Typed records"). Pure bytes: the
//! engine stores rows as payloads and in row batches, the readers decode
//! them into values ([`row::decode_row`]) or columns.

pub mod arrow_in;
pub mod columns;
pub mod row;
pub mod schema;

pub use arrow_in::{encode_columns, ColumnIn};
pub use columns::{Projection, Room, RowDamage, TypedColumn, TypedColumns};
pub use row::{convert_row, decode_row, encode_row, RowLayout, Value};
pub use schema::{Field, FieldType, Schema, SchemaError, SchemaVersions};

pub use crate::format::record::{EXT_ROWS, EXT_ROW_BATCH};

/// Most bytes of a schema version's JSON in a data-file header (4096 − 84).
pub const MAX_SCHEMA_JSON: usize = 4096 - HEADER_SCHEMA_AT;
/// Where a typed file's header holds the schema JSON's length (u32), then
/// its CRC-64 (u64), then the JSON.
pub const HEADER_SCHEMA_LEN_AT: usize = 72;
/// Where the JSON starts in the header.
pub const HEADER_SCHEMA_AT: usize = 84;
/// Most fields of a schema.
pub const MAX_FIELDS: usize = 1024;
