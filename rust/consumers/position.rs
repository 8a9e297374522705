//! Position files: where one named consumer stands, crash-safely.
//!
//! `base/consumers/<base32(name)>.pos`, 4096 bytes, little-endian
//! (`/work/spec/consumers-retention.md` and `docs/FORMAT.md` give every byte):
//!
//! ```text
//!    0..512   header: magic "LMQCPOS\0", version, name, creation time, CRC-64
//!  256..260   pid of the process that has the consumer open (advisory)
//!  512..544   slot 0: generation | next_seq | committed_us | CRC-64 of the 24 bytes before
//! 1024..1056  slot 1: same layout
//! 1536..      the topic filter the consumer reads with (optional; zeros
//!             when it has none, as in files of older builds):
//!             len u32 | body (len bytes) | CRC-64 of len and body
//! ```
//!
//! The filter's body: flags u8 (bit 0: topic, bit 1: queue id, bit 2:
//! tags) | queue_id u16 | topic_len u8 | topic | tag_count u8 | per tag:
//! len u8 | tag. It is written when a name is first opened with a filter,
//! and replaced only by a reset (`ConsumerOptions::reset`), in place and
//! msynced: a write torn by a crash fails its CRC, and the open reports the
//! file as corrupted (offset 1536) rather than reading other topics.
//!
//! A commit writes generation `g + 1` into slot `(g + 1) % 2`, the slot that
//! does *not* hold the newest valid position. A torn commit (the process
//! dies between stores, or the machine loses part of the page) leaves that
//! slot with a bad CRC, and the other slot still holds the previous commit:
//! a position never moves backwards past its last completed commit and never
//! becomes garbage. The slots live in different 512-byte sectors, so a
//! sector that the disk writes only partly damages one slot at most. Every
//! consumer has its own file, so nothing one consumer writes can touch
//! another's position.
//!
//! A commit is a 32-byte store into a shared mapping: it survives the death
//! of the process at once, and a machine crash once the kernel writes the
//! page back (or after [`PositionFile::sync`], which msyncs it).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::crc::crc64;
use crate::format::{le_u32, le_u64};
use crate::storage::fsutil::sync_dir;
use crate::storage::mapped::WritableMapping;

use super::name::{self, MAX_NAME_LEN};
use crate::reader::topic::TopicSelector;

/// First eight bytes of a position file.
pub const POSITION_MAGIC: [u8; 8] = *b"LMQCPOS\0";
/// Version of the position-file format.
pub const POSITION_VERSION: u32 = 1;
/// Size of a position file.
pub const POSITION_FILE_LEN: usize = 4096;
/// Bytes of the header covered by its CRC (the CRC follows them).
const HEADER_CRC_AT: usize = 24 + MAX_NAME_LEN;
/// Where the advisory pid of the open consumer lives.
const PID_AT: usize = 256;
/// Offsets of the two slots, in different 512-byte sectors.
pub const SLOT_AT: [usize; 2] = [512, 1024];
/// Bytes of one slot.
pub const SLOT_LEN: usize = 32;
/// Where the remembered topic filter starts (its own 512-byte sector).
pub const SELECTOR_AT: usize = 1536;
const SELECTOR_MAX_BODY: usize = POSITION_FILE_LEN - SELECTOR_AT - 4 - 8;

