//! One key index file: its byte layout, its mapping, and the checks that decide whether it
//! can be trusted. `docs/FORMAT.md` ("Key index files") is the contract; this file follows it.
//!
//! ```text
//! offset                      size          field
//! 0                           40            header (seed 001 order, little-endian)
//! 40                          4 * slots     slot table: u32 item number (index + 1), 0 = empty
//! 40 + 4*slots                20 * items    items: hash u32, position u64, time diff u32 (ms), prev u32
//! 40 + 4*slots + 20*items     56            trailer: magic, version, geometry, CRCs, seal state
//! ```
//!
//! A sealed file carries two CRC-64s in its trailer: one of the header and one of the slot
//! table and the used items (bytes `40 .. 40 + 4*slots + 20*count`). Both are checked before
//! a sealed file is trusted, by the writer at open and by a reader on its first use of the
//! file, because a damaged slot or item would otherwise make lookups miss messages silently.
//! That check reads the whole used part of the file: for a full default file (2^20 slots,
//! 2^21 items, 44 MiB) about 10 ms from the page cache and 37 ms cold on the test machine,
//! against 0.1 ms for the header alone (figures in `docs/FORMAT.md`). An open file has no
//! CRC; the writer replays it instead.
//!
//! Every field is a little-endian u32 or u64, and every offset is a multiple of 4, so the
//! whole mapping is accessed as atomic words (see [`MappedWords`]): the writer and lookups in
//! the same process share one mapping without data races, and the publication order
//! (item, then slot with Release, then header, then item count with Release) is expressed
//! in the memory model rather than assumed.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::MmapOptions;

use super::hash::slot_of;
use super::{corrupt, io_err};
use crate::error::{Error, Result};

/// Bytes in the header (seed 001: begin/end timestamp, begin/end position, used slots, items).
pub const HEADER_LEN: u64 = 40;
/// Bytes per slot.
pub const SLOT_LEN: u64 = 4;
/// Bytes per item.
pub const ITEM_LEN: u64 = 20;
/// Bytes in the trailer.
pub const TRAILER_LEN: u64 = 56;
/// First 8 bytes of the trailer.
pub const MAGIC: [u8; 8] = *b"LMQKEYIX";
/// Format version of the file (trailer). 2 added the content CRC; a version-1 file is
/// reported corrupt, so the writer removes it and re-indexes the data.
pub const VERSION: u32 = 2;
/// File name suffix.
pub const SUFFIX: &str = ".idx";
/// Suffix of a file being created (removed on open: it never became visible).
pub const TMP_SUFFIX: &str = ".idx.tmp";

const STATE_OPEN: u32 = 0;
const STATE_SEALED: u32 = 1;

// Word (u32) indexes of header fields; the four u64 fields are words 0..8.
const W_USED_SLOTS: usize = 8;
const W_COUNT: usize = 9;
const HEADER_WORDS: usize = 10;
// u64 indexes of header fields.
const Q_BEGIN_TS: usize = 0;
const Q_END_TS: usize = 1;
const Q_BEGIN_POS: usize = 2;
const Q_END_POS: usize = 3;
// Word offsets inside the trailer.
const T_STATE: usize = 8;
const T_HEADER_CRC: usize = 10;
const T_CONTENT_CRC: usize = 12;

/// Whether `trailer` (a file's last [`TRAILER_LEN`] bytes) says the file is sealed.
pub fn trailer_says_sealed(trailer: &[u8]) -> bool {
    trailer.len() == TRAILER_LEN as usize
        && trailer
            .get(T_STATE * 4..T_STATE * 4 + 4)
            .is_some_and(|w| u32::from_le_bytes(w.try_into().unwrap()) == STATE_SEALED)
}

/// Total file length for a geometry.
pub fn file_len(slots: u32, items: u32) -> u64 {
    HEADER_LEN + SLOT_LEN * u64::from(slots) + ITEM_LEN * u64::from(items) + TRAILER_LEN
}

