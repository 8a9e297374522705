//! The journal's everyday behaviour: append, read, roll, seek, reopen.

mod common;

use std::time::Duration;

use common::*;
use litemq::{Error, FlushMode, QueueBuilder, Record, RollPeriod, RollStrategy, Start};
use proptest::prelude::*;

#[test]
fn append_then_read_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..1000 {
        assert_eq!(app.append(&payload(i)).unwrap(), i);
    }
    app.flush().unwrap();
    let got = read_all(&q, Start::Beginning);
    assert_eq!(got.len(), 1000);
    for (i, (seq, p)) in got.iter().enumerate() {
        assert_eq!(*seq, i as u64);
        assert_eq!(*p, payload(i as u64));
    }
    assert_eq!(q.len(), 1000);
    assert!(q.stats().rolls > 0, "64 KiB files must have rolled");
}

#[test]
fn empty_payload_is_a_message() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"").unwrap();
    app.append(b"x").unwrap();
    app.flush().unwrap();
    assert_eq!(
        read_all(&q, Start::Beginning),
        vec![(0, vec![]), (1, b"x".to_vec())]
    );
}

#[test]
fn batch_returns_dense_range() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"first").unwrap();
    let r = app.append_batch([&b"a"[..], b"b", b"c"]).unwrap();
    assert_eq!(r, 1..4);
    let empty = app.append_batch(std::iter::empty::<&[u8]>()).unwrap();
    assert_eq!(empty, 4..4);
    app.flush().unwrap();
    assert_eq!(q.get(3).unwrap().payload, b"c");
}

#[test]
fn keys_and_headers_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let headers = [litemq::format::record::HeaderField {
        name: "ünï",
        value: b"\x00\xff",
        value_is_text: false,
    }];
    let rec = Record {
        payload: b"p",
        key: Some("clé".as_bytes()),
        key_is_text: true,
        headers: &headers,
        ..Record::default()
    };
    app.append_record(&rec).unwrap();
    app.flush().unwrap();
    let m = q.get(0).unwrap();
    assert_eq!(m.key.as_deref(), Some("clé".as_bytes()));
    assert!(m.key_is_text);
    assert_eq!(m.headers, vec![("ünï".to_string(), vec![0, 255], false)]);
}

#[test]
fn oversized_payload_is_rejected_not_written() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let max = app.max_message_len();
    assert!(matches!(
        app.append(&vec![1; max + 1]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(app.append(&vec![7; max]).unwrap(), 0);
    app.flush().unwrap();
    assert_eq!(q.get(0).unwrap().payload.len(), max);
    assert_eq!(q.len(), 1);
}

#[test]
fn rolls_by_count_and_size() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(10))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..35 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    assert_eq!(data_files(dir.path()).len(), 4);

    let dir2 = tempfile::tempdir().unwrap();
    let q = small(dir2.path())
        .roll(RollStrategy::Size(8192))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for _ in 0..100 {
        app.append(&[0u8; 100]).unwrap(); // 128-byte frames: ~32 per 4 KiB of data
    }
    q.close().unwrap();
    assert_eq!(data_files(dir2.path()).len(), 4);
}

#[test]
fn rolls_by_time_with_a_fake_clock() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_795_305_540_000_000); // 2026-11-21T23:59:00Z
    let q = small(dir.path())
        .roll(RollStrategy::Period(RollPeriod::Minutely))
        .clock(clock.clone())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    app.append(b"a").unwrap();
    app.append(b"b").unwrap();
    app.flush().unwrap();
    clock.advance(Duration::from_secs(60)); // next minute, next UTC day
    app.append(b"c").unwrap();
    app.flush().unwrap();
    clock.advance(Duration::from_secs(30)); // same minute
    app.append(b"d").unwrap();
    q.close().unwrap();
    let files = data_files(dir.path());
    let names: Vec<_> = files
        .iter()
        .map(|p| {
            p.strip_prefix(dir.path())
                .unwrap()
                .to_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        names,
        vec![
            "2026/11/21/20261121-0001.data",
            "2026/11/22/20261122-0001.data"
        ]
    );
    let q = small(dir.path()).open().unwrap();
    let got: Vec<_> = read_all(&q, Start::Beginning)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        got,
        vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]
    );
}

