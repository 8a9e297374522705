//! Damage handling: telling the end of the data from a zeroed page,
//! stepping over a damaged frame or a hole, and holes key compaction left.

use std::time::Instant;

use super::scan::*;
use super::{Stuck, Tailer, Zero, HOLE_CHECK_EVERY, HOLE_CHECK_POLLS};
use crate::error::{Error, Result};
use crate::format::frame::{self};
use crate::storage::frames::{frame_at, Check, RecordKind, Step};
use crate::storage::layout::FileId;

impl Tailer {
    /// True when the cursor stands on a zero length word.
    pub(super) fn at_zero(&self) -> bool {
        self.cursor
            .as_ref()
            .is_some_and(|c| c.map.covers(c.offset + 4) && c.map.load_u32(c.offset) == 0)
    }

    /// Why frames must follow a zero length word at `self.seq` in file
    /// `id`, from what the tailer knows without I/O.
    pub(super) fn frames_follow(&self, id: FileId) -> Option<String> {
        if let Some(n) = self.catalog.successor(id) {
            return Some(format!(
                "the file is followed by {}, from seq {}",
                self.catalog.data_path(n.id).display(),
                n.header.first_seq
            ));
        }
        (self.seq < self.known_end).then(|| format!("seq {} was published", self.known_end - 1))
    }

    /// Tells the end of the data from a hole, for the zero length word at
    /// the cursor. Without `deep`, the check that costs a directory listing
    /// runs only when the tailer has waited at the same word for a while.
    pub(super) fn zero_kind(&mut self, deep: bool) -> Result<Zero> {
        let c = self.cursor.as_ref().expect("called with a cursor");
        let (id, offset) = (c.info.id, c.offset);
        let mut stuck = match self.stuck {
            Some(s) if s.id == id && s.offset == offset => s,
            // First time here: the cheap checks at once.
            _ => Stuck {
                id,
                offset,
                polls: 0,
                checked: Instant::now(),
            },
        };
        stuck.polls = stuck.polls.wrapping_add(1);
        self.stuck = Some(stuck);
        // A tailer polling at the tail: nothing to do most of the time.
        if !deep && stuck.polls % HOLE_CHECK_POLLS != 1 {
            return Ok(Zero::Tail);
        }
        let mut why = self.frames_follow(id);
        if why.is_none() {
            let now = Instant::now();
            if deep || now.duration_since(stuck.checked) >= HOLE_CHECK_EVERY {
                stuck.checked = now;
                self.stuck = Some(stuck);
                self.catalog.refresh()?;
                why = self.frames_follow(id);
                if why.is_none() {
                    let end = published_end(&self.catalog);
                    if end > self.seq {
                        why = Some(format!(
                            "the last file's sparse index shows messages up to seq {}",
                            end - 1
                        ));
                    }
                }
            }
        }
        let Some(why) = why else {
            return Ok(Zero::Tail);
        };
        let c = self.cursor.as_ref().expect("called with a cursor");
        // Whatever told us that frames follow may have been published after
        // the word was read: read it again before calling it damage.
        if c.map.load_u32(offset) != 0 {
            return Ok(Zero::Filled);
        }
        Ok(Zero::Hole(Error::corrupted(
            c.map.path(),
            offset as u64,
            Some(self.seq),
            format!(
                "zero length word where a frame must be ({why}): \
                 a zeroed page or a lost write; skip_damaged() steps over it"
            ),
        )))
    }

