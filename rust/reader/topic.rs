//! Reading one topic: a filter a [`super::tailer::Tailer`] applies, which
//! jumps over what cannot match.
//!
//! For each data file the filter makes a plan once: a file older than
//! format 6, or sealed with a footer that says no record carries a topic,
//! is skipped whole; a sealed file with a topic index (`NAME.topics`) that
//! checks out is read only at the sequences its index lists for the topic
//! (and whose tag masks can match); the active file is read at the frames
//! the queue handle's map of it lists (`catalog::topic_cache`), then frame
//! by frame past what the map read; a sealed file whose index is missing or
//! not built yet is read frame by frame, and each record's topic and tags
//! are compared. Every message returned is compared exactly, so an index
//! can only make reading faster, never return another topic's message.

use std::sync::Arc;

use super::plan::{Jump, Plan, Planned};
use super::topic_offsets::{Scanner, Streams, TopicOffsets};
use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::footer::{Footer, CONTENT_TOPICS};
use crate::format::record::RecordView;
use crate::format::topics::tag_mask;
use crate::index::topics::{self, TopicsIndex};

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
    if let Some((dev, ino, _)) = key {
        catalog.forget_if_replaced(info.id, (dev, ino));
    }
    let number = info.header.file_number;
    let wanted = (
        selector.topic.clone(),
        selector.queue_id,
        selector.tags.clone(),
    );
    match key.and_then(|k| catalog.topic_plans.get(number, k, &wanted)) {
        Some(None) => return Plan::Skip,
        Some(Some(seqs)) => return Plan::Seqs(seqs),
        None => {}
    }
    let plan = plan_from_index(selector, masks, catalog, info);
    let kept = match &plan {
        Plan::Skip => Some(None),
        Plan::Seqs(seqs) => Some(Some(seqs.clone())),
        // "Read every frame": the index may be built meanwhile.
        _ => None,
    };
    if let (Some(k), Some(seqs)) = (key, kept) {
        catalog.topic_plans.put(number, k, &wanted, seqs);
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
    match super::topic_offsets::active_frames(catalog, info, topic, queue_id) {
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
