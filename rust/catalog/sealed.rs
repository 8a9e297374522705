//! Sealed files verified once: a sealed version-4 file's footer carries a
//! CRC-64 of its whole frame area; a bulk reader checks it in one pass (at
//! memory speed) the first time a queue handle reads the file in bulk, and
//! then parses its frames without a CRC per frame. Every frame handed out
//! is thus still CRC-checked: by its own CRC, or by its file's checksum
//! verified in this process. A file whose frame area does not match its
//! footer is [`Error::Corrupted`], naming the file.
//!
//! What was verified is remembered per queue handle (its catalog), keyed by
//! the file's device, inode and change time as well as its footer: a file
//! replaced by a copy, or written to, is verified again. Keyed by inode and
//! footer alone, a damaged copy of a file verified earlier could take the
//! recycled inode of the original and pass unchecked (the random-damage
//! test in `tests/corruption.rs` did exactly that).

use std::collections::HashSet;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::format::footer::{trimmed_len, Footer, FOOTER_LEN};
use crate::format::frame::{DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN};
use crate::format::header::DataHeader;
use crate::storage::mapped::Mapping;

/// Which file, which content: `(st_dev, st_ino, st_ctime in ns,
/// file_number, frames_end, frames_crc)`.
type Key = (u64, u64, i64, u64, u64, u64);

/// The files a queue handle verified.
#[derive(Debug, Default)]
pub(crate) struct Verified(Mutex<HashSet<Key>>);

/// A sealed file's footer, with the key of the file as it was when the
/// footer was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sealed {
    pub(crate) footer: Footer,
    key: Key,
}

/// The footer of `map` when it is a sealed version-4 file (trimmed or
/// full). The footer is read with `pread` at the end of the file as it is
/// now, not through the mapping: a mapping made before the file was
/// trimmed reaches past its end, where touching it would fault. It counts
/// only when it agrees with the header and the trimming rule, and the
/// mapping shows the end-of-file marker where it says the frames end.
pub(crate) fn footer(map: &Mapping, h: &DataHeader) -> Option<Sealed> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    if h.version < 4 {
        return None;
    }
    let file = std::fs::File::open(map.path()).ok()?;
    let meta = file.metadata().ok()?;
    if (meta.dev(), meta.ino()) != map.identity() {
        return None; // the path now names another file
    }
    let len = meta.len();
    let mut b = [0u8; FOOTER_LEN];
    file.read_exact_at(&mut b, len.checked_sub(FOOTER_LEN as u64)?)
        .ok()?;
    let f = Footer::decode(&b).ok()?;
    let fits = f.file_number == h.file_number
        && f.first_seq == h.first_seq
        && f.end_seq >= f.first_seq
        && f.hole_seqs <= f.end_seq - f.first_seq
        && f.frames_end >= DATA_HEADER_LEN as u64
        && f.frames_end.is_multiple_of(FRAME_ALIGN as u64)
        && trimmed_len(f.frames_end, h.file_size) == len
        && map.covers(f.frames_end as usize + 4);
    let ctime = meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec();
    let key = (
        meta.dev(),
        meta.ino(),
        ctime,
        f.file_number,
        f.frames_end,
        f.frames_crc,
    );
    (fits && map.load_u32(f.frames_end as usize) == END_OF_FILE)
        .then_some(Sealed { footer: f, key })
}

impl Verified {
    /// True when this handle already verified `s`.
    pub(crate) fn contains(&self, s: &Sealed) -> bool {
        self.0.lock().is_ok_and(|set| set.contains(&s.key))
    }

    /// Checks the frame area of `map` against its footer (once per file
    /// per handle); [`Error::Corrupted`] naming the file when they differ.
    pub(crate) fn verify(&self, map: &Mapping, s: &Sealed) -> Result<()> {
        if self.contains(s) {
            return Ok(());
        }
        let f = &s.footer;
        let crc = Footer::frames_crc_of(map.as_slice(), f.frames_end);
        if crc != Some(f.frames_crc) {
            return Err(Error::corrupted(
                map.path(),
                DATA_HEADER_LEN as u64,
                None,
                format!(
                    "the frame area does not match the footer's CRC (stored {:#018x}, computed {})",
                    f.frames_crc,
                    crc.map_or_else(|| "none".into(), |c| format!("{c:#018x}"))
                ),
            ));
        }
        if let Ok(mut set) = self.0.lock() {
            set.insert(s.key);
        }
        Ok(())
    }
}
