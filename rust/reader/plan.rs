//! Filtered reading: a tailer that returns only some messages plans each
//! data file once (skip it, read only listed sequences, or read every
//! frame) and compares every message it returns exactly, so an index can
//! only make reading faster, never change what is returned. Topic reads
//! ([`super::topic`]) and field queries ([`super::field`]) are the two
//! filters.

use super::catalog::{Catalog, FileInfo};

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
}

/// The plan of the file a filtered tailer is in.
#[derive(Debug, Default)]
pub(crate) struct Planned {
    /// `(file_number, first_seq, end_seq, plan)` of the file planned last;
    /// `end_seq` is `u64::MAX` for the active file.
    plan: Option<(u64, u64, u64, Plan)>,
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
        }
        let (number, _, end, plan) = self.plan.as_ref()?;
        let to_end = Jump {
            seq: *end,
            frame: None,
        };
        match plan {
            Plan::Scan => None,
            Plan::Skip => Some(to_end),
            Plan::SeqsThenScan(_, upto, _) if seq >= *upto => None,
            Plan::SeqsThenScan(seqs, upto, upto_at) => {
                let i = seqs.partition_point(|&(s, _)| s < seq);
                let (s, at) = seqs
                    .get(i)
                    .copied()
                    .filter(|(s, _)| s < upto)
                    .unwrap_or((*upto, *upto_at));
                let to = Jump {
                    seq: s,
                    frame: at.map(|o| (*number, o as usize)),
                };
                (to.seq > seq || to.frame.is_some()).then_some(to)
            }
            Plan::Seqs(seqs) => {
                let i = seqs.partition_point(|&(s, _)| s < seq);
                let to = match seqs.get(i) {
                    Some(&(s, offset)) => Jump {
                        seq: s,
                        frame: offset.map(|o| (*number, o as usize)),
                    },
                    None => to_end,
                };
                (to.seq > seq || to.frame.is_some()).then_some(to)
            }
        }
    }
}
