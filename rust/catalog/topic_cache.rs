//! What a queue handle keeps for its topic reads between tailers: the
//! map of its active file's topic messages ([`ActiveTopics`]) and the
//! plans of its sealed files ([`SealedPlans`]); `reader::topic` uses them.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::format::frame::DATA_HEADER_LEN;
use crate::format::le_u64;
use crate::format::record;
use crate::format::walk::FrameBytes;
use crate::storage::frames::{frame_at, Check, RecordKind, Step};
use crate::storage::mapped::Mapping;

/// How many sealed-file plans a handle keeps.
const SEALED_PLANS_KEEP: usize = 256;

/// A queue handle's plans of sealed files for topic reads, so a new topic
/// tailer does not open and check each file's footer and topic index
/// again: a sealed file never changes, and a plan is used only while the
/// path names the same file, unchanged (device, inode and change time, as
/// `catalog::sealed` keys what it verified): a file rewritten, replaced or
/// damaged in place since is planned afresh. Only plans from a footer and
/// an index are kept (skip the file, or read these sequences), not "read
/// every frame" (its index may be built meanwhile).
#[derive(Debug, Default)]
pub(crate) struct SealedPlans(Mutex<Vec<SealedPlan>>);

/// What a selector asks for: topic, queue id, tags.
pub(crate) type SelectorKey = (Option<String>, Option<u16>, Vec<String>);

/// A sealed file's plan: `None` to skip it, else the `(sequence, frame
/// offset)` to read.
pub(crate) type SealedSeqs = Option<Vec<(u64, Option<u64>)>>;

#[derive(Debug)]
struct SealedPlan {
    file_number: u64,
    key: (u64, u64, i64),
    selector: SelectorKey,
    seqs: SealedSeqs,
}

impl SealedPlans {
    /// The plan of file `file_number` for `selector`, if one was made of
    /// the file as it is now (`key`: device, inode, change time).
    pub(crate) fn get(
        &self,
        file_number: u64,
        key: (u64, u64, i64),
        selector: &SelectorKey,
    ) -> Option<SealedSeqs> {
        let plans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let p = plans
            .iter()
            .rev()
            .find(|p| p.file_number == file_number && p.selector == *selector)?;
        (p.key == key).then(|| p.seqs.clone())
    }

    /// Keeps the plan of file `file_number` (as `key` says it is) for
    /// `selector`.
    pub(crate) fn put(
        &self,
        file_number: u64,
        key: (u64, u64, i64),
        selector: &SelectorKey,
        seqs: SealedSeqs,
    ) {
        let mut plans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        plans.retain(|p| !(p.file_number == file_number && p.selector == *selector));
        if plans.len() >= SEALED_PLANS_KEEP {
            plans.remove(0);
        }
        plans.push(SealedPlan {
            file_number,
            key,
            selector: selector.clone(),
            seqs,
        });
    }

