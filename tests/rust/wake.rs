//! Followers that sleep on the wake-up word (`wake.ctl`): woken across
//! processes, never woken for nothing, timing out, surviving a killed waiter,
//! a control file they cannot write and a writer that never wakes them.
//!
//! These tests check what happens, not how fast: figures come from
//! `benches/peers.py` (the latency case).

mod common;

use std::io::BufRead;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use litemq::{Queue, QueueBuilder, Start};

const CHILD_ENV: &str = "LITEMQ_TEST_WAKE_QUEUE";
const ROUNDS: u64 = 10;

/// Polls `cond` until it holds (panics after 30 s, naming `what`).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn open_read_only(path: &str) -> Queue {
    QueueBuilder::new(path).read_only(true).open().unwrap()
}

/// Child of `a_follower_in_another_process_sleeps_on_the_word_and_wakes_on_each_append`:
/// follows the queue read-only, one message per round.
#[test]
#[ignore = "child-process entry point, run by the wake tests"]
fn child_follower() {
    let path = std::env::var(CHILD_ENV).expect("started by the parent test");
    let q = open_read_only(&path);
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..ROUNDS {
        let m = t
            .read_next_timeout(Duration::from_secs(60))
            .unwrap()
            .expect("message arrives");
        assert_eq!((m.seq, m.payload), (i, &payload(i)[..]));
        // A line of its own (libtest starts the first with the test's name).
        println!("\n<GOT {i}>");
    }
    println!("CHILD-FOLLOWED wake_word={}", q.stats().wake_word);
}

#[test]
fn a_follower_in_another_process_sleeps_on_the_word_and_wakes_on_each_append() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    assert!(
        dir.path().join("wake.ctl").is_file(),
        "the writer creates it"
    );
    let mut child = spawn_child(
        child_test("child_follower")
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::piped()),
    );
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let app = q.appender().unwrap();
    for i in 0..ROUNDS {
        // The child registered as a waiter: it sleeps on the word.
        eventually("the child to wait", || q.stats().waiters == 1);
        app.append(&payload(i)).unwrap();
        let got = format!("<GOT {i}>");
        assert!(
            lines.by_ref().map_while(|l| l.ok()).any(|l| l == got),
            "the child did not get {i}"
        );
    }
    let rest: Vec<String> = lines.map_while(|l| l.ok()).collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "child failed: {rest:?}");
    assert!(
        rest.iter().any(|l| l == "CHILD-FOLLOWED wake_word=true"),
        "{rest:?}"
    );
    let s = q.stats();
    assert!(s.wake_word);
    // Each append found the child registered, but on a busy machine the
    // child's 50 ms re-check may find a message between its publication and
    // the writer's wake call: count the wakes, not one per append.
    assert!(s.woken >= 1, "the writer's wakes woke the child: {s:?}");
    assert!(s.wake_calls >= s.woken && s.wake_calls <= ROUNDS, "{s:?}");
}

#[test]
fn the_writer_makes_no_wake_call_when_nobody_waits() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let reader = open_read_only(dir.path().to_str().unwrap());
    let mut t = reader.tailer(Start::Beginning).unwrap();
    let app = q.appender().unwrap();
    for i in 0..2000 {
        app.append(&payload(i)).unwrap();
        if i % 10 == 0 {
            while t.read_next().unwrap().is_some() {}
        }
    }
    app.flush().unwrap();
    while t.read_next().unwrap().is_some() {}
    assert_eq!(t.next_seq(), 2000);
    let s = q.stats();
    assert_eq!((s.waiters, s.wake_calls, s.woken), (0, 0, 0), "{s:?}");
    assert!(s.wake_word);

    // A follower asleep on the word makes the next append wake it.
    let waiting = std::thread::spawn(move || {
        let got = t.read_next_timeout(Duration::from_secs(30)).unwrap();
        got.map(|m| m.seq)
    });
    eventually("the follower to wait", || q.stats().waiters == 1);
    app.append(b"wake up").unwrap();
    assert_eq!(waiting.join().unwrap(), Some(2000));
    assert!(q.stats().wake_calls >= 1);
}

