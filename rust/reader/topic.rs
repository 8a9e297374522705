//! Reading one topic: a filter a [`super::tailer::Tailer`] applies, which
//! jumps over what cannot match.
//!
//! For each data file the filter makes a plan once: a file older than
//! format 6, or sealed with a footer that says no record carries a topic,
//! is skipped whole; a sealed file with a topic index (`NAME.topics`) that
//! checks out is read only at the sequences its index lists for the topic
//! (and whose tag masks can match); the active file is read at the frames
//! the queue handle's map of it lists ([`ActiveTopics`]), then frame by
//! frame past what the map read; a sealed file whose index is missing or
//! not built yet is read frame by frame, and each record's topic and tags
//! are compared. Every message returned is compared exactly, so an index
//! can only make reading faster, never return another topic's message.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::catalog::{Catalog, FileInfo};
use super::plan::{Jump, Plan, Planned};
use super::topic_offsets::{Scanner, Streams, TopicOffsets};
use crate::error::{Error, Result};
use crate::format::footer::{Footer, CONTENT_TOPICS};
use crate::format::frame::{self, FrameAt, DATA_HEADER_LEN};
use crate::format::le_u64;
use crate::format::record::{self, RecordView};
use crate::format::topics::tag_mask;
use crate::index::topics::{self, TopicsIndex};
use crate::storage::mapped::Mapping;

/// Which messages a topic tailer returns.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TopicSelector {
    /// The topic (`None`: any topic, or none, when filtering by tags only).
    pub topic: Option<String>,
    /// One stream of the topic (`None`: every queue id).
    pub queue_id: Option<u16>,
    /// Tags: a message matches when it carries any of them (none given:
    /// every message of the topic).
    pub tags: Vec<String>,
}

impl TopicSelector {
    /// True when `rec` is a message the selector wants.
    pub fn matches(&self, rec: &RecordView<'_>) -> bool {
        if let Some(t) = &self.topic {
            if rec.topic != Some(t.as_str()) {
                return false;
            }
        }
        if self.queue_id.is_some_and(|q| q != rec.queue_id) {
            return false;
        }
        self.tags.is_empty() || rec.tags().any(|t| self.tags.iter().any(|w| w == t))
    }
}

/// A [`TopicSelector`] and the plan for the file the tailer is in.
#[derive(Debug)]
pub(crate) struct TopicFilter {
    selector: TopicSelector,
    masks: Vec<u32>,
    planned: Planned,
    offsets: TopicOffsets,
}

impl TopicFilter {
    pub(crate) fn new(selector: TopicSelector, scanner: Scanner) -> TopicFilter {
        let masks = selector.tags.iter().map(|t| tag_mask(t)).collect();
        let streams = Streams {
            topic: selector.topic.clone(),
            queue_id: selector.queue_id,
        };
        TopicFilter {
            selector,
            masks,
            planned: Planned::default(),
            offsets: TopicOffsets::new(streams, scanner),
        }
    }

    /// The topic offset of message `seq` of stream `(topic, queue_id)`.
    pub(crate) fn offset_of(
        &mut self,
        catalog: &Arc<Catalog>,
        seq: u64,
        topic: &str,
        queue_id: u16,
    ) -> Result<u64> {
        self.offsets.offset_of(catalog, seq, topic, queue_id)
    }

    /// Where message `offset` of the selected stream is (see
    /// [`super::tailer::Tailer::seek_topic_offset`]).
    pub(crate) fn seq_of(
        &mut self,
        catalog: &Arc<Catalog>,
        offset: u64,
    ) -> Result<std::result::Result<u64, (u64, u64)>> {
        let Some(topic) = self.selector.topic.clone() else {
            return Err(Error::InvalidArgument(
                "seeking by topic offset needs a topic tailer (select a topic)".into(),
            ));
        };
        let queue_id = self.selector.queue_id.unwrap_or(0);
        self.offsets.seq_of(catalog, &topic, queue_id, offset)
    }

    pub(crate) fn selector(&self) -> &TopicSelector {
        &self.selector
    }