    /// Lets go of every plan (the queue closed).
    pub(crate) fn clear(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// Most topic messages of the active file a handle's [`ActiveTopics`]
/// remembers (24 bytes each); past it, topic reads scan the rest of the
/// file frame by frame, as without the map.
const ACTIVE_MAP_MAX: usize = 1 << 20;

/// A queue handle's map of the topic messages of its active (last) data
/// file, which has no topic index until it is sealed: built incrementally
/// by reading the file's published frames once, each checked by its own
/// CRC, and shared by the handle's topic tailers and topic offsets, so a
/// later topic tailer reads only its topic's frames of the file (each
/// again checked by its own CRC when it is read, and its topic and tags
/// compared exactly), and the file is read once per handle instead of
/// twice per tailer (its frames, and its topic offsets).
///
/// The map trusts that a frame this process read intact at an offset
/// stays there: the writer never rewrites a published frame, and the
/// one thing that does, recovery after a writer crash cutting the tail
/// at a damaged frame and a new writer appending over it, zeroes every
/// frame after the cut, the last one mapped included; before each use the
/// map checks that its last frame is still the frame it read (same length
/// word, CRC passes and equals the one read) and that the path still
/// names the file it mapped (device and inode), and starts over when not
/// (see docs/DESIGN.md, "The active file's topic map").
#[derive(Debug, Default)]
pub(crate) struct ActiveTopics(Mutex<Option<ActiveMap>>);

/// `(seq, frame offset, queue id)` of a message in the active file.
type TopicFrame = (u64, u64, u16);

#[derive(Debug)]
struct ActiveMap {
    file_number: u64,
    identity: (u64, u64),
    /// The sequence and offset of the next frame to read.
    upto: u64,
    offset: usize,
    /// Offset, length word and stored CRC of the last frame read.
    last: Option<(usize, u32, u64)>,
    /// The reading stopped at something other than the end of what is
    /// published (damage, a zero-filled gap, the size limit): a reader
    /// reads on from `upto` itself.
    stopped: bool,
    /// Each topic's number in `by_topic`.
    topics: HashMap<String, usize>,
    /// Each topic (`""`: tags without one) with `(seq, frame offset,
    /// queue id)` of its messages, in order.
    by_topic: Vec<(String, Vec<TopicFrame>)>,
    /// Messages in `by_topic`.
    count: usize,
}

/// The wanted messages of the active file below `upto`, from the map.
#[derive(Debug)]
pub(crate) struct ActiveFrames {
    /// `(seq, frame offset, topic number, queue id)`, in order.
    pub(crate) frames: Vec<(u64, u64, usize, u16)>,
    /// The topics the numbers stand for.
    pub(crate) topics: Vec<String>,
    /// Every message of the file below this sequence was read.
    pub(crate) upto: u64,
    /// The offset of frame `upto`.
    pub(crate) upto_offset: u64,
}

impl ActiveMap {
    fn new(file_number: u64, first_seq: u64, map: &Mapping) -> ActiveMap {
        ActiveMap {
            file_number,
            identity: map.identity(),
            upto: first_seq,
            offset: DATA_HEADER_LEN,
            last: None,
            stopped: false,
            topics: HashMap::new(),
            by_topic: Vec::new(),
            count: 0,
        }
    }

    /// True when the last frame read is still there as it was read.
    fn intact(&self, map: &Mapping) -> bool {
        let Some((at, len, crc)) = self.last else {
            return true;
        };
        // The slice is taken after the frame's bytes are known to be in
        // it (`length_word` and `frame_at` bound it by the file's length).
        map.length_word(at) == Some(len)
            && matches!(frame_at(map, at, Check::Crc), Step::Frame(_))
            && le_u64(map.as_slice(), at + 4 + len as usize) == Some(crc)
    }

    /// Reads the frames published since, each checked by its CRC.
    fn extend(&mut self, map: &Mapping) {
        if self.stopped {
            return;
        }
        loop {
            let at = self.offset;
            let f = match frame_at(map, at, Check::Crc) {
                Step::Frame(f) => f,
                // Nothing more published yet, or the file was sealed.
                Step::Empty | Step::EndOfFile => return,
                // Damage, or no room for a length word.
                Step::Damage(_) => {
                    self.stopped = true;
                    return;
                }
            };
            let (rec, record_len) = (f.record, f.record.len());
            let len = record_len as u32;
            let Ok(view) = record::decode(rec) else {
                self.stopped = true;
                return;
            };
            if view.flags & record::FLAG_TOPIC != 0 {
                if self.count >= ACTIVE_MAP_MAX {
                    self.stopped = true;
                    return;
                }
                let topic = view.topic.unwrap_or("");
                let n = match self.topics.get(topic) {
                    Some(&n) => n,
                    None => {
                        let n = self.by_topic.len();
                        self.topics.insert(topic.to_string(), n);
                        self.by_topic.push((topic.to_string(), Vec::new()));
                        n
                    }
                };
                self.by_topic[n]
                    .1
                    .push((self.upto, at as u64, view.queue_id));
                self.count += 1;
            }
            // From the slice as long as the file is now: the file may have
            // grown since the loop began (format 11), and `frame_at` saw it.
            let crc = le_u64(map.as_slice(), at + 4 + record_len).unwrap_or(0);
            self.last = Some((at, len, crc));
            self.upto += RecordKind::of_or_plain(rec).count();
            self.offset = f.next;
        }
    }
}

impl ActiveTopics {
    /// Lets go of the map (the queue closed).
    pub(crate) fn clear(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The messages of `topic` (any when `None`, `""` for tags without a
    /// topic) and `queue_id` (any when `None`) in the active file
    /// `file_number` (first sequence `first_seq`) mapped as `map`, from the
    /// map brought up to what is published now.
    pub(crate) fn frames(
        &self,
        (file_number, first_seq): (u64, u64),
        map: &Mapping,
        topic: Option<&str>,
        queue_id: Option<u16>,
    ) -> ActiveFrames {
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = match guard.as_ref() {
            Some(m) => {
                m.file_number != file_number || m.identity != map.identity() || !m.intact(map)
            }
            None => true,
        };
        if fresh {
            *guard = Some(ActiveMap::new(file_number, first_seq, map));
        }
        let m = guard.as_mut().expect("set above");
        m.extend(map);
        let mut frames = Vec::new();
        let mut topics = Vec::new();
        for (t, list) in &m.by_topic {
            if topic.is_some_and(|w| w != t) {
                continue;
            }
            let n = topics.len();
            topics.push(t.clone());
            frames.extend(
                list.iter()
                    .filter(|&&(_, _, q)| queue_id.is_none_or(|w| w == q))
                    .map(|&(seq, at, q)| (seq, at, n, q)),
            );
        }
        if topics.len() > 1 {
            frames.sort_unstable_by_key(|f| f.0);
        }
        ActiveFrames {
            frames,
            topics,
            upto: m.upto,
            upto_offset: m.offset as u64,
        }
    }
}
