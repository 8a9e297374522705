//! Retention: deleting whole sealed data files from the oldest.
//!
//! A policy bounds a queue by age, bytes and file count, and can protect
//! every file a named consumer has not consumed yet. [`apply`] decides from
//! plain inputs (the file list, the policy, the time, the consumers' minimum
//! position), so the I/O thread can run it at roll time and any thread can
//! run it through `Queue::apply_retention`; [`run`] gathers those inputs
//! for a queue and serializes passes with an flock on `base/.retention.lock`.
//!
//! Order keeps the queue consistent for readers: files go oldest first and
//! only as a prefix, so the files that remain are always a contiguous run of
//! sequences ending at the writer. The data file goes before its indexes
//! (sparse `.index`, dense `.offsets`): a reader that lists the directory in
//! between does not see the data file (the catalog only lists `.data`), and
//! an index without data is cleaned up by the next pass. The last file is never deleted, whatever the policy:
//! it is the one being written (or the one the next file follows), and it
//! keeps `first_seq` known. A reader that has a deleted file mapped keeps
//! reading it (unlink of a mapped file is fine on Linux); the space returns
//! when the last mapping and descriptor go.
//!
//! Key-index files (`<queue>/index/`) go too, once every item in them points
//! before the oldest data file kept (they could only lead to deleted
//! messages): see [`crate::index::key_index::remove_files_before`], which
//! keeps the newest one. They are judged by position, not by the policy, so
//! a pass also removes those an earlier pass kept (as the newest then).

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::catalog::{Catalog, FileInfo};
use crate::error::{Error, Result};
use crate::format::position;
use crate::index::key_index;
use crate::storage::fsutil::{remove_data_file, remove_if_present};
use crate::storage::layout::{FileId, KEY_INDEX_DIR};
use crate::storage::mapped::allocated_bytes;

/// Lock file serializing retention passes (threads and processes).
pub const RETENTION_LOCK_FILE: &str = ".retention.lock";

/// What to keep. Every limit that is set must hold after a pass (except
/// that the last file always stays, and `protect_unconsumed` wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetentionPolicy {
    /// Delete a file once its newest message is older than this. A sealed
    /// file's newest message is no newer than the creation time of the file
    /// after it, which is what is compared (no scan needed).
    pub max_age: Option<Duration>,
    /// Keep at most this many bytes on disk: data, sparse-index,
    /// dense-index and key-index files, counted as the disk blocks they hold (`st_blocks`).
    pub max_bytes: Option<u64>,
    /// Keep at most this many data files (at least 1).
    pub max_files: Option<usize>,
    /// Never delete a file holding a sequence at or after the smallest
    /// committed position of the named consumers.
    pub protect_unconsumed: bool,
}

impl RetentionPolicy {
    /// True when the policy never deletes anything.
    pub fn is_unbounded(&self) -> bool {
        self.max_age.is_none() && self.max_bytes.is_none() && self.max_files.is_none()
    }

