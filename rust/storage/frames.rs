//! The frame walker (`format::walk`) over a live mapping (here, below the
//! catalog, the reader and the writer, which all walk mapped files): the length word
//! is loaded with acquire ordering, the ordering the writer publishes a
//! frame with (its length word is stored last), so the bytes behind a
//! non-zero word are complete. Every frame walk of the read path, of
//! recovery, compaction and the consumers goes through
//! [`walk::frame_at`] / [`walk::Walker`] on a [`Mapping`].

use crate::format::walk::FrameBytes;
use crate::storage::mapped::Mapping;

pub use crate::format::kind::RecordKind;
pub use crate::format::walk::{frame_at, Check, Step};

impl FrameBytes for Mapping {
    #[inline]
    fn frame_bytes(&self) -> &[u8] {
        self.as_slice()
    }

    #[inline]
    fn length_word(&self, at: usize) -> Option<u32> {
        (at.checked_add(4)? <= self.len()).then(|| self.load_u32(at))
    }
}
