//! Sealed files verified once: a trimmed version-4 file's footer carries a
//! CRC-64 of its whole frame area; a bulk reader checks it in one pass (at
//! memory speed) the first time this process reads the file in bulk, and
//! then parses its frames without a CRC per frame. Every frame handed out
//! is thus still CRC-checked: by its own CRC, or by its file's checksum
//! verified in this process. A file whose frame area does not match its
//! footer is [`Error::Corrupted`], naming the file.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use super::catalog::FileInfo;
use crate::error::{Error, Result};
use crate::format::footer::{trimmed_len, Footer, FOOTER_LEN};
use crate::format::frame::{DATA_HEADER_LEN, END_OF_FILE, FRAME_ALIGN};
use crate::storage::mapped::Mapping;

/// Which file, which content: `(st_dev, st_ino, file_number, frames_end,
/// frames_crc)`. A file replaced by another (another inode) or whose footer
/// changed is verified again.
type Key = (u64, u64, u64, u64, u64);

fn verified() -> &'static Mutex<HashSet<Key>> {
    static VERIFIED: OnceLock<Mutex<HashSet<Key>>> = OnceLock::new();
    VERIFIED.get_or_init(Default::default)
}

/// The footer of `map` when it is a sealed version-4 file (trimmed or
/// full). The footer is read with `pread` at the end of the file as it is
/// now, not through the mapping: a mapping made before the file was
/// trimmed reaches past its end, where touching it would fault. It counts
/// only when it agrees with the header and the trimming rule, and the
/// mapping shows the end-of-file marker where it says the frames end.
pub(crate) fn footer(map: &Mapping, info: &FileInfo) -> Option<Footer> {
    use std::os::unix::fs::{FileExt, MetadataExt};
    let h = &info.header;
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
        && f.frames_end >= DATA_HEADER_LEN as u64
        && f.frames_end.is_multiple_of(FRAME_ALIGN as u64)
        && trimmed_len(f.frames_end, h.file_size) == len
        && f.frames_end + 4 <= map.len() as u64;
    (fits && map.load_u32(f.frames_end as usize) == END_OF_FILE).then_some(f)
}

/// True when this process already verified the file behind `map` with
/// footer `f`.
pub(crate) fn is_verified(map: &Mapping, f: &Footer) -> bool {
    let key = key(map, f);
    verified().lock().is_ok_and(|set| set.contains(&key))
}

fn key(map: &Mapping, f: &Footer) -> Key {
    let (dev, ino) = map.identity();
    (dev, ino, f.file_number, f.frames_end, f.frames_crc)
}

/// Checks the frame area of `map` against its footer `f` (once per file
/// per process); [`Error::Corrupted`] naming the file when they differ.
pub(crate) fn verify(map: &Mapping, f: &Footer) -> Result<()> {
    if is_verified(map, f) {
        return Ok(());
    }
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
    if let Ok(mut set) = verified().lock() {
        set.insert(key(map, f));
    }
    Ok(())
}
