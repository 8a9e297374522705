//! The queue: opens (and recovers) the files, owns the I/O thread, and
//! hands out appenders and tailers.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::config::Config;
use crate::error::{Error, Result};
use crate::format::frame::max_record_len;
use crate::format::metadata::Metadata;
use crate::format::FORMAT_VERSION;
use crate::reader::batch::Batch;
use crate::reader::catalog::Catalog;
use crate::reader::tailer::{OwnedMessage, Start, Tailer};
use crate::recovery::{recover, RecoveryReport};
use crate::storage::fsutil::write_atomic;
use crate::storage::layout::{LOCK_FILE, METADATA_FILE};
use crate::storage::lock::WriterLock;
use crate::writer::appender::Appender;
use crate::writer::io_thread::IoThread;
use crate::writer::shared::WriterShared;

/// Figures describing a queue, for monitoring.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub first_seq: u64,
    pub next_seq: u64,
    pub files: u64,
    /// Bytes of data files on disk (preallocated size).
    pub disk_bytes: u64,
    /// Every sequence below this is msync'd (writer only).
    pub durable_seq: u64,
    pub syncs: u64,
    pub rolls: u64,
    /// Record bytes written since open (writer only).
    pub bytes_written: u64,
    pub read_only: bool,
    /// What recovery found when the queue was opened.
    pub recovery: RecoveryReport,
}

struct Writer {
    appender: Appender,
    shared: Arc<WriterShared>,
    thread: Mutex<Option<JoinHandle<Result<()>>>>,
    /// Released at close, so the queue can be reopened while this value lives.
    lock: Mutex<Option<WriterLock>>,
}

struct Inner {
    config: Config,
    catalog: Arc<Catalog>,
    writer: Option<Writer>,
    metadata: Mutex<Metadata>,
    recovery: RecoveryReport,
    /// Reader reused by `get`.
    getter: Mutex<Option<Tailer>>,
    closed: std::sync::atomic::AtomicBool,
}

/// An open queue. `Send + Sync`; close it (or drop it) to flush and stop
/// the I/O thread.
///
/// ```no_run
/// let queue = litemq::QueueBuilder::new("/tmp/orders").open()?;
/// queue.appender()?.append(b"order 1")?;
/// assert_eq!(queue.get(0)?.payload, b"order 1");
/// queue.close()?;
/// # Ok::<(), litemq::Error>(())
/// ```
pub struct Queue {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Queue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queue")
            .field("path", &self.inner.config.path)
            .field("read_only", &self.inner.config.read_only)
            .finish()
    }
}

fn read_metadata(path: &Path) -> Result<Option<Metadata>> {
    match std::fs::read(path) {
        Ok(bytes) => {
            let m: Metadata = serde_json::from_slice(&bytes).map_err(|e| {
                Error::corrupted(path, 0, None, format!("metadata.json does not parse: {e}"))
            })?;
            if m.format_version != FORMAT_VERSION {
                return Err(Error::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found: m.format_version,
                    supported: FORMAT_VERSION,
                });
            }
            Ok(Some(m))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", path, e)),
    }
}

fn write_metadata(path: &Path, m: &Metadata) -> Result<()> {
    let bytes = serde_json::to_vec_pretty(m).expect("metadata serializes");
    write_atomic(path, &bytes)
}