#[test]
fn a_waiter_times_out_and_deregisters() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let reader = open_read_only(dir.path().to_str().unwrap());
    for handle in [&q, &reader] {
        let mut t = handle.tailer(Start::End).unwrap();
        let registered = Arc::new(AtomicBool::new(false));
        let watch = {
            let registered = registered.clone();
            let path = dir.path().to_str().unwrap().to_owned();
            std::thread::spawn(move || {
                let q = open_read_only(&path);
                let start = Instant::now();
                while start.elapsed() < Duration::from_millis(250) {
                    if q.stats().waiters == 1 {
                        registered.store(true, Ordering::SeqCst);
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let start = Instant::now();
        let got = t.read_next_timeout(Duration::from_millis(400)).unwrap();
        let waited = start.elapsed();
        assert!(got.is_none());
        assert!(
            waited >= Duration::from_millis(400),
            "returned early: {waited:?}"
        );
        watch.join().unwrap();
        assert!(registered.load(Ordering::SeqCst), "it slept on the word");
        assert_eq!(q.stats().waiters, 0, "deregistered on timeout");
    }
}

/// Child of `a_killed_waiter_leaves_a_count_the_writer_resets`: waits, to be killed.
#[test]
#[ignore = "child-process entry point, run by the wake tests"]
fn child_waits_forever() {
    let path = std::env::var(CHILD_ENV).expect("started by the parent test");
    let q = open_read_only(&path);
    let mut t = q.tailer(Start::End).unwrap();
    let _ = t.read_next_timeout(Duration::from_secs(600));
}

#[test]
fn a_killed_waiter_leaves_a_count_the_writer_resets() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let mut child = spawn_child(
        child_test("child_waits_forever")
            .env(CHILD_ENV, dir.path())
            .stdout(std::process::Stdio::null()),
    );
    eventually("the child to wait", || q.stats().waiters == 1);
    child.kill().unwrap(); // SIGKILL, by its pid: no guard runs
    child.wait().unwrap();
    assert_eq!(q.stats().waiters, 1, "the dead waiter's count stays");

    // Every append now wakes nobody; after a run of such wakes over a
    // second, the writer takes the count for stale and resets it.
    let app = q.appender().unwrap();
    let mut i = 0;
    eventually("the writer to reset the count", || {
        app.append(&payload(i)).unwrap();
        i += 1;
        std::thread::sleep(Duration::from_millis(10));
        q.stats().waiters == 0
    });
    let s = q.stats();
    assert_eq!(s.waiter_resets, 1, "{s:?}");
    assert_eq!(s.woken, 0, "{s:?}");
    for j in 0..100 {
        app.append(&payload(j)).unwrap();
    }
    app.flush().unwrap();
    assert_eq!(q.stats().wake_calls, s.wake_calls, "no more wake calls");
}

/// Child of `a_follower_that_cannot_write_the_control_file_polls_and_follows`.
#[test]
#[ignore = "child-process entry point, run by the wake tests"]
fn child_unprivileged_follower() {
    let path = std::env::var(CHILD_ENV).expect("started by the parent test");
    let q = open_read_only(&path);
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut wake_word = true;
    for i in 0..ROUNDS {
        let m = t
            .read_next_timeout(Duration::from_secs(60))
            .unwrap()
            .expect("message arrives");
        assert_eq!((m.seq, m.payload), (i, &payload(i)[..]));
        wake_word &= q.stats().wake_word;
    }
    println!("CHILD-FOLLOWED wake_word={wake_word}");
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").unwrap().uid() == 0
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_follower_that_cannot_write_the_control_file_polls_and_follows() {
    use std::os::unix::process::CommandExt;
    let dir = tempfile::tempdir().unwrap();
    chmod(dir.path(), 0o755); // others may read the queue...
    let q = small(dir.path()).open().unwrap();
    let ctl = dir.path().join("wake.ctl");
    let mut cmd = child_test("child_unprivileged_follower");
    cmd.env(CHILD_ENV, dir.path())
        .stdout(std::process::Stdio::piped());
    if running_as_root() {
        cmd.uid(65534).gid(65534); // ...but not write wake.ctl (0644, root's)
    } else {
        chmod(&ctl, 0o444);
    }
    let child = cmd.spawn().unwrap();
    let app = q.appender().unwrap();
    for i in 0..ROUNDS {
        app.append(&payload(i)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    assert!(
        stdout.contains("CHILD-FOLLOWED wake_word=false"),
        "{stdout}"
    );
    assert_eq!(q.stats().waiters, 0, "the child never registered");
}

#[test]
fn a_follower_the_writer_never_wakes_still_gets_every_message() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap().to_owned();
    small(dir.path()).open().unwrap().close().unwrap();
    let reader = open_read_only(&path);
    assert!(reader.stats().wake_word, "opened the first writer's file");
    // A writer that bumps another file than the follower sleeps on (as one
    // of an older litemq bumps none).
    std::fs::remove_file(dir.path().join("wake.ctl")).unwrap();
    let q = small(dir.path()).open().unwrap();
    let mut t = reader.tailer(Start::End).unwrap();
    let follower = std::thread::spawn(move || {
        let mut seqs = Vec::new();
        for _ in 0..5 {
            let m = t.read_next_timeout(Duration::from_secs(30)).unwrap();
            seqs.push(m.expect("message arrives").seq);
        }
        // After three missed wake-ups it polled, and a second later opens
        // the file again: the writer's.
        let got = t.read_next_timeout(Duration::from_secs(30)).unwrap();
        seqs.push(got.expect("message arrives").seq);
        seqs
    });
    let app = q.appender().unwrap();
    for i in 0..5 {
        std::thread::sleep(Duration::from_millis(100));
        app.append(&payload(i)).unwrap();
    }
    std::thread::sleep(Duration::from_millis(1200));
    eventually("the follower to sleep on the writer's word", || {
        q.stats().waiters == 1
    });
    app.append(b"last").unwrap();
    assert_eq!(follower.join().unwrap(), vec![0, 1, 2, 3, 4, 5]);
    drop(reader);
}
