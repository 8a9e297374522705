//! The state file of a group: mapped shared, changed only with 8-byte
//! atomics; its creation, its header and the checks an open makes of its
//! marks against the queue's end.

use super::lease::Now;
use super::name;
use crate::error::{Error, Result};
use crate::format::work_queue::{
    decode_header, encode_header, file_len, lap_of, slot_word, ClockWord, JobState, SlotWord,
    WqHeader, BOOT_ENTRIES, WQ_HEADER_LEN, W_BOOTS, W_BOOT_NEXT, W_CURSOR, W_LOW, W_REWOUND, W_TOP,
};
use crate::storage::fsutil::sync_dir;
use crate::storage::mapped::{preallocate, WordFile};
use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;

/// The state file, mapped.
pub(super) struct StateFile {
    pub(super) words: WordFile,
    pub(super) window: u64,
    pub(super) epoch_us: u64,
    /// Layout version (1 or 2): how deadlines count.
    pub(super) version: u64,
    pub(super) path: PathBuf,
}

impl StateFile {
    /// Maps the state file at `path`, whose header is `header` (checked by
    /// [`read_header`]), for reading and writing: a handle's open and
    /// [`rewind_groups_past`] map it alike.
    pub(super) fn map(path: PathBuf, header: &WqHeader) -> Result<StateFile> {
        let words = WordFile::open_existing(&path, (file_len(header.window) / 8) as usize)?;
        Ok(StateFile {
            words,
            window: header.window,
            epoch_us: header.epoch_us,
            version: header.version,
            path,
        })
    }

    pub(super) fn word(&self, i: usize) -> &AtomicU64 {
        &self.words.words()[i]
    }
    pub(super) fn load(&self, i: usize) -> u64 {
        u64::from_le(self.word(i).load(Ordering::Acquire))
    }
    pub(super) fn store(&self, i: usize, v: u64) {
        self.word(i).store(v.to_le(), Ordering::Release)
    }
    pub(super) fn cas(&self, i: usize, old: u64, new: u64) -> bool {
        self.word(i)
            .compare_exchange(
                old.to_le(),
                new.to_le(),
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
    }
    pub(super) fn fetch_max(&self, i: usize, n: u64) {
        let _ = self
            .word(i)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (u64::from_le(w) < n).then_some(n.to_le())
            });
    }
    pub(super) fn add(&self, i: usize, n: u64) {
        let _ = self
            .word(i)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                Some(u64::from_le(w).wrapping_add(n).to_le())
            });
    }
    /// Word index of the state word of `seq`'s slot (owner +1, claim tag +2).
    pub(super) fn slot(&self, seq: u64) -> usize {
        slot_word((seq & (self.window - 1)) as usize)
    }
    pub(super) fn state_of(&self, seq: u64) -> (u64, SlotWord) {
        let raw = self.load(self.slot(seq));
        (raw, SlotWord::for_seq(raw, seq, self.window))
    }

    /// Version 2: records (or corrects) in the boot table the wall-clock
    /// time of this boot's monotonic zero, which processes of other boots
    /// read this boot's deadlines by. An entry more than a second off (the
    /// wall clock was stepped since, say from an early-boot clock to NTP
    /// time) is rewritten; a new boot takes the next entry round robin.
    pub(super) fn register_boot(&self, now: &Now) {
        if self.version < 2 {
            return;
        }
        let base = now.boot_base();
        let boot = u64::from(now.boot);
        for e in 0..BOOT_ENTRIES {
            let at = W_BOOTS + 2 * e;
            if self.load(at) == boot {
                if self.load(at + 1).abs_diff(base) > 1000 {
                    self.store(at + 1, base);
                }
                return;
            }
        }
        let at = W_BOOTS
            + 2 * (self.word(W_BOOT_NEXT).fetch_add(1, Ordering::AcqRel) as usize % BOOT_ENTRIES);
        // The base first: a reader that finds the key reads a base of this boot.
        self.store(at, 0);
        self.store(at + 1, base);
        self.store(at, boot);
    }

    /// Version 2: stores boot `boot` into the clock half of slot word `i`'s
    /// clock word (the owner's namespace stays).
    pub(super) fn set_clock_boot(&self, i: usize, boot: u32) {
        let _ = self
            .word(i + 3)
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                let c = ClockWord {
                    boot,
                    ..ClockWord::decode(u64::from_le(w))
                };
                Some(c.encode().to_le())
            });
    }
}

