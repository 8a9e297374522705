//! Work-queue state files (`base/workqueues/<base32(name)>.wq`): the header
//! and the slot words, in both directions. No I/O; `docs/FORMAT.md` ("Work
//! queues") is the byte-level contract.
//!
//! ```text
//!      0..4096  header: immutable part (magic, version, window, epoch,
//!               group id, name, CRC-64), then the shared words (low-water
//!               mark, dispatch cursor, counters, the boot table)
//!   4096..      window × 32-byte slots: state word, owner, claim tag, clock word
//! ```
//!
//! Every field is a little-endian `u64`; the shared ones are read and written
//! only as 8-byte atomics through a shared mapping.

use super::crc::crc64;
use super::le_u64;

/// First eight bytes of a state file.
pub const WQ_MAGIC: [u8; 8] = *b"LMQWORKQ";
/// Version of the state-file layout new groups get: 2 (monotonic deadlines,
/// the clock word, the group id and the boot table).
pub const WQ_VERSION: u64 = 2;
/// Oldest version still read (and written, with its own rules): 1, whose
/// deadlines count wall-clock milliseconds from the epoch.
pub const WQ_OLDEST_VERSION: u64 = 1;
/// Bytes of the header; the slots follow.
pub const WQ_HEADER_LEN: usize = 4096;
/// Bytes of one slot.
pub const WQ_SLOT_LEN: usize = 32;
/// Longest group name, in bytes (as consumer names).
pub const WQ_MAX_NAME_LEN: usize = 128;
/// Smallest window (slots); windows are powers of two.
pub const MIN_WINDOW: u64 = 16;
/// Largest window (slots): a 512 MiB state file.
pub const MAX_WINDOW: u64 = 1 << 24;

/// Byte offsets in the header.
const VERSION_AT: usize = 8;
const WINDOW_AT: usize = 16;
const EPOCH_AT: usize = 24;
const NAME_LEN_AT: usize = 32;
const CRC_AT: usize = 40;
/// Version 2: the group's random id (zero in version 1).
const GROUP_ID_AT: usize = 48;
const NAME_AT: usize = 64;

/// Word (offset / 8) of the low-water mark (byte 192).
pub const W_LOW: usize = 24;
/// Word of the dispatch cursor (byte 200).
pub const W_CURSOR: usize = 25;
/// Word of the count of acks (byte 208).
pub const W_ACKED: usize = 26;
/// Word of the count of jobs dead-lettered or dropped (byte 216).
pub const W_DEAD: usize = 27;
/// Word of the count of jobs expired before a handout (byte 224).
pub const W_EXPIRED: usize = 28;
/// Word of the count of handouts after the first (byte 232).
pub const W_REDELIVERED: usize = 29;
/// Word of the count of jobs retention removed before a handout, or key
/// compaction dropped (byte 240).
pub const W_GONE: usize = 30;
/// Word bumped by every nack and release: handles look through the ring when it moves (byte 248).
pub const W_HINT: usize = 31;
/// Word of the top: every sequence a priority (or key-ordered) group claimed ahead of the
/// cursor is below it (byte 256).
pub const W_TOP: usize = 32;
/// Word of the count of sequences the marks were moved back over because
/// they were past the queue's end when a handle opened the group (byte 264).
pub const W_REWOUND: usize = 33;

/// Version 2: word of the boot-table cursor (byte 2040): boots register
/// in entry `cursor mod BOOT_ENTRIES`, round robin.
pub const W_BOOT_NEXT: usize = 255;
/// Version 2: word of the first boot-table entry (byte 2048). Entry `e` is
/// words `W_BOOTS + 2e` (the boot key, 0 when free) and `+ 1` (wall-clock
/// ms since the Unix epoch at that boot's monotonic zero).
pub const W_BOOTS: usize = 256;
/// Version 2: entries in the boot table (bytes 2048..2560).
pub const BOOT_ENTRIES: usize = 32;

/// Word index of slot `i`'s first word.
pub fn slot_word(i: usize) -> usize {
    (WQ_HEADER_LEN + i * WQ_SLOT_LEN) / 8
}

/// Bytes of a state file with `window` slots.
pub fn file_len(window: u64) -> u64 {
    WQ_HEADER_LEN as u64 + window * WQ_SLOT_LEN as u64
}