    pub(crate) fn matches(&self, rec: &RecordView<'_>) -> bool {
        self.selector.matches(rec)
    }

    /// Where a tailer standing at `seq` should read next (see
    /// [`Planned::jump`]).
    pub(crate) fn jump(&mut self, catalog: &Catalog, seq: u64) -> Option<Jump> {
        let (selector, masks) = (&self.selector, &self.masks);
        self.planned.jump(
            catalog,
            seq,
            &mut |c, info| plan_sealed(selector, masks, c, info),
            // The active file: the frames the handle's map lists, then
            // every frame published after what it read.
            &mut |info| plan_active(selector, catalog, info),
        )
    }
}

/// Plans a sealed file: from the handle's cache when the file is the one
/// (device, inode, change time) the cached plan was made of, else from its
/// footer and topic index (see [`SealedPlans`]).
fn plan_sealed(
    selector: &TopicSelector,
    masks: &[u32],
    catalog: &Catalog,
    info: &FileInfo,
) -> Plan {
    let key = file_key(&catalog.data_path(info.id));
    let number = info.header.file_number;
    if let Some(plan) = key.and_then(|k| catalog.topic_plans.get(number, k, selector)) {
        return plan;
    }
    let plan = plan_from_index(selector, masks, catalog, info);
    if let Some(k) = key {
        catalog.topic_plans.put(number, k, selector, &plan);
    }
    plan
}

/// `(st_dev, st_ino, st_ctime in ns)` of the file at `path`.
fn file_key(path: &std::path::Path) -> Option<(u64, u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((
        m.dev(),
        m.ino(),
        m.ctime().saturating_mul(1_000_000_000) + m.ctime_nsec(),
    ))
}

/// How many sealed-file plans a handle keeps.
const SEALED_PLANS_KEEP: usize = 256;

/// A queue handle's plans of sealed files for topic reads, so a new topic
/// tailer does not open and check each file's footer and topic index
/// again: a sealed file never changes, and a plan is used only while the
/// path names the same file, unchanged (device, inode and change time, as
/// `reader::sealed` keys what it verified): a file rewritten, replaced or
/// damaged in place since is planned afresh. Only plans from a footer and
/// an index are kept (skip the file, or read these sequences), not "read
/// every frame" (its index may be built meanwhile).
#[derive(Debug, Default)]
pub(crate) struct SealedPlans(Mutex<Vec<SealedPlan>>);

#[derive(Debug)]
struct SealedPlan {
    file_number: u64,
    key: (u64, u64, i64),
    selector: TopicSelector,
    /// `None`: skip the file.
    seqs: Option<Vec<(u64, Option<u64>)>>,
}

impl SealedPlans {
    fn get(
        &self,
        file_number: u64,
        key: (u64, u64, i64),
        selector: &TopicSelector,
    ) -> Option<Plan> {
        let plans = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let p = plans
            .iter()
            .rev()
            .find(|p| p.file_number == file_number && p.selector == *selector)?;
        if p.key != key {
            return None;
        }
        Some(match &p.seqs {
            None => Plan::Skip,
            Some(seqs) => Plan::Seqs(seqs.clone()),
        })
    }

