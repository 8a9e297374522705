//! The read path: the [`catalog::Catalog`] of data files, [`tailer::Tailer`]s
//! that walk frames, columnar [`columns::Columns`] reads, and data files
//! held in memory rather than mapped ([`archived`]: copies read back from an
//! archive).

pub mod archived;
pub mod backward;
pub mod catalog;
pub mod columns;
pub(crate) mod field;
pub mod frames;
pub mod keys;
pub(crate) mod plan;
pub(crate) mod sealed;
#[cfg_attr(
    not(feature = "python"),
    allow(
        dead_code,
        reason = "filled by the Python bindings (a column pyarrow lets go of); without them only the taking side is used"
    )
)]
pub mod spare;
pub mod tailer;
pub mod topic;
pub(crate) mod topic_cache;
pub(crate) mod topic_offsets;
pub mod topics_summary;
pub mod wait;
pub mod wake;
pub mod watch;
