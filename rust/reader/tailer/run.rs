//! Read-ahead runs: consecutive frames of one file read in one tight
//! loop, handed on undecoded (`read_run_frames`) or as messages.

use super::message::{Message, RunFrame};
use super::{OnMismatch, Tailer};
use crate::error::Result;
use crate::format::frame::{self};
use crate::format::record::{self};
use crate::storage::frames::{frame_at, Check, Step};

impl Tailer {
    /// The length of the next message's record when [`Tailer::read_run`]
    /// can take it, `None` when it cannot: when the tailer does not read
    /// every message (a filter, expiry skipping), has no file open, or the
    /// frame at its cursor is not there or its record's flags byte has the
    /// compression or the extension bit. The length and the flags byte are
    /// read unchecked, only to choose the path and size a run (the run
    /// checks the frame, [`Tailer::read_next`] everything else): a reader
    /// that runs only where this says so does not pay a futile run, and
    /// its CRC, at a compressed or encrypted message, a batch (whose frame
    /// the cursor stays on for each member), a hole, a tombstone or the
    /// end of a file.
    #[inline]
    pub fn run_start(&self) -> Option<usize> {
        if self.filter.is_some() || self.skip_expired.is_some() {
            return None;
        }
        let c = self.cursor.as_ref()?;
        if !c.map.covers(c.offset + 5) {
            return None;
        }
        let len = c.map.load_u32(c.offset);
        if len == 0 || len == frame::END_OF_FILE {
            return None;
        }
        // The flags byte is published once the length word is.
        let flags = c.map.as_slice()[c.offset + 4];
        (flags & (record::FLAG_COMPRESSED | record::FLAG_EXTENSION) == 0).then_some(len as usize)
    }

    /// Moves back to message `seq`, whose frame is at `frame_at` in the
    /// file under the cursor, read by a [`Tailer::read_run`] since the
    /// tailer last moved otherwise: a reader that read a run ahead gives
    /// back the messages it did not hand out. The tailer is then where it
    /// would be had the run stopped before `seq` (a run changes only the
    /// cursor's offset and the sequence). Without a cursor (the queue was
    /// closed meanwhile) only the sequence is set; the next read seeks.
    pub fn rewind_run(&mut self, seq: u64, frame_at: usize) {
        debug_assert!(seq <= self.seq, "a run is given back, not skipped");
        if let Some(c) = self.cursor.as_mut() {
            debug_assert!(frame_at <= c.offset);
            c.offset = frame_at;
        }
        self.seq = seq;
    }

    /// Reads up to `max` consecutive messages of the file under the cursor
    /// in one tight loop, handing each to `take`; stops before
    /// a message `take` refuses (returning false), and at anything that is
    /// not a plain complete frame (the end of the published data or of the
    /// file, a damaged frame, a compressed or encrypted record, a hole, a
    /// batch): [`Tailer::read_next`] handles those (and reports damage).
    /// Returns how many messages were taken.
    ///
    /// Each frame is checked as [`Tailer::read_run_frames`] says; in a
    /// typed file (format 12) each record's payload is checked as a row of
    /// the file's schema version too.
    #[inline]
    pub fn read_run<F: FnMut(&Message<'_>) -> bool + ?Sized>(
        &mut self,
        max: usize,
        mismatch: OnMismatch,
        take: &mut F,
    ) -> Result<usize> {
        // A typed file's records are rows (format 12): one that does not
        // check against the file's layout stops the run, and `read_next`
        // reports it.
        let typed = match &self.cursor {
            Some(c) if c.info.header.schema_version != 0 => {
                super::typed_of(&mut self.typed, &self.catalog, &c.info)?
            }
            _ => None,
        };
        let layout = typed.as_ref().map(|t| &t.layout);
        self.read_run_frames(max, mismatch, &mut |f| match f.message() {
            Some(m) if layout.is_none_or(|l| l.check_row(m.payload).is_ok()) => take(&m),
            _ => false,
        })
    }

