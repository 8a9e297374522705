//! Several writer processes share one key index: each appends under the
//! queue's append lock, after catching up with what the others appended.
//!
//! A writer attached this way maps only the newest file (the one items go
//! to) and checks no sealed file: the first writer process checked them all
//! when it opened the queue, and lookups open the index as a reader does.

use std::sync::{Arc, Mutex, RwLock};

use super::file::IndexFile;
use super::{scan_dir, Active, Entry, KeyIndexConfig, KeyIndexWriter, Result, Shared};

impl KeyIndexWriter {
    /// A writer for the index in `dir` that another writer process keeps
    /// too. Call with the queue's append lock held: nobody appends meanwhile.
    pub fn attach(dir: &std::path::Path, cfg: KeyIndexConfig) -> Result<Self> {
        cfg.validate()?;
        std::fs::create_dir_all(dir).map_err(super::io_err("create directory", dir))?;
        let mut w = Self {
            shared: Arc::new(Shared {
                dir: dir.to_owned(),
                entries: RwLock::new(Vec::new()),
                standalone: false,
                dir_mtime: Mutex::new(None),
            }),
            cfg,
            active: None,
            pending_seal: Vec::new(),
            last_position: None,
            last_ms: 0,
        };
        w.attach_newest()?;
        Ok(w)
    }

    /// Brings this writer level with the files on disk after another process
    /// appended to them (the caller holds the append lock). When the newest
    /// file is still the one this writer appends to, its header is reread
    /// (O(1)); otherwise the writer moves to the newest file.
    pub fn reload(&mut self) -> Result<()> {
        let listed = scan_dir(&self.shared.dir)?;
        let same_file = match (&self.active, listed.last()) {
            (Some(a), Some((_, path, _))) => a.file.path() == path.as_path(),
            (None, None) => true,
            _ => false,
        };
        if !same_file {
            return self.attach_newest();
        }
        if let Some(a) = self.active.as_mut() {
            let h = a.file.header();
            a.count = h.count;
            a.begin_ms = h.begin_ts / 1000;
            a.sealed = a.file.is_sealed();
            if h.count > 0 {
                self.last_position = Some(h.end_pos);
                self.last_ms = h.end_ts / 1000;
            }
        }
        Ok(())
    }

    /// Maps the newest file as the active one. Files this writer rolled over
    /// stay in `pending_seal`; the file it appended to before, if another
    /// writer rolled past it, is that writer's to seal.
    fn attach_newest(&mut self) -> Result<()> {
        let listed = scan_dir(&self.shared.dir)?;
        let mut entries = Vec::new();
        self.active = None;
        if let Some((name_ms, path, ino)) = listed.last() {
            let f = Arc::new(IndexFile::open(path, true)?);
            f.check_state()?;
            let h = f.header();
            self.active = Some(Active {
                file: Arc::clone(&f),
                count: h.count,
                begin_ms: h.begin_ts / 1000,
                sealed: f.is_sealed(),
            });
            if h.count > 0 {
                self.last_position = Some(h.end_pos);
                self.last_ms = h.end_ts / 1000;
            }
            // Only the newest file is listed: its own name bounds its items.
            let entry = Entry::new(*name_ms, *name_ms, path.clone(), *ino);
            let _ = entry.file.set(f);
            entries.push(Arc::new(entry));
        }
        *self.shared.write_entries() = entries;
        Ok(())
    }
}
