//! Tailer seeks: by time, position, to the end, and stepping over
//! frames by their lengths.

use std::sync::Arc;

use super::cursor::Cursor;
use super::scan::*;
use super::Tailer;
use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::error::DecodeError;
use crate::format::frame::DATA_HEADER_LEN;
use crate::format::position;
use crate::index::sparse::SparseIndex;
use crate::storage::frames::{frame_at, open_data, Check, RecordKind, Step};
use crate::storage::mapped::Mapping;

impl Tailer {
    /// Steps over published frames by their lengths alone (no CRC: the
    /// frame finally read is checked) while `more(seq, file_number, offset)` holds,
    /// crossing into later files at end-of-file markers. Returns false when
    /// it ran out of published frames first.
    pub(super) fn skip_while(
        &mut self,
        mut more: impl FnMut(u64, u64, usize) -> bool,
    ) -> Result<bool> {
        loop {
            let Some(c) = self.cursor.as_mut() else {
                return Ok(false);
            };
            if !more(self.seq, c.info.header.file_number, c.offset) {
                return Ok(true);
            }
            let f = match frame_at(&*c.map, c.offset, Check::Lengths) {
                Step::Empty => return Ok(false),
                Step::EndOfFile => {
                    if !self.next_file()? {
                        return Ok(false);
                    }
                    continue;
                }
                Step::Frame(f) if c.map.covers(f.next + 4) => f,
                Step::Damage(e @ DecodeError::Truncated) => {
                    return Err(Error::corrupted(
                        c.map.path(),
                        c.offset as u64,
                        Some(self.seq),
                        e.to_string(),
                    ));
                }
                Step::Frame(_) | Step::Damage(_) => {
                    return Err(Error::corrupted(
                        c.map.path(),
                        c.offset as u64,
                        Some(self.seq),
                        "frame length runs past the end of the file",
                    ));
                }
            };
            let next = f.next;
            let kind = RecordKind::of_or_plain(f.record);
            if let Some((first, count)) = kind.batch() {
                // A batch (format 9): its members share the frame;
                // stop on it at the first one `more` refuses.
                let end = first.saturating_add(count);
                let mut m = self.seq + 1;
                while m < end {
                    if !more(m, c.info.header.file_number, c.offset) {
                        self.seq = m;
                        return Ok(true);
                    }
                    m += 1;
                }
                c.offset = next;
                self.seq = end.max(self.seq + 1);
                continue;
            }
            let n = kind.count();
            if n > 1 {
                self.passed_hole = Some(self.seq);
            }
            c.offset = next;
            self.seq += n;
        }
    }