/// The record of `selector` stored at [`SELECTOR_AT`] (`None`: no filter,
/// four zero bytes). Too long a filter (its topic and tags over 2.5 KB) is
/// an invalid argument.
pub fn encode_selector(selector: Option<&TopicSelector>) -> Result<Vec<u8>> {
    let Some(sel) = selector else {
        return Ok(vec![0u8; 4]);
    };
    let mut body = Vec::new();
    let flags = u8::from(sel.topic.is_some())
        | (u8::from(sel.queue_id.is_some()) << 1)
        | (u8::from(!sel.tags.is_empty()) << 2);
    body.push(flags);
    body.extend_from_slice(&sel.queue_id.unwrap_or(0).to_le_bytes());
    let short = |s: &str, what: &str| -> Result<u8> {
        u8::try_from(s.len())
            .map_err(|_| Error::InvalidArgument(format!("{what} {s:?} is over 255 bytes")))
    };
    let topic = sel.topic.as_deref().unwrap_or("");
    body.push(short(topic, "topic")?);
    body.extend_from_slice(topic.as_bytes());
    let count = u8::try_from(sel.tags.len())
        .map_err(|_| Error::InvalidArgument("more than 255 tags".into()))?;
    body.push(count);
    for tag in &sel.tags {
        body.push(short(tag, "tag")?);
        body.extend_from_slice(tag.as_bytes());
    }
    if body.len() > SELECTOR_MAX_BODY {
        return Err(Error::InvalidArgument(format!(
            "a named tailer's topic filter is at most {SELECTOR_MAX_BODY} bytes \
             (topic and tags); this one is {}",
            body.len()
        )));
    }
    let mut out = (body.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&body);
    let crc = crc64(&[&out]);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// The topic filter remembered in a whole file image (`None`: none).
pub fn decode_selector(path: &Path, file: &[u8]) -> Result<Option<TopicSelector>> {
    let bad = |why: &str| reject(path, SELECTOR_AT, format!("topic filter: {why}"));
    let len = le_u32(file, SELECTOR_AT).ok_or_else(|| bad("truncated"))? as usize;
    if len == 0 {
        return Ok(None);
    }
    if len > SELECTOR_MAX_BODY {
        return Err(bad(&format!("length {len} is too large")));
    }
    let end = SELECTOR_AT + 4 + len;
    let stored = file.get(SELECTOR_AT..end).ok_or_else(|| bad("truncated"))?;
    if le_u64(file, end) != Some(crc64(&[stored])) {
        return Err(bad("CRC mismatch"));
    }
    let mut b = &stored[4..];
    let mut take = |n: usize| -> Result<&[u8]> {
        if b.len() < n {
            return Err(bad("truncated body"));
        }
        let (h, t) = b.split_at(n);
        b = t;
        Ok(h)
    };
    let text = |bytes: &[u8]| -> Result<String> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|_| bad("not UTF-8"))
    };
    let flags = take(1)?[0];
    let qid = take(2)?;
    let queue_id = u16::from_le_bytes([qid[0], qid[1]]);
    let n = take(1)?[0] as usize;
    let topic = text(take(n)?)?;
    let count = take(1)?[0] as usize;
    let mut tags = Vec::with_capacity(count);
    for _ in 0..count {
        let n = take(1)?[0] as usize;
        tags.push(text(take(n)?)?);
    }
    Ok(Some(TopicSelector {
        topic: (flags & 1 != 0).then_some(topic),
        queue_id: (flags & 2 != 0).then_some(queue_id),
        tags,
    }))
}

/// A committed position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Counts commits; the valid slot with the larger one is current.
    pub generation: u64,
    /// Sequence the consumer reads next: every sequence below it is consumed.
    pub next_seq: u64,
    /// When the commit happened, µs since the Unix epoch (the queue's clock).
    pub committed_us: u64,
}

/// Encodes the header of a position file for `name`.
pub fn encode_header(name: &str, created_us: u64) -> [u8; HEADER_CRC_AT + 8] {
    let mut b = [0u8; HEADER_CRC_AT + 8];
    b[0..8].copy_from_slice(&POSITION_MAGIC);
    b[8..12].copy_from_slice(&POSITION_VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&(name.len() as u32).to_le_bytes());
    b[16..24].copy_from_slice(&created_us.to_le_bytes());
    b[24..24 + name.len()].copy_from_slice(name.as_bytes());
    let crc = crc64(&[&b[..HEADER_CRC_AT]]);
    b[HEADER_CRC_AT..].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Why a position file was rejected.
fn reject(path: &Path, offset: usize, why: impl Into<String>) -> Error {
    Error::corrupted(path, offset as u64, None, why)
}

/// Decodes a header: the consumer's name and creation time.
pub fn decode_header(path: &Path, b: &[u8]) -> Result<(String, u64)> {
    let head = b
        .get(..HEADER_CRC_AT + 8)
        .ok_or_else(|| reject(path, 0, "position file truncated"))?;
    if head[0..8] != POSITION_MAGIC {
        return Err(reject(path, 0, "not a litemq position file (bad magic)"));
    }
    if le_u64(head, HEADER_CRC_AT) != Some(crc64(&[&head[..HEADER_CRC_AT]])) {
        return Err(reject(
            path,
            HEADER_CRC_AT,
            "position file header CRC mismatch",
        ));
    }
    let version = le_u32(head, 8).unwrap_or(0);
    if version != POSITION_VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            supported: POSITION_VERSION,
        });
    }
    let len = le_u32(head, 12).unwrap_or(0) as usize;
    let created = le_u64(head, 16).unwrap_or(0);
    let name = head
        .get(24..24 + len)
        .filter(|_| len <= MAX_NAME_LEN)
        .and_then(|n| std::str::from_utf8(n).ok())
        .ok_or_else(|| reject(path, 12, "bad consumer name in position file"))?;
    Ok((name.to_string(), created))
}

