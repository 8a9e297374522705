//! Reading one topic: a filter a [`super::tailer::Tailer`] applies, which
//! jumps over what cannot match.
//!
//! For each data file the filter makes a plan once: a file older than
//! format 6, or sealed with a footer that says no record carries a topic,
//! is skipped whole; a sealed file with a topic index (`NAME.topics`) that
//! checks out is read only at the sequences its index lists for the topic
//! (and whose tag masks can match); any other file (the active one, or a
//! sealed one whose index is missing or not built yet) is read frame by
//! frame, and each record's topic and tags are compared. Every message
//! returned is compared exactly, so an index can only make reading faster,
//! never return another topic's message.

use std::os::unix::fs::FileExt;

use super::catalog::{Catalog, FileInfo};
use crate::format::footer::{Footer, CONTENT_TOPICS, FOOTER_LEN};
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

/// What to do in one data file.
#[derive(Debug)]
enum Plan {
    /// Nothing in it can match.
    Skip,
    /// Only these `(sequence, frame offset)` can match (sorted).
    Seqs(Vec<(u64, u64)>),
    /// Read every frame.
    Scan,
}

/// Where a topic tailer goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Jump {
    /// The sequence to read next.
    pub(crate) seq: u64,
    /// Its frame, when the topic index says where: `(file_number, offset)`.
    pub(crate) frame: Option<(u64, usize)>,
}

/// A [`TopicSelector`] and the plan for the file the tailer is in.
#[derive(Debug)]
pub(crate) struct TopicFilter {
    selector: TopicSelector,
    masks: Vec<u32>,
    /// `(file_number, first_seq, end_seq, plan)` of the file planned last;
    /// `end_seq` is `u64::MAX` for the active file.
    plan: Option<(u64, u64, u64, Plan)>,
}

impl TopicFilter {
    pub(crate) fn new(selector: TopicSelector) -> TopicFilter {
        let masks = selector.tags.iter().map(|t| tag_mask(t)).collect();
        TopicFilter {
            selector,
            masks,
            plan: None,
        }
    }

    pub(crate) fn selector(&self) -> &TopicSelector {
        &self.selector
    }

    pub(crate) fn matches(&self, rec: &RecordView<'_>) -> bool {
        self.selector.matches(rec)
    }

    /// Where a tailer standing at `seq` should read next: `Some(jump)` with
    /// `jump.seq > seq` to move forward (past messages that cannot match;
    /// it may be the first sequence of the next file), `None` to read on
    /// from `seq`.
    pub(crate) fn jump(&mut self, catalog: &Catalog, seq: u64) -> Option<Jump> {
        let fresh = match &self.plan {
            // The active file may have been sealed, and the tailer moved on.
            Some((number, _, u64::MAX, _)) => {
                catalog.locate(seq).map(|f| f.header.file_number) != Some(*number)
            }
            Some((_, first, end, _)) => seq < *first || seq >= *end,
            None => true,
        };
        if fresh {
            let info = catalog.locate(seq)?;
            let next = catalog.successor(info.id);
            let (end, plan) = match next {
                // The active file: new frames come; read them all.
                None => (u64::MAX, Plan::Scan),
                Some(n) => (n.header.first_seq, self.plan_sealed(catalog, &info)),
            };
            self.plan = Some((info.header.file_number, info.header.first_seq, end, plan));
        }
        let (number, _, end, plan) = self.plan.as_ref()?;
        let to_end = Jump {
            seq: *end,
            frame: None,
        };
        match plan {
            Plan::Scan => None,
            Plan::Skip => Some(to_end),
            Plan::Seqs(seqs) => {
                let i = seqs.partition_point(|&(s, _)| s < seq);
                let to = match seqs.get(i) {
                    Some(&(s, offset)) => Jump {
                        seq: s,
                        frame: Some((*number, offset as usize)),
                    },
                    None => to_end,
                };
                (to.seq > seq || to.frame.is_some()).then_some(to)
            }
        }
    }

    fn plan_sealed(&self, catalog: &Catalog, info: &FileInfo) -> Plan {
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
            let topic_ok = match &self.selector.topic {
                Some(t) => g.topic == *t,
                None => true,
            };
            if !topic_ok || self.selector.queue_id.is_some_and(|q| q != g.queue_id) {
                continue;
            }
            let Some(entries) = index.entries(g) else {
                return Plan::Scan;
            };
            seqs.extend(
                entries
                    .iter()
                    .filter(|e| {
                        self.masks.is_empty() || self.masks.iter().any(|&m| has_bits(e.tag_mask, m))
                    })
                    .map(|e| (e.seq, e.offset)),
            );
        }
        seqs.sort_unstable();
        Plan::Seqs(seqs)
    }
}

/// True when `mask` has every bit of `bits`.
fn has_bits(mask: u32, bits: u32) -> bool {
    mask & bits == bits
}

/// The footer of sealed file `info`, read with `pread` at the file's end,
/// when it agrees with the header and the trimming rule.
pub(crate) fn read_footer(catalog: &Catalog, info: &FileInfo) -> Option<Footer> {
    let file = std::fs::File::open(catalog.data_path(info.id)).ok()?;
    let len = file.metadata().ok()?.len();
    let mut b = vec![0u8; FOOTER_LEN];
    file.read_exact_at(&mut b, len.checked_sub(FOOTER_LEN as u64)?)
        .ok()?;
    let f = Footer::decode(&b).ok()?;
    let h = info.header;
    (f.file_number == h.file_number
        && f.first_seq == h.first_seq
        && crate::format::footer::trimmed_len(f.frames_end, h.file_size) == len)
        .then_some(f)
}