    fn put(&self, file_number: u64, key: (u64, u64, i64), selector: &TopicSelector, plan: &Plan) {
        let seqs = match plan {
            Plan::Skip => None,
            Plan::Seqs(seqs) => Some(seqs.clone()),
            _ => return,
        };
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

fn plan_from_index(
    selector: &TopicSelector,
    masks: &[u32],
    catalog: &Catalog,
    info: &FileInfo,
) -> Plan {
    let h = info.header;
    if h.version < 6 {
        return Plan::Skip; // no record of an older file carries a topic
    }
    let Some(footer) = read_footer(catalog, info) else {
        return Plan::Scan;
    };
    if footer.content_flags & CONTENT_TOPICS == 0 {
        return Plan::Skip;
    }
    let path = info.id.topics_path(catalog.base());
    let Some(index) = TopicsIndex::open(&path, &topics::of(&h, &footer)) else {
        return Plan::Scan;
    };
    let mut seqs = Vec::new();
    for g in &index.groups {
        let topic_ok = match &selector.topic {
            Some(t) => g.topic == *t,
            None => true,
        };
        if !topic_ok || selector.queue_id.is_some_and(|q| q != g.queue_id) {
            continue;
        }
        let Some(entries) = index.entries(g) else {
            return Plan::Scan;
        };
        seqs.extend(
            entries
                .iter()
                .filter(|e| masks.is_empty() || masks.iter().any(|&m| has_bits(e.tag_mask, m)))
                .map(|e| (e.seq, Some(e.offset))),
        );
    }
    seqs.sort_unstable();
    Plan::Seqs(seqs)
}

fn plan_active(selector: &TopicSelector, catalog: &Catalog, info: &FileInfo) -> Plan {
    let (topic, queue_id) = (selector.topic.as_deref(), selector.queue_id);
    match catalog.active_topics.frames(catalog, info, topic, queue_id) {
        Some(a) => Plan::SeqsThenScan(
            a.frames
                .into_iter()
                .map(|(seq, at, _, _)| (seq, Some(at)))
                .collect(),
            a.upto,
            Some(a.upto_offset),
        ),
        None => Plan::Scan,
    }
}

/// True when `mask` has every bit of `bits`.
fn has_bits(mask: u32, bits: u32) -> bool {
    mask & bits == bits
}

/// The footer of sealed file `info` (see [`Catalog::read_footer`]).
pub(crate) fn read_footer(catalog: &Catalog, info: &FileInfo) -> Option<Footer> {
    catalog.read_footer(info)
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
    fn new(info: &FileInfo, map: &Mapping) -> ActiveMap {
        ActiveMap {
            file_number: info.header.file_number,
            identity: map.identity(),
            upto: info.header.first_seq,
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
        let file = map.as_slice();
        at + 4 <= file.len()
            && map.load_u32(at) == len
            && matches!(frame::decode(file, at, len), Ok(FrameAt::Frame { .. }))
            && le_u64(file, at + 4 + len as usize) == Some(crc)
    }

    /// Reads the frames published since, each checked by its CRC.
    fn extend(&mut self, map: &Mapping) {
        if self.stopped {
            return;
        }
        let file = map.as_slice();
        loop {
            let at = self.offset;
            if at + 4 > file.len() {
                self.stopped = true;
                return;
            }
            let len = map.load_u32(at);
            let record_len = match frame::decode(file, at, len) {
                Ok(FrameAt::Frame { record_len, .. }) => record_len,
                // Nothing more published yet, or the file was sealed.
                Ok(FrameAt::Empty) | Ok(FrameAt::EndOfFile) => return,
                Err(_) => {
                    self.stopped = true;
                    return;
                }
            };
            let rec = &file[at + 4..at + 4 + record_len];
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
            let crc = le_u64(file, at + 4 + record_len).unwrap_or(0);
            self.last = Some((at, len, crc));
            self.upto += record::seqs_of(rec);
            self.offset = at + frame::frame_size(record_len);
        }
    }
}

impl ActiveTopics {
    /// Lets go of the map (the queue closed).
    pub(crate) fn clear(&self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// The messages of active file `info` of `topic` (any when `None`,
    /// `""` for tags without a topic) and `queue_id` (any when `None`),
    /// from the map brought up to what is published now; `None` when the
    /// file cannot be mapped.
    pub(crate) fn frames(
        &self,
        catalog: &Catalog,
        info: &FileInfo,
        topic: Option<&str>,
        queue_id: Option<u16>,
    ) -> Option<ActiveFrames> {
        let file = catalog.map_file(info).ok()?;
        let map = &file.map;
        let mut guard = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = match guard.as_ref() {
            Some(m) => {
                m.file_number != info.header.file_number
                    || m.identity != map.identity()
                    || !m.intact(map)
            }
            None => true,
        };
        if fresh {
            *guard = Some(ActiveMap::new(info, map));
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
        Some(ActiveFrames {
            frames,
            topics,
            upto: m.upto,
            upto_offset: m.offset as u64,
        })
    }
}