/// Path of the state file of group `group` in the queue at `base`.
pub fn state_path(base: &Path, group: &str) -> PathBuf {
    let mut f = name::encode(group.as_bytes());
    f.push_str(WQ_SUFFIX);
    base.join(WORK_QUEUES_DIR).join(f)
}

pub(super) fn group_of_file(file: &str) -> Option<String> {
    let stem = file.strip_suffix(WQ_SUFFIX)?;
    let group = String::from_utf8(name::decode(stem)?).ok()?;
    name::validate(&group).ok()?;
    (name::encode(group.as_bytes()) == stem).then_some(group)
}

pub(super) fn validate_name(group: &str) -> Result<()> {
    name::validate(group).map_err(|e| match e {
        Error::InvalidArgument(m) => {
            Error::InvalidArgument(m.replacen("consumer name", "work queue name", 1))
        }
        other => other,
    })
}

/// Writes a complete state file under a temporary name and links it into
/// place (fails with EEXIST when another process created it first): the
/// file appears whole or not at all. The slots are zeros with their disk
/// blocks allocated (a hole written through the mapping on a full disk
/// would be SIGBUS; here it is `ENOSPC`, op `preallocate`).
pub(super) fn create(path: &Path, header: &WqHeader, start: u64) -> Result<()> {
    let dir = path.parent().expect("state files live in a directory");
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    let mut tmp = path.as_os_str().to_owned();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        preallocate(&f, file_len(header.window)).map_err(|e| Error::io("preallocate", &tmp, e))?;
        f.write_all(&encode_header(header, start))
            .map_err(|e| Error::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => sync_dir(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
            Err(e) => Err(Error::io("link", path, e)),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

/// Reads and checks the immutable header of the state file at `path`.
pub(super) fn read_header(path: &Path) -> Result<WqHeader> {
    let f = std::fs::File::open(path).map_err(|e| Error::io("open", path, e))?;
    let len = f.metadata().map_err(|e| Error::io("stat", path, e))?.len();
    let mut b = vec![0u8; WQ_HEADER_LEN.min(len as usize)];
    f.read_exact_at(&mut b, 0)
        .map_err(|e| Error::io("read", path, e))?;
    let h = decode_header(&b).map_err(|(at, why)| Error::corrupted(path, at as u64, None, why))?;
    if len != file_len(h.window) {
        return Err(Error::corrupted(
            path,
            0,
            None,
            format!(
                "state file is {len} bytes; a window of {} needs {}",
                h.window,
                file_len(h.window)
            ),
        ));
    }
    Ok(h)
}

/// Checks the marks against each other and against the queue's end, and
/// moves marks past the end back to it.
///
/// `low <= cursor` always holds (the mark passes only sequences below the
/// cursor): a file where it does not is refused as corrupted. A cursor (or
/// priority top) past the queue's end claims jobs the queue does not have:
/// a machine crash lost the data's tail but kept the state file's header
/// page (its pages reach the disk on their own schedule), or the data files
/// were replaced. Left alone, every message written since at those
/// sequences would be skipped without a word. The marks move back to the
/// end (`low` only when it is past it too), the slots of every sequence
/// from the end on are cleared (they describe the lost jobs), and the
/// `rewound` counter grows by how far the state was ahead. Jobs below the
/// end keep their state.
///
/// The marks are loaded before the end is asked for: a job handed out is in
/// the files, so a live group is never taken for one ahead of its data. The
/// repair runs under an exclusive `flock` on the state file and checks
/// again first, so two handles opening at once repair once.
pub(super) fn check_marks(st: &StateFile, end: &dyn Fn() -> Result<u64>) -> Result<()> {
    let refused = |low: u64, cursor: u64| {
        Error::corrupted(
            &st.path,
            (W_LOW * 8) as u64,
            None,
            format!("low-water mark {low} is past the dispatch cursor {cursor}"),
        )
    };
    let marks = || (st.load(W_LOW), st.load(W_CURSOR), st.load(W_TOP));
    let (low, cursor, top) = marks();
    if low > cursor {
        return Err(refused(low, cursor));
    }
    if cursor.max(top) <= end()? {
        return Ok(());
    }
    let file = std::fs::File::open(&st.path).map_err(|e| Error::io("open", &st.path, e))?;
    file.lock().map_err(|e| Error::io("lock", &st.path, e))?;
    let (low, cursor, top) = marks();
    if low > cursor {
        return Err(refused(low, cursor));
    }
    let end = end()?;
    let ahead = cursor.max(top);
    if ahead <= end {
        return Ok(()); // another handle repaired it
    }
    let low = low.min(end);
    // Slots first, marks after: a repair cut short is done again in full
    // by the next open (the marks still say so).
    for seq in end..low.saturating_add(st.window) {
        let i = st.slot(seq);
        for w in i..i + 3 {
            if st.load(w) != 0 {
                st.store(w, 0);
            }
        }
    }
    st.store(W_TOP, top.min(end));
    st.store(W_LOW, low);
    st.store(W_CURSOR, cursor.min(end));
    st.add(W_REWOUND, ahead - end);
    st.words
        .flush()
        .map_err(|e| Error::io("msync", &st.path, e))
}

pub(super) fn gone_word(seq: u64, word: SlotWord, window: u64) -> u64 {
    SlotWord {
        lap: lap_of(seq, window),
        state: JobState::Gone,
        ..word
    }
    .encode()
}

pub(super) fn state_files(base: &Path) -> Result<Vec<(String, PathBuf)>> {
    let dir = base.join(WORK_QUEUES_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read directory", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", &dir, e))?;
        if let Some(group) = entry.file_name().to_str().and_then(group_of_file) {
            out.push((group, entry.path()));
        }
    }
    Ok(out)
}

/// The group state files under `base` that are still there, opened for
/// reading (one removed meanwhile is left out).
fn open_state_files(base: &Path) -> Result<Vec<(PathBuf, std::fs::File)>> {
    let mut out = Vec::new();
    for (_, path) in state_files(base)? {
        match std::fs::File::open(&path) {
            Ok(f) => out.push((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("open", &path, e)),
        }
    }
    Ok(out)
}

/// Word `w` of the state file `f` (at `path`), read without mapping it.
pub(super) fn read_word(f: &std::fs::File, path: &Path, w: usize) -> Result<u64> {
    let mut b = [0u8; 8];
    f.read_exact_at(&mut b, (w * 8) as u64)
        .map_err(|e| Error::io("read", path, e))?;
    Ok(u64::from_le_bytes(b))
}

/// The smallest low-water mark of the queue's work queues, if any: what
/// `protect_unconsumed` retention must keep.
pub fn min_low(base: &Path) -> Result<Option<u64>> {
    let mut min: Option<u64> = None;
    for (path, f) in open_state_files(base)? {
        let low = read_word(&f, &path, W_LOW)?;
        min = Some(min.map_or(low, |m| m.min(low)));
    }
    Ok(min)
}

/// Checks every group's marks against the queue's end `end` when a writer
/// opens the queue, before anything is appended: a machine crash may have
/// lost the data's tail and kept a state file's header page, and once new
/// messages reach the old marks the state looks consistent and they would
/// be skipped. Groups ahead of the data are repaired as a handle's open does
/// ([`check_marks`]); the others are only read (no state file is mapped for
/// writing, so a full disk does not stop the writer). Returns how many
/// groups were moved back.
pub fn rewind_groups_past(base: &Path, end: u64) -> Result<usize> {
    let mut rewound = 0;
    for (path, f) in open_state_files(base)? {
        if read_word(&f, &path, W_CURSOR)?.max(read_word(&f, &path, W_TOP)?) <= end {
            continue;
        }
        let header = read_header(&path)?;
        let state = StateFile::map(path, &header)?;
        check_marks(&state, &|| Ok(end))?;
        rewound += 1;
    }
    Ok(rewound)
}

/// Removes group `group` (its state file). Returns whether it existed.
/// Handles still open keep working on the unlinked file until closed.
pub fn remove(base: &Path, group: &str) -> Result<bool> {
    validate_name(group)?;
    let path = state_path(base, group);
    match std::fs::remove_file(&path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(Error::io("remove", &path, e)),
    }
}
