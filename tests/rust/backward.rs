//! Reading newest first: `Queue::backward_tailer` steps back across files by
//! seeking (the dense index), and every message it returns is the one a
//! forward read returns at that sequence.

mod common;

use common::{payload, read_only, small};
use litemq::Start;

#[test]
fn backward_reads_every_message_newest_first_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let n = 3000u64;
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    assert!(q.data_files().unwrap().len() >= 3, "{:?}", q.data_files());
    q.close().unwrap();
    let q = read_only(dir.path());
    let mut b = q.backward_tailer(Start::End).unwrap();
    let mut want = n;
    while let Some(m) = b.read_next().unwrap() {
        want -= 1;
        assert_eq!((m.seq, m.payload), (want, &payload(want)[..]));
    }
    assert_eq!(want, 0, "stopped before the oldest");
    assert_eq!(b.next_seq(), None);
    // From a sequence, and after a seek.
    let mut b = q.backward_tailer(Start::Seq(10)).unwrap();
    assert_eq!(b.next_seq(), Some(10));
    assert_eq!(b.read_next().unwrap().unwrap().seq, 10);
    b.seek(1500).unwrap();
    assert_eq!(b.read_next().unwrap().unwrap().seq, 1500);
    assert_eq!(b.read_next().unwrap().unwrap().seq, 1499);
}

#[test]
fn backward_from_the_end_of_an_empty_queue_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let mut b = q.backward_tailer(Start::End).unwrap();
    assert!(b.read_next().unwrap().is_none());
    let mut b = q.backward_tailer(Start::Seq(0)).unwrap();
    assert!(b.read_next().unwrap().is_none());
}