/// Encodes a slot.
pub fn encode_slot(p: &Position) -> [u8; SLOT_LEN] {
    let mut b = [0u8; SLOT_LEN];
    b[0..8].copy_from_slice(&p.generation.to_le_bytes());
    b[8..16].copy_from_slice(&p.next_seq.to_le_bytes());
    b[16..24].copy_from_slice(&p.committed_us.to_le_bytes());
    let crc = crc64(&[&b[..24]]);
    b[24..32].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Decodes a slot; `None` when it was never written or is torn.
pub fn decode_slot(b: &[u8]) -> Option<Position> {
    let s = b.get(..SLOT_LEN)?;
    if le_u64(s, 24)? != crc64(&[&s[..24]]) {
        return None;
    }
    let p = Position {
        generation: le_u64(s, 0)?,
        next_seq: le_u64(s, 8)?,
        committed_us: le_u64(s, 16)?,
    };
    (p.generation > 0).then_some(p)
}

/// The current position in a whole file image: the valid slot with the
/// larger generation.
pub fn decode_position(path: &Path, file: &[u8]) -> Result<Position> {
    let slots = SLOT_AT.map(|at| file.get(at..).and_then(decode_slot));
    match slots {
        [Some(a), Some(b)] => Ok(if a.generation >= b.generation { a } else { b }),
        [Some(p), None] | [None, Some(p)] => Ok(p),
        [None, None] => Err(reject(path, SLOT_AT[0], "neither position slot is valid")),
    }
}

/// What a reader sees in a position file, read without taking its lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub name: String,
    pub created_us: u64,
    pub position: Position,
    /// The topic filter the consumer reads with, if any.
    pub selector: Option<TopicSelector>,
}

/// Reads a position file with `pread` (no mapping, no lock): safe to call
/// from any process while the consumer commits.
pub fn read_snapshot(path: &Path) -> Result<Snapshot> {
    let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
    let mut buf = vec![0u8; POSITION_FILE_LEN];
    read_image(&file, path, &mut buf)?;
    let (name, created_us) = decode_header(path, &buf)?;
    // A commit racing this read shows up as one slot with a bad CRC; the
    // other slot then holds the previous position. Retry once in case both
    // looked bad because two commits raced the read.
    let position = match decode_position(path, &buf) {
        Ok(p) => p,
        Err(_) => {
            read_image(&file, path, &mut buf)?;
            decode_position(path, &buf)?
        }
    };
    let selector = decode_selector(path, &buf)?;
    Ok(Snapshot {
        name,
        created_us,
        position,
        selector,
    })
}

/// Reads the whole file image. A position file is created whole (written
/// under a temporary name, then linked into place) and never changes size,
/// so a short one is damage: `Corrupted` naming the file, not a bare I/O
/// error.
fn read_image(file: &File, path: &Path, buf: &mut [u8]) -> Result<()> {
    match file.read_exact_at(buf, 0) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            let len = file.metadata().map(|m| m.len()).unwrap_or(0);
            Err(reject(
                path,
                len as usize,
                format!("position file truncated: {len} of {POSITION_FILE_LEN} bytes"),
            ))
        }
        Err(e) => Err(Error::io("read", path, e)),
    }
}

/// An open consumer's position file: mapped read-write and locked (flock)
/// so that one process (and one handle) at a time commits for a name.
#[derive(Debug)]
pub struct PositionFile {
    map: WritableMapping,
    current: Position,
    selector: Option<TopicSelector>,
}