/// CRC-64/XZ (ECMA-182 polynomial, reflected, init and xorout all ones), as the data files
/// use it (`format::crc`); check value for `"123456789"` is `0x995DC9BBDF1939FA`.
pub fn crc64(bytes: &[u8]) -> u64 {
    crate::format::crc::crc64_of(bytes)
}

use crate::storage::mapped::MappedWords;

/// A decoded item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Item {
    /// Hash of the key ([`super::hash`]).
    pub hash: u32,
    /// Data position of the message (`format::position`).
    pub position: u64,
    /// Milliseconds after the file's `begin_ts`.
    pub time_diff_ms: u32,
    /// Item number (index + 1) of the previous item in the same slot; 0 = none.
    pub prev: u32,
}

/// A header snapshot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Timestamp (ms) of the first item.
    pub begin_ts: u64,
    /// Timestamp (ms) of the last item.
    pub end_ts: u64,
    /// Position of the first item.
    pub begin_pos: u64,
    /// Position of the last item.
    pub end_pos: u64,
    /// Slots that hold at least one item.
    pub used_slots: u32,
    /// Items written.
    pub count: u32,
}

impl Header {
    fn to_bytes(self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.begin_ts.to_le_bytes());
        b[8..16].copy_from_slice(&self.end_ts.to_le_bytes());
        b[16..24].copy_from_slice(&self.begin_pos.to_le_bytes());
        b[24..32].copy_from_slice(&self.end_pos.to_le_bytes());
        b[32..36].copy_from_slice(&self.used_slots.to_le_bytes());
        b[36..40].copy_from_slice(&self.count.to_le_bytes());
        b
    }
}

/// One mapped index file.
pub struct IndexFile {
    path: PathBuf,
    name_ms: u64,
    words: MappedWords,
    slots: u32,
    items: u32,
    /// Word index (in `words.u32s()`) of slot 0, item 0 and the trailer.
    slot_base: usize,
    item_base: usize,
    trailer_base: usize,
}

impl std::fmt::Debug for IndexFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexFile")
            .field("path", &self.path)
            .field("slots", &self.slots)
            .field("items", &self.items)
            .field("count", &self.count())
            .finish()
    }
}

/// The trailer bytes of a freshly created, open (unsealed) file.
fn trailer_bytes(slots: u32, items: u32) -> [u8; TRAILER_LEN as usize] {
    let mut t = [0u8; TRAILER_LEN as usize];
    t[0..8].copy_from_slice(&MAGIC);
    t[8..12].copy_from_slice(&VERSION.to_le_bytes());
    t[12..16].copy_from_slice(&slots.to_le_bytes());
    t[16..20].copy_from_slice(&items.to_le_bytes());
    let crc = crc64(&t[0..24]);
    t[24..32].copy_from_slice(&crc.to_le_bytes());
    t
}