/// The immutable part of a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WqHeader {
    /// Layout version: [`WQ_VERSION`] for a new group, 1 for an older one.
    pub version: u64,
    /// Slots in the ring (a power of two).
    pub window: u64,
    /// When the group was created, µs since the Unix epoch (version 1:
    /// deadlines count milliseconds from here).
    pub epoch_us: u64,
    /// Version 2: a random id drawn when the group was created (never 0),
    /// so that a group removed and created again under its name is another
    /// group. 0 in version 1.
    pub group_id: u64,
    /// The group's name.
    pub name: String,
}

fn crc_of(b: &[u8], version: u64) -> u64 {
    // Version 2 covers the group id too (bytes 48..64 were zero, unchecked).
    let from = if version >= 2 { GROUP_ID_AT } else { NAME_AT };
    crc64(&[&b[..CRC_AT], &b[from..NAME_AT + WQ_MAX_NAME_LEN]])
}

/// The whole header page of a new state file whose low-water mark and
/// cursor start at `start`.
pub fn encode_header(h: &WqHeader, start: u64) -> Vec<u8> {
    let mut b = vec![0u8; WQ_HEADER_LEN];
    b[0..8].copy_from_slice(&WQ_MAGIC);
    b[VERSION_AT..VERSION_AT + 8].copy_from_slice(&h.version.to_le_bytes());
    b[WINDOW_AT..WINDOW_AT + 8].copy_from_slice(&h.window.to_le_bytes());
    b[EPOCH_AT..EPOCH_AT + 8].copy_from_slice(&h.epoch_us.to_le_bytes());
    b[NAME_LEN_AT..NAME_LEN_AT + 8].copy_from_slice(&(h.name.len() as u64).to_le_bytes());
    if h.version >= 2 {
        b[GROUP_ID_AT..GROUP_ID_AT + 8].copy_from_slice(&h.group_id.to_le_bytes());
    }
    b[NAME_AT..NAME_AT + h.name.len()].copy_from_slice(h.name.as_bytes());
    let crc = crc_of(&b, h.version);
    b[CRC_AT..CRC_AT + 8].copy_from_slice(&crc.to_le_bytes());
    for w in [W_LOW, W_CURSOR] {
        b[w * 8..w * 8 + 8].copy_from_slice(&start.to_le_bytes());
    }
    b
}

/// Checks and decodes the immutable part of a header (`b` holds at least
/// the first 4096 bytes); the error says what is wrong and at which offset.
pub fn decode_header(b: &[u8]) -> Result<WqHeader, (usize, String)> {
    if b.len() < WQ_HEADER_LEN {
        return Err((0, format!("{} bytes, shorter than a header", b.len())));
    }
    if b[0..8] != WQ_MAGIC {
        return Err((0, format!("magic {:02X?}", &b[0..8])));
    }
    let version = le_u64(b, VERSION_AT).unwrap_or(0);
    if !(WQ_OLDEST_VERSION..=WQ_VERSION).contains(&version) {
        return Err((
            VERSION_AT,
            format!("version {version}, expected {WQ_OLDEST_VERSION} to {WQ_VERSION}"),
        ));
    }
    let crc = le_u64(b, CRC_AT).unwrap_or(0);
    if crc != crc_of(b, version) {
        return Err((CRC_AT, "header CRC mismatch".to_string()));
    }
    let window = le_u64(b, WINDOW_AT).unwrap_or(0);
    if !window.is_power_of_two() || !(MIN_WINDOW..=MAX_WINDOW).contains(&window) {
        return Err((WINDOW_AT, format!("window {window}")));
    }
    let name_len = le_u64(b, NAME_LEN_AT).unwrap_or(0) as usize;
    if name_len == 0 || name_len > WQ_MAX_NAME_LEN {
        return Err((NAME_LEN_AT, format!("name length {name_len}")));
    }
    let name = std::str::from_utf8(&b[NAME_AT..NAME_AT + name_len])
        .map_err(|_| (NAME_AT, "name is not UTF-8".to_string()))?
        .to_string();
    let group_id = if version >= 2 {
        le_u64(b, GROUP_ID_AT).unwrap_or(0)
    } else {
        0
    };
    Ok(WqHeader {
        version,
        window,
        epoch_us: le_u64(b, EPOCH_AT).unwrap_or(0),
        group_id,
        name,
    })
}

/// The state of one job (bits 12..16 of its slot's state word).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Not handed out (or released): ready for `get`.
    Pending,
    /// Handed to a worker until the deadline.
    Leased,
    /// Nacked: ready again at the deadline.
    Delayed,
    /// Acknowledged (done).
    Acked,
    /// Past `max_deliveries`: dead-lettered or dropped (done).
    Dead,
    /// Expired before it was handed out (done).
    Expired,
    /// Being written to the dead-letter queue by its owner until the deadline.
    DeadLettering,
    /// Removed by retention before it was handed out (done).
    Gone,
}

