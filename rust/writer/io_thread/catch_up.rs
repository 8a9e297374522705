//! Several writer processes: the I/O thread takes the append lock for each
//! bundle and first moves to where the last holder left the tail.
//!
//! The tail the last holder recorded is trusted (it was written before the
//! lock was released); from there the thread steps over any frame already
//! published (a holder that died before recording) by their lengths, and
//! across end-of-file markers into the files other processes created. After
//! taking the lock over from a dead holder it also rewrites the sparse-index
//! entries of the frames it stepped over and rebuilds the key index's tail,
//! which that holder may have left half done. Bytes a dead holder wrote past
//! the last published frame need no repair: every frame clears the length
//! word after it before it is published (`ActiveFile::write_frame`).

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::{IoThread, KeyData};
use crate::catalog::FileInfo;
use crate::error::{Error, Result};
use crate::format::error::DecodeError;
use crate::format::frame;
use crate::format::kind::RecordKind;
use crate::format::walk::{frame_at, Check, Step};
use crate::format::{le_u64, position};
use crate::index::sparse::Entry;
use crate::storage::layout::KEY_INDEX_DIR;
use crate::writer::active::{ActiveFile, Sealed};
use crate::writer::append_lock::{AppendLock, Tail};

/// `Tail::write_pos` of a file that is sealed while its successor does not
/// exist yet.
const SEALED: u64 = u64::MAX;

/// The append lock, held; released (without a new tail) if dropped.
pub(super) struct Held {
    lock: Arc<AppendLock>,
    done: bool,
}

impl Held {
    /// Records `tail` and releases the lock.
    pub(super) fn release(mut self, tail: Tail) {
        self.lock.release(Some(tail));
        self.done = true;
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if !self.done {
            self.lock.release(None);
        }
    }
}

impl IoThread {
    /// Takes the append lock and moves this writer to the queue's tail.
    pub(super) fn lock_tail(&mut self, lock: Arc<AppendLock>) -> Result<Held> {
        let got = lock.acquire()?;
        let held = Held {
            lock: lock.clone(),
            done: false,
        };
        let took_over = got.took_over_from.is_some();
        match got.tail {
            Some(t) => self.jump_to(&t)?,
            // The dead holder was recording the tail: walk from the newest
            // file if this writer has no position of its own yet.
            None if self.active.is_none() && self.last_id.is_none() => {
                self.catalog.refresh()?;
                if let Some(last) = self.catalog.last() {
                    self.enter(last)?;
                }
            }
            None => {}
        }
        self.step_over_published(took_over)?;
        if took_over {
            self.shared.counters.takeovers.fetch_add(1, Relaxed);
            self.rebuild_key_index_tail()?;
            // A generation nobody has seen: every other writer reloads.
            self.key_gen_seen = lock.key_gen_now() + 1;
        } else if let Some(t) = got.tail {
            if t.key_gen != self.key_gen_seen {
                self.key_index.reload()?;
                self.key_gen_seen = t.key_gen;
            }
        }
        Ok(held)
    }

    /// The tail to record when releasing the lock.
    pub(super) fn tail(&self) -> Tail {
        let (file_number, write_pos) = match &self.active {
            Some(a) => (a.header.file_number, a.write_pos as u64),
            None => (self.next_file_number.saturating_sub(1), SEALED),
        };
        Tail {
            file_number,
            write_pos,
            next_seq: self.next_seq,
            last_ts: self.last_ts,
            key_gen: self.key_gen_seen,
        }
    }

    /// Moves to the recorded tail when it is ahead of this writer.
    fn jump_to(&mut self, t: &Tail) -> Result<()> {
        if t.file_number == 0 || t.next_seq < self.next_seq {
            return Ok(()); // nothing written yet, or nothing new
        }
        let here = self.active.as_ref().map(|a| a.header.file_number);
        if t.write_pos == SEALED {
            self.leave_active()?;
            let info = self.file_numbered(t.file_number)?;
            self.last_id = Some(info.id);
            self.next_file_number = t.file_number + 1;
        } else {
            if here != Some(t.file_number) {
                self.leave_active()?;
                let info = self.file_numbered(t.file_number)?;
                self.enter(info)?;
            }
            let a = self.active.as_mut().expect("entered above");
            if t.write_pos as usize >= a.map.len()
                || !t.write_pos.is_multiple_of(frame::FRAME_ALIGN as u64)
            {
                return Err(Error::corrupted(
                    a.map.path(),
                    t.write_pos,
                    Some(t.next_seq),
                    "append.lock records a tail outside the file",
                ));
            }
            a.write_pos = t.write_pos as usize;
            a.next_seq = t.next_seq;
            // The tail's time is that of the file's last message when the
            // file holds any (the footer's `last_ts` comes from here).
            if t.next_seq > a.header.first_seq {
                a.last_ts = a.last_ts.max(t.last_ts);
            }
        }
        self.next_seq = t.next_seq;
        self.last_ts = self.last_ts.max(t.last_ts);
        Ok(())
    }