impl IndexFile {
    /// Creates `<dir>/<name>.idx` with the given geometry: written under a temporary name,
    /// sized (zero-filled), trailer written, fsynced, renamed, directory fsynced. Readers
    /// listing the directory therefore never see a file without its trailer.
    pub fn create(dir: &Path, name_ms: u64, slots: u32, items: u32) -> Result<Self> {
        let name = format_name(name_ms).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "key index: timestamp {name_ms} ms is past year 9999"
            ))
        })?;
        let path = dir.join(format!("{name}{SUFFIX}"));
        let tmp = dir.join(format!("{name}{TMP_SUFFIX}"));
        let len = file_len(slots, items);
        {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)
                .map_err(io_err("create", &tmp))?;
            preallocate(&file, len).map_err(io_err("preallocate", &tmp))?;
            file.write_all_at(&trailer_bytes(slots, items), len - TRAILER_LEN)
                .map_err(io_err("write trailer", &tmp))?;
            file.sync_all().map_err(io_err("fsync", &tmp))?;
        }
        fs::rename(&tmp, &path).map_err(io_err("rename", &tmp))?;
        sync_dir(dir)?;
        Self::open(&path, true)
    }

    /// Maps an existing file and checks its trailer (magic, version, static CRC, length).
    /// Header, slots and items are checked by [`IndexFile::check_sealed`] /
    /// [`IndexFile::recover`].
    pub fn open(path: &Path, writable: bool) -> Result<Self> {
        let name_ms = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(SUFFIX))
            .and_then(parse_name)
            .ok_or_else(|| corrupt(path, "file name is not <yyyyMMddHHmmssSSS>.idx"))?;
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(io_err("open", path))?;
        let len = file.metadata().map_err(io_err("stat", path))?.len();
        if len < HEADER_LEN + TRAILER_LEN || len % 4 != 0 || len > isize::MAX as u64 {
            return Err(corrupt(
                path,
                format!("length {len} cannot hold a header and trailer"),
            ));
        }
        // The geometry is read with pread first so that a bad file is rejected before mapping.
        let mut t = [0u8; TRAILER_LEN as usize];
        file.read_exact_at(&mut t, len - TRAILER_LEN)
            .map_err(io_err("read trailer", path))?;
        if t[0..8] != MAGIC {
            return Err(corrupt(path, "bad magic in trailer"));
        }
        let le32 = |at: usize| u32::from_le_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]]);
        let mut crc_bytes = [0u8; 8];
        crc_bytes.copy_from_slice(&t[24..32]);
        if crc64(&t[0..24]) != u64::from_le_bytes(crc_bytes) {
            return Err(corrupt(path, "trailer CRC mismatch"));
        }
        let version = le32(8);
        if version != VERSION {
            return Err(corrupt(
                path,
                format!("unsupported key index version {version} (supported: {VERSION})"),
            ));
        }
        let (slots, items) = (le32(12), le32(16));
        if slots == 0 || items == 0 || file_len(slots, items) != len {
            return Err(corrupt(
                path,
                format!("length {len} does not match {slots} slots and {items} items"),
            ));
        }
        let opts = MmapOptions::new();
        let map = if writable {
            opts.map_raw(&file)
        } else {
            opts.map_raw_read_only(&file)
        }
        .map_err(io_err("mmap", path))?;
        let words = MappedWords::new(map, (HEADER_LEN + TRAILER_LEN) as usize)
            .map_err(|r| corrupt(path, r))?;
        let slot_base = HEADER_WORDS - 8;
        let item_base = slot_base + slots as usize;
        let trailer_base = item_base + 5 * items as usize;
        Ok(Self {
            path: path.to_owned(),
            name_ms,
            words,
            slots,
            items,
            slot_base,
            item_base,
            trailer_base,
        })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Milliseconds in the file's name (the first item's time).
    pub fn name_ms(&self) -> u64 {
        self.name_ms
    }
    /// Slots in the hash table.
    pub fn slots(&self) -> u32 {
        self.slots
    }
    /// Capacity in items.
    pub fn items(&self) -> u32 {
        self.items
    }

    #[inline]
    fn w(&self, word: usize) -> &AtomicU32 {
        // Word indexes are relative to byte 32 (see `MappedWords::u32s`).
        &self.words.u32s()[word]
    }
    #[inline]
    fn load32(&self, word: usize, order: Ordering) -> u32 {
        u32::from_le(self.w(word).load(order))
    }
    #[inline]
    fn store32(&self, word: usize, value: u32, order: Ordering) {
        self.w(word).store(value.to_le(), order);
    }
    #[inline]
    fn load64(&self, q: usize) -> u64 {
        u64::from_le(self.words.header_u64s()[q].load(Ordering::Relaxed))
    }
    #[inline]
    fn store64(&self, q: usize, value: u64) {
        self.words.header_u64s()[q].store(value.to_le(), Ordering::Relaxed);
    }

    /// Published item count (Acquire: every item below it is fully visible).
    #[inline]
    pub fn count(&self) -> u32 {
        self.load32(W_COUNT - 8, Ordering::Acquire)
    }

    /// A header snapshot. Load the count first (Acquire) so the other fields are at least
    /// as new as the items it covers.
    pub fn header(&self) -> Header {
        let count = self.count();
        Header {
            begin_ts: self.load64(Q_BEGIN_TS),
            end_ts: self.load64(Q_END_TS),
            begin_pos: self.load64(Q_BEGIN_POS),
            end_pos: self.load64(Q_END_POS),
            used_slots: self.load32(W_USED_SLOTS - 8, Ordering::Relaxed),
            count,
        }
    }

    fn write_header(&self, h: &Header) {
        self.store64(Q_BEGIN_TS, h.begin_ts);
        self.store64(Q_END_TS, h.end_ts);
        self.store64(Q_BEGIN_POS, h.begin_pos);
        self.store64(Q_END_POS, h.end_pos);
        self.store32(W_USED_SLOTS - 8, h.used_slots, Ordering::Relaxed);
        self.store32(W_COUNT - 8, h.count, Ordering::Release);
    }

    #[inline]
    fn slot(&self, s: u32, order: Ordering) -> u32 {
        self.load32(self.slot_base + s as usize, order)
    }
    #[inline]
    fn set_slot(&self, s: u32, value: u32, order: Ordering) {
        self.store32(self.slot_base + s as usize, value, order);
    }

    /// Reads item `i` (0-based). Caller guarantees `i < items`.
    #[inline]
    pub fn item(&self, i: u32) -> Item {
        let b = self.item_base + 5 * i as usize;
        let r = Ordering::Relaxed;
        Item {
            hash: self.load32(b, r),
            position: u64::from(self.load32(b + 1, r)) | (u64::from(self.load32(b + 2, r)) << 32),
            time_diff_ms: self.load32(b + 3, r),
            prev: self.load32(b + 4, r),
        }
    }

    fn write_item(&self, i: u32, it: &Item) {
        let b = self.item_base + 5 * i as usize;
        let r = Ordering::Relaxed;
        self.store32(b, it.hash, r);
        self.store32(b + 1, it.position as u32, r);
        self.store32(b + 2, (it.position >> 32) as u32, r);
        self.store32(b + 3, it.time_diff_ms, r);
        self.store32(b + 4, it.prev, r);
    }

    /// Appends item number `count + 1` (the writer's cached `count`), publishing it last.
    /// Preconditions (checked by the writer): `count < items`, `position` non-zero and not
    /// below any earlier position, `begin_ms` is the first item's millisecond (`ts_ms` itself when `count == 0`) and
    /// `ts_ms - begin_ms` fits in u32.
    #[inline]
    pub fn append(&self, count: u32, hash: u32, position: u64, ts_ms: u64, begin_ms: u64) {
        let s = slot_of(hash, self.slots);
        let prev = self.slot(s, Ordering::Relaxed);
        let item = Item {
            hash,
            position,
            time_diff_ms: (ts_ms - begin_ms) as u32,
            prev,
        };
        // 1. the item; 2. the slot (Release: a lookup that follows the slot sees the item);
        // 3. the header; 4. the count (Release: publishes everything above).
        self.write_item(count, &item);
        self.set_slot(s, count + 1, Ordering::Release);
        if count == 0 {
            self.store64(Q_BEGIN_TS, ts_ms * 1000);
            self.store64(Q_BEGIN_POS, position);
        }
        self.store64(Q_END_TS, ts_ms * 1000 + 999);
        self.store64(Q_END_POS, position);
        if prev == 0 {
            let used = self.load32(W_USED_SLOTS - 8, Ordering::Relaxed);
            self.store32(W_USED_SLOTS - 8, used + 1, Ordering::Relaxed);
        }
        self.store32(W_COUNT - 8, count + 1, Ordering::Release);
    }

    /// Appends to `out`, in ascending position order, the positions of published items whose
    /// hash is `hash` and whose millisecond overlaps `[start_us, end_us)`.
    ///
    /// Defensive against torn or foreign images: a link that does not point strictly
    /// backwards, points past the item table, or reaches an item with position 0 or a hash
    /// of another slot ends the walk (everything behind it is unreachable anyway).
    pub fn collect(
        &self,
        hash: u32,
        start_us: Option<u64>,
        end_us: Option<u64>,
        out: &mut Vec<u64>,
    ) {
        let count = self.count().min(self.items);
        if count == 0 {
            return;
        }
        let begin_ts = self.load64(Q_BEGIN_TS);
        let end_ts = self.load64(Q_END_TS);
        if start_us.is_some_and(|s| end_ts < s) || end_us.is_some_and(|e| begin_ts >= e) {
            return;
        }
        let begin_ms = begin_ts / 1000;
        let s = slot_of(hash, self.slots);
        let first = out.len();
        let mut link = self.slot(s, Ordering::Acquire);
        let mut bound = u32::MAX;
        while link != 0 {
            if link > self.items || link >= bound {
                break;
            }
            bound = link;
            let i = link - 1;
            let it = self.item(i);
            link = it.prev;
            if i >= count {
                // Written but not yet published: skip it, its `prev` is already valid.
                continue;
            }
            if it.position == 0 || slot_of(it.hash, self.slots) != s {
                break;
            }
            let t_ms = begin_ms.saturating_add(u64::from(it.time_diff_ms));
            if start_us.is_some_and(|st| t_ms.saturating_mul(1000).saturating_add(999) < st) {
                break; // the chain runs newest first: every later item is older still
            }
            if it.hash == hash && end_us.is_none_or(|e| t_ms.saturating_mul(1000) < e) {
                out.push(it.position);
            }
        }
        out[first..].reverse();
    }

    /// Header sanity shared by every check.
    fn check_header(&self, h: &Header) -> std::result::Result<(), String> {
        if h.count > self.items {
            return Err(format!(
                "item count {} exceeds capacity {}",
                h.count, self.items
            ));
        }
        if h.used_slots > self.slots || h.used_slots > h.count {
            return Err(format!(
                "used slot count {} is impossible with {} items",
                h.used_slots, h.count
            ));
        }
        if h.count == 0 {
            return if *h == Header::default() {
                Ok(())
            } else {
                Err("empty file with a non-zero header".into())
            };
        }
        if h.begin_pos == 0 || h.begin_pos > h.end_pos {
            return Err(format!(
                "position range {}..={} is invalid",
                h.begin_pos, h.end_pos
            ));
        }
        if !h.begin_ts.is_multiple_of(1000) || h.end_ts % 1000 != 999 || h.begin_ts > h.end_ts {
            return Err(format!(
                "time range {}..={} is invalid",
                h.begin_ts, h.end_ts
            ));
        }
        if h.end_ts / 1000 - h.begin_ts / 1000 > u64::from(u32::MAX) {
            return Err("time range exceeds the u32 millisecond diff".into());
        }
        Ok(())
    }

    /// Whether the trailer says sealed.
    pub fn is_sealed(&self) -> bool {
        self.load32(self.trailer_base + T_STATE, Ordering::Acquire) == STATE_SEALED
    }

    fn trailer_u64(&self, word: usize) -> u64 {
        let b = self.trailer_base + word;
        u64::from(self.load32(b, Ordering::Relaxed))
            | (u64::from(self.load32(b + 1, Ordering::Relaxed)) << 32)
    }

    fn set_trailer_u64(&self, word: usize, value: u64) {
        let b = self.trailer_base + word;
        self.store32(b, value as u32, Ordering::Relaxed);
        self.store32(b + 1, (value >> 32) as u32, Ordering::Relaxed);
    }

    /// CRC-64 of the slot table and the first `count` items, i.e. of file bytes
    /// `40 .. 40 + 4*slots + 20*count`. Read word by word through the atomic view (the
    /// mapping is never viewed as plain bytes), in chunks, so no copy of the file is made.
    fn content_crc(&self, count: u32) -> u64 {
        let end = self.item_base + 5 * count.min(self.items) as usize;
        let words = &self.words.u32s()[self.slot_base..end];
        let mut digest = crate::format::crc::Crc64::new();
        let mut buf = [0u8; 16 * 1024];
        for chunk in words.chunks(buf.len() / 4) {
            for (w, out) in chunk.iter().zip(buf.chunks_exact_mut(4)) {
                out.copy_from_slice(&u32::from_le(w.load(Ordering::Relaxed)).to_le_bytes());
            }
            digest.write(&buf[..4 * chunk.len()]);
        }
        digest.finish()
    }

    /// Checks a sealed file's header only (CRC and sanity), in O(1): enough to trust its
    /// position and time range, not its slots or items.
    fn check_sealed_header(&self) -> Result<Header> {
        let h = self.header();
        if crc64(&h.to_bytes()) != self.trailer_u64(T_HEADER_CRC) {
            return Err(corrupt(&self.path, "header CRC mismatch in a sealed file"));
        }
        self.check_header(&h).map_err(|r| corrupt(&self.path, r))?;
        Ok(h)
    }

    /// The header, checked as far as possible without reading items, in O(1): state word,
    /// then CRC and sanity if sealed, sanity alone if open. Its `end_pos` then bounds every
    /// item a lookup or a replay can use: the writer stores `end_pos` before it publishes
    /// the count, and the header's 40 bytes share one sector, so even a crash image holds
    /// a header at least as new as the items its count covers.
    pub fn checked_header(&self) -> Result<Header> {
        self.check_state()?;
        if self.is_sealed() {
            return self.check_sealed_header();
        }
        let h = self.header();
        self.check_header(&h).map_err(|r| corrupt(&self.path, r))?;
        Ok(h)
    }

    /// Checks a sealed file: header CRC, header sanity, then the CRC of the slot table and
    /// the used items. O(slots + count): the header alone cannot vouch for a slot or item,
    /// and a damaged one would make lookups miss messages without any error.
    pub fn check_sealed(&self) -> Result<Header> {
        let h = self.check_sealed_header()?;
        if self.content_crc(h.count) != self.trailer_u64(T_CONTENT_CRC) {
            return Err(corrupt(
                &self.path,
                "slot table or item CRC mismatch in a sealed file",
            ));
        }
        Ok(h)
    }

    /// Checks the seal state word, which must be 0 (open) or 1 (sealed).
    pub fn check_state(&self) -> Result<()> {
        match self.load32(self.trailer_base + T_STATE, Ordering::Relaxed) {
            STATE_OPEN | STATE_SEALED => Ok(()),
            other => Err(corrupt(&self.path, format!("unknown seal state {other}"))),
        }
    }

    /// Brings an open (unsealed) file to the state a live writer would have produced for its
    /// longest valid published prefix: items are replayed in order and each must have a
    /// non-zero, non-decreasing position, a non-decreasing time diff (0 for the first),
    /// and a `prev` equal to its slot's head at that point. The slot table and header are
    /// rebuilt from those items; unpublished or invalid items and stale slots are zeroed.
    /// Returns the header after repair (count 0 means the file holds nothing).
    /// Writer-only: needs a writable mapping and no concurrent lookups of other processes
    /// that must not see the repair (they only ever see valid items either way).
    pub fn recover(&self) -> Result<Header> {
        let h = self.header();
        if h.count > self.items {
            return Err(corrupt(
                &self.path,
                format!("item count {} exceeds capacity {}", h.count, self.items),
            ));
        }
        let published = h.count;
        if published > 0 {
            let first = self.item(0);
            if h.begin_pos != first.position || !h.begin_ts.is_multiple_of(1000) {
                return Err(corrupt(
                    &self.path,
                    "header begin fields do not match the first item",
                ));
            }
        }
        for s in 0..self.slots {
            if self.slot(s, Ordering::Relaxed) != 0 {
                self.set_slot(s, 0, Ordering::Relaxed);
            }
        }
        let mut n = 0u32;
        let mut used = 0u32;
        let (mut last_pos, mut last_diff) = (0u64, 0u32);
        while n < published {
            let it = self.item(n);
            let s = slot_of(it.hash, self.slots);
            let ok = it.position != 0
                && it.position >= last_pos
                && it.time_diff_ms >= last_diff
                && (n > 0 || it.time_diff_ms == 0)
                && it.prev == self.slot(s, Ordering::Relaxed);
            if !ok {
                break;
            }
            if it.prev == 0 {
                used += 1;
            }
            self.set_slot(s, n + 1, Ordering::Relaxed);
            last_pos = it.position;
            last_diff = it.time_diff_ms;
            n += 1;
        }
        // Zero everything after the valid prefix: unpublished items from a crash mid-add,
        // or items a torn image made invalid. Loads first so untouched pages stay holes.
        let end = self.item_base + 5 * self.items as usize;
        for w in (self.item_base + 5 * n as usize)..end {
            if self.load32(w, Ordering::Relaxed) != 0 {
                self.store32(w, 0, Ordering::Relaxed);
            }
        }
        let fixed = if n == 0 {
            Header::default()
        } else {
            let begin_ms = h.begin_ts / 1000;
            Header {
                begin_ts: h.begin_ts,
                end_ts: (begin_ms + u64::from(last_diff)) * 1000 + 999,
                begin_pos: h.begin_pos,
                end_pos: last_pos,
                used_slots: used,
                count: n,
            }
        };
        self.write_header(&fixed);
        Ok(fixed)
    }

    /// Drops every item whose position is above `position`, newest first, restoring each
    /// slot head from the dropped item's `prev`. The count is lowered first, so concurrent
    /// lookups stop returning the dropped items before they are zeroed. Returns the new header.
    pub fn truncate_after(&self, position: u64) -> Header {
        let h = self.header();
        let mut n = h.count;
        while n > 0 && self.item(n - 1).position > position {
            n -= 1;
        }
        if n == h.count {
            return h;
        }
        self.store32(W_COUNT - 8, n, Ordering::Release);
        let mut used = h.used_slots;
        for i in (n..h.count).rev() {
            let it = self.item(i);
            self.set_slot(slot_of(it.hash, self.slots), it.prev, Ordering::Release);
            if it.prev == 0 {
                used -= 1;
            }
            self.write_item(
                i,
                &Item {
                    hash: 0,
                    position: 0,
                    time_diff_ms: 0,
                    prev: 0,
                },
            );
        }
        let fixed = if n == 0 {
            Header::default()
        } else {
            let last = self.item(n - 1);
            Header {
                end_ts: (h.begin_ts / 1000 + u64::from(last.time_diff_ms)) * 1000 + 999,
                end_pos: last.position,
                used_slots: used,
                count: n,
                ..h
            }
        };
        self.write_header(&fixed);
        fixed
    }

    /// Marks the file sealed after making its content durable: msync everything, then write
    /// the header and content CRCs and the state word, then msync the trailer. A sealed file
    /// is checked against both CRCs ([`IndexFile::check_sealed`]); an open one is replayed
    /// by [`IndexFile::recover`].
    pub fn seal(&self) -> Result<()> {
        self.flush()?;
        let h = self.header();
        self.set_trailer_u64(T_HEADER_CRC, crc64(&h.to_bytes()));
        self.set_trailer_u64(T_CONTENT_CRC, self.content_crc(h.count));
        self.store32(self.trailer_base + T_STATE, STATE_SEALED, Ordering::Release);
        self.flush_trailer()?;
        self.release_unused(h.count);
        Ok(())
    }

    /// Gives back the disk blocks of the pages that hold only items at or above `count`
    /// (a sealed file's unused items: nothing reads them, and they read as zeros). Best
    /// effort: a file system that cannot punch holes keeps them. `unseal` allocates them
    /// again before anything is written there.
    fn release_unused(&self, count: u32) {
        let used_end = 32 + 4 * (self.item_base + 5 * count as usize);
        let from = used_end.div_ceil(4096) * 4096;
        let to = (32 + 4 * self.trailer_base) / 4096 * 4096;
        if from < to {
            if let Ok(f) = OpenOptions::new().write(true).open(&self.path) {
                let _ = crate::storage::mapped::punch_hole(&f, from as u64, (to - from) as u64);
            }
        }
    }

    /// Clears the seal before the file is written again (both CRCs would go stale), after
    /// allocating the blocks `seal` gave back: a full disk fails here, not as SIGBUS.
    pub fn unseal(&self) -> Result<()> {
        let f = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .map_err(io_err("open", &self.path))?;
        let len = 32 + 4 * (self.trailer_base as u64) + TRAILER_LEN;
        crate::storage::mapped::allocate_range(&f, 0, len)
            .map_err(io_err("allocate", &self.path))?;
        self.store32(self.trailer_base + T_STATE, STATE_OPEN, Ordering::Release);
        self.set_trailer_u64(T_HEADER_CRC, 0);
        self.set_trailer_u64(T_CONTENT_CRC, 0);
        self.flush_trailer()
    }

    fn flush_trailer(&self) -> Result<()> {
        // msync needs a page-aligned start; memmap2 aligns the range for us.
        let off = 32 + 4 * self.trailer_base;
        self.words
            .flush_range(off, TRAILER_LEN as usize)
            .map_err(io_err("msync", &self.path))
    }

    /// msync of the whole file.
    pub fn flush(&self) -> Result<()> {
        self.words.flush().map_err(io_err("msync", &self.path))
    }
}

