//! The derived-index builder: a thread that writes, for each sealed data
//! file, its topic index (`NAME.topics`, when its footer says some record
//! carries a topic) and its secondary indexes (`NAME.field-FIELD`, one per
//! declared field), so the I/O thread never spends a walk of a whole file
//! on them.
//!
//! It starts with the files already sealed (an index missing after a crash,
//! or never built because the writer closed first, is built then), then
//! takes each file the I/O thread seals. An index appears under its name
//! only complete (temp file, then rename); a reader that finds none reads
//! the data file instead, so nothing waits for the builder. Closing the
//! queue lets it finish what was handed to it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{unbounded, Sender};

use crate::catalog::{Catalog, FileInfo};
use crate::format::footer::{Footer, CONTENT_TOPICS};
use crate::index::fields::{FieldIndexDef, SharedDefs};
use crate::index::topics::{self, TopicsIndex};
use crate::storage::mapped::Mapping;

/// Builds or checks the secondary index files of a sealed file, returning
/// how many are valid afterwards: the queue's
/// `reader::typed_where::ensure_indexes` (the writer does not read rows).
pub type BuildIndexes = fn(&Arc<Catalog>, &FileInfo, &[FieldIndexDef]) -> usize;

/// The I/O thread's handle on the builder.
#[derive(Debug)]
pub struct DerivedBuilder {
    tx: Option<Sender<FileInfo>>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl DerivedBuilder {
    /// Starts the thread; it first checks every sealed file of `catalog`.
    /// `fields` are the declared secondary indexes (an index declared later
    /// is built for older files by whoever declares it, see
    /// `Queue::add_index`, and by this thread for files sealed from then on),
    /// built by `build`.
    pub fn start(
        base: PathBuf,
        catalog: Arc<Catalog>,
        fields: SharedDefs,
        build: BuildIndexes,
    ) -> DerivedBuilder {
        let (tx, rx) = unbounded::<FileInfo>();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("litemq-derived".into())
            .spawn(move || {
                let files = catalog.snapshot();
                // The last file is the active one: not sealed.
                for info in files.iter().take(files.len().saturating_sub(1)) {
                    if s.load(Ordering::Relaxed) {
                        return;
                    }
                    ensure(&base, &catalog, info, &fields, build);
                }
                for info in rx {
                    ensure(&base, &catalog, &info, &fields, build);
                }
            })
            .ok();
        DerivedBuilder {
            tx: Some(tx),
            stop,
            handle,
        }
    }

    /// Hands over a file just sealed.
    pub fn submit(&self, info: FileInfo) {
        if let Some(tx) = &self.tx {
            let _ = tx.send(info);
        }
    }

    /// Builds what was handed over, skips the start-up check of older files
    /// if it is still running, and waits for the thread.
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for DerivedBuilder {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Builds the derived indexes of sealed file `info` that are missing or
/// fail a check. Failures leave no index: readers then read the data
/// file, which reports any damage itself.
fn ensure(
    base: &Path,
    catalog: &Arc<Catalog>,
    info: &FileInfo,
    fields: &SharedDefs,
    build: BuildIndexes,
) {
    ensure_topics(base, info);
    let defs = fields.read().unwrap_or_else(|e| e.into_inner()).clone();
    let there: Vec<bool> = defs
        .iter()
        .map(|d| info.id.field_path(base, &d.name).exists())
        .collect();
    build(catalog, info, &defs);
    // An index dropped while this built it (`Queue::drop_index` forgets it
    // before deleting its files, so a file there before is the drop's to
    // delete): a file this wrote goes too.
    let now = fields.read().unwrap_or_else(|e| e.into_inner()).clone();
    for (d, _) in defs
        .iter()
        .zip(there)
        .filter(|(d, there)| !there && !now.contains(d))
    {
        let _ = std::fs::remove_file(info.id.field_path(base, &d.name));
    }
}

/// Builds the topic index of sealed file `info` when it needs one and has
/// none that checks out.
pub(crate) fn ensure_topics(base: &Path, info: &FileInfo) {
    let h = info.header;
    if h.version < 6 {
        return; // older files hold no topic fields
    }
    let path = info.id.data_path(base);
    let Ok(map) = Mapping::open(&path) else {
        return;
    };
    let file = map.as_slice();
    let Ok(footer) = Footer::read(file, h.file_number, h.first_seq, h.file_size) else {
        return; // not sealed (yet), or damaged: nothing to index from
    };
    if footer.content_flags & CONTENT_TOPICS == 0 {
        return;
    }
    let out = info.id.topics_path(base);
    if TopicsIndex::open(&out, &topics::of(&h, &footer)).is_some_and(|ix| ix.verify()) {
        return;
    }
    let Ok(bytes) = topics::build(file, &h, &footer) else {
        return; // damage: readers read the file
    };
    let tmp = out.with_extension(format!("topics.{}.tmp", std::process::id()));
    if std::fs::write(&tmp, &bytes).is_err() || std::fs::rename(&tmp, &out).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return;
    }
    if !path.exists() {
        // Retention deleted the data file meanwhile.
        let _ = std::fs::remove_file(&out);
    }
}
