//! Where files live: `base/YYYY/MM/DD/YYYYMMDD-NNNN.data` and `.index`.
//!
//! The counter starts at 1 each UTC day and widens past four digits rather
//! than failing. Files sort by (day, counter) compared as numbers, which is
//! also the order of their `file_number`.

use std::path::{Path, PathBuf};

use crate::clock::utc_date;
use crate::error::{Error, Result};

pub const METADATA_FILE: &str = "metadata.json";
pub const LOCK_FILE: &str = ".lock";
pub const KEY_INDEX_DIR: &str = "index";

/// Names one data file (and its index) within a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FileId {
    /// UTC day as the number YYYYMMDD.
    pub day: u32,
    /// 1-based counter within the day.
    pub counter: u32,
}

impl FileId {
    /// The first file of the UTC day holding `micros`.
    pub fn first_of_day(micros: u64) -> FileId {
        let (y, m, d) = utc_date(micros);
        FileId {
            day: y * 10_000 + m * 100 + d,
            counter: 1,
        }
    }

    /// The file that follows `self` when a file is created at `micros`.
    pub fn successor(self, micros: u64) -> FileId {
        let next_day = FileId::first_of_day(micros);
        if next_day.day > self.day {
            next_day
        } else {
            FileId {
                day: self.day,
                counter: self.counter + 1,
            }
        }
    }

    fn dir(self, base: &Path) -> PathBuf {
        let d = self.day;
        base.join(format!("{:04}", d / 10_000))
            .join(format!("{:02}", d / 100 % 100))
            .join(format!("{:02}", d % 100))
    }

    fn stem(self) -> String {
        format!("{:08}-{:04}", self.day, self.counter)
    }

    pub fn data_path(self, base: &Path) -> PathBuf {
        self.dir(base).join(format!("{}.data", self.stem()))
    }

    pub fn index_path(self, base: &Path) -> PathBuf {
        self.dir(base).join(format!("{}.index", self.stem()))
    }

    /// The data file's dense index (format version 5): `NAME.offsets`.
    pub fn offsets_path(self, base: &Path) -> PathBuf {
        self.dir(base).join(format!("{}.offsets", self.stem()))
    }

    /// The data file's topic index (format version 6): `NAME.topics`.
    pub fn topics_path(self, base: &Path) -> PathBuf {
        self.dir(base).join(format!("{}.topics", self.stem()))
    }

    /// The data file's secondary index on header field `field`:
    /// `NAME.field-FIELD` (field names are checked to be file-name safe).
    pub fn field_path(self, base: &Path, field: &str) -> PathBuf {
        self.dir(base)
            .join(format!("{}.field-{field}", self.stem()))
    }

    /// Every index derived from the data file (sparse, dense, topics, and
    /// the secondary indexes found beside it): what goes with it when it
    /// is deleted, and what its indexes weigh.
    pub fn index_paths(self, base: &Path) -> Vec<PathBuf> {
        let mut out = vec![
            self.index_path(base),
            self.offsets_path(base),
            self.topics_path(base),
        ];
        let prefix = format!("{}.field-", self.stem());
        if let Ok(entries) = std::fs::read_dir(self.dir(base)) {
            for e in entries.flatten() {
                let name = e.file_name();
                if name
                    .to_str()
                    .is_some_and(|n| n.starts_with(&prefix) && !n.ends_with(".tmp"))
                {
                    out.push(e.path());
                }
            }
        }
        out.sort();
        out
    }

    /// Directory that holds this file, created on demand by the writer.
    pub fn parent(self, base: &Path) -> PathBuf {
        self.dir(base)
    }

    fn parse(name: &str) -> Option<FileId> {
        Self::parse_with(name, ".data")
    }

    /// The id in a file name `YYYYMMDD-NNNN{suffix}` (`.data` or `.index`).
    pub fn parse_with(name: &str, suffix: &str) -> Option<FileId> {
        let stem = name.strip_suffix(suffix)?;
        let (day, counter) = stem.split_once('-')?;
        if day.len() != 8
            || counter.len() < 4
            || !day
                .bytes()
                .chain(counter.bytes())
                .all(|b| b.is_ascii_digit())
        {
            return None;
        }
        Some(FileId {
            day: day.parse().ok()?,
            counter: counter.parse().ok()?,
        })
    }
}

fn numeric_children(dir: &Path, width: usize) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("read directory", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io("read directory", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.len() == width && name.bytes().all(|b| b.is_ascii_digit()) {
            out.push(entry.path());
        }
    }
    Ok(out)
}

/// Every data file of the queue at `base`, oldest first.
pub fn list_data_files(base: &Path) -> Result<Vec<FileId>> {
    let mut ids = Vec::new();
    for year in numeric_children(base, 4)? {
        for month in numeric_children(&year, 2)? {
            for day in numeric_children(&month, 2)? {
                let entries =
                    std::fs::read_dir(&day).map_err(|e| Error::io("read directory", &day, e))?;
                for entry in entries {
                    let entry = entry.map_err(|e| Error::io("read directory", &day, e))?;
                    if let Some(id) = entry.file_name().to_str().and_then(FileId::parse) {
                        ids.push(id);
                    }
                }
            }
        }
    }
    ids.sort();
    Ok(ids)
}

/// Leftover temporary files from a crash during file creation.
pub fn list_temp_files(base: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for year in numeric_children(base, 4)? {
        for month in numeric_children(&year, 2)? {
            for day in numeric_children(&month, 2)? {
                let entries =
                    std::fs::read_dir(&day).map_err(|e| Error::io("read directory", &day, e))?;
                for entry in entries.flatten() {
                    if entry
                        .file_name()
                        .to_str()
                        .is_some_and(|n| n.ends_with(".tmp"))
                    {
                        out.push(entry.path());
                    }
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_order() {
        let a = FileId {
            day: 20260114,
            counter: 9999,
        };
        let b = FileId {
            day: 20260114,
            counter: 10000,
        };
        assert!(a < b);
        assert_eq!(
            b.data_path(Path::new("/q")),
            Path::new("/q/2026/01/14/20260114-10000.data")
        );
        assert_eq!(FileId::parse("20260114-10000.data"), Some(b));
        assert_eq!(
            FileId::parse("20260114-0001.data"),
            Some(FileId {
                day: 20260114,
                counter: 1
            })
        );
        assert_eq!(FileId::parse("20260114-01.data"), None);
        assert_eq!(FileId::parse("2026011x-0001.data"), None);
    }

    #[test]
    fn successor_moves_to_a_new_day() {
        let a = FileId::first_of_day(0);
        assert_eq!(
            a.successor(1),
            FileId {
                day: 19700101,
                counter: 2
            }
        );
        assert_eq!(
            a.successor(86_400_000_000),
            FileId {
                day: 19700102,
                counter: 1
            }
        );
    }
}
