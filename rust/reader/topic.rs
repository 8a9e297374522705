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
use super::plan::{Jump, Plan, Planned};
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

/// A [`TopicSelector`] and the plan for the file the tailer is in.
#[derive(Debug)]
pub(crate) struct TopicFilter {
    selector: TopicSelector,
    masks: Vec<u32>,
    planned: Planned,
}

impl TopicFilter {
    pub(crate) fn new(selector: TopicSelector) -> TopicFilter {
        let masks = selector.tags.iter().map(|t| tag_mask(t)).collect();
        TopicFilter {
            selector,
            masks,
            planned: Planned::default(),
        }
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
            // The active file: new frames come; read them all.
            &mut |_| Plan::Scan,
        )
    }
}

fn plan_sealed(
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
