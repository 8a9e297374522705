//! Topic index files (`NAME.topics`, format 6): for one sealed data file,
//! the messages of each topic and queue id, so that a reader of one topic
//! reads only its messages.
//!
//! ```text
//! header    (64 bytes)
//!   0  8  magic "LMQTOPX\0"
//!   8  4  version u32 = 1
//!  12  4  group_count u32
//!  16  8  file_number of the data file
//!  24  8  first_seq of the data file
//!  32  8  end_seq of the data file (one past its last message)
//!  40  8  frames_crc of the data file (its footer's): ties the index to the data
//!  48  4  directory_len u32 (bytes of the directory that follows the header)
//!  52  4  zero
//!  56  8  CRC-64 of bytes 0..56 and of the directory
//! directory: group_count × (topic_len u8 | topic | queue_id u16 | count u64
//!                           | entries_at u64 | entries_crc u64)
//! entries:   per group, `count` × 32 bytes, in sequence order:
//!            seq u64 | offset u64 | timestamp u64 | tag_mask u32 | record_len u32
//! ```
//! Groups are ordered by (topic bytes, queue id); a topic of length 0 is the
//! group of messages that carry tags but no topic. The tag mask of a
//! message is the OR of [`tag_mask`] over its tags. The file is derived
//! data: readers use it only when every check passes, and fall back to the
//! data file otherwise.

use super::crc::crc64;
use super::{le_u16, le_u32, le_u64};

/// First eight bytes of a topic index file.
pub const TOPICS_MAGIC: [u8; 8] = *b"LMQTOPX\0";
/// Version of the topic index layout.
pub const TOPICS_VERSION: u32 = 1;
/// Bytes of the header.
pub const TOPICS_HEADER_LEN: usize = 64;
/// Bytes of one entry.
pub const TOPIC_ENTRY_LEN: usize = 32;

/// Two bits of a 32-bit mask for `tag`, from its FNV-1a 32-bit hash: bit
/// `h & 31` and bit `(h >> 5) & 31`. A message's mask is the OR over its
/// tags; a reader wanting tag `t` skips entries whose mask lacks either of
/// `t`'s bits without reading the message, and checks the tags exactly on
/// the others. Stable across versions (docs/FORMAT.md).
pub fn tag_mask(tag: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for &b in tag.as_bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    (1 << (h & 31)) | (1 << ((h >> 5) & 31))
}

/// One message of a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicEntry {
    /// Its sequence.
    pub seq: u64,
    /// Offset of its frame in the data file.
    pub offset: u64,
    /// Its timestamp.
    pub timestamp: u64,
    /// OR of [`tag_mask`] over its tags.
    pub tag_mask: u32,
    /// Bytes of its record.
    pub record_len: u32,
}

/// What the index is of: the data file it was built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicsOf {
    /// The data file's number.
    pub file_number: u64,
    /// Its first sequence.
    pub first_seq: u64,
    /// One past its last sequence.
    pub end_seq: u64,
    /// Its footer's CRC of the frame area.
    pub frames_crc: u64,
}

/// A group as the directory lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicGroup {
    /// The topic (empty: tags without a topic).
    pub topic: String,
    /// The topic's stream.
    pub queue_id: u16,
    /// Messages in the group.
    pub count: u64,
    entries_at: u64,
    entries_crc: u64,
}

/// Encodes an index of `of` holding `groups`, each `((topic, queue_id),
/// entries)`, sorted by key; entries in sequence order.
pub fn encode(of: &TopicsOf, groups: &[((String, u16), Vec<TopicEntry>)]) -> Vec<u8> {
    let mut dir_len = 0usize;
    for ((topic, _), _) in groups {
        dir_len += 1 + topic.len() + 2 + 8 + 8 + 8;
    }
    let mut out = vec![0u8; TOPICS_HEADER_LEN];
    let mut at = (TOPICS_HEADER_LEN + dir_len) as u64;
    let mut entries = Vec::new();
    for ((topic, queue_id), list) in groups {
        let start = entries.len();
        for e in list {
            entries.extend_from_slice(&e.seq.to_le_bytes());
            entries.extend_from_slice(&e.offset.to_le_bytes());
            entries.extend_from_slice(&e.timestamp.to_le_bytes());
            entries.extend_from_slice(&e.tag_mask.to_le_bytes());
            entries.extend_from_slice(&e.record_len.to_le_bytes());
        }
        out.push(topic.len() as u8);
        out.extend_from_slice(topic.as_bytes());
        out.extend_from_slice(&queue_id.to_le_bytes());
        out.extend_from_slice(&(list.len() as u64).to_le_bytes());
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&crc64(&[&entries[start..]]).to_le_bytes());
        at += (list.len() * TOPIC_ENTRY_LEN) as u64;
    }
    out[0..8].copy_from_slice(&TOPICS_MAGIC);
    out[8..12].copy_from_slice(&TOPICS_VERSION.to_le_bytes());
    out[12..16].copy_from_slice(&(groups.len() as u32).to_le_bytes());
    out[16..24].copy_from_slice(&of.file_number.to_le_bytes());
    out[24..32].copy_from_slice(&of.first_seq.to_le_bytes());
    out[32..40].copy_from_slice(&of.end_seq.to_le_bytes());
    out[40..48].copy_from_slice(&of.frames_crc.to_le_bytes());
    out[48..52].copy_from_slice(&(dir_len as u32).to_le_bytes());
    let crc = crc64(&[&out[..56], &out[TOPICS_HEADER_LEN..]]);
    out[56..64].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&entries);
    out
}

