//! Recovery of a queue whose last data file holds fuzzed bytes after its
//! header, checked against a model: the messages a reopened queue holds are
//! exactly the frames of the longest valid prefix (frame CRC and record both
//! decode), or opening refuses with an error; it never panics, and when it
//! opens, the next append continues the sequence.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

mod work_dir;

use libfuzzer_sys::fuzz_target;
use litemq::format::frame::{self, FrameAt, DATA_HEADER_LEN};
use litemq::format::record;
use litemq::{QueueBuilder, Start};

const FILE_SIZE: u64 = 64 * 1024;

fn builder(p: &std::path::Path) -> QueueBuilder {
    QueueBuilder::new(p).file_size(FILE_SIZE).index_interval(4)
}

/// A queue with one sealed file and a last file, made once.
fn pristine() -> &'static (PathBuf, Vec<(PathBuf, Vec<u8>)>, u64) {
    static P: OnceLock<(PathBuf, Vec<(PathBuf, Vec<u8>)>, u64)> = OnceLock::new();
    P.get_or_init(|| {
        let dir = work_dir::fresh("data_file_recovery");
        let q = builder(dir.as_path())
            .roll(litemq::RollStrategy::Count(10))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        for i in 0..15u8 {
            app.append(&[i; 20]).unwrap();
        }
        q.close().unwrap();
        let mut files = Vec::new();
        fn walk(base: &std::path::Path, d: &std::path::Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            for e in std::fs::read_dir(d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(base, &p, out);
                } else if p.file_name().unwrap() != ".lock" {
                    out.push((
                        p.strip_prefix(base).unwrap().to_path_buf(),
                        std::fs::read(&p).unwrap(),
                    ));
                }
            }
        }
        walk(dir.as_path(), dir.as_path(), &mut files);
        files.sort();
        (dir, files, 10)
    })
}

/// The model: frames of the longest valid prefix starting at the header.
fn valid_prefix(file: &[u8]) -> u64 {
    let mut at = DATA_HEADER_LEN;
    let mut n = 0;
    loop {
        let Some(len) = frame::plain_len(file, at) else {
            return n;
        };
        match frame::decode(file, at, len) {
            Ok(FrameAt::Frame { record_len, next }) => {
                if record::decode(&file[at + 4..at + 4 + record_len]).is_err()
                    || next + 4 > file.len()
                {
                    return n;
                }
                n += 1;
                at = next;
            }
            _ => return n,
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (_, files, last_first) = pristine();
    let dir = tempfile::tempdir().unwrap();
    let mut last_data = None;
    for (rel, bytes) in files {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let mut bytes = bytes.clone();
        if rel.extension().is_some_and(|e| e == "data")
            && rel.to_string_lossy().ends_with("-0002.data")
        {
            let n = data.len().min(bytes.len() - DATA_HEADER_LEN);
            bytes[DATA_HEADER_LEN..DATA_HEADER_LEN + n].copy_from_slice(&data[..n]);
            bytes[DATA_HEADER_LEN + n..].fill(0);
            last_data = Some(bytes.clone());
        }
        if rel.file_name().unwrap() == "metadata.json" {
            let s = String::from_utf8(bytes)
                .unwrap()
                .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
            bytes = s.into_bytes();
        }
        std::fs::write(&p, bytes).unwrap();
    }
    let last_data = last_data.expect("the pristine queue has a second file");
    let expected = last_first + valid_prefix(&last_data);
    match builder(dir.path()).open() {
        Ok(q) => {
            let next = q.next_seq();
            assert_eq!(next, expected, "recovery keeps exactly the valid prefix");
            let mut t = q.tailer(Start::Beginning).unwrap();
            let mut n = 0;
            while let Some(m) = t.read_next().expect("a recovered queue reads back") {
                assert_eq!(m.seq, n);
                n += 1;
            }
            assert_eq!(n, next);
            assert_eq!(q.appender().unwrap().append(b"after").unwrap(), next);
            q.close().unwrap();
        }
        Err(litemq::Error::Corrupted { .. }) => {
            // Refused: damage followed by a valid frame (not a torn tail).
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
});