    /// Rejects limits that make no sense.
    pub fn validate(&self) -> Result<()> {
        if self.max_files == Some(0) {
            return Err(Error::InvalidConfig(
                "retention max_files must be at least 1 (the file being written always stays)"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// What a retention pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Data files deleted, oldest first (their `.index` and `.offsets`
    /// files went too).
    pub deleted_files: Vec<PathBuf>,
    /// Bytes of disk (`st_blocks`) the deleted data, sparse-index,
    /// dense-index and key-index files held.
    pub deleted_bytes: u64,
    /// Key-index files deleted, oldest first: every item in them pointed
    /// before the first data file kept.
    pub deleted_key_index_files: Vec<PathBuf>,
    /// First sequence still in the queue after the pass.
    pub first_seq: u64,
    /// Files that a limit wanted gone but a consumer has not consumed yet.
    pub protected_files: usize,
}

/// Bytes of disk allocated to a data file and its indexes.
fn file_bytes(base: &Path, id: FileId) -> u64 {
    allocated_bytes(&id.data_path(base))
        + id.index_paths(base)
            .iter()
            .map(|p| allocated_bytes(p))
            .sum::<u64>()
}

/// What each data file would free with it, by file number: its key-index files (those whose
/// last item is in it, and which retention deletes once it is gone; never the newest), and
/// the bytes no deletion frees (the newest key-index file and any that cannot be judged),
/// which count towards `max_bytes` all the same.
fn key_index_bytes(base: &Path, files: &[FileInfo]) -> (Vec<u64>, u64) {
    let mut per_file = vec![0u64; files.len()];
    let mut fixed = 0u64;
    let listed = key_index::file_sizes(&base.join(KEY_INDEX_DIR)).unwrap_or_default();
    let n = listed.len();
    let mut judged = true;
    for (k, (_, end, bytes)) in listed.into_iter().enumerate() {
        match end {
            Some(end) if judged && k + 1 < n => {
                // Freed once every data file up to the one holding `end` is deleted.
                let number = position::decode(end).0;
                let i = files
                    .partition_point(|f| f.header.file_number <= number)
                    .saturating_sub(1);
                per_file[i] += bytes;
            }
            _ => {
                judged = false; // retention stops at the first file it cannot delete
                fixed += bytes;
            }
        }
    }
    (per_file, fixed)
}

/// How many files, from the oldest, `policy` deletes; and how many more a
/// limit wanted but the consumers protect. Pure: no I/O besides `size`.
pub fn plan(
    files: &[FileInfo],
    policy: &RetentionPolicy,
    now_us: u64,
    min_consumer: Option<u64>,
    size: &mut dyn FnMut(&FileInfo) -> u64,
) -> (usize, usize) {
    let n = files.len();
    if n <= 1 || policy.is_unbounded() {
        return (0, 0);
    }
    let deletable = n - 1; // never the last file
    let mut want = 0usize;
    if let Some(max_files) = policy.max_files {
        want = want.max(n.saturating_sub(max_files.max(1)));
    }
    if let Some(age) = policy.max_age {
        let age = age.as_micros().min(u64::MAX as u128) as u64;
        // File i's newest message is older than files[i + 1].created_us.
        let expired = files
            .windows(2)
            .take_while(|w| w[1].header.created_us.saturating_add(age) <= now_us)
            .count();
        want = want.max(expired);
    }
    if let Some(max_bytes) = policy.max_bytes {
        let sizes: Vec<u64> = files.iter().map(&mut *size).collect();
        let mut total: u64 = sizes.iter().sum();
        let mut k = 0;
        while total > max_bytes && k < deletable {
            total -= sizes[k];
            k += 1;
        }
        want = want.max(k);
    }
    let want = want.min(deletable);
    let allowed = match (policy.protect_unconsumed, min_consumer) {
        // File i holds sequences below files[i + 1].first_seq only.
        (true, Some(min)) => files
            .windows(2)
            .take_while(|w| w[1].header.first_seq <= min)
            .count(),
        _ => deletable,
    };
    let delete = want.min(allowed);
    (delete, want - delete)
}

/// Deletes the files [`plan`] chooses. `files` must be the queue's data
/// files, oldest first, as the catalog lists them. Files already gone
/// (another pass) count as deleted without error.
pub fn apply(
    base: &Path,
    files: &[FileInfo],
    policy: &RetentionPolicy,
    now_us: u64,
    min_consumer: Option<u64>,
) -> Result<RetentionReport> {
    policy.validate()?;
    // Everything on disk counts: data, sparse- and dense-index files, and the key-index files, each
    // with the data file whose deletion frees it; what nothing frees rides on the last file
    // (never deleted).
    let (ki, fixed) = if policy.max_bytes.is_some() {
        key_index_bytes(base, files)
    } else {
        (vec![0; files.len()], 0)
    };
    let last = files.last().map(|f| f.id);
    let mut size = |f: &FileInfo| {
        let i = files.iter().position(|g| g.id == f.id).unwrap_or(0);
        file_bytes(base, f.id) + ki[i] + if Some(f.id) == last { fixed } else { 0 }
    };
    let (delete, protected) = plan(files, policy, now_us, min_consumer, &mut size);
    delete_prefix(base, files, delete, protected)
}

/// How many files, from the oldest, hold only sequences below `before`
/// (never the last file), and how many of those the consumers protect:
/// each must lie wholly before `min_consumer`, the smallest committed
/// position. Pure, like [`plan`].
pub fn plan_before(files: &[FileInfo], before: u64, min_consumer: Option<u64>) -> (usize, usize) {
    // File i holds sequences below files[i + 1].first_seq only.
    let below = |limit: u64| {
        files
            .windows(2)
            .take_while(|w| w[1].header.first_seq <= limit)
            .count()
    };
    let want = below(before);
    let delete = match min_consumer {
        Some(min) => want.min(below(min)),
        None => want,
    };
    (delete, want - delete)
}

/// Deletes the oldest data files whose messages are all below `before`
/// (for `litemq archive --delete-local`, once they are safely copied), as a
/// retention pass does: under the retention lock, oldest first, never the
/// last file, and never a file a named consumer has not consumed (whatever
/// the queue's policy says about consumers).
pub fn run_before(
    catalog: &Catalog,
    before: u64,
    min_consumer: MinConsumer<'_>,
) -> Result<RetentionReport> {
    let _lock = RetentionLock::acquire(catalog.base(), true)?;
    catalog.refresh()?;
    let files = catalog.snapshot();
    let (delete, protected) = plan_before(&files, before, min_consumer()?);
    let report = delete_prefix(catalog.base(), &files, delete, protected)?;
    if !report.deleted_files.is_empty() {
        catalog.refresh()?;
    }
    Ok(report)
}

/// Deletes the first `delete` of `files` (data before indexes), sweeps the
/// leftovers before the first file kept and the key-index files that only
/// point before it.
fn delete_prefix(
    base: &Path,
    files: &[FileInfo],
    delete: usize,
    protected: usize,
) -> Result<RetentionReport> {
    let mut report = RetentionReport {
        protected_files: protected,
        first_seq: files.first().map_or(0, |f| f.header.first_seq),
        ..RetentionReport::default()
    };
    for f in &files[..delete] {
        let data = f.id.data_path(base);
        let bytes = file_bytes(base, f.id);
        remove_data_file(&data)?;
        for index in f.id.index_paths(base) {
            remove_if_present(&index)?;
        }
        report.deleted_bytes += bytes;
        report.deleted_files.push(data);
    }
    if let Some(kept) = files.get(delete) {
        report.first_seq = kept.header.first_seq;
        sweep(base, kept.id)?;
        let first_kept = position::encode(kept.header.file_number, 0);
        let removed = key_index::remove_files_before(&base.join(KEY_INDEX_DIR), first_kept)?;
        for (path, len) in removed {
            report.deleted_bytes += len;
            report.deleted_key_index_files.push(path);
        }
    }
    Ok(report)
}

/// The smallest committed position of the named consumers (`None`: there
/// are none), read when a pass protects them. Given by the caller
/// (`consumers::min_position`): retention sits beside the consumers, not
/// above them.
pub type MinConsumer<'a> = &'a dyn Fn() -> Result<Option<u64>>;

/// Runs one pass over the queue at `catalog.base()`: takes the retention
/// lock, refreshes the catalog, reads the consumers' positions
/// (`min_consumer`) when the policy protects them, deletes, and refreshes
/// the catalog again so this process's `first_seq` and tailers see the
/// result.
pub fn run(
    catalog: &Catalog,
    policy: &RetentionPolicy,
    now_us: u64,
    min_consumer: MinConsumer<'_>,
) -> Result<RetentionReport> {
    let _lock = RetentionLock::acquire(catalog.base(), true)?;
    run_locked(catalog, policy, now_us, min_consumer)
}

/// As [`run`], but returns `Ok(None)` at once when another pass holds the
/// lock (that pass does the work): for the I/O thread, which must not wait.
pub fn run_if_idle(
    catalog: &Catalog,
    policy: &RetentionPolicy,
    now_us: u64,
    min_consumer: MinConsumer<'_>,
) -> Result<Option<RetentionReport>> {
    match RetentionLock::acquire(catalog.base(), false)? {
        Some(_lock) => run_locked(catalog, policy, now_us, min_consumer).map(Some),
        None => Ok(None),
    }
}

fn run_locked(
    catalog: &Catalog,
    policy: &RetentionPolicy,
    now_us: u64,
    min_consumer: MinConsumer<'_>,
) -> Result<RetentionReport> {
    policy.validate()?;
    let base = catalog.base();
    catalog.refresh()?;
    let files = catalog.snapshot();
    let min = if policy.protect_unconsumed && !policy.is_unbounded() {
        min_consumer()?
    } else {
        None
    };
    let report = apply(base, &files, policy, now_us, min)?;
    if !report.deleted_files.is_empty() {
        catalog.refresh()?;
    }
    Ok(report)
}

/// Removes index files (`.index`, `.offsets`, `.topics`, `.field-FIELD`) left without their data file (a pass interrupted
/// between the two unlinks) and day directories emptied by retention, for
/// everything older than `first_kept`. Never touches the directory of
/// `first_kept` or later ones, where the writer may be creating files.
fn sweep(base: &Path, first_kept: FileId) -> Result<()> {
    let (kept_year, kept_month) = (first_kept.day / 10_000, first_kept.day / 100);
    for year_dir in numeric_dirs(base, 4) {
        let Some(year) = number(&year_dir) else {
            continue;
        };
        if year > kept_year {
            continue;
        }
        for month_dir in numeric_dirs(&year_dir, 2) {
            let Some(month) = number(&month_dir).map(|m| year * 100 + m) else {
                continue;
            };
            if month > kept_month {
                continue;
            }
            for day_dir in numeric_dirs(&month_dir, 2) {
                let Some(day) = number(&day_dir).map(|d| month * 100 + d) else {
                    continue;
                };
                if day > first_kept.day {
                    continue;
                }
                if let Ok(entries) = std::fs::read_dir(&day_dir) {
                    for e in entries.flatten() {
                        let name = e.file_name();
                        let Some(id) = name.to_str().and_then(|n| {
                            FileId::parse_with(n, ".index")
                                .or_else(|| FileId::parse_with(n, ".offsets"))
                                .or_else(|| FileId::parse_with(n, ".topics"))
                                .or_else(|| {
                                    // `NAME.field-FIELD`, not a temp file.
                                    let (stem, _) = n.split_once(".field-")?;
                                    (!n.ends_with(".tmp"))
                                        .then(|| FileId::parse_with(stem, ""))
                                        .flatten()
                                })
                        }) else {
                            continue;
                        };
                        if id < first_kept && !id.data_path(base).exists() {
                            remove_if_present(&e.path())?;
                        }
                    }
                }
                if day < first_kept.day {
                    let _ = std::fs::remove_dir(&day_dir); // fails unless empty
                }
            }
            if month < kept_month {
                let _ = std::fs::remove_dir(&month_dir);
            }
        }
        if year < kept_year {
            let _ = std::fs::remove_dir(&year_dir);
        }
    }
    Ok(())
}

fn numeric_dirs(dir: &Path, width: usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.len() == width && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(|e| e.path())
        .collect();
    out.sort();
    out
}

fn number(dir: &Path) -> Option<u32> {
    dir.file_name()?.to_str()?.parse().ok()
}

/// An exclusive flock on `base/.retention.lock` for one pass. flock locks
/// belong to the open file description, so two threads of one process
/// exclude each other too.
pub(crate) struct RetentionLock {
    _file: File,
}

impl RetentionLock {
    /// Takes the lock, waiting for it when `wait`; `None` when busy and not
    /// waiting. Key compaction (`crate::compact`) takes it too.
    pub(crate) fn acquire(base: &Path, wait: bool) -> Result<Option<RetentionLock>> {
        let path = base.join(RETENTION_LOCK_FILE);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| Error::io("open", &path, e))?;
        if wait {
            file.lock().map_err(|e| Error::io("flock", &path, e))?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => return Ok(None),
                Err(std::fs::TryLockError::Error(e)) => return Err(Error::io("flock", &path, e)),
            }
        }
        Ok(Some(RetentionLock { _file: file }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::header::DataHeader;

    fn files(n: u64) -> Vec<FileInfo> {
        (0..n)
            .map(|i| FileInfo {
                id: FileId {
                    day: 20260101,
                    counter: i as u32 + 1,
                },
                header: DataHeader {
                    version: crate::format::FORMAT_VERSION,
                    first_seq: i * 100,
                    created_us: i * 1_000_000,
                    file_number: i + 1,
                    file_size: 1000,
                    index_interval: 4,
                    schema_version: 0,
                },
            })
            .collect()
    }

    fn plan_of(n: u64, p: RetentionPolicy, now: u64, min: Option<u64>) -> (usize, usize) {
        plan(&files(n), &p, now, min, &mut |f| f.header.file_size)
    }

    #[test]
    fn never_the_last_file() {
        let p = RetentionPolicy {
            max_files: Some(1),
            max_bytes: Some(0),
            ..Default::default()
        };
        assert_eq!(plan_of(5, p, 0, None), (4, 0));
        assert_eq!(plan_of(1, p, 0, None), (0, 0));
        assert_eq!(plan_of(0, p, 0, None), (0, 0));
    }

    #[test]
    fn limits_combine_as_the_strictest() {
        let p = RetentionPolicy {
            max_files: Some(4),
            max_bytes: Some(2500),
            ..Default::default()
        };
        assert_eq!(plan_of(6, p, 0, None), (4, 0)); // bytes: keep 2 files
                                                    // File i is expired once file i+1 was created `age` ago.
        let p = RetentionPolicy {
            max_age: Some(Duration::from_secs(2)),
            ..Default::default()
        };
        assert_eq!(plan_of(6, p, 4_000_000, None), (2, 0));
        assert_eq!(plan_of(6, p, 3_999_999, None), (1, 0));
    }

    #[test]
    fn consumers_protect_what_they_have_not_consumed() {
        let p = RetentionPolicy {
            max_files: Some(1),
            protect_unconsumed: true,
            ..Default::default()
        };
        // A consumer at 250 still needs file 2 (200..300): files 0 and 1 may go.
        assert_eq!(plan_of(6, p, 0, Some(250)), (2, 3));
        // At 300 exactly, file 2 is consumed.
        assert_eq!(plan_of(6, p, 0, Some(300)), (3, 2));
        // No consumers: nothing to protect.
        assert_eq!(plan_of(6, p, 0, None), (5, 0));
        let unprotected = RetentionPolicy {
            protect_unconsumed: false,
            ..p
        };
        assert_eq!(plan_of(6, unprotected, 0, Some(0)), (5, 0));
    }

    #[test]
    fn before_a_sequence_only_whole_files_consumed_and_never_the_last() {
        let f = files(6); // file i holds 100·i .. 100·(i+1); the last is open
        assert_eq!(plan_before(&f, 0, None), (0, 0));
        assert_eq!(plan_before(&f, 299, None), (2, 0)); // file 2 still has 299
        assert_eq!(plan_before(&f, 300, None), (3, 0));
        assert_eq!(plan_before(&f, u64::MAX, None), (5, 0));
        // A consumer at 150 has not finished file 1: only file 0 may go.
        assert_eq!(plan_before(&f, 300, Some(150)), (1, 2));
        assert_eq!(plan_before(&files(1), u64::MAX, None), (0, 0));
    }
}