impl Queue {
    pub(crate) fn open(config: Config) -> Result<Queue> {
        let base = config.path.clone();
        let meta_path = base.join(METADATA_FILE);
        if config.read_only {
            let Some(meta) = read_metadata(&meta_path)? else {
                return Err(Error::io(
                    "open queue",
                    &base,
                    std::io::Error::new(
                        std::io::ErrorKind::NotFound,
                        "no litemq queue here (metadata.json missing)",
                    ),
                ));
            };
            let catalog = Arc::new(Catalog::load(&base)?);
            return Ok(Queue::assemble(
                config,
                catalog,
                None,
                meta,
                RecoveryReport::default(),
            ));
        }

        if base.exists() && !base.is_dir() {
            return Err(Error::io(
                "open queue",
                &base,
                std::io::Error::from_raw_os_error(libc::ENOTDIR),
            ));
        }
        std::fs::create_dir_all(&base).map_err(|e| Error::io("create directory", &base, e))?;
        let lock = WriterLock::acquire(&base.join(LOCK_FILE), &base)?;
        let existing = read_metadata(&meta_path)?;
        let clean = existing.as_ref().is_some_and(|m| m.clean_shutdown);
        let mut meta = existing.unwrap_or(Metadata {
            format_version: FORMAT_VERSION,
            created_us: config.clock.now_micros(),
            file_size: config.file_size,
            index_interval: config.index_interval,
            clean_shutdown: false,
            next_seq: 0,
            writer_pid: 0,
        });
        let catalog = Arc::new(Catalog::load(&base)?);
        let (resume, report) = recover(&config, &catalog, clean)?;
        meta.clean_shutdown = false;
        meta.writer_pid = std::process::id();
        meta.file_size = config.file_size;
        meta.index_interval = config.index_interval;
        write_metadata(&meta_path, &meta)?;

        let next_seq = resume.next_seq;
        let shared = WriterShared::new(next_seq);
        let (tx, rx) = crossbeam_channel::bounded(config.channel_capacity);
        let io = IoThread::new(config.clone(), rx, shared.clone(), catalog.clone(), resume);
        let thread = std::thread::Builder::new()
            .name("litemq-io".into())
            .spawn(move || io.run())
            .map_err(|e| Error::io("spawn I/O thread", &base, e))?;
        let appender = Appender::new(
            tx,
            next_seq,
            shared.clone(),
            config.flush,
            max_record_len(config.file_size),
        );
        let writer = Writer {
            appender,
            shared,
            thread: Mutex::new(Some(thread)),
            lock: Mutex::new(Some(lock)),
        };
        Ok(Queue::assemble(config, catalog, Some(writer), meta, report))
    }