    /// Moves to the first message whose timestamp is at or after `micros`
    /// (or to the end when there is none yet).
    pub fn seek_time(&mut self, micros: u64) -> Result<()> {
        self.check_open()?;
        self.catalog.refresh()?;
        let files = self.catalog.snapshot();
        // The last file whose first message is before `micros` holds the
        // answer, or the answer is the first message of the file after it.
        let mut chosen: Option<(FileInfo, Arc<Mapping>, u64, usize)> = None;
        let (mut lo, mut hi) = (0usize, files.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let info = files[mid];
            let map = Arc::new(open_data(&self.catalog.data_path(info.id))?);
            let first_ts = first_timestamp(&map);
            match first_ts {
                Some(ts) if ts < micros => {
                    chosen = Some((info, map, info.header.first_seq, DATA_HEADER_LEN));
                    lo = mid + 1;
                }
                _ => hi = mid,
            }
        }
        let Some((info, map, mut at_seq, mut offset)) = chosen else {
            return self.seek_to_start();
        };
        let mut cursor = Cursor::new(info, map, Arc::default(), offset, false);
        if let Some(e) = cursor.entry(&self.catalog, |ix| ix.floor_time(micros)) {
            // From a batch's first member: the members before the entry's
            // share its timestamp.
            (at_seq, offset) = (entry_frame_seq(&cursor.map, &e), e.offset as usize);
        }
        cursor.offset = offset;
        self.cursor = Some(cursor);
        self.seq = at_seq;
        loop {
            let before = (
                self.cursor_offset(),
                self.seq,
                self.cursor.as_ref().map(|c| c.info.id),
            );
            match self.advance()? {
                None => return Ok(()),
                Some(loc) => {
                    let ts = self.message(loc)?.timestamp;
                    if ts >= micros {
                        // Step back onto this message.
                        let c = self.cursor.as_mut().expect("advance keeps a cursor");
                        if before.2 == Some(c.info.id) {
                            c.offset = before.0;
                            self.seq = before.1;
                        } else {
                            self.seek(loc.seq)?;
                        }
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Moves to the first frame at or after `position` (see
    /// [`Message::position`]), at a batch frame (format 9) to its first
    /// member; used to re-index the data after a crash and by key lookups.
    pub fn seek_position(&mut self, pos: u64) -> Result<()> {
        self.check_open()?;
        let (number, offset) = position::decode(pos);
        let known = |c: &Catalog| c.at_or_after_number(number);
        // A file another process created since the catalog last looked.
        let info = match known(&self.catalog) {
            Some(info) => Some(info),
            None => {
                self.catalog.refresh()?;
                known(&self.catalog)
            }
        };
        let Some(info) = info else {
            return self.seek_end();
        };
        let mut cursor = match self.cursor.take() {
            Some(c) if c.info.id == info.id => c,
            _ => match Cursor::open(&self.catalog, info) {
                Ok(c) => c,
                Err(e) if is_not_found(&e) => {
                    // Retention removed it: the refreshed catalog no longer lists it.
                    self.catalog.refresh()?;
                    return self.seek_position(pos);
                }
                Err(e) => return Err(e),
            },
        };
        let (mut seq, mut at) = (info.header.first_seq, DATA_HEADER_LEN);
        if info.header.file_number == number {
            if let Some(e) = cursor.entry(&self.catalog, |ix| ix.floor_offset(offset)) {
                // An entry at a batch frame may name a later member: the
                // frame's position is its first member.
                (seq, at) = (entry_frame_seq(&cursor.map, &e), e.offset as usize);
            }
        }
        cursor.offset = at;
        self.cursor = Some(cursor);
        self.seq = seq;
        let target = offset as usize;
        self.skip_while(|_, file, at| file == number && at < target)?;
        Ok(())
    }

    pub(super) fn seek_to_start(&mut self) -> Result<()> {
        self.cursor = None;
        self.seq = self.catalog.first().map_or(0, |f| f.header.first_seq);
        Ok(())
    }

    /// Moves after the last published message.
    /// Costs a directory listing and a walk over at most one sparse-index
    /// interval of frames, by their lengths.
    pub fn seek_end(&mut self) -> Result<()> {
        self.check_open()?;
        self.catalog.refresh()?;
        let Some(last) = self.catalog.last() else {
            return self.seek_to_start();
        };
        let (mut cursor, reused) = match self.cursor.take() {
            Some(c) if c.info.id == last.id => (c, true),
            _ => (Cursor::open(&self.catalog, last)?, false),
        };
        let (mut seq, mut at) = (last.header.first_seq, DATA_HEADER_LEN);
        if let Some(e) = cursor.entry(&self.catalog, SparseIndex::last) {
            (seq, at) = (e.seq, e.offset as usize);
        }
        if reused && self.seq > seq {
            (seq, at) = (self.seq, cursor.offset);
        }
        cursor.offset = at;
        self.cursor = Some(cursor);
        self.seq = seq;
        self.skip_while(|_, _, _| true)?;
        Ok(())
    }

    /// The sequence after the last published message (the queue's
    /// `next_seq` as files show it), without moving the tailer.
    pub(crate) fn published_end(&mut self) -> Result<u64> {
        self.check_open()?;
        self.catalog.refresh()?;
        Ok(published_end(&self.catalog))
    }

    /// Steps forward over every published frame by their lengths (no CRC)
    /// and returns the sequence after the last one: the tail as far as
    /// this tailer can tell, cheaply (a `TailWatch` follows the tail so).
    pub(crate) fn skip_to_end(&mut self) -> Result<u64> {
        self.check_open()?;
        if !self.ensure_cursor()? {
            return Ok(self.seq);
        }
        self.skip_while(|_, _, _| true)?;
        Ok(self.seq)
    }
}