impl PositionFile {
    /// Opens the position file of `name` in `dir`, creating it at
    /// `initial()` when the consumer is new. Returns the file and whether it
    /// was created.
    pub fn open_or_create(
        dir: &Path,
        consumer: &str,
        now_us: u64,
        initial: &mut dyn FnMut() -> Result<u64>,
    ) -> Result<(PositionFile, bool)> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let path = dir.join(name::file_name(consumer));
        // Loops only when the file is removed between our open and our lock.
        for _ in 0..100 {
            let mut created = false;
            if !path.exists() {
                created = create(dir, &path, consumer, now_us, initial()?)?;
            }
            let map = match WritableMapping::open(&path) {
                Ok(m) => m,
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                    continue
                }
                Err(e) => return Err(e),
            };
            match map.file().try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => {
                    let pid = le_u32(map.as_slice(), PID_AT).filter(|&p| p != 0);
                    return Err(Error::Locked {
                        path: path.clone(),
                        pid,
                    });
                }
                Err(TryLockError::Error(e)) => return Err(Error::io("flock", &path, e)),
            }
            if !same_file(map.file(), &path) {
                continue; // removed (and maybe recreated) before we locked it
            }
            if map.len() < POSITION_FILE_LEN {
                return Err(reject(
                    &path,
                    0,
                    format!("position file is {} bytes", map.len()),
                ));
            }
            let (stored, _) = decode_header(&path, map.as_slice())?;
            if stored != consumer {
                return Err(reject(
                    &path,
                    24,
                    format!("position file holds consumer {stored:?}"),
                ));
            }
            let current = decode_position(&path, map.as_slice())?;
            let selector = decode_selector(&path, map.as_slice())?;
            let mut pf = PositionFile {
                map,
                current,
                selector,
            };
            pf.map.store_u32(PID_AT, std::process::id());
            return Ok((pf, created));
        }
        Err(Error::io(
            "open",
            &path,
            std::io::Error::other("position file keeps disappearing"),
        ))
    }

    /// The last committed position.
    pub fn current(&self) -> Position {
        self.current
    }

    /// Commits `next_seq`: one 32-byte store into the mapping. Survives the
    /// process; survives the machine once written back (see [`Self::sync`]).
    pub fn commit(&mut self, next_seq: u64, now_us: u64) {
        let p = Position {
            generation: self.current.generation + 1,
            next_seq,
            committed_us: now_us,
        };
        let slot = SLOT_AT[(p.generation % 2) as usize];
        self.map.write(slot, &encode_slot(&p));
        self.current = p;
    }

    /// The remembered topic filter.
    pub fn selector(&self) -> Option<&TopicSelector> {
        self.selector.as_ref()
    }

    /// Remembers `selector` (`None`: no filter), written in place and
    /// msynced (see the module's notes on a torn write).
    pub fn set_selector(&mut self, selector: Option<&TopicSelector>) -> Result<()> {
        let record = encode_selector(selector)?;
        // Body and CRC first, then the length that makes them count.
        self.map.write(SELECTOR_AT + 4, &record[4..]);
        self.map.write(SELECTOR_AT, &record[..4]);
        self.sync()?;
        self.selector = selector.cloned();
        Ok(())
    }

    /// Forces the slots to disk (msync).
    pub fn sync(&self) -> Result<()> {
        self.map.sync_range(0, POSITION_FILE_LEN)
    }

    pub fn path(&self) -> &Path {
        self.map.path()
    }
}

impl Drop for PositionFile {
    fn drop(&mut self) {
        // The flock goes with the descriptor; clear the advisory pid.
        self.map.store_u32(PID_AT, 0);
    }
}

/// Writes a complete position file under a temporary name, then links it
/// into place, which fails if another process created it first: a position
/// file appears whole or not at all, and an existing one is never replaced.
/// Returns whether this call created it.
fn create(dir: &Path, path: &Path, consumer: &str, now_us: u64, next_seq: u64) -> Result<bool> {
    let mut image = vec![0u8; POSITION_FILE_LEN];
    let header = encode_header(consumer, now_us);
    image[..header.len()].copy_from_slice(&header);
    let first = Position {
        generation: 1,
        next_seq,
        committed_us: now_us,
    };
    let at = SLOT_AT[1];
    image[at..at + SLOT_LEN].copy_from_slice(&encode_slot(&first));

    let tmp = temp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(|e| Error::io("create", &tmp, e))?;
        f.write_all(&image)
            .map_err(|e| Error::io("write", &tmp, e))?;
        f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {
                sync_dir(dir)?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(Error::io("link", path, e)),
        }
    })();
    let _ = std::fs::remove_file(&tmp);
    result
}

fn temp_path(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut s = path.as_os_str().to_owned();
    s.push(format!(".{}.{n}.tmp", std::process::id()));
    PathBuf::from(s)
}