#[test]
fn timestamps_never_go_backwards() {
    // Also for `append_batch`, which builds its frames (timestamp and CRC)
    // on the caller's thread: a batch built at a time older than the
    // queue's last message is stamped again, with a CRC that matches.
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(2_000_000);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(b"a").unwrap();
    app.flush().unwrap();
    clock.set(1_000_000); // the wall clock steps back
    app.append(b"b").unwrap();
    assert_eq!(app.append_batch([&b"c"[..], b"dd"]).unwrap(), 2..4);
    // Written before the clock moves on ("b" gets its time when written).
    app.flush().unwrap();
    clock.set(3_000_000);
    assert_eq!(app.append_batch([&b"eee"[..]]).unwrap(), 4..5);
    q.close().unwrap();
    // Read by another handle: every frame's CRC is checked.
    let q = small(dir.path()).read_only(true).open().unwrap();
    let got: Vec<_> = (0..5)
        .map(|s| {
            let m = q.get(s).unwrap();
            (m.payload, m.timestamp)
        })
        .collect();
    let at = |p: &[u8], t| (p.to_vec(), t);
    assert_eq!(
        got,
        vec![
            at(b"a", 2_000_000),
            at(b"b", 2_000_000),
            at(b"c", 2_000_000),
            at(b"dd", 2_000_000),
            at(b"eee", 3_000_000),
        ]
    );
    drop(q);
    // A walk checking every frame's CRC (a bad one fails the open).
    let q = small(dir.path()).verify_on_startup(true).open().unwrap();
    assert_eq!(q.next_seq(), 5);
}

#[test]
fn reopen_continues_the_sequence() {
    let dir = tempfile::tempdir().unwrap();
    {
        let q = small(dir.path()).open().unwrap();
        let app = q.appender().unwrap();
        for i in 0..50 {
            app.append(&payload(i)).unwrap();
        }
    } // drop closes
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.next_seq(), 50);
    assert_eq!(q.appender().unwrap().append(b"more").unwrap(), 50);
    q.close().unwrap();
    let q = small(dir.path()).read_only(true).open().unwrap();
    assert_eq!(q.len(), 51);
    assert_eq!(q.get(50).unwrap().payload, b"more");
}

#[test]
fn seek_by_sequence_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let clock = clock_at(1_000_000);
    let q = small(dir.path()).clock(clock.clone()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..500u64 {
        app.append(&payload(i)).unwrap();
        app.flush().unwrap();
        clock.advance(Duration::from_millis(10));
    }
    let mut t = q.tailer(Start::Beginning).unwrap();
    for seq in [0u64, 1, 3, 4, 5, 77, 255, 499] {
        t.seek(seq).unwrap();
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.payload.to_vec()), (seq, payload(seq)));
    }
    t.seek(500).unwrap();
    assert!(t.read_next().unwrap().is_none());
    assert!(matches!(
        t.seek(501),
        Err(Error::NotFound {
            seq: 501,
            next: 500,
            ..
        })
    ));
    // Message i was written at 1_000_000 + i * 10_000 µs.
    for (at, want) in [
        (0u64, 0u64),
        (1_000_000, 0),
        (1_000_001, 1),
        (1_010_000, 1),
        (3_000_000, 200),
        (5_990_000, 499),
    ] {
        t.seek_time(at).unwrap();
        assert_eq!(t.read_next().unwrap().unwrap().seq, want, "seek_time({at})");
    }
    t.seek_time(9_000_000).unwrap();
    assert!(t.read_next().unwrap().is_none());
}

#[test]
fn tailer_reads_while_another_thread_appends() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    let n = 20_000u64;
    let writer = std::thread::spawn(move || {
        for i in 0..n {
            app.append(&payload(i)).unwrap();
        }
    });
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..n {
        let m = t
            .read_next_timeout(Duration::from_secs(10))
            .unwrap()
            .expect("message within 10 s");
        assert_eq!(m.seq, i);
        assert_eq!(m.payload, payload(i));
    }
    writer.join().unwrap();
}

