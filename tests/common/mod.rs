//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use litemq::{ManualClock, Queue, QueueBuilder, Start};

/// A small-file builder so tests roll often.
pub fn small(path: &Path) -> QueueBuilder {
    QueueBuilder::new(path)
        .file_size(64 * 1024)
        .index_interval(4)
}

pub fn clock_at(micros: u64) -> Arc<ManualClock> {
    Arc::new(ManualClock::new(micros))
}

/// Every payload from `start`, as owned vectors.
pub fn read_all(q: &Queue, start: Start) -> Vec<(u64, Vec<u8>)> {
    let mut t = q.tailer(start).unwrap();
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        out.push((m.seq, m.payload.to_vec()));
    }
    out
}

/// Deterministic payload for sequence `i`, of varying length.
pub fn payload(i: u64) -> Vec<u8> {
    let len = (i * 37 % 300) as usize;
    (0..len).map(|j| (i as usize + j) as u8).collect()
}

/// Data files of a queue, oldest first.
pub fn data_files(base: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = walk(base)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "data"))
        .collect();
    v.sort_by_key(|p| {
        let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
        let (d, c) = stem.split_once('-').unwrap();
        (d.parse::<u64>().unwrap(), c.parse::<u64>().unwrap())
    });
    v
}

fn walk(p: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        let path = e.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