impl JobState {
    fn code(self) -> u64 {
        match self {
            JobState::Pending => 0,
            JobState::Leased => 1,
            JobState::Delayed => 2,
            JobState::Acked => 3,
            JobState::Dead => 4,
            JobState::Expired => 5,
            JobState::DeadLettering => 6,
            JobState::Gone => 7,
        }
    }

    fn from_code(c: u64) -> Option<JobState> {
        Some(match c {
            0 => JobState::Pending,
            1 => JobState::Leased,
            2 => JobState::Delayed,
            3 => JobState::Acked,
            4 => JobState::Dead,
            5 => JobState::Expired,
            6 => JobState::DeadLettering,
            7 => JobState::Gone,
            _ => return None,
        })
    }

    /// Finished for good: the low-water mark may pass it.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            JobState::Acked | JobState::Dead | JobState::Expired | JobState::Gone
        )
    }

    /// Held by a worker (until its deadline, or until it dies).
    pub fn is_owned(self) -> bool {
        matches!(self, JobState::Leased | JobState::DeadLettering)
    }
}

/// Bits of the lap tag: which pass of the ring a slot's word describes.
pub const LAP_BITS: u32 = 12;
const LAP_MASK: u64 = (1 << LAP_BITS) - 1;
/// Largest deadline (40 bits of ms: about 34 years of a boot's uptime in
/// version 2, of the group's life in version 1).
pub const MAX_DEADLINE_MS: u64 = (1 << 40) - 1;

/// Version 2: a slot's fourth word, the *clock word*: which boot's
/// monotonic clock the deadline in the state word counts on, and the pid
/// namespace of the owner. Written before the claim tag, so it is trusted
/// only while the tag equals the state word. 0 (never written, or a
/// version-1 file) means "unknown": the reader's own boot and namespace.
///
/// ```text
/// bits  0..32  pid namespace of the owner (inode of /proc/<pid>/ns/pid)
/// bits 32..64  boot key of the deadline's clock (see clock::system_boot_key)
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClockWord {
    /// Boot key of the clock the deadline counts on (0: unknown).
    pub boot: u32,
    /// Pid namespace the owner's identity was taken in (0: unknown).
    pub pid_ns: u32,
}

impl ClockWord {
    /// Encodes the word.
    pub fn encode(self) -> u64 {
        (u64::from(self.boot) << 32) | u64::from(self.pid_ns)
    }

    /// Decodes a word.
    pub fn decode(w: u64) -> ClockWord {
        ClockWord {
            boot: (w >> 32) as u32,
            pid_ns: w as u32,
        }
    }
}

/// One slot's state word, decoded.
///
/// ```text
/// bits  0..12  lap tag: (seq / window) mod 4096
/// bits 12..16  state (JobState)
/// bits 16..24  deliveries (handouts so far, 0..=255)
/// bits 24..64  deadline, ms: version 2 on the monotonic clock of the boot
///              the clock word names; version 1 since the header's epoch
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotWord {
    /// Lap tag of the sequence the word describes.
    pub lap: u64,
    /// The job's state.
    pub state: JobState,
    /// Handouts so far.
    pub deliveries: u8,
    /// Lease end (or when a nacked job is ready), ms (see the layout above).
    pub deadline_ms: u64,
}

/// The lap tag of `seq` in a ring of `window` slots.
pub fn lap_of(seq: u64, window: u64) -> u64 {
    (seq / window) & LAP_MASK
}

impl SlotWord {
    /// Encodes the word (the deadline saturates at [`MAX_DEADLINE_MS`]).
    pub fn encode(&self) -> u64 {
        (self.lap & LAP_MASK)
            | (self.state.code() << 12)
            | (u64::from(self.deliveries) << 16)
            | (self.deadline_ms.min(MAX_DEADLINE_MS) << 24)
    }

    /// Decodes a word; `None` for an undefined state code (damage).
    pub fn decode(w: u64) -> Option<SlotWord> {
        Some(SlotWord {
            lap: w & LAP_MASK,
            state: JobState::from_code((w >> 12) & 0xF)?,
            deliveries: ((w >> 16) & 0xFF) as u8,
            deadline_ms: w >> 24,
        })
    }

