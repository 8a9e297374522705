//! The read path: [`tailer::Tailer`]s that walk frames (through the
//! handle's [`crate::catalog::Catalog`] of data files, a layer below),
//! columnar [`columns::Columns`] reads, and data files held in memory
//! rather than mapped ([`archived`]: copies read back from an archive).

pub mod archived;
pub mod backward;
pub mod columns;
pub(crate) mod field;
pub mod keys;
pub(crate) mod parallel;
pub(crate) mod plan;
pub mod spare;
pub mod tailer;
pub mod topic;
pub(crate) mod topic_offsets;
pub mod topics_summary;
pub mod typed;
pub mod typed_where;
pub mod wait;
pub mod wake;
pub mod watch;
