//! Topic indexes (`NAME.topics`): built from a sealed data file, read by
//! topic tailers. The bytes are in [`crate::format::topics`]; the data file
//! stays the truth (an index that is missing or fails a check is rebuilt
//! by the writer and read around by readers).

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::format::footer::Footer;
use crate::format::header::DataHeader;
use crate::format::record::FLAG_TOPIC;
use crate::format::topics::{self, tag_mask, TopicEntry, TopicGroup, TopicsOf, TOPICS_HEADER_LEN};

/// What a topic index is of, from a sealed file's header and footer.
pub fn of(header: &DataHeader, footer: &Footer) -> TopicsOf {
    TopicsOf {
        file_number: header.file_number,
        first_seq: header.first_seq,
        end_seq: footer.end_seq,
        frames_crc: footer.frames_crc,
    }
}

/// The topic index of sealed data file `file` (its bytes), whose header
/// and footer are given; an index of no group when no record has a topic
/// field (a file the writer resumed claims topics without knowing). Every frame's CRC is
/// checked; a damaged frame or record is an error (the file gets no index,
/// readers read it whole and report the damage).
pub fn build(file: &[u8], header: &DataHeader, footer: &Footer) -> Result<Vec<u8>, String> {
    // By topic, then queue id: a topic is looked up by `&str`, without
    // allocating its name for every message (the writer's derived thread
    // builds this while appends go on).
    let mut groups: BTreeMap<String, BTreeMap<u16, Vec<TopicEntry>>> = BTreeMap::new();
    super::walk_sealed(file, header, footer, &mut |seq, at, record_len, view| {
        if view.flags & FLAG_TOPIC != 0 {
            let mask = view.tags().fold(0, |m, t| m | tag_mask(t));
            let topic = view.topic.unwrap_or("");
            let streams = match groups.get_mut(topic) {
                Some(s) => s,
                None => groups.entry(topic.to_string()).or_default(),
            };
            streams.entry(view.queue_id).or_default().push(TopicEntry {
                seq,
                offset: at as u64,
                timestamp: view.timestamp,
                tag_mask: mask,
                record_len: record_len as u32,
            });
        }
    })?;
    // No group at all is still an index: of a file whose footer claims
    // topics it has none (a resumed file), so readers skip it and the next
    // writer open does not walk it again.
    let groups: Vec<((String, u16), Vec<TopicEntry>)> = groups
        .into_iter()
        .flat_map(|(topic, streams)| {
            streams
                .into_iter()
                .map(move |(q, entries)| ((topic.clone(), q), entries))
        })
        .collect();
    Ok(topics::encode(&of(header, footer), &groups))
}

/// A topic index opened for reading: its directory, and the file to read
/// groups' entries from.
#[derive(Debug)]
pub struct TopicsIndex {
    file: File,
    /// Its groups, ordered by (topic, queue id).
    pub groups: Vec<TopicGroup>,
}

impl TopicsIndex {
    /// Opens the index at `path` when it is valid and of the data file `of`.
    pub fn open(path: &Path, of: &TopicsOf) -> Option<TopicsIndex> {
        let file = File::open(path).ok()?;
        let mut head = [0u8; TOPICS_HEADER_LEN];
        file.read_exact_at(&mut head, 0).ok()?;
        let dir_len = u32::from_le_bytes(head[48..52].try_into().ok()?) as usize;
        let mut b = vec![0u8; TOPICS_HEADER_LEN + dir_len];
        file.read_exact_at(&mut b, 0).ok()?;
        let groups = topics::decode_directory(&b, of)?;
        Some(TopicsIndex { file, groups })
    }

    /// True when every group's entries pass their CRC.
    pub fn verify(&self) -> bool {
        self.groups.iter().all(|g| self.entries(g).is_some())
    }

    /// The entries of `group`; `None` when they fail their CRC.
    pub fn entries(&self, group: &TopicGroup) -> Option<Vec<TopicEntry>> {
        let (at, len) = group.entries_range()?;
        let mut b = vec![0u8; len];
        self.file.read_exact_at(&mut b, at).ok()?;
        group.decode_entries(&b)
    }
}
