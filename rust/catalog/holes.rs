//! Holes counted: how many sequences of a range key compaction dropped
//! (docs/FORMAT.md, "Holes and key compaction"), so that `len`, `Stats`,
//! consumer lag and work-queue backlogs count the messages that are there.
//!
//! Only a sealed file holds holes: the writer never writes one and
//! compaction never rewrites the queue's last file. A sealed file of format
//! 11 says how many sequences its holes stand for in its footer
//! (`hole_seqs`); one of format 8 to 10 (zeros there: "not counted") is
//! walked once, by its length words, and files of older formats have none
//! (compaction rewrites a file it compacts as the current version).
//!
//! A file's count is remembered per queue handle (its catalog), keyed by
//! the file's device, inode and change time: compaction (in any process)
//! renames a new file over the old one, so a `stat` of the file tells
//! whether the count still holds. That rename (and every other change of a
//! directory's entries) also changes the directory's change time, so one
//! `stat` per day directory spares the files' own: a file checked while its
//! directory's change time was more than [`SETTLED`] old is not checked
//! again while that change time stays the same (a later change would get a
//! later time, however coarse the file system's clock). A range that starts or ends inside a file
//! with holes is counted by walking that file's length words up to the
//! range's bound (at most one file at each end; a file without holes is
//! not walked).

use std::collections::HashMap;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::sync::Mutex;

use super::{Catalog, FileInfo};
use crate::format::data_file;
use crate::format::footer::{Footer, FOOTER_LEN, HOLE_SEQS_SINCE};
use crate::format::frame::DATA_HEADER_LEN;
use crate::format::header::DataHeader;
use crate::format::kind::RecordKind;
use crate::storage::frames::{frame_at, Check, Step};
use crate::storage::layout::FileId;
use crate::storage::mapped::Mapping;

/// First format version whose files may hold holes.
const HOLES_SINCE: u32 = 8;

/// How old a directory's change time must be, when a file in it is checked,
/// for the check to hold while that time stays the same: far more than a
/// file system clock's tick, so that any later change of the directory gets
/// a different time.
const SETTLED: std::time::Duration = std::time::Duration::from_secs(1);

/// `(st_dev, st_ino, st_ctime in ns)`: which file, as it is now.
type Identity = (u64, u64, i64);

fn identity(meta: &std::fs::Metadata) -> Identity {
    let ctime = meta.ctime().saturating_mul(1_000_000_000) + meta.ctime_nsec();
    (meta.dev(), meta.ino(), ctime)
}

/// What a handle knows of a sealed file's holes.
#[derive(Debug, Clone, Copy)]
struct Count {
    identity: Identity,
    /// The identity and change time of the file's directory when the file
    /// was last checked, if that change time was settled (see [`SETTLED`]).
    checked_under: Option<Identity>,
    /// Sequences its holes stand for (0: none, or not sealed yet).
    holes: u64,
    /// It is sealed with a valid footer (an unsealed file is looked at
    /// again: a crash may have left its seal unfinished for recovery).
    sealed: bool,
}

/// The hole counts of the sealed files a handle looked at.
#[derive(Debug, Default)]
pub(crate) struct HoleCounts(Mutex<HashMap<FileId, Count>>);

impl HoleCounts {
    /// Forgets the files not in `listed` (retention removed them).
    pub(crate) fn retain(&self, listed: &[FileId]) {
        if let Ok(mut m) = self.0.lock() {
            m.retain(|id, _| listed.contains(id));
        }
    }

    pub(crate) fn clear(&self) {
        if let Ok(mut m) = self.0.lock() {
            m.clear();
        }
    }
}

/// A directory as one call of [`Catalog::holes_between`] found it.
struct DirSeen {
    /// Its day (`FileId::day`).
    day: u32,
    /// Its identity and change time (`None`: it could not be read).
    now: Option<Identity>,
    /// That change time was settled when the directory was looked at.
    settled: bool,
}

impl DirSeen {
    fn look(day: u32, dir: std::path::PathBuf) -> DirSeen {
        let t0 = std::time::SystemTime::now();
        let now = std::fs::metadata(&dir).ok().map(|m| identity(&m));
        let settled = now.is_some_and(|(_, _, ctime)| {
            let since_epoch = t0
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as i64);
            ctime.saturating_add(SETTLED.as_nanos() as i64) < since_epoch
        });
        DirSeen { day, now, settled }
    }
}

impl Catalog {
    /// Sequences in `from..to` that are holes (key compaction dropped their
    /// messages): `to - from` minus this is the messages there, as far as
    /// the files listed now hold them. Files that are gone count none. A
    /// sealed file of format 8 to 10 whose frames cannot be walked (damage)
    /// counts the holes before the damage: the readers report the damage
    /// itself at its sequence.
    pub fn holes_between(&self, from: u64, to: u64) -> u64 {
        let files = self.snapshot();
        if from >= to || files.len() < 2 {
            return 0;
        }
        let mut total = 0;
        let mut dir: Option<DirSeen> = None;
        // The last file is never compacted: only files with a successor.
        for (f, next) in files.iter().zip(files.iter().skip(1)) {
            let (start, end) = (f.header.first_seq, next.header.first_seq);
            let (lo, hi) = (from.max(start), to.min(end));
            if lo >= hi {
                continue;
            }
            // Files are listed by day: each directory is looked at once,
            // before the files in it.
            if dir.as_ref().is_none_or(|d| d.day != f.id.day) {
                dir = Some(DirSeen::look(f.id.day, f.id.parent(self.base())));
            }
            let whole = self.file_holes(f, dir.as_ref().expect("set above"));
            total += if whole == 0 || (lo == start && hi >= end) {
                whole
            } else if hi >= end {
                // From a position to the file's end: walk up to the position.
                whole.saturating_sub(self.holes_in(f, start, lo))
            } else {
                self.holes_in(f, lo, hi)
            };
        }
        total
    }