/// Decodes the header and directory from the start of an index file
/// (`b` holds at least header and directory). `None` when anything does not
/// check out, or the index is of another data file than `of`.
pub fn decode_directory(b: &[u8], of: &TopicsOf) -> Option<Vec<TopicGroup>> {
    if b.get(0..8)? != TOPICS_MAGIC || le_u32(b, 8)? != TOPICS_VERSION {
        return None;
    }
    let groups = le_u32(b, 12)? as usize;
    let dir_len = le_u32(b, 48)? as usize;
    let dir = b.get(TOPICS_HEADER_LEN..TOPICS_HEADER_LEN.checked_add(dir_len)?)?;
    if crc64(&[&b[..56], dir]) != le_u64(b, 56)? {
        return None;
    }
    let found = TopicsOf {
        file_number: le_u64(b, 16)?,
        first_seq: le_u64(b, 24)?,
        end_seq: le_u64(b, 32)?,
        frames_crc: le_u64(b, 40)?,
    };
    if found != *of {
        return None;
    }
    let mut out = Vec::with_capacity(groups.min(dir_len));
    let mut at = 0usize;
    for _ in 0..groups {
        let len = *dir.get(at)? as usize;
        let topic = std::str::from_utf8(dir.get(at + 1..at + 1 + len)?).ok()?;
        at += 1 + len;
        out.push(TopicGroup {
            topic: topic.to_string(),
            queue_id: le_u16(dir, at)?,
            count: le_u64(dir, at + 2)?,
            entries_at: le_u64(dir, at + 10)?,
            entries_crc: le_u64(dir, at + 18)?,
        });
        at += 26;
    }
    (at == dir_len).then_some(out)
}

impl TopicGroup {
    /// Where the group's entries lie in the file: `(offset, length)`.
    pub fn entries_range(&self) -> Option<(u64, usize)> {
        let len = usize::try_from(self.count)
            .ok()?
            .checked_mul(TOPIC_ENTRY_LEN)?;
        Some((self.entries_at, len))
    }

    /// Decodes the group's entries from `b` (the bytes at
    /// [`TopicGroup::entries_range`]); `None` when their CRC does not match.
    pub fn decode_entries(&self, b: &[u8]) -> Option<Vec<TopicEntry>> {
        let (_, len) = self.entries_range()?;
        if b.len() != len || crc64(&[b]) != self.entries_crc {
            return None;
        }
        b.chunks_exact(TOPIC_ENTRY_LEN)
            .map(|e| {
                Some(TopicEntry {
                    seq: le_u64(e, 0)?,
                    offset: le_u64(e, 8)?,
                    timestamp: le_u64(e, 16)?,
                    tag_mask: le_u32(e, 24)?,
                    record_len: le_u32(e, 28)?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(seq: u64) -> TopicEntry {
        TopicEntry {
            seq,
            offset: 4096 + seq * 32,
            timestamp: 7 + seq,
            tag_mask: tag_mask("paid"),
            record_len: 20,
        }
    }

    #[test]
    fn round_trip_and_damage() {
        let of = TopicsOf {
            file_number: 3,
            first_seq: 10,
            end_seq: 20,
            frames_crc: 99,
        };
        let groups = vec![
            (("".to_string(), 0), vec![entry(11)]),
            (("orders".to_string(), 0), vec![entry(10), entry(14)]),
            (("orders".to_string(), 2), vec![]),
        ];
        let b = encode(&of, &groups);
        let dir = decode_directory(&b, &of).unwrap();
        assert_eq!(dir.len(), 3);
        assert_eq!(
            (dir[1].topic.as_str(), dir[1].queue_id, dir[1].count),
            ("orders", 0, 2)
        );
        let (at, len) = dir[1].entries_range().unwrap();
        let got = dir[1]
            .decode_entries(&b[at as usize..at as usize + len])
            .unwrap();
        assert_eq!(got, vec![entry(10), entry(14)]);
        // Another data file, a flipped bit in the directory or the entries: refused.
        assert!(decode_directory(&b, &TopicsOf { end_seq: 21, ..of }).is_none());
        let mut bad = b.clone();
        bad[TOPICS_HEADER_LEN + 2] ^= 1;
        assert!(decode_directory(&bad, &of).is_none());
        let mut bad = b.clone();
        bad[at as usize] ^= 1;
        assert!(dir[1]
            .decode_entries(&bad[at as usize..at as usize + len])
            .is_none());
        assert!(decode_directory(&b[..40], &of).is_none());
    }

    #[test]
    fn tag_masks_are_fnv1a_bits() {
        // FNV-1a 32 of "a" is 0xe40c292c: bits 12 and 9 (0xe40c292c >> 5 = ..., & 31 = 9).
        assert_eq!(tag_mask("a"), (1 << 12) | (1 << 9));
        assert_ne!(tag_mask("paid"), tag_mask("eu"));
    }
}
