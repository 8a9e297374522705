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
