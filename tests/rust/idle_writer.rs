//! Appends that find the I/O thread asleep: the appending thread writes the
//! batch itself (no wake-up of the I/O thread between an append and a
//! reader), in sequence order with everything the I/O thread writes, and a
//! failure there poisons the writer like one on the I/O thread.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{count_stored, payload, read_all, small, within_10s, PanicClock};
use litemq::{Error, FlushMode, Queue, Record, Start};

/// Long enough for the I/O thread to finish its idle spin and sleep.
const IDLE: Duration = Duration::from_millis(5);

fn appender_writes(q: &Queue) -> u64 {
    q.stats().appender_writes
}

#[test]
fn a_lone_append_is_written_by_the_appender_and_visible_without_more_appends() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    // The first append creates the first data file: the I/O thread's job.
    for i in 0..20u64 {
        std::thread::sleep(IDLE);
        assert_eq!(app.append(&payload(i)).unwrap(), i);
        // Visible with no further append or flush to push it along.
        let m = t
            .read_next_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("a lone append becomes visible");
        assert_eq!((m.seq, m.payload), (i, &payload(i)[..]));
    }
    // The I/O thread may be awake for a few (a timed wake-up), not for all.
    assert!(appender_writes(&q) >= 10, "{:?}", q.stats());
    q.close().unwrap();
    let q = small(dir.path()).open().unwrap();
    let got = read_all(&q, Start::Beginning);
    assert_eq!(got.len(), 20);
}

#[test]
fn sync_mode_appends_always_go_through_the_io_thread() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .flush_mode(FlushMode::Sync)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..5u64 {
        std::thread::sleep(IDLE);
        app.append(&payload(i)).unwrap();
    }
    assert_eq!(
        appender_writes(&q),
        0,
        "the group commit is the I/O thread's"
    );
    assert_eq!(q.stats().durable_seq, 5);
    q.close().unwrap();
}

#[test]
fn batch_mode_byte_limit_still_syncs_after_appender_writes() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .flush_mode(FlushMode::Batch {
            bytes: 100,
            interval: Duration::from_secs(3600),
        })
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    app.append(b"creates the first file").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while q.stats().durable_seq < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first append is synced"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(IDLE);
    app.append(&[1u8; 200]).unwrap();
    assert!(appender_writes(&q) >= 1, "{:?}", q.stats());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while q.stats().durable_seq < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "200 bytes pending and a 100-byte limit: synced by now"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    q.close().unwrap();
}