    /// Steps over frames published after this writer's position, into the
    /// files other writers created. With `repair`, rewrites the sparse-index
    /// entries of the frames it steps over.
    fn step_over_published(&mut self, repair: bool) -> Result<()> {
        loop {
            let Some(a) = self.active.as_mut() else {
                // The last file is sealed: has another writer created the next?
                match self.try_file_numbered(self.next_file_number)? {
                    Some(info) => {
                        self.enter(info)?;
                        continue;
                    }
                    None => return Ok(()),
                }
            };
            let file = a.map.as_slice();
            let at = a.write_pos;
            let (len, next, kind) = match frame_at(file, at, Check::Lengths) {
                Step::Empty => return Ok(()),
                Step::EndOfFile => {
                    self.leave_active()?;
                    continue;
                }
                Step::Frame(f) => (f.record.len() as u32, Some(f.next), f.kind_or_plain()),
                Step::Damage(DecodeError::BadLength(len)) => (len, None, RecordKind::Plain),
                Step::Damage(_) => {
                    return Err(Error::corrupted(
                        a.map.path(),
                        at as u64,
                        Some(a.next_seq),
                        "frame position outside the file",
                    ))
                }
            };
            let next = next.filter(|&n| n + 4 <= file.len());
            let ts = le_u64(file, at + 5).filter(|_| next.is_some());
            let (Some(ts), Some(next)) = (ts, next) else {
                return Err(Error::corrupted(
                    a.map.path(),
                    at as u64,
                    Some(a.next_seq),
                    format!("frame length {len} runs past the end of the file"),
                ));
            };
            // A batch (format 9) stands for its members, each with
            // its sparse-index slot at the batch frame.
            let n = kind.count();
            let interval = u64::from(a.header.index_interval);
            for k in 0..n {
                let i = a.next_seq + k - a.header.first_seq;
                if repair && i.is_multiple_of(interval) {
                    let entry = Entry {
                        seq: a.next_seq + k,
                        timestamp: ts,
                        offset: at as u64,
                    };
                    a.index.put(i / interval, entry)?;
                }
            }
            a.first_ts.get_or_insert(ts);
            a.last_ts = a.last_ts.max(ts);
            a.write_pos = next;
            a.next_seq += n;
            self.next_seq = a.next_seq;
            self.last_ts = self.last_ts.max(ts);
        }
    }

    /// After a dead holder: reopen the key index (which replays a file it
    /// left half written) and index the keyed messages it did not get to.
    fn rebuild_key_index_tail(&mut self) -> Result<()> {
        let data_end = match &self.active {
            Some(a) => a.end_position(),
            None => position::encode(self.next_file_number, 0),
        };
        self.catalog.refresh()?;
        let KeyData { add_from, has_keys } = &mut self.key_data;
        self.key_index = crate::index::key_index::catch_up::open_level_with_data(
            &self.config.path.join(KEY_INDEX_DIR),
            self.config.key_index,
            0,
            None,
            crate::index::key_index::catch_up::Data {
                start: self.catalog.first_position().unwrap_or(data_end),
                end: data_end,
                add_from: &mut **add_from,
                has_keys: &mut **has_keys,
                known_clear: &crate::index::coverage::Coverage::new(),
            },
        )?
        .0;
        Ok(())
    }

    /// Makes `info` the active file, positioned at its first frame.
    fn enter(&mut self, info: FileInfo) -> Result<()> {
        let a = ActiveFile::open_existing(&self.base, info.id, info.header)?;
        self.prefault.set_file(&a);
        self.next_seq = a.next_seq;
        self.last_id = Some(info.id);
        self.next_file_number = info.header.file_number + 1;
        self.active = Some(a);
        Ok(())
    }

    /// Leaves the active file to another writer's roll (it sealed it, or
    /// wrote past it): no end marker from us; our pages in it still need a
    /// sync at the next flush.
    fn leave_active(&mut self) -> Result<()> {
        if let Some(old) = self.active.take() {
            self.prefault.clear();
            if old.synced_pos != usize::MAX {
                let file = old
                    .map
                    .file()
                    .try_clone()
                    .map_err(|e| Error::io("dup", old.map.path(), e))?;
                self.keep_unsynced(Sealed {
                    path: old.map.path().to_path_buf(),
                    file,
                })?;
            }
        }
        Ok(())
    }

    fn try_file_numbered(&self, number: u64) -> Result<Option<FileInfo>> {
        let found = |c: &crate::catalog::Catalog| {
            c.at_or_after_number(number)
                .filter(|f| f.header.file_number == number)
        };
        if let Some(f) = found(&self.catalog) {
            return Ok(Some(f));
        }
        self.catalog.refresh()?;
        Ok(found(&self.catalog))
    }

    fn file_numbered(&self, number: u64) -> Result<FileInfo> {
        self.try_file_numbered(number)?.ok_or_else(|| {
            Error::corrupted(
                &self.base,
                0,
                None,
                format!("append.lock names data file number {number}, which does not exist"),
            )
        })
    }
}

impl super::Resume {
    /// The tail recovery found, to start `append.lock` from.
    pub fn tail(&self) -> Tail {
        let (file_number, write_pos) = match (&self.active, self.last_id) {
            (Some(a), _) => (a.header.file_number, a.write_pos as u64),
            (None, Some(_)) => (self.next_file_number - 1, SEALED),
            (None, None) => (0, 0),
        };
        Tail {
            file_number,
            write_pos,
            next_seq: self.next_seq,
            last_ts: self.last_timestamp,
            key_gen: 0,
        }
    }
}
