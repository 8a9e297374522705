//! Sparse-index parsing: a sealed file's `.index` replaced by fuzzed bytes
//! (with its real header kept when the first input byte is even). Opening,
//! `get`, `seek` and `seek_time` never panic; a message returned under a
//! sequence must be the one appended there (this check found engine bug 4,
//! index entries trusted without a check; entries now carry a CRC). The
//! file's dense index is removed, so lookups by sequence use the sparse one.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

mod work_dir;

use libfuzzer_sys::fuzz_target;
use litemq::{QueueBuilder, Start};

fn builder(p: &std::path::Path) -> QueueBuilder {
    QueueBuilder::new(p).file_size(64 * 1024).index_interval(2)
}

fn payload(seq: u64) -> Vec<u8> {
    let mut v = seq.to_le_bytes().to_vec();
    v.resize(8 + (seq % 13) as usize, seq as u8);
    v
}

fn pristine() -> &'static (PathBuf, PathBuf) {
    static P: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = work_dir::fresh("sparse_index");
        let q = builder(dir.as_path())
            .roll(litemq::RollStrategy::Count(40))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        for s in 0..100 {
            app.append(&payload(s)).unwrap();
        }
        q.close().unwrap();
        let day = std::fs::read_dir(dir.as_path().join("2026")).ok();
        let _ = day;
        // The first file's index.
        let mut idx = None;
        fn find(d: &std::path::Path, out: &mut Option<PathBuf>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    find(&p, out);
                } else if p.to_string_lossy().ends_with("-0001.index") {
                    *out = Some(p);
                }
            }
        }
        find(dir.as_path(), &mut idx);
        let idx = idx.expect("first index file");
        // Without its dense index (format 5), `get` and `seek` in the first
        // file go through the sparse index, which is what is fuzzed here.
        std::fs::remove_file(idx.with_extension("offsets")).unwrap();
        (dir, idx)
    })
}

fuzz_target!(|data: &[u8]| {
    let (dir, index) = pristine();
    let original = std::fs::read(index).unwrap();
    let mut bytes = original.clone();
    if data.first().is_some_and(|b| b % 2 == 0) && data.len() > 1 {
        let n = (data.len() - 1).min(bytes.len() - 256);
        bytes[256..256 + n].copy_from_slice(&data[1..1 + n]);
    } else {
        bytes = data.to_vec();
    }
    std::fs::write(index, &bytes).unwrap();
    if let Ok(q) = builder(dir.as_path()).read_only(true).open() {
        for seq in [0u64, 1, 7, 20, 33, 39, 40, 41, 99] {
            if let Ok(m) = q.get(seq) {
                assert_eq!(
                    m.payload,
                    payload(seq),
                    "get({seq}) returned another message"
                );
            }
        }
        if let Ok(mut t) = q.tailer(Start::Beginning) {
            let _ = t.seek(25);
            let _ = t.read_next().map(|m| m.map(|m| m.seq));
            let _ = t.seek_time(data.len() as u64);
            let _ = t.seek_end();
        }
    }
    std::fs::write(index, &original).unwrap();
});
