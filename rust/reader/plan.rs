//! Filtered reading: a tailer that returns only some messages plans each
//! data file once (skip it, read only listed sequences, or read every
//! frame) and compares every message it returns exactly, so an index can
//! only make reading faster, never change what is returned. Topic reads
//! ([`super::topic`]) and field queries ([`super::field`]) are the two
//! filters.

use crate::catalog::{Catalog, FileInfo};

/// What to do in one data file.
#[derive(Debug)]
pub(crate) enum Plan {
    /// Nothing in it can match.
    Skip,
    /// Only these `(sequence, frame offset)` can match (sorted; an offset
    /// of `None` is found by a seek).
    Seqs(Vec<(u64, Option<u64>)>),
    /// Read every frame.
    Scan,
    /// The active file, indexed in memory up to a sequence: only these
    /// `(sequence, frame offset)` below it can match (sorted; an offset of
    /// `None` is found by a seek); from it on (its frame's offset when
    /// known), read every frame.
    SeqsThenScan(Vec<(u64, Option<u64>)>, u64, Option<u64>),
}

/// Where a filtered tailer goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Jump {
    /// The sequence to read next.
    pub(crate) seq: u64,
    /// Its frame, when an index says where: `(file_number, offset)`.
    pub(crate) frame: Option<(u64, usize)>,
    /// The offset, in the same file, of a frame a few matches further on,
    /// when the plan knows it: the tailer prefetches it.
    pub(crate) ahead: Option<usize>,
}

/// How many planned frames ahead a filtered read prefetches.
const AHEAD: usize = 4;

/// The offset of the planned frame `AHEAD` entries after entry `i` of
/// `seqs`, if it is below `upto` and its offset is known.
fn ahead(seqs: &[(u64, Option<u64>)], i: usize, upto: u64) -> Option<usize> {
    seqs.get(i + AHEAD)
        .filter(|(s, _)| *s < upto)
        .and_then(|&(_, at)| at.map(|o| o as usize))
}

/// The plan of the file a filtered tailer is in.
#[derive(Debug, Default)]
pub(crate) struct Planned {
    /// `(file_number, first_seq, end_seq, plan)` of the file planned last;
    /// `end_seq` is `u64::MAX` for the active file.
    plan: Option<(u64, u64, u64, Plan)>,
    /// Where in the plan's sequences the last jump landed: a tailer moves
    /// forward, so the next one is found from there in a step or two
    /// instead of by a binary search, whose loads miss the cache.
    hint: usize,
}

/// The first index of `seqs` (sorted) whose sequence is at least `seq`,
/// looked for from `hint` (the last answer) forward when `seq` lies there.
fn position(seqs: &[(u64, Option<u64>)], seq: u64, hint: &mut usize) -> usize {
    *hint = position_by(seqs, |&(s, _)| s, seq, *hint);
    *hint
}

/// The first index of `items` (sorted by `key`) whose key is at least
/// `seq`: looked for forward from `hint` (an earlier answer; any value is
/// correct, one at or just before the answer is fast) when the item before
/// the hint is below `seq`, else by a binary search.
pub(crate) fn position_by<T>(items: &[T], key: impl Fn(&T) -> u64, seq: u64, hint: usize) -> usize {
    let h = hint.min(items.len());
    if h > 0 && key(&items[h - 1]) >= seq {
        return items.partition_point(|x| key(x) < seq);
    }
    match items[h..].iter().take(4).position(|x| key(x) >= seq) {
        Some(k) => h + k,
        None if h + 4 >= items.len() => items.len(),
        None => h + 4 + items[h + 4..].partition_point(|x| key(x) < seq),
    }
}

