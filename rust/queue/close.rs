//! Closing a queue: the writer stopped and joined, a clean shutdown
//! recorded, every file let go.

use crate::error::{Error, Result};
use crate::storage::layout::METADATA_FILE;
use crate::storage::lock::WriterLock;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::metadata::write_metadata;
use super::{Queue, Writer};

impl Queue {
    /// Writes and syncs everything appended, stops the I/O thread, records
    /// a clean shutdown and releases the writer lock. Then lets go of every
    /// file: the queue's own mappings at once, and every [`Tailer`] and
    /// [`Consumer`] made from it at its next call, which reports
    /// [`Error::Closed`] (a blocked `read_next_timeout` wakes with it);
    /// drop them to unmap their files at once. Appenders report
    /// [`Error::Closed`] too. Later calls do nothing.
    ///
    /// A poisoned writer is closed all the same (lock released, files let
    /// go, no clean shutdown recorded: the next open recovers as after a
    /// crash), then its error is returned.
    pub fn close(&self) -> Result<()> {
        self.shut_down(true)
    }

    /// `close`; with `stop_tailers` false (dropping the queue), tailers
    /// made from it keep reading the files.
    pub(super) fn shut_down(&self, stop_tailers: bool) -> Result<()> {
        let Some(lazy) = &self.lazy else {
            return self.shut_down_own(stop_tailers);
        };
        // No writer starts once this handle is closing.
        let _starting = lazy.starting.lock().unwrap_or_else(|e| e.into_inner());
        let writer = match lazy.writer.get() {
            Some(w) => w.shut_down(stop_tailers),
            None => Ok(()),
        };
        let own = self.shut_down_own(stop_tailers);
        writer.and(own)
    }

    /// `shut_down` of this handle's own state (a lazy handle's writer is
    /// another `Queue`).
    fn shut_down_own(&self, stop_tailers: bool) -> Result<()> {
        if self
            .own
            .closed
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Ok(());
        }
        let result = match &self.own.writer {
            Some(w) => self.close_writer(w),
            None => Ok(()),
        };
        if stop_tailers {
            self.own.catalog.close();
        }
        if let Some(w) = &self.own.writer {
            w.shared.drop_wake();
        }
        self.own.wake.close();
        if stop_tailers {
            // Dropped, not closed: tailers made from the queue read on, and
            // their async waits with them.
            self.own.watch.close();
        }
        *self.own.getter.lock().unwrap_or_else(|e| e.into_inner()) = None;
        *self
            .inner()
            .key_reader
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        result
    }

    fn close_writer(&self, w: &Writer) -> Result<()> {
        if w.appender.forked() {
            // The lock's descriptor is shared with the parent: leave it.
            return Err(Error::Forked);
        }
        w.appender.shut();
        let handle = w.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let compactor = w.compactor.lock().unwrap_or_else(|e| e.into_inner()).take();
        let result = match handle.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Internal("the I/O thread panicked".into())),
            None => Ok(()),
        };
        // A compaction pass started at a roll ends before the files go.
        if let Some(c) = compactor {
            let _ = c.join();
        }
        // Released whatever happens below (dropped on every return).
        let lock = w.lock.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Err(e) = result {
            // The thread's files went with it; metadata keeps
            // `clean_shutdown: false`, so the next open recovers.
            drop(lock);
            return Err(Error::Poisoned { cause: Arc::new(e) });
        }
        let next_seq = if self.inner().config.multi_writer {
            // Only the last of several writers records a clean shutdown.
            if !lock.as_ref().is_some_and(WriterLock::try_exclusive) {
                return Ok(());
            }
            self.end_on_disk()
        } else {
            w.shared.written()
        };
        let mut meta = self
            .inner()
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        meta.clean_shutdown = true;
        meta.next_seq = next_seq;
        meta.key_index_upto = w.shared.indexed_upto();
        meta.key_index_last = w.shared.key_index_last();
        if !self.inner().config.multi_writer {
            // This writer added every keyed message since its open, which
            // found the index whole: what its files do not cover holds none.
            meta.key_index_clear = self.key_index_gaps().unwrap_or_default();
        }
        write_metadata(&self.inner().config.path.join(METADATA_FILE), &meta)?;
        drop(lock);
        Ok(())
    }
}