    /// The loop of [`Tailer::read_run`], one level down: hands `take` the
    /// record bytes of up to `max` consecutive complete frames of the file
    /// under the cursor, undecoded, for a reader that decodes only what it
    /// needs (`Columns` reads a record without fields from its bytes, and
    /// builds no [`Message`]). Stops before a frame `take` refuses, which
    /// it must for any record that is not plain (see [`plain_view`]), and
    /// at the end of the published data or of the file and at a damaged
    /// frame. Returns how many frames were taken.
    ///
    /// Each frame is checked by its own CRC, except in a sealed file whose
    /// whole frame area this process verified against its footer's CRC (see
    /// `catalog::sealed`, remembered per queue handle): a bulk read that
    /// wants at least a quarter of such a file's messages verifies it first
    /// and then parses its frames without per-frame CRC. When that check
    /// fails, `mismatch` says what happens: [`OnMismatch::Fail`] (a read of
    /// the file as a whole, `read_arrow`) is [`Error::Corrupted`] naming the
    /// file; [`OnMismatch::CheckFrames`] (a tailer: `read_batch`, a Python
    /// tailer's read-ahead) checks the frames one by one from there on, so
    /// the run stops before the damaged frame and the read after it reports
    /// the damage at its own sequence, as [`Tailer::read_next`] does (and
    /// [`Tailer::skip_damaged`] steps over that frame alone). Smaller runs
    /// verify the file once the frames runs have read from it and the run
    /// asked for reach a quarter of it, and go on frame by frame when that
    /// check fails, whatever `mismatch` says.
    ///
    /// `take` is a type parameter, not a `dyn`, so that the caller's
    /// closure is compiled into the loop.
    #[inline]
    pub fn read_run_frames<F: FnMut(&RunFrame<'_>) -> bool + ?Sized>(
        &mut self,
        max: usize,
        mismatch: OnMismatch,
        take: &mut F,
    ) -> Result<usize> {
        self.check_open()?;
        if self.filter.is_some() || self.skip_expired.is_some() {
            return Ok(0); // one message at a time, through the filter
        }
        let seq0 = self.seq;
        let Some(c) = self.cursor.as_mut() else {
            return Ok(0);
        };
        let footer = *c
            .footer
            .get_or_insert_with(|| crate::catalog::sealed::footer(&c.map, &c.info.header));
        let mut trusted_end = None;
        if let Some(sealed) = footer {
            let f = sealed.footer;
            let wanted = (max as u64).min(f.end_seq.saturating_sub(seq0));
            let rows = f.end_seq - f.first_seq;
            let verified = &self.catalog.verified;
            if !c.verified {
                if verified.contains(&sealed) || wanted * 4 >= rows {
                    match verified.verify(&c.map, &sealed) {
                        Ok(()) => c.verified = true,
                        Err(e) if mismatch == OnMismatch::Fail => return Err(e),
                        // Some frame of the file is damaged (or a byte no
                        // frame's CRC covers): find it frame by frame.
                        Err(_) => c.footer = Some(None),
                    }
                } else if (c.run_frames + wanted) * 4 >= rows {
                    // A tailer reading on, run after run. Its frames so far
                    // were checked one by one; a mismatch here only means
                    // some frame ahead is damaged, which the per-frame check
                    // then reports at the message where it is, as it did
                    // before: the file is treated as not sealed from here on.
                    match verified.verify(&c.map, &sealed) {
                        Ok(()) => c.verified = true,
                        Err(_) => c.footer = Some(None),
                    }
                }
            }
            if c.verified {
                trusted_end = Some(f.frames_end as usize);
            }
        }
        let map = &c.map;
        let file_number = c.info.header.file_number;
        let mut at = c.offset;
        let mut n = 0usize;
        let check = trusted_end.map_or(Check::Crc, Check::Trusted);
        while n < max {
            // Anything but a complete frame (the end of the data or of
            // the file, damage) ends the run: `read_next` handles it.
            let Step::Frame(fr) = frame_at(&**map, at, check) else {
                break;
            };
            let f = RunFrame {
                seq: seq0 + n as u64,
                record: fr.record,
                at,
                file_number,
                mapping: map,
            };
            if !take(&f) {
                break;
            }
            at = fr.next;
            n += 1;
        }
        c.offset = at;
        c.run_frames += n as u64;
        self.seq = seq0 + n as u64;
        Ok(n)
    }
}
