//! The frame walker (`format::walk`) over a live mapping (here, below the
//! catalog, the reader and the writer, which all walk mapped files): the length word
//! is loaded with acquire ordering, the ordering the writer publishes a
//! frame with (its length word is stored last), so the bytes behind a
//! non-zero word are complete. Every frame walk of the read path, of
//! recovery, compaction and the consumers goes through
//! [`walk::frame_at`] / [`walk::Walker`] on a [`Mapping`].

use std::path::Path;

use crate::error::Result;
use crate::format::frame::{frame_size, END_OF_FILE};
use crate::format::header::DataHeader;
use crate::format::walk::FrameBytes;
use crate::storage::mapped::Mapping;

pub use crate::format::kind::RecordKind;
pub use crate::format::walk::{frame_at, Check, Step};

/// The one place a walk over a live mapping is bounded by the file's
/// length (format version 11: the last file grows while it is read). The
/// length word is loaded only where the file has it; after a word that
/// announces a frame, [`Mapping::covers`] makes sure the cached length
/// reaches past the frame and the word after it (the writer grew the file
/// before it published the frame; an `fstat` when the cache is behind), so
/// [`FrameBytes::frame_bytes`], taken after, holds the whole frame, and a
/// damaged word that points past the file is a frame the bytes do not
/// hold: damage, never a load past end of file.
impl FrameBytes for Mapping {
    #[inline]
    fn frame_bytes(&self) -> &[u8] {
        self.as_slice()
    }

    #[inline]
    fn length_word(&self, at: usize) -> Option<u32> {
        if !self.covers(at.checked_add(4)?) {
            return None;
        }
        let len = self.load_u32(at);
        if len != 0 && len != END_OF_FILE {
            let end = at
                .saturating_add(frame_size(len as usize))
                .saturating_add(4);
            self.covers(end);
        }
        Some(len)
    }
}

/// Maps data file `path` for reading at its header's `file_size` (the file
/// may be shorter and grow: format version 11), or at its length when the
/// header cannot be read or says less.
pub fn open_data(path: &Path) -> Result<Mapping> {
    Mapping::open_extent(path, false, |f| {
        use std::os::unix::fs::FileExt;
        let mut b = [0u8; 64];
        f.read_exact_at(&mut b, 0).ok()?;
        DataHeader::decode(&b).ok().map(|h| h.file_size)
    })
}