#[test]
fn many_threads_append_dense_unique_sequences() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let threads: Vec<_> = (0..4u8)
        .map(|w| {
            let app = q.appender().unwrap();
            std::thread::spawn(move || {
                (0..2000u32)
                    .map(|i| app.append(&[&[w][..], &i.to_le_bytes()].concat()).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    q.appender().unwrap().flush().unwrap();
    seqs.sort();
    assert_eq!(seqs, (0..8000).collect::<Vec<_>>());
    // Each writer's messages keep their order.
    let mut last = [None::<u32>; 4];
    for (_, p) in read_all(&q, Start::Beginning) {
        let i = u32::from_le_bytes(p[1..5].try_into().unwrap());
        assert!(last[p[0] as usize].is_none_or(|l| l < i));
        last[p[0] as usize] = Some(i);
    }
}

#[test]
fn sync_mode_appends_are_durable_when_they_return() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .flush_mode(FlushMode::Sync)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let seq = app.append(b"x").unwrap();
    assert!(q.stats().durable_seq > seq);
    assert!(q.stats().syncs >= 1);
}

#[test]
fn second_writer_is_refused_with_pid() {
    let dir = tempfile::tempdir().unwrap();
    let _q = small(dir.path()).open().unwrap();
    match small(dir.path()).open() {
        Err(Error::Locked { pid, .. }) => assert_eq!(pid, Some(std::process::id())),
        other => panic!("expected Locked, got {other:?}"),
    }
    // Readers take no lock.
    small(dir.path()).read_only(true).open().unwrap();
}

#[test]
fn closed_queue_refuses_work() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    q.close().unwrap();
    assert!(matches!(app.append(b"x"), Err(Error::Closed)));
    assert!(matches!(q.appender(), Err(Error::Closed)));
    q.close().unwrap();
}

#[test]
fn invalid_configuration_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    for b in [
        QueueBuilder::new(dir.path()).file_size(100),
        QueueBuilder::new(dir.path()).index_interval(0),
        QueueBuilder::new(dir.path()).roll(RollStrategy::Count(0)),
        QueueBuilder::new(dir.path()).channel_capacity(0),
    ] {
        assert!(matches!(b.open(), Err(Error::InvalidConfig(_))));
    }
    assert!(!dir.path().join("metadata.json").exists());
}

#[test]
fn read_only_open_of_missing_queue_is_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let err = QueueBuilder::new(dir.path().join("nope"))
        .read_only(true)
        .open()
        .unwrap_err();
    assert_eq!(err.errno(), None);
    assert!(
        matches!(err, Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound)
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn arbitrary_payloads_round_trip(payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..3000), 1..60)) {
        let dir = tempfile::tempdir().unwrap();
        let q = small(dir.path()).open().unwrap();
        let app = q.appender().unwrap();
        let max = vec![0xAB; app.max_message_len()];
        app.append(&max).unwrap();
        for p in &payloads {
            app.append(p).unwrap();
        }
        q.close().unwrap();
        let q = small(dir.path()).read_only(true).open().unwrap();
        let got: Vec<Vec<u8>> = read_all(&q, Start::Beginning).into_iter().map(|(_, p)| p).collect();
        prop_assert_eq!(&got[0], &max);
        prop_assert_eq!(&got[1..], &payloads[..]);
    }
}

#[test]
fn many_single_appends_never_reorder_in_the_handoff() {
    // Full batches go down the channel while the I/O thread may be taking
    // the pending one: it must never take a newer batch before an older one.
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(64 << 20)
        .channel_capacity(4)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..300_000u64 {
        app.append(&i.to_le_bytes()).unwrap();
    }
    app.flush().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..300_000u64 {
        assert_eq!(t.read_next().unwrap().unwrap().payload, i.to_le_bytes());
    }
}

#[test]
fn readers_in_the_writing_process_see_their_own_appends() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..100u64 {
        let seq = app.append(&payload(i)).unwrap();
        assert_eq!(
            q.get(seq).unwrap().payload,
            payload(i),
            "get right after append"
        );
    }
    app.append(b"last").unwrap();
    assert_eq!(
        read_all(&q, Start::Beginning).len(),
        101,
        "a new tailer sees every append"
    );
}

/// Batches reuse the buffers of batches already written: nothing of an
/// earlier, longer batch may leak into a later one.
#[test]
fn batches_of_shrinking_and_growing_sizes_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).file_size(1 << 20).open().unwrap();
    let app = q.appender().unwrap();
    let mut want = Vec::new();
    for (round, n) in [300u64, 7, 120, 1, 64, 500, 3].into_iter().enumerate() {
        let batch: Vec<Vec<u8>> = (0..n).map(|i| payload(i * 7 + round as u64)).collect();
        let range = app.append_batch(batch.iter().map(Vec::as_slice)).unwrap();
        assert_eq!(range.end - range.start, n);
        let records: Vec<Record<'_>> = batch[..(n as usize).min(5)]
            .iter()
            .map(|p| Record {
                key: Some(b"k"),
                ..Record::new(p)
            })
            .collect();
        app.append_records(&records).unwrap();
        want.extend(batch.iter().cloned());
        want.extend(batch[..(n as usize).min(5)].iter().cloned());
        app.flush().unwrap();
    }
    let got: Vec<Vec<u8>> = read_all(&q, Start::Beginning)
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(got, want);
}

/// Reopening a queue this process just closed works while other threads
/// start child processes: a child between its fork and its exec holds a
/// copy of every open file, the writer lock's too, for a moment.
#[test]
fn reopen_while_another_thread_spawns_children() {
    let dir = tempfile::tempdir().unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spawner = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let _ = std::process::Command::new("true").status();
            }
        })
    };
    for i in 0..100u64 {
        let q = small(dir.path()).open().unwrap();
        q.appender().unwrap().append(&i.to_le_bytes()).unwrap();
        q.close().unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    spawner.join().unwrap();
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.next_seq(), 100);
}