/// True when `file` is still the file at `path` (same device and inode).
fn same_file(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Removes the position file of `consumer` unless it is open somewhere.
/// Returns whether a file was removed.
pub fn remove(dir: &Path, consumer: &str) -> Result<bool> {
    let path = dir.join(name::file_name(consumer));
    let file = match File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("open", &path, e)),
    };
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut pid = [0u8; 4];
            let pid = file
                .read_exact_at(&mut pid, PID_AT as u64)
                .ok()
                .map(|_| u32::from_le_bytes(pid))
                .filter(|&p| p != 0);
            return Err(Error::Locked { path, pid });
        }
        Err(TryLockError::Error(e)) => return Err(Error::io("flock", &path, e)),
    }
    // Unlink while holding the lock: whoever opened the old file and locks
    // it after us sees that it is no longer at `path` and starts over.
    std::fs::remove_file(&path).map_err(|e| Error::io("remove", &path, e))?;
    sync_dir(dir)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip_and_reject_damage() {
        let p = Position {
            generation: 7,
            next_seq: 42,
            committed_us: 99,
        };
        let mut b = encode_slot(&p);
        assert_eq!(decode_slot(&b), Some(p));
        b[9] ^= 1;
        assert_eq!(decode_slot(&b), None);
        assert_eq!(
            decode_slot(&[0u8; SLOT_LEN]),
            None,
            "an unwritten slot is not a position"
        );
    }

    #[test]
    fn newest_valid_slot_wins_and_torn_slot_falls_back() {
        let path = Path::new("x.pos");
        let mut file = vec![0u8; POSITION_FILE_LEN];
        let put = |file: &mut Vec<u8>, g: u64, seq: u64| {
            let at = SLOT_AT[(g % 2) as usize];
            file[at..at + SLOT_LEN].copy_from_slice(&encode_slot(&Position {
                generation: g,
                next_seq: seq,
                committed_us: 0,
            }));
        };
        put(&mut file, 1, 10);
        assert_eq!(decode_position(path, &file).unwrap().next_seq, 10);
        put(&mut file, 2, 20);
        assert_eq!(decode_position(path, &file).unwrap().next_seq, 20);
        put(&mut file, 3, 30);
        assert_eq!(decode_position(path, &file).unwrap().next_seq, 30);
        // Commit 4 torn half way: slot 0 has gen 4's first 16 bytes only.
        let torn = encode_slot(&Position {
            generation: 4,
            next_seq: 40,
            committed_us: 0,
        });
        file[SLOT_AT[0]..SLOT_AT[0] + 16].copy_from_slice(&torn[..16]);
        assert_eq!(decode_position(path, &file).unwrap().next_seq, 30);
    }

    #[test]
    fn truncated_file_is_corruption_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.pos");
        let mut image = vec![0u8; POSITION_FILE_LEN];
        let header = encode_header("billing", 5);
        image[..header.len()].copy_from_slice(&header);
        image[SLOT_AT[1]..SLOT_AT[1] + SLOT_LEN].copy_from_slice(&encode_slot(&Position {
            generation: 1,
            next_seq: 7,
            committed_us: 5,
        }));
        std::fs::write(&path, &image).unwrap();
        assert_eq!(read_snapshot(&path).unwrap().position.next_seq, 7);
        for keep in [0, 100, 1040, POSITION_FILE_LEN - 1] {
            std::fs::write(&path, &image[..keep]).unwrap();
            match read_snapshot(&path) {
                Err(Error::Corrupted {
                    path: p, reason, ..
                }) => {
                    assert_eq!(p, path);
                    assert!(reason.contains("truncated"), "{reason}");
                }
                other => panic!("{keep} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn selector_round_trip_and_damage() {
        let path = Path::new("x.pos");
        let mut file = vec![0u8; POSITION_FILE_LEN];
        assert_eq!(decode_selector(path, &file).unwrap(), None);
        for sel in [
            TopicSelector {
                topic: Some("orders".into()),
                queue_id: Some(3),
                tags: vec!["paid".into(), "eu".into()],
            },
            TopicSelector {
                topic: None,
                queue_id: None,
                tags: vec!["x".into()],
            },
            TopicSelector {
                topic: Some(String::new()),
                queue_id: None,
                tags: vec![],
            },
        ] {
            let rec = encode_selector(Some(&sel)).unwrap();
            file[SELECTOR_AT..SELECTOR_AT + rec.len()].copy_from_slice(&rec);
            assert_eq!(decode_selector(path, &file).unwrap(), Some(sel));
        }
        file[SELECTOR_AT + 6] ^= 1;
        assert!(matches!(
            decode_selector(path, &file),
            Err(Error::Corrupted { offset: 1536, .. })
        ));
        let huge = TopicSelector {
            topic: None,
            queue_id: None,
            tags: vec!["t".repeat(200); 20],
        };
        assert!(matches!(
            encode_selector(Some(&huge)),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn header_round_trip() {
        let h = encode_header("billing", 5);
        let (name, created) = decode_header(Path::new("x"), &h).unwrap();
        assert_eq!((name.as_str(), created), ("billing", 5));
        let mut bad = h;
        bad[30] ^= 1;
        assert!(decode_header(Path::new("x"), &bad).is_err());
    }
}