    /// The state this word gives `seq`. A slot holds a word of `seq`'s own
    /// lap, of the lap before (left by `seq - window`, finished), or of the
    /// lap after (`seq` finished and `seq + window` claimed the slot):
    /// the mark never passes a slot that was not written in its own lap, so
    /// no slot is ever more than one lap off. An all-zero word was never
    /// written (no transition writes one). So: never written, or the lap
    /// before, reads "pending, never handed out"; the lap after reads as
    /// finished (`Acked`: its exact end is not known, only that it ended).
    /// A word with an undefined state code (damage: slots carry no checksum,
    /// each is one compare-and-swap word) reads as pending too, so that its
    /// job comes back rather than blocking the mark for ever.
    pub fn for_seq(w: u64, seq: u64, window: u64) -> SlotWord {
        let lap = lap_of(seq, window);
        let pending = SlotWord {
            lap,
            state: JobState::Pending,
            deliveries: 0,
            deadline_ms: 0,
        };
        let Some(word) = SlotWord::decode(w) else {
            return pending;
        };
        if word.lap == lap && w != 0 {
            return word;
        }
        let state = if w != 0 && word.lap == (lap + 1) & LAP_MASK {
            JobState::Acked
        } else {
            JobState::Pending
        };
        SlotWord { state, ..pending }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_damage_is_named() {
        let h = WqHeader {
            version: WQ_VERSION,
            window: 1024,
            epoch_us: 1_700_000_000_000_000,
            group_id: 0x0123_4567_89ab_cdef,
            name: "thumbnails".into(),
        };
        let mut b = encode_header(&h, 42);
        assert_eq!(&b[0..8], b"LMQWORKQ");
        assert_eq!(le_u64(&b, W_LOW * 8), Some(42));
        assert_eq!(le_u64(&b, W_CURSOR * 8), Some(42));
        assert_eq!(le_u64(&b, GROUP_ID_AT), Some(h.group_id));
        assert_eq!(decode_header(&b).unwrap(), h);
        b[GROUP_ID_AT] ^= 1;
        assert_eq!(
            decode_header(&b).unwrap_err().0,
            CRC_AT,
            "the id is checked"
        );
        b[GROUP_ID_AT] ^= 1;
        b[NAME_AT] ^= 1;
        assert_eq!(decode_header(&b).unwrap_err().0, CRC_AT);
        // Version 1: no group id, the CRC skips bytes 40..64.
        let v1 = WqHeader {
            version: 1,
            group_id: 0,
            ..h
        };
        let mut b = encode_header(&v1, 0);
        assert_eq!(decode_header(&b).unwrap(), v1);
        b[GROUP_ID_AT] = 7;
        assert_eq!(decode_header(&b).unwrap(), v1, "unchecked in version 1");
        let mut b = encode_header(&WqHeader { version: 3, ..v1 }, 0);
        assert_eq!(decode_header(&b).unwrap_err().0, VERSION_AT);
        b[VERSION_AT] = 0;
        assert_eq!(decode_header(&b).unwrap_err().0, VERSION_AT);
        let c = ClockWord {
            boot: 0xdead_beef,
            pid_ns: 4_026_531_836,
        };
        assert_eq!(ClockWord::decode(c.encode()), c);
    }

    #[test]
    fn slot_words_round_trip_and_other_laps_read_as_pending() {
        let w = SlotWord {
            lap: 7,
            state: JobState::Leased,
            deliveries: 255,
            deadline_ms: MAX_DEADLINE_MS,
        };
        assert_eq!(SlotWord::decode(w.encode()), Some(w));
        let seq = 7 * 64 + 3;
        assert_eq!(SlotWord::for_seq(w.encode(), seq, 64), w);
        let next_lap = SlotWord::for_seq(w.encode(), seq + 64, 64);
        assert_eq!(next_lap.state, JobState::Pending, "left by the lap before");
        assert_eq!(next_lap.deliveries, 0);
        let reused = SlotWord::for_seq(w.encode(), seq - 64, 64);
        assert!(reused.state.is_done(), "the lap after: finished and reused");
        assert_eq!(SlotWord::for_seq(0, 4095 * 64, 64).state, JobState::Pending);
        assert_eq!(SlotWord::decode(8 << 12), None, "undefined state code");
        let damaged = SlotWord::for_seq((8 << 12) | 7, seq, 64);
        assert_eq!(
            damaged.state,
            JobState::Pending,
            "damage: the job comes back"
        );
    }
}