    /// Steps over damage at the current position, after a read raised
    /// [`Error::Corrupted`]: a frame whose length is intact but whose
    /// contents are damaged is skipped by its length; a hole (a zero or
    /// unusable length word where frames follow) is skipped to the next
    /// frame that checks out, numbered from the next sparse-index entry or
    /// the next file (the messages in between are lost). Returns false when
    /// there is nothing to step over (the end of the data) or no later
    /// frame can be numbered.
    pub fn skip_damaged(&mut self) -> Result<bool> {
        self.check_open()?;
        self.ensure_cursor()?;
        let Some(c) = self.cursor.as_mut() else {
            return Ok(false);
        };
        if !c.map.covers(c.offset + 4) {
            return Ok(false);
        }
        let len = c.map.load_u32(c.offset);
        match len {
            frame::END_OF_FILE => return Ok(false),
            0 => match self.zero_kind(true)? {
                Zero::Tail | Zero::Filled => return Ok(false),
                Zero::Hole(_) => {}
            },
            _ => {
                // The damage may have hit the frame's own length word (or
                // its count): where the dense index knows the frame of a
                // later message, it wins over the length word.
                if let Some((seq, at)) = c.next_by_dense(&self.catalog, self.seq) {
                    c.offset = at;
                    self.seq = seq;
                    return Ok(true);
                }
                let step = frame_at(&*c.map, c.offset, Check::Lengths);
                if let Step::Frame(f) = step.filter(|f| c.map.covers(f.next + 4)) {
                    // A tailer on a batch may stand at any of its members
                    // (a seek lands on one): the batch ends where its head
                    // says, when that holds the tailer's sequence.
                    let kind = RecordKind::of_or_plain(f.record);
                    let after = match kind.batch() {
                        Some((first, count)) if (first..first + count).contains(&self.seq) => {
                            first + count
                        }
                        _ => self.seq + kind.count(),
                    };
                    c.offset = f.next;
                    self.seq = after;
                    return Ok(true);
                }
            }
        }
        self.resync()
    }

    /// Moves past a hole at the cursor to the next frame that checks out
    /// and whose sequence is known: from the first sparse-index entry after
    /// the hole, the next file's first sequence, or `known_end`, counting
    /// frames back from there. Without any, to the next file.
    pub(super) fn resync(&mut self) -> Result<bool> {
        let c = self.cursor.as_mut().expect("called with a cursor");
        let hole = c.offset;
        let found = next_valid_frame(&c.map, hole + frame::FRAME_ALIGN);
        let after = c.entry(&self.catalog, |ix| ix.ceil_after(hole as u64));
        let id = c.info.id;
        let mut to: Option<(u64, usize)> = None;
        if let Some(mut e) = after {
            let e_at = e.offset as usize;
            e.seq = entry_frame_seq(&c.map, &e);
            to = Some((e.seq, e_at));
            if let Some(p) = found.filter(|&p| p < e_at) {
                if let Some((n, end)) = count_frames(&c.map, p, Some(e_at)) {
                    if end == e_at && e.seq >= n {
                        to = Some((e.seq - n, p));
                    }
                }
            }
        } else if let Some(p) = found {
            if let Some((n, end)) = count_frames(&c.map, p, None) {
                let sealed = c.map.load_u32(end) == frame::END_OF_FILE;
                let anchor = if sealed {
                    if self.catalog.successor(id).is_none() {
                        self.catalog.refresh()?;
                    }
                    self.catalog.successor(id).map(|n| n.header.first_seq)
                } else {
                    (self.catalog.successor(id).is_none() && self.known_end > self.seq)
                        .then_some(self.known_end)
                };
                to = anchor.filter(|&a| a >= n).map(|a| (a - n, p));
            }
        }
        match to {
            Some((seq, at)) if seq >= self.seq => {
                let c = self.cursor.as_mut().expect("called with a cursor");
                c.offset = at;
                self.seq = seq;
                Ok(true)
            }
            Some(_) => Ok(false),
            None => {
                // Nothing numbered after the hole in this file: go on with
                // the next one (the rest of this one is lost).
                if self.catalog.successor(id).is_none() {
                    self.catalog.refresh()?;
                }
                match self.catalog.successor(id) {
                    Some(n) if n.header.first_seq >= self.seq => {
                        self.seq = n.header.first_seq;
                        self.cursor = None;
                        Ok(true)
                    }
                    _ => Ok(false),
                }
            }
        }
    }

    /// The first sequence of the hole a seek to `seq` stepped over, when
    /// `seq` is a hole (key compaction dropped it); for a backward reader,
    /// which goes on before it.
    pub(crate) fn hole_start(&mut self, seq: u64) -> Option<u64> {
        if self.seq > seq {
            return Some(self.passed_hole.filter(|&s| s <= seq).unwrap_or(seq));
        }
        self.at_hole().then_some(seq)
    }

    /// The frame under the cursor is a complete hole (a sequence key
    /// compaction dropped).
    pub(crate) fn at_hole(&self) -> bool {
        let Some(c) = self.cursor.as_ref() else {
            return false;
        };
        if !c.map.covers(c.offset + 4) {
            return false;
        }
        match frame_at(&*c.map, c.offset, Check::Crc) {
            Step::Frame(f) => matches!(RecordKind::of_or_plain(f.record), RecordKind::Hole { .. }),
            _ => false,
        }
    }
}
