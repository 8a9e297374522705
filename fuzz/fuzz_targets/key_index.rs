//! Key-index file parsing: the queue's key-index file replaced by fuzzed
//! bytes (same length, or the raw input). Opening read-only and `find`
//! never panic, and `find` only returns messages whose stored key is the
//! key asked for. Opening as the writer repairs or rebuilds the index from
//! the data: afterwards `find` returns exactly the messages with that key
//! (the model: every message whose sequence is congruent mod 5).
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

mod work_dir;

use libfuzzer_sys::fuzz_target;
use litemq::{KeyIndexConfig, QueueBuilder, Record};

fn builder(p: &std::path::Path) -> QueueBuilder {
    QueueBuilder::new(p)
        .file_size(64 * 1024)
        .key_index(KeyIndexConfig {
            slots: 16,
            items: 64,
        })
}

fn key(seq: u64) -> Vec<u8> {
    format!("k{}", seq % 5).into_bytes()
}

fn pristine() -> &'static (PathBuf, Vec<(PathBuf, Vec<u8>)>) {
    static P: OnceLock<(PathBuf, Vec<(PathBuf, Vec<u8>)>)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = work_dir::fresh("key_index");
        let q = builder(dir.as_path()).open().unwrap();
        let app = q.appender().unwrap();
        for s in 0..50u64 {
            let k = key(s);
            let p = s.to_le_bytes();
            app.append_record(&Record {
                key: Some(&k),
                ..Record::new(&p)
            })
            .unwrap();
        }
        q.close().unwrap();
        let mut files = Vec::new();
        for e in std::fs::read_dir(dir.as_path().join("index"))
            .unwrap()
            .flatten()
        {
            let p = e.path();
            files.push((p.clone(), std::fs::read(&p).unwrap()));
        }
        files.sort();
        (dir, files)
    })
}

fuzz_target!(|data: &[u8]| {
    let (dir, files) = pristine();
    if files.is_empty() {
        return;
    }
    let (target, original) = &files[(data.first().copied().unwrap_or(0) as usize) % files.len()];
    let mut bytes = original.clone();
    if data.len() > 2 && data[1] % 3 != 0 {
        // Overwrite a window, keeping the length (the trailer check passes
        // more often, so the fuzzer reaches slots, items and chains).
        let at = (u16::from_le_bytes([data[1], data.get(2).copied().unwrap_or(0)]) as usize)
            % bytes.len();
        let n = (data.len() - 3).min(bytes.len() - at);
        bytes[at..at + n].copy_from_slice(&data[3..3 + n]);
    } else {
        bytes = data.to_vec();
    }
    std::fs::write(target, &bytes).unwrap();
    if let Ok(q) = builder(dir.as_path()).read_only(true).open() {
        for k in 0..6u64 {
            let want = format!("k{k}").into_bytes();
            if let Ok(found) = q.find(&want, None, None, None) {
                for m in found {
                    assert_eq!(
                        m.key.as_deref(),
                        Some(&want[..]),
                        "find returned another key"
                    );
                }
            }
        }
    }
    if let Ok(q) = builder(dir.as_path()).open() {
        for k in 0..5u64 {
            let want = format!("k{k}").into_bytes();
            let found: Vec<u64> = q
                .find(&want, None, None, None)
                .unwrap()
                .iter()
                .map(|m| m.seq)
                .collect();
            let model: Vec<u64> = (0..50).filter(|s| s % 5 == k).collect();
            assert_eq!(
                found, model,
                "after the writer's repair, find({k}) matches the data"
            );
        }
        q.close().unwrap();
    }
    // Restore the pristine files for the next input (the writer's open may
    // have rewritten or replaced them).
    let _ = std::fs::remove_dir_all(dir.as_path().join("index"));
    std::fs::create_dir_all(dir.as_path().join("index")).unwrap();
    for (p, b) in files {
        std::fs::write(p, b).unwrap();
    }
});
