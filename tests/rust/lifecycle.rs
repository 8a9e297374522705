//! `Queue::close` stops everything made from the queue: tailers and
//! consumers report `Closed` (a blocked wait wakes with it) and let go of
//! their files; the writer lock and the names are free for a reopen in the
//! same process. Dropping a queue without `close` leaves its tailers reading.

mod common;

use std::time::{Duration, Instant};

use common::*;
use litemq::{Error, Start};

/// Mappings of this process on files under `dir`.
fn mapped_under(dir: &std::path::Path) -> Vec<String> {
    let root = dir.canonicalize().unwrap().display().to_string();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&format!("{root}/")))
        .map(str::to_string)
        .collect()
}

#[test]
fn close_stops_tailers_and_consumers_and_frees_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..2000 {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 0);
    let mut c = q.consumer("billing", Start::Beginning).unwrap();
    assert_eq!(c.read_next().unwrap().unwrap().seq, 0);
    q.close().unwrap();

    assert!(matches!(t.read_next(), Err(Error::Closed)));
    assert!(matches!(t.seek(5), Err(Error::Closed)));
    assert!(matches!(t.seek_end(), Err(Error::Closed)));
    assert!(matches!(c.read_next(), Err(Error::Closed)));
    assert!(matches!(app.append(b"x"), Err(Error::Closed)));
    assert!(q.is_closed());
    // The tailer let go of its file; only the consumer's is left.
    drop(c);
    assert_eq!(mapped_under(dir.path()), Vec::<String>::new());

    let q2 = small(dir.path()).open().unwrap();
    let c2 = q2.consumer("billing", Start::Beginning).unwrap();
    assert_eq!(c2.next_seq(), 0);
    q2.close().unwrap();
}

#[test]
fn close_wakes_a_blocked_wait() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    q.appender().unwrap().append(b"one").unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let waiter = std::thread::spawn(move || {
        assert_eq!(t.read_next().unwrap().unwrap().payload, b"one");
        let start = Instant::now();
        let r = t
            .read_next_timeout(Duration::from_secs(60))
            .map(|m| m.map(|m| m.seq));
        (r, start.elapsed())
    });
    std::thread::sleep(Duration::from_millis(100));
    q.close().unwrap();
    let (r, waited) = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::Closed)), "{r:?}");
    assert!(waited < Duration::from_secs(30), "woke after {waited:?}");
}

#[test]
fn drop_without_close_leaves_tailers_reading() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..10 {
        app.append(&payload(i)).unwrap();
    }
    let mut t = q.tailer(Start::Beginning).unwrap();
    drop(q);
    let mut n = 0;
    while let Some(m) = t.read_next().unwrap() {
        assert_eq!(m.payload, payload(n));
        n += 1;
    }
    assert_eq!(n, 10);
}

/// `lock_on_first_write` (what `litemq.Queue` opens with, issue 33): the
/// handle reads without the writer lock until its first append, so another
/// writer appends meanwhile; its own first append then collides.
#[test]
fn a_lazy_handle_takes_the_writer_lock_at_its_first_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("q");
    let lazy = small(&path).lock_on_first_write(true).open().unwrap();
    assert!(path.join("metadata.json").exists(), "created at open");
    assert_eq!(litemq::writer_pid(&path), None);
    let writer = small(&path).open().unwrap();
    let app = writer.appender().unwrap();
    app.append(b"from the writer").unwrap();
    app.flush().unwrap();
    assert_eq!(lazy.get(0).unwrap().payload, b"from the writer");
    assert!(matches!(lazy.appender(), Err(Error::Locked { .. })));
    assert_eq!(lazy.len(), 1, "still a reader after the refusal");
    writer.close().unwrap();
    let app = lazy.appender().unwrap();
    assert_eq!(app.append(b"mine").unwrap(), 1);
    assert_eq!(litemq::writer_pid(&path), Some(std::process::id()));
    assert!(!lazy.stats().read_only);
    lazy.close().unwrap();
    assert_eq!(litemq::writer_pid(&path), None);
    let q = small(&path).open().unwrap();
    assert_eq!(q.get(1).unwrap().payload, b"mine");
    assert_eq!(q.stats().recovery.cut_bytes, 0);
    q.close().unwrap();
}

/// A writer killed while creating its queue leaves `metadata.json.tmp` (and
/// maybe `wake.ctl.tmp`) before any `metadata.json`: the next open creates
/// the queue there, it does not take the directory for someone else's.
#[test]
fn a_queue_whose_creation_was_killed_is_created_again() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("metadata.json.tmp"), b"{\"format_v").unwrap();
    std::fs::write(dir.path().join("wake.ctl.tmp"), b"").unwrap();
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.appender().unwrap().append(b"first").unwrap(), 0);
    // Anything else still makes the directory someone else's.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("part-0000.parquet.tmp"), b"").unwrap();
    assert!(small(other.path()).open().is_err());
}