impl Planned {
    /// Where a tailer standing at `seq` should read next: `Some(jump)` with
    /// `jump.seq > seq` to move forward (past messages that cannot match;
    /// it may be the first sequence of the next file), `None` to read on
    /// from `seq`. A sealed file is planned by `plan_sealed`, the active
    /// file by `plan_active`.
    pub(crate) fn jump(
        &mut self,
        catalog: &Catalog,
        seq: u64,
        plan_sealed: &mut dyn FnMut(&Catalog, &FileInfo) -> Plan,
        plan_active: &mut dyn FnMut(&FileInfo) -> Plan,
    ) -> Option<Jump> {
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
                // The active file: new frames come.
                None => (u64::MAX, plan_active(&info)),
                Some(n) => (n.header.first_seq, plan_sealed(catalog, &info)),
            };
            self.plan = Some((info.header.file_number, info.header.first_seq, end, plan));
            self.hint = 0;
        }
        let (number, _, end, plan) = self.plan.as_ref()?;
        let hint = &mut self.hint;
        let to_end = Jump {
            seq: *end,
            frame: None,
            ahead: None,
        };
        match plan {
            Plan::Scan => None,
            Plan::Skip => Some(to_end),
            Plan::SeqsThenScan(_, upto, _) if seq >= *upto => None,
            Plan::SeqsThenScan(seqs, upto, upto_at) => {
                let i = position(seqs, seq, hint);
                let (s, at) = seqs
                    .get(i)
                    .copied()
                    .filter(|(s, _)| s < upto)
                    .unwrap_or((*upto, *upto_at));
                let to = Jump {
                    seq: s,
                    frame: at.map(|o| (*number, o as usize)),
                    ahead: ahead(seqs, i, *upto),
                };
                (to.seq > seq || to.frame.is_some()).then_some(to)
            }
            Plan::Seqs(seqs) => {
                let i = position(seqs, seq, hint);
                let to = match seqs.get(i) {
                    Some(&(s, offset)) => Jump {
                        seq: s,
                        frame: offset.map(|o| (*number, o as usize)),
                        ahead: ahead(seqs, i, u64::MAX),
                    },
                    None => to_end,
                };
                (to.seq > seq || to.frame.is_some()).then_some(to)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{ahead, position, AHEAD};

    #[test]
    fn the_frame_to_prefetch_is_a_few_planned_entries_on_in_the_same_range() {
        let seqs: Vec<(u64, Option<u64>)> = (0..10)
            .map(|i| (i * 2, (i != 7).then_some(4096 + i * 100)))
            .collect();
        assert_eq!(ahead(&seqs, 0, u64::MAX), Some(4096 + AHEAD * 100));
        // An entry whose offset is not known, past the end, or at or past
        // the sequence the plan's entries stop at: nothing to prefetch.
        assert_eq!(ahead(&seqs, 7 - AHEAD, u64::MAX), None);
        assert_eq!(ahead(&seqs, 10 - AHEAD, u64::MAX), None);
        assert_eq!(ahead(&seqs, 1, (1 + AHEAD as u64) * 2), None);
        assert_eq!(
            ahead(&seqs, 1, (1 + AHEAD as u64) * 2 + 1),
            Some(4096 + (1 + AHEAD) * 100)
        );
    }

    #[test]
    fn position_from_a_hint_agrees_with_a_binary_search() {
        let seqs: Vec<(u64, Option<u64>)> = (0..50).map(|i| (i * 3 + 1, None)).collect();
        // Forward in small and large steps, backward, past the end, from
        // any hint: always the first sequence at or after the one asked.
        let mut hint = 0;
        for seq in [0, 1, 2, 4, 5, 30, 31, 90, 3, 0, 148, 149, 150, 500, 7, 7, 8] {
            let want = seqs.partition_point(|&(s, _)| s < seq);
            assert_eq!(position(&seqs, seq, &mut hint), want, "seq {seq}");
            assert_eq!(hint, want);
        }
        for h in 0..60 {
            for seq in 0..160 {
                let mut hint = h;
                let want = seqs.partition_point(|&(s, _)| s < seq);
                assert_eq!(position(&seqs, seq, &mut hint), want, "seq {seq} hint {h}");
            }
        }
        assert_eq!(position(&[], 5, &mut 3), 0);
    }
}
