//! Waits without a thread per waiter: a queue handle's `TailWatch` fires
//! registrations when their message is published (by this or another
//! handle), and with `Closed` when the queue closes; `Appender::flush_then`
//! reports the durable mark from the I/O thread.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::small;
use litemq::{Error, Notify, Start};

fn channel_notify() -> (Notify, mpsc::Receiver<Result<(), String>>) {
    let (tx, rx) = mpsc::channel();
    let n = Notify::new(move |r: litemq::Result<()>| {
        let _ = tx.send(r.map_err(|e| e.to_string()));
    });
    (n, rx)
}

const LONG: Duration = Duration::from_secs(10);
const SHORT: Duration = Duration::from_millis(100);

#[test]
fn a_registration_fires_when_its_message_is_published_and_not_before() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"0").unwrap();
    let watch = q.tail_watch();
    // Message 1 is not there yet: nothing fires.
    let (n, rx) = channel_notify();
    watch.register(1, 1, n).unwrap();
    assert!(rx.recv_timeout(SHORT).is_err(), "fired before its message");
    assert_eq!(watch.waiting(), 1);
    app.append(b"1").unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
    assert_eq!(watch.waiting(), 0);
    // A message already there fires at once.
    let (n, rx) = channel_notify();
    watch.register(1, 0, n).unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
}

#[test]
fn another_handle_publishing_wakes_a_read_only_watch() {
    let dir = tempfile::tempdir().unwrap();
    let writer = small(dir.path()).open().unwrap();
    let reader = small(dir.path()).read_only(true).open().unwrap();
    let watch = reader.tail_watch();
    let mut waits = Vec::new();
    for owner in 0..100 {
        let (n, rx) = channel_notify();
        watch.register(owner, 0, n).unwrap();
        waits.push(rx);
    }
    std::thread::sleep(SHORT);
    writer.appender().unwrap().append(b"x").unwrap();
    for rx in waits {
        assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
    }
    let mut t = reader.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().payload, b"x");
}

#[test]
fn a_cancelled_registration_never_fires() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let watch = q.tail_watch();
    let (n, rx) = channel_notify();
    let id = watch.register(7, 0, n).unwrap();
    watch.cancel(id);
    q.appender().unwrap().append(b"x").unwrap();
    q.close().unwrap();
    // Neither the append nor the close reports it (the sender is gone).
    assert_eq!(
        rx.recv_timeout(SHORT),
        Err(mpsc::RecvTimeoutError::Disconnected)
    );
}

#[test]
fn closing_the_queue_or_the_owner_fires_closed() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let watch = q.tail_watch();
    let (mine, mine_rx) = channel_notify();
    let (theirs, theirs_rx) = channel_notify();
    watch.register(1, 0, mine).unwrap();
    watch.register(2, 0, theirs).unwrap();
    watch.close_owner(1);
    assert_eq!(
        mine_rx.recv_timeout(LONG).unwrap(),
        Err(Error::Closed.to_string())
    );
    assert!(
        theirs_rx.recv_timeout(SHORT).is_err(),
        "another owner's wait ended"
    );
    q.close().unwrap();
    assert_eq!(
        theirs_rx.recv_timeout(LONG).unwrap(),
        Err(Error::Closed.to_string())
    );
    // A closed watch refuses new registrations, and says so to the callback too.
    let (n, rx) = channel_notify();
    assert!(matches!(watch.register(3, 0, n), Err(Error::Closed)));
    assert_eq!(
        rx.recv_timeout(LONG).unwrap(),
        Err(Error::Closed.to_string())
    );
}

#[test]
fn flush_then_reports_once_the_appends_are_durable() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..100u32 {
        app.append(&i.to_le_bytes()).unwrap();
    }
    let (n, rx) = channel_notify();
    app.flush_then(n);
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
    assert!(q.stats().durable_seq >= 100, "{:?}", q.stats());
    q.close().unwrap();
    let (n, rx) = channel_notify();
    app.flush_then(n);
    assert!(
        rx.recv_timeout(LONG).unwrap().is_err(),
        "a closed writer flushed"
    );
}

#[test]
fn a_watch_without_a_wake_up_word_polls_and_still_fires() {
    let dir = tempfile::tempdir().unwrap();
    small(dir.path()).open().unwrap().close().unwrap();
    // As after an older litemq: no wake.ctl when the reader opens.
    std::fs::remove_file(dir.path().join("wake.ctl")).unwrap();
    let reader = small(dir.path()).read_only(true).open().unwrap();
    let watch = reader.tail_watch();
    let (n, rx) = channel_notify();
    watch.register(1, 0, n).unwrap();
    assert!(rx.recv_timeout(SHORT).is_err());
    assert!(!reader.stats().wake_word, "the reader found a wake-up word");
    // A writer appears (creating wake.ctl) and appends twice, a while apart.
    let writer = small(dir.path()).open().unwrap();
    let app = writer.appender().unwrap();
    app.append(b"0").unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
    let (n, rx) = channel_notify();
    watch.register(1, 1, n).unwrap();
    // Past the retry, the watch sleeps on the word the writer made.
    std::thread::sleep(Duration::from_millis(2500));
    let stats = reader.stats();
    assert!(stats.wake_word && stats.waiters == 1, "{stats:?}");
    app.append(b"1").unwrap();
    assert_eq!(rx.recv_timeout(LONG).unwrap(), Ok(()));
}
