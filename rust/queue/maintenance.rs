//! Retention and key compaction run on demand.

use crate::compact::{self, CompactOptions, CompactReport};
use crate::error::Result;
use crate::retention::{self, RetentionPolicy, RetentionReport};

use super::Queue;

impl Queue {
    /// Applies the queue's retention policy now (it also runs at every
    /// roll). A queue opened without a policy keeps everything.
    pub fn apply_retention(&self) -> Result<RetentionReport> {
        match self.inner().config.retention {
            Some(policy) => self.apply_retention_with(&policy),
            None => Ok(RetentionReport {
                first_seq: self.first_seq(),
                ..RetentionReport::default()
            }),
        }
    }

    /// Key compaction (Kafka's compacted topics): rewrites the sealed data
    /// files keeping, for every key, only its latest message in the queue,
    /// and dropping a tombstone that is its key's latest message once it is
    /// `opts.grace_us` old. Messages without a key are kept. A dropped
    /// message becomes a hole: its sequence stays in the queue's range,
    /// tailers step over it, [`Queue::get`] of it is [`Error::Compacted`].
    /// The file being written is never touched; the pass holds the
    /// retention lock (it waits for a retention pass, and retention for
    /// it). Allowed on read-only handles and while a writer appends.
    /// `progress` gets `(files done, files to examine)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let queue = litemq::QueueBuilder::new(dir.path()).file_size(1 << 20).open()?;
    /// let app = queue.appender()?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v1") })?;
    /// app.append_record(&litemq::Record { key: Some(b"k"), ..litemq::Record::new(b"v2") })?;
    /// app.roll()?; // only sealed files are compacted
    /// let report = queue.compact(&litemq::CompactOptions::default(), &mut |_, _| {})?;
    /// assert_eq!(report.records_dropped, 1);
    /// assert!(matches!(queue.get(0), Err(litemq::Error::Compacted { seq: 0 })));
    /// assert_eq!(queue.get_latest(b"k")?.unwrap().payload, b"v2");
    /// # Ok::<(), litemq::Error>(())
    /// ```
    pub fn compact(
        &self,
        opts: &CompactOptions,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<CompactReport> {
        self.check_open()?;
        self.wait_visible()?;
        let now = self.inner().config.clock.now_micros();
        let defs = self.indexes();
        let report = compact::run(&self.inner().catalog, opts, &defs, now, progress)?;
        if report.files_rewritten > 0 {
            // The cached `get` reader may map a file as it was before.
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }

    /// Deletes the oldest data files whose messages all lie below `before`
    /// (`litemq archive --delete-local`, after a verified copy): under the
    /// retention lock like a retention pass, never the last file, never a
    /// file a named consumer has not consumed. Allowed on read-only queues.
    pub fn delete_files_before(&self, before: u64) -> Result<RetentionReport> {
        self.check_open()?;
        let base = self.path();
        let min_consumer = || crate::consumers::min_position(base);
        let report = retention::run_before(&self.inner().catalog, before, &min_consumer)?;
        if !report.deleted_files.is_empty() {
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }

    /// Applies `policy` once (for tools such as `litemq retain`). Allowed on
    /// read-only queues: deleting old sealed files never touches what the
    /// writer writes.
    pub fn apply_retention_with(&self, policy: &RetentionPolicy) -> Result<RetentionReport> {
        self.check_open()?;
        let now = self.inner().config.clock.now_micros();
        let base = self.path();
        let min_consumer = || crate::consumers::min_position(base);
        let report = retention::run(&self.inner().catalog, policy, now, &min_consumer)?;
        if !report.deleted_files.is_empty() {
            // The cached `get` reader may map a deleted file: let it go.
            *self
                .inner()
                .getter
                .lock()
                .unwrap_or_else(|e| e.into_inner()) = None;
        }
        Ok(report)
    }
}