    fn assemble(
        config: Config,
        catalog: Arc<Catalog>,
        writer: Option<Writer>,
        meta: Metadata,
        recovery: RecoveryReport,
    ) -> Queue {
        Queue {
            inner: Arc::new(Inner {
                config,
                catalog,
                writer,
                metadata: Mutex::new(meta),
                recovery,
                getter: Mutex::new(None),
                closed: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// The queue's directory.
    pub fn path(&self) -> &Path {
        &self.inner.config.path
    }

    pub fn is_read_only(&self) -> bool {
        self.inner.config.read_only
    }

    /// An appender; all appenders of a queue share one sequence.
    pub fn appender(&self) -> Result<Appender> {
        self.check_open()?;
        let w = self.inner.writer.as_ref().ok_or(Error::ReadOnly)?;
        if w.appender.forked() {
            return Err(Error::Forked);
        }
        Ok(w.appender.clone())
    }

    /// A tailer positioned at `start`.
    pub fn tailer(&self, start: Start) -> Result<Tailer> {
        self.check_open()?;
        let mut t = Tailer::new(self.inner.catalog.clone(), self.inner.config.wait);
        match start {
            Start::Beginning => {}
            Start::End => t.seek_end()?,
            Start::Seq(seq) => t.seek(seq)?,
        }
        Ok(t)
    }

    /// One message by sequence, copied out.
    pub fn get(&self, seq: u64) -> Result<OwnedMessage> {
        self.check_open()?;
        let mut guard = self.inner.getter.lock().unwrap_or_else(|e| e.into_inner());
        let t = match guard.as_mut() {
            Some(t) => t,
            None => guard.insert(Tailer::new(
                self.inner.catalog.clone(),
                self.inner.config.wait,
            )),
        };
        if t.next_seq() != seq {
            t.seek(seq)?;
        }
        match t.read_next()? {
            Some(m) => Ok(m.to_owned()),
            None => Err(Error::NotFound {
                seq,
                first: self.first_seq(),
                next: self.next_seq(),
            }),
        }
    }

    /// Columns of messages `start..end` (at most `max_rows`), in Arrow layout.
    pub fn read_batch(&self, start: u64, end: u64, max_rows: usize) -> Result<Batch> {
        self.check_open()?;
        let first = self.first_seq();
        let mut t = Tailer::new(self.inner.catalog.clone(), self.inner.config.wait);
        t.seek(start.max(first))?;
        Batch::read(&mut t, end, max_rows)
    }

    /// Sequence of the oldest message kept.
    pub fn first_seq(&self) -> u64 {
        self.inner
            .catalog
            .first()
            .map_or(self.next_seq(), |f| f.header.first_seq)
    }

    /// Sequence the next message gets (one past the last published).
    pub fn next_seq(&self) -> u64 {
        match &self.inner.writer {
            Some(w) => w.shared.written(),
            None => {
                let mut t = Tailer::new(self.inner.catalog.clone(), self.inner.config.wait);
                match t.seek_end() {
                    Ok(()) => t.next_seq(),
                    Err(_) => self.inner.catalog.last().map_or(0, |f| f.header.first_seq),
                }
            }
        }
    }

    /// Messages currently kept.
    pub fn len(&self) -> u64 {
        self.next_seq() - self.first_seq()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Figures for monitoring.
    pub fn stats(&self) -> Stats {
        let files = self.inner.catalog.snapshot();
        let mut s = Stats {
            first_seq: self.first_seq(),
            next_seq: self.next_seq(),
            files: files.len() as u64,
            disk_bytes: files.iter().map(|f| f.header.file_size).sum(),
            read_only: self.inner.config.read_only,
            recovery: self.inner.recovery.clone(),
            ..Stats::default()
        };
        if let Some(w) = &self.inner.writer {
            use std::sync::atomic::Ordering::Relaxed;
            s.durable_seq = w.shared.durable();
            s.syncs = w.shared.counters.syncs.load(Relaxed);
            s.rolls = w.shared.counters.rolls.load(Relaxed);
            s.bytes_written = w.shared.counters.bytes_written.load(Relaxed);
        }
        s
    }

    /// Writes and syncs everything appended, stops the I/O thread and
    /// records a clean shutdown. Later calls do nothing; handles made from
    /// this queue report [`Error::Closed`].
    pub fn close(&self) -> Result<()> {
        if self
            .inner
            .closed
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return Ok(());
        }
        let Some(w) = &self.inner.writer else {
            return Ok(());
        };
        if w.appender.forked() {
            return Err(Error::Forked);
        }
        w.appender.shut();
        let handle = w.thread.lock().unwrap_or_else(|e| e.into_inner()).take();
        let result = match handle.map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::InvalidArgument("I/O thread panicked".into())),
            None => Ok(()),
        };
        if let Err(e) = result {
            return Err(Error::Poisoned { cause: Arc::new(e) });
        }
        let mut meta = self
            .inner
            .metadata
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        meta.clean_shutdown = true;
        meta.next_seq = w.shared.written();
        write_metadata(&self.inner.config.path.join(METADATA_FILE), &meta)?;
        drop(w.lock.lock().unwrap_or_else(|e| e.into_inner()).take());
        Ok(())
    }
}

/// Pid of the process holding the writer lock of the queue at `path`, if any.
pub fn writer_pid(path: &Path) -> Option<u32> {
    WriterLock::holder(&path.join(LOCK_FILE))
}

impl Drop for Queue {
    fn drop(&mut self) {
        // In a forked child the I/O thread does not exist: joining would hang.
        let forked = self
            .inner
            .writer
            .as_ref()
            .is_some_and(|w| w.appender.forked());
        if Arc::strong_count(&self.inner) == 1 && !forked {
            let _ = self.close();
        }
    }
}