/// Gives the file its full length, zero-filled, with its blocks allocated: a full disk fails
/// here, as an error, instead of as SIGBUS on a later store into the mapping.
fn preallocate(file: &File, len: u64) -> io::Result<()> {
    crate::storage::mapped::preallocate(file, len)
}

/// fsync of a directory, so that a create, rename or unlink in it is durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("fsync directory", dir))
}

// File names: the first item's time in UTC to the millisecond, `yyyyMMddHHmmssSSS`.

/// Last millisecond a 4-digit year can name (9999-12-31T23:59:59.999Z).
pub const MAX_NAME_MS: u64 = 253_402_300_799_999;

fn civil_from_days(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's `civil_from_days` (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = year - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if month > 2 { month - 3 } else { month + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `20261121224512345` for 2026-11-21T22:45:12.345Z; `None` past year 9999.
pub fn format_name(ms: u64) -> Option<String> {
    if ms > MAX_NAME_MS {
        return None;
    }
    let (days, rem) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s, milli) = (
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000,
    );
    Some(format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{milli:03}"))
}

/// Inverse of [`format_name`]; `None` unless `name` is exactly what `format_name` produces.
pub fn parse_name(name: &str) -> Option<u64> {
    if name.len() != 17 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let num = |r: std::ops::Range<usize>| name[r].parse::<u64>().ok();
    let (y, mo, d) = (num(0..4)?, num(4..6)? as u32, num(6..8)? as u32);
    let (h, mi, s, milli) = (num(8..10)?, num(10..12)?, num(12..14)?, num(14..17)?);
    if y < 1970 || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 59
    {
        return None;
    }
    let days = days_from_civil(y as i64, mo, d);
    let ms = (days as u64) * 86_400_000 + ((h * 60 + mi) * 60 + s) * 1000 + milli;
    (format_name(ms).as_deref() == Some(name)).then_some(ms)
}
