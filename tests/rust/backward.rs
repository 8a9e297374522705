//! Reading newest first: `Queue::backward_tailer` steps back across files by
//! seeking (the dense index), and every message it returns is the one a
//! forward read returns at that sequence. And both tailers as `Iterator`s.

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
    app.flush().unwrap();
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

#[test]
fn a_tailer_is_an_iterator_of_owned_messages_that_ends_at_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..10 {
        app.append(&payload(i)).unwrap();
    }
    // Written (the I/O thread may still be on its way): the iterator
    // ends at what is published.
    app.flush().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let first: Vec<_> = t.by_ref().map(|m| m.unwrap()).collect();
    assert_eq!(
        first
            .iter()
            .map(|m| (m.seq, m.payload.clone()))
            .collect::<Vec<_>>(),
        (0..10).map(|i| (i, payload(i))).collect::<Vec<_>>()
    );
    assert!(first.iter().all(|m| m.offset >= 4096 && m.file.exists()));
    // Ended at the tail; a later iteration picks up what came since.
    app.append(&payload(10)).unwrap();
    app.flush().unwrap();
    assert_eq!(t.map(|m| m.unwrap().seq).collect::<Vec<_>>(), [10]);
}

#[test]
fn an_iterator_over_damage_yields_the_error_until_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..3 {
        app.append(&[i as u8; 64]).unwrap();
    }
    let victim = q.get(1).unwrap();
    q.close().unwrap();
    // Flip a payload byte of message 1: its CRC no longer matches.
    let mut bytes = std::fs::read(&victim.file).unwrap();
    bytes[victim.offset as usize + 40] ^= 0xFF;
    std::fs::write(&victim.file, bytes).unwrap();
    let q = read_only(dir.path());
    let mut t = q.tailer(Start::Beginning).unwrap();
    assert_eq!(t.next().unwrap().unwrap().seq, 0);
    assert!(matches!(
        t.next(),
        Some(Err(litemq::Error::Corrupted { .. }))
    ));
    assert!(matches!(
        t.next(),
        Some(Err(litemq::Error::Corrupted { .. }))
    ));
    assert!(t.skip_damaged().unwrap());
    assert_eq!(t.next().unwrap().unwrap().seq, 2);
    assert!(t.next().is_none());
    // Newest first, the same.
    let mut b = q.backward_tailer(Start::End).unwrap();
    assert_eq!(b.next().unwrap().unwrap().seq, 2);
    assert!(matches!(
        b.next(),
        Some(Err(litemq::Error::Corrupted { .. }))
    ));
    assert!(b.skip_damaged().unwrap());
    assert_eq!(b.next().unwrap().unwrap().seq, 0);
    assert!(b.next().is_none());
}
