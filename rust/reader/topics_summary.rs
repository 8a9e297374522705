//! `Queue::topics`: every topic stream of a queue, counted from the topic
//! indexes of sealed files and a read of the files without one.

use std::collections::BTreeMap;

use super::tailer::Tailer;
use super::topic::read_footer;
use crate::catalog::Catalog;
use crate::error::Result;
use crate::format::footer::CONTENT_TOPICS;
use crate::format::record::FLAG_TOPIC;
use crate::index::topics::{self, TopicsIndex};

/// One topic stream as [`topic_summary`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// The topic (empty: messages with tags and no topic).
    pub topic: String,
    /// The stream of the topic.
    pub queue_id: u16,
    /// Messages of the stream still in the queue.
    pub count: u64,
    /// Sequence of its first message.
    pub first_seq: u64,
    /// Sequence of its last message.
    pub last_seq: u64,
    /// Timestamp of its last message.
    pub last_timestamp: u64,
    /// Topic offset of its first message (see
    /// [`crate::Message::topic_offset`]): 0, as offsets count the messages
    /// still in the queue.
    pub first_offset: u64,
    /// Topic offset of its last message: `first_offset + count - 1`.
    pub last_offset: u64,
}

/// Every topic stream of the queue `tailer` reads, from the topic indexes
/// of sealed files and a read of the files without one (the active file).
pub(crate) fn topic_summary(catalog: &Catalog, tailer: &mut Tailer) -> Result<Vec<TopicInfo>> {
    let mut all: BTreeMap<(String, u16), TopicInfo> = BTreeMap::new();
    let mut add = |topic: &str, queue_id: u16, seq: u64, ts: u64| {
        let e = all
            .entry((topic.to_string(), queue_id))
            .or_insert_with(|| TopicInfo {
                topic: topic.to_string(),
                queue_id,
                count: 0,
                first_seq: seq,
                last_seq: seq,
                last_timestamp: ts,
                first_offset: 0,
                last_offset: 0,
            });
        e.last_offset = e.first_offset + e.count;
        e.count += 1;
        e.last_seq = seq;
        e.last_timestamp = ts;
    };
    let files = catalog.snapshot();
    let first = tailer.next_seq();
    for (i, info) in files.iter().enumerate() {
        let end = files.get(i + 1).map(|n| n.header.first_seq);
        if end.is_some_and(|e| e <= first) {
            continue;
        }
        if end.is_some() {
            if info.header.version < 6 {
                continue;
            }
            let footer = read_footer(catalog, info);
            if footer.is_some_and(|f| f.content_flags & CONTENT_TOPICS == 0) {
                continue;
            }
            let path = info.id.topics_path(catalog.base());
            let index =
                footer.and_then(|f| TopicsIndex::open(&path, &topics::of(&info.header, &f)));
            if let Some(index) = index {
                let mut complete = true;
                let mut found = Vec::new();
                for g in &index.groups {
                    match index.entries(g) {
                        Some(entries) => found.push((g, entries)),
                        None => complete = false,
                    }
                }
                if complete {
                    for (g, entries) in found {
                        for e in entries.iter().filter(|e| e.seq >= first) {
                            add(&g.topic, g.queue_id, e.seq, e.timestamp);
                        }
                    }
                    continue;
                }
            }
        }
        // No usable index: read the file's messages.
        tailer.seek(info.header.first_seq.max(first))?;
        while let Some(m) = tailer.read_next()? {
            if end.is_some_and(|e| m.seq >= e) {
                break;
            }
            let rec = m.record();
            if rec.flags & FLAG_TOPIC != 0 {
                add(rec.topic.unwrap_or(""), rec.queue_id, m.seq, m.timestamp);
            }
        }
    }
    Ok(all.into_values().collect())
}
