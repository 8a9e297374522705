//! Readers and writers in separate processes.

mod common;

use std::time::Duration;

use common::*;
use litemq::{Error, QueueBuilder, Start};

const CHILD_ENV: &str = "LITEMQ_TEST_CHILD_QUEUE";
const N: u64 = 3000;

/// Runs in the child process that `tailer_in_child_process_follows_writer_across_rolls`
/// starts (it passes `--ignored`): follows the queue read-only and checks every message.
#[test]
#[ignore = "child-process entry point, run by tailer_in_child_process_follows_writer_across_rolls"]
fn child_entry() {
    let path = std::env::var(CHILD_ENV).expect("started by the parent test");
    let mut q = None;
    for _ in 0..500 {
        match QueueBuilder::new(&path).read_only(true).open() {
            Ok(opened) => {
                q = Some(opened);
                break;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    let q = q.expect("queue appears");
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..N {
        let m = t
            .read_next_timeout(Duration::from_secs(20))
            .unwrap()
            .expect("message arrives");
        assert_eq!(m.seq, i);
        assert_eq!(m.payload, payload(i), "payload of {i}");
    }
    println!("CHILD-READ-ALL");
}

#[test]
fn tailer_in_child_process_follows_writer_across_rolls() {
    let dir = tempfile::tempdir().unwrap();
    // Create the queue first so the child can open it read-only.
    let q = small(dir.path()).open().unwrap();
    let child = spawn_child(
        child_test("child_entry")
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::piped()),
    );
    let app = q.appender().unwrap();
    for i in 0..N {
        app.append(&payload(i)).unwrap();
        if i % 100 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    app.flush().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("CHILD-READ-ALL"));
    assert!(
        q.stats().rolls >= 5,
        "the child must have crossed several rolls"
    );
}

#[test]
fn writer_pid_is_reported_and_second_writer_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _q = small(dir.path()).open().unwrap();
    assert_eq!(litemq::writer_pid(dir.path()), Some(std::process::id()));
    let err = small(dir.path()).open().unwrap_err();
    assert!(matches!(err, Error::Locked { pid: Some(p), .. } if p == std::process::id()));
}

const GROWTH_ENV: &str = "LITEMQ_TEST_GROWTH_QUEUE";
const GROWTH_N: u64 = 6000;
const GROWTH_FILE_SIZE: u64 = 1 << 20;

fn growth_payload(i: u64) -> Vec<u8> {
    // 8 .. ~2 KiB: frames of every size land on chunk boundaries.
    let mut v = i.to_le_bytes().to_vec();
    v.resize(8 + ((i * 7919) % 2000) as usize, (i % 251) as u8);
    v
}

/// Runs in the child process that
/// `reader_in_child_process_follows_a_growing_file` starts: follows the
/// queue read-only, reads every message as it comes, and `get`s and
/// `seek`s back at random meanwhile (dense and sparse indexes of the file
/// being grown). A load past the end of a file would kill it (SIGBUS).
#[test]
#[ignore = "child-process entry point, run by reader_in_child_process_follows_a_growing_file"]
fn growth_child_entry() {
    let path = std::env::var(GROWTH_ENV).expect("started by the parent test");
    let q = QueueBuilder::new(&path).read_only(true).open().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut back = q.tailer(Start::Beginning).unwrap();
    for i in 0..GROWTH_N {
        let m = t
            .read_next_timeout(Duration::from_secs(20))
            .unwrap()
            .expect("message arrives");
        assert_eq!(m.seq, i);
        assert_eq!(m.payload, growth_payload(i), "payload of {i}");
        if i % 7 == 0 {
            let s = (i * 104_729) % (i + 1);
            assert_eq!(q.get(s).unwrap().payload, growth_payload(s), "get {s}");
            back.seek(s).unwrap();
            let m = back.read_next().unwrap().unwrap();
            assert_eq!((m.seq, m.payload), (s, &growth_payload(s)[..]));
        }
    }
    println!("CHILD-READ-ALL");
}

/// Format version 11: a data file and its indexes grow in chunks while
/// they are written, and a reader in another process maps them at their
/// full size but reads only what they hold. The child follows the writer
/// across many growth steps (1 MiB files grow 64 KiB, 128, 256, 512 KiB,
/// 1 MiB) and several rolls, and never crashes.
#[test]
fn reader_in_child_process_follows_a_growing_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(GROWTH_FILE_SIZE)
        .index_interval(16)
        .open()
        .unwrap();
    let child = spawn_child(
        child_test("growth_child_entry")
            .env(GROWTH_ENV, dir.path())
            .stdout(std::process::Stdio::piped()),
    );
    let app = q.appender().unwrap();
    let mut lengths = std::collections::BTreeSet::new();
    for i in 0..GROWTH_N {
        app.append(&growth_payload(i)).unwrap();
        if i % 64 == 0 {
            app.flush().unwrap();
            std::thread::sleep(Duration::from_millis(1));
            let last = data_files(dir.path()).pop().unwrap();
            lengths.insert(std::fs::metadata(last).unwrap().len());
        }
    }
    app.flush().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "child failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("CHILD-READ-ALL"));
    assert!(q.stats().rolls >= 3, "the child crossed several rolls");
    assert!(
        lengths.len() >= 4 && lengths.iter().any(|&l| l < GROWTH_FILE_SIZE / 4),
        "the active file grew in steps: {lengths:?}"
    );
}