/// Threads mixing bursts (which wake the I/O thread) with lone appends
/// (which the appender writes): every sequence holds the message appended
/// with it.
#[test]
fn appender_writes_and_io_thread_writes_keep_sequence_order() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..3u8)
        .map(|id| {
            let app = q.appender().unwrap();
            let got = got.clone();
            std::thread::spawn(move || {
                for round in 0..40u32 {
                    let burst = if round % 3 == 0 { 50 } else { 1 };
                    for k in 0..burst {
                        let p = format!("{id}-{round}-{k}").into_bytes();
                        let seq = app.append(&p).unwrap();
                        got.lock().unwrap().push((seq, p));
                    }
                    std::thread::sleep(Duration::from_micros(200 * u64::from(id + 1)));
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut sent = got.lock().unwrap().clone();
    sent.sort();
    let stored = read_all(&q, Start::Beginning);
    assert_eq!(stored.len(), sent.len());
    for ((seq, p), (sseq, sp)) in sent.iter().zip(&stored) {
        assert_eq!((seq, p), (sseq, sp));
    }
    assert!(appender_writes(&q) > 0, "{:?}", q.stats());
    q.close().unwrap();
    // Rolled files (64 KiB) and a reopen: nothing lost.
    let q = small(dir.path()).open().unwrap();
    assert_eq!(read_all(&q, Start::Beginning).len(), sent.len());
}

#[test]
fn close_while_appenders_write_keeps_every_append_that_returned() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let q = small(&base).open().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let app = q.appender().unwrap();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut ok = Vec::new();
                while !stop.load(Ordering::SeqCst) {
                    match app.append(b"m") {
                        Ok(seq) => ok.push(seq),
                        Err(Error::Closed) => break,
                        Err(e) => panic!("{e:?}"),
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                ok
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    q.close().unwrap();
    stop.store(true, Ordering::SeqCst);
    let mut ok: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    ok.sort_unstable();
    assert!(!ok.is_empty());
    let q = small(&base).open().unwrap();
    let stored = read_all(&q, Start::Beginning);
    let stored: Vec<u64> = stored.into_iter().map(|(s, _)| s).collect();
    assert_eq!(
        stored, ok,
        "every append that returned a sequence is stored"
    );
}

#[test]
fn a_failed_appender_write_is_reported_by_that_append_and_poisons_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let clock = Arc::new(PanicClock::default());
    let q = small(&base).clock(clock.clone()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"before").unwrap();
    // Until an append is written by its appender: the I/O thread is asleep
    // (a busy machine may keep it awake past IDLE), and stays so.
    let mut stored = 1;
    loop {
        std::thread::sleep(IDLE);
        let before = appender_writes(&q);
        app.append(b"probe").unwrap();
        stored += 1;
        if appender_writes(&q) > before {
            break;
        }
        assert!(stored < 1000, "the I/O thread never slept");
    }
    clock.0.store(true, Ordering::SeqCst);
    // The I/O thread is asleep: this append writes, and fails, on this
    // thread, and says so now rather than on the next call.
    match app.append(b"boom") {
        Err(Error::Poisoned { cause }) => assert!(
            matches!(&*cause, Error::Internal(m) if m.contains("clock armed to panic")),
            "{cause:?}"
        ),
        other => panic!("expected the poison of the failed write: {other:?}"),
    }
    assert!(matches!(app.append(b"later"), Err(Error::Poisoned { .. })));
    let app2 = app.clone();
    let flushed = within_10s(move || app2.flush());
    assert!(
        matches!(flushed, Err(Error::Poisoned { .. })),
        "{flushed:?}"
    );
    drop(app);
    // The sleeping I/O thread wakes for close and stops with the error.
    let closed = within_10s(move || q.close());
    assert!(closed.is_err(), "close reports the failure");
    clock.0.store(false, Ordering::SeqCst);
    assert_eq!(
        count_stored(&base),
        stored,
        "only the appends that returned are stored"
    );
}

#[test]
fn a_short_burst_is_written_by_its_appender_and_a_stream_wakes_the_io_thread() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).file_size(1 << 20).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"creates the first file").unwrap();
    // A burst of 10 after a pause: no wake-up of the I/O thread, each
    // appender writes its own (a timed wake-up of the I/O thread may take
    // some of one burst: one of a few is enough).
    let mut whole = false;
    let mut n = 1;
    for _ in 0..5 {
        std::thread::sleep(IDLE);
        let before = appender_writes(&q);
        for i in 0..10 {
            app.append(&payload(i)).unwrap();
        }
        n += 10;
        if appender_writes(&q) - before == 10 {
            whole = true;
            break;
        }
    }
    assert!(whole, "{:?}", q.stats());
    // A stream: the I/O thread is woken and writes most of it.
    std::thread::sleep(IDLE);
    let before = appender_writes(&q);
    for i in 0..10_000 {
        app.append(&payload(i)).unwrap();
    }
    let direct = appender_writes(&q) - before;
    assert!(direct < 5_000, "{direct} of 10,000 written by the appender");
    q.close().unwrap();
    let q = small(dir.path()).file_size(1 << 20).open().unwrap();
    assert_eq!(read_all(&q, Start::Beginning).len(), n + 10_000);
}

/// `append_batch` then `flush`, in turn, with the I/O thread asleep between
/// them: the appender writes each bundle and syncs it itself (issue 15's
/// durable batches; no wake-up of the I/O thread either way). Bundles that
/// need a new file go to the I/O thread, which rolls. Every frame reads back
/// CRC-checked, in sequence, across the rolls and after reopening.
#[test]
fn batches_flushed_in_turn_are_written_and_synced_by_their_appender_across_rolls() {
    let dir = tempfile::tempdir().unwrap();
    // 64 KiB files: a roll every few batches of 50 messages of up to 300 B.
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"creates the first file").unwrap();
    app.flush().unwrap();
    let mut want: Vec<Vec<u8>> = vec![b"creates the first file".to_vec()];
    let rolls_before = q.stats().rolls;
    for round in 0..40u64 {
        std::thread::sleep(IDLE);
        let batch: Vec<Vec<u8>> = (0..50).map(|i| payload(round * 50 + i)).collect();
        let range = app.append_batch(batch.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(range, want.len() as u64..want.len() as u64 + 50);
        want.extend(batch);
        app.flush().unwrap();
        let s = q.stats();
        assert_eq!(s.durable_seq, want.len() as u64, "flush returned durable");
    }
    let s = q.stats();
    assert!(s.rolls > rolls_before + 3, "{s:?}");
    // Most bundles were written on the appender's thread (a timed wake-up
    // of the I/O thread, or a roll, takes some).
    assert!(s.appender_writes >= 10, "{s:?}");
    let check = |q: &Queue| {
        let got = read_all(q, Start::Beginning);
        assert_eq!(got.len(), want.len());
        for (i, (seq, p)) in got.iter().enumerate() {
            assert_eq!((*seq, p), (i as u64, &want[i]));
        }
    };
    check(&q);
    q.close().unwrap();
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.stats().recovery.cut_bytes, 0);
    check(&q);
}

/// A bundle an appender writes while the I/O thread sleeps, and which
/// fails, is reported by that call and poisons the writer. (Records: the
/// writer asks the clock for their time as it writes them, where the armed
/// clock makes the write fail; `append_batch` of plain payloads asks it on
/// the caller's thread, before anything is handed over.)
#[test]
fn a_failed_appender_written_batch_is_reported_by_that_call_and_poisons_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().to_path_buf();
    let clock = Arc::new(PanicClock::default());
    let q = small(&base).clock(clock.clone()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"before").unwrap();
    app.flush().unwrap();
    let mut stored = 1;
    // Until a batch is written by its appender (the I/O thread asleep).
    loop {
        std::thread::sleep(IDLE);
        let before = appender_writes(&q);
        app.append_records(&[Record::new(b"a"), Record::new(b"b")])
            .unwrap();
        stored += 2;
        app.flush().unwrap();
        if appender_writes(&q) > before {
            break;
        }
        assert!(stored < 1000, "the I/O thread never slept");
    }
    clock.0.store(true, Ordering::SeqCst);
    std::thread::sleep(IDLE);
    match app.append_records(&[Record::new(b"boom"), Record::new(b"boom")]) {
        Err(Error::Poisoned { cause }) => assert!(
            matches!(&*cause, Error::Internal(m) if m.contains("clock armed to panic")),
            "{cause:?}"
        ),
        other => panic!("expected the poison of the failed write: {other:?}"),
    }
    let app2 = app.clone();
    let flushed = within_10s(move || app2.flush());
    assert!(
        matches!(flushed, Err(Error::Poisoned { .. })),
        "{flushed:?}"
    );
    drop(app);
    let closed = within_10s(move || q.close());
    assert!(closed.is_err(), "close reports the failure");
    clock.0.store(false, Ordering::SeqCst);
    assert_eq!(count_stored(&base), stored);
}