    /// Sequences the holes of file `f` stand for (0 when it is not sealed),
    /// remembered while the file stays the same; `dir` is its directory as
    /// this call found it.
    fn file_holes(&self, f: &FileInfo, dir: &DirSeen) -> u64 {
        if f.header.version < 4 {
            return 0; // never compacted (no footer)
        }
        let under = dir.now.filter(|_| dir.settled);
        let cached = self.holes.0.lock().ok().and_then(|m| m.get(&f.id).copied());
        if let Some(c) = cached {
            if c.sealed && under.is_some() && c.checked_under == under {
                return c.holes; // nothing in its directory changed since
            }
        }
        let path = self.data_path(f.id);
        let Ok(meta) = std::fs::metadata(&path) else {
            return 0; // removed by retention meanwhile
        };
        let c = match cached {
            Some(c) if c.identity == identity(&meta) && c.sealed => c,
            _ => match count_file(&path, f) {
                Some(c) => c,
                None => return 0,
            },
        };
        if let Ok(mut m) = self.holes.0.lock() {
            m.insert(
                f.id,
                Count {
                    checked_under: under,
                    ..c
                },
            );
        }
        c.holes
    }

    /// Sequences of `lo..hi` (inside file `f`, which has holes) that are
    /// holes: its length words walked from its start up to `hi` (a
    /// compacted file has few frames: each hole is one).
    fn holes_in(&self, f: &FileInfo, lo: u64, hi: u64) -> u64 {
        let Ok(map) = Mapping::open(&self.data_path(f.id)) else {
            return 0;
        };
        let mut at = DATA_HEADER_LEN;
        let mut seq = f.header.first_seq;
        let mut holes = 0;
        while seq < hi {
            let Step::Frame(fr) = frame_at(&map, at, Check::Lengths) else {
                break;
            };
            let kind = RecordKind::of_or_plain(fr.record);
            let after = kind.seq_after(seq);
            if let RecordKind::Hole { .. } = kind {
                holes += after.min(hi).saturating_sub(seq.max(lo));
            }
            seq = after;
            at = fr.next;
        }
        holes
    }
}

/// Reads the hole count of sealed file `path` (listed as `f`): from its
/// footer (format 11), by walking it (formats 8 to 10), or none. `None`
/// when the file cannot be read (removed meanwhile).
fn count_file(path: &std::path::Path, f: &FileInfo) -> Option<Count> {
    let file = std::fs::File::open(path).ok()?;
    let meta = file.metadata().ok()?;
    let identity = identity(&meta);
    let len = meta.len();
    // The header as the file is now: compaction in another process may
    // have rewritten it as a later version since the catalog read it.
    let mut head = [0u8; 64];
    file.read_exact_at(&mut head, 0).ok()?;
    let header = DataHeader::decode(&head).ok()?;
    let mut tail = [0u8; FOOTER_LEN];
    let footer = len
        .checked_sub(FOOTER_LEN as u64)
        .and_then(|at| file.read_exact_at(&mut tail, at).ok())
        .and_then(|()| {
            Footer::read_tail(
                &tail,
                len,
                header.file_number,
                header.first_seq,
                header.file_size,
            )
            .ok()
        });
    let Some(footer) =
        footer.filter(|_| header.version >= 4 && header.first_seq == f.header.first_seq)
    else {
        return Some(Count {
            identity,
            checked_under: None,
            holes: 0,
            sealed: false,
        });
    };
    let holes = if header.version >= HOLE_SEQS_SINCE {
        footer.hole_seqs
    } else if header.version >= HOLES_SINCE {
        let map = Mapping::open(path).ok()?;
        if map.identity() != (identity.0, identity.1) {
            return None; // replaced between the open and the map: next time
        }
        // Damage stops the walk: the holes before it (the readers report
        // the damage itself at its sequence).
        data_file::hole_seqs(map.as_slice(), footer.frames_end as usize).0
    } else {
        0
    };
    Some(Count {
        identity,
        checked_under: None,
        holes,
        sealed: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CompactOptions, QueueBuilder, RollStrategy, Start};

    /// Every range, inside one file, across files, from and to a hole,
    /// counts the holes a tailer steps over.
    #[test]
    fn every_range_counts_the_holes_a_tailer_steps_over() {
        let dir = tempfile::tempdir().unwrap();
        let q = QueueBuilder::new(dir.path())
            .file_size(64 * 1024)
            .roll(RollStrategy::Count(20))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        const N: u64 = 130;
        for i in 0..N {
            let key = format!("k{}", i % 7);
            let key = (i % 5 != 0).then_some(key.as_bytes());
            app.append_record(&crate::Record {
                key,
                ..crate::Record::new(b"m")
            })
            .unwrap();
        }
        app.flush().unwrap();
        let opts = CompactOptions {
            grace_us: u64::MAX,
            ..CompactOptions::default()
        };
        assert!(q.compact(&opts, &mut |_, _| {}).unwrap().records_dropped > 50);
        let mut t = q.tailer(Start::Beginning).unwrap();
        let mut kept = Vec::new();
        while let Some(m) = t.read_next().unwrap() {
            kept.push(m.seq);
        }
        drop(t);
        let c = Catalog::load(dir.path()).unwrap();
        for from in 0..=N {
            for to in (from..=N).step_by(3) {
                let messages = kept.iter().filter(|&&s| (from..to).contains(&s)).count();
                assert_eq!(
                    c.holes_between(from, to),
                    to - from - messages as u64,
                    "{from}..{to}"
                );
            }
        }
        q.close().unwrap();
    }
}
