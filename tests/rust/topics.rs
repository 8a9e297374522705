//! Topics in one queue: a tailer of one topic (and queue id, and tags)
//! returns exactly that topic's messages in order, whatever the state of
//! the topic indexes (`NAME.topics`): built, missing, damaged, or not built
//! yet for the active file; and it follows new ones.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use litemq::{Queue, Record, RollStrategy, Start, TopicSelector};

/// What message `i` carries: topic, queue id, tags (`None`: a plain message).
fn shape(i: u64) -> Option<(&'static str, u16, &'static [&'static str])> {
    match i % 10 {
        0 => Some(("orders", 0, &["paid", "eu"])),
        1 => Some(("orders", 1, &["refund"])),
        2 => Some(("audit", 0, &[])),
        3 => Some(("", 0, &["paid"])), // tags without a topic
        4 if i % 20 == 4 => Some(("orders", 0, &["us"])),
        _ => None,
    }
}

fn append(q: &Queue, range: std::ops::Range<u64>) {
    let app = q.appender().unwrap();
    for i in range {
        let body = payload(i);
        let seq = match shape(i) {
            None => app.append(&body),
            Some((topic, queue_id, tags)) => app.append_record(&Record {
                topic: (!topic.is_empty()).then_some(topic),
                queue_id,
                tags,
                ..Record::new(&body)
            }),
        }
        .unwrap();
        assert_eq!(seq, i);
    }
    app.flush().unwrap();
}

/// Sequences a selector must return, computed from `shape`.
fn expected(n: u64, sel: &TopicSelector) -> Vec<u64> {
    (0..n)
        .filter(|&i| {
            let Some((topic, queue_id, tags)) = shape(i) else {
                return false;
            };
            let topic_ok = match &sel.topic {
                Some(t) => t == topic,
                None => true,
            };
            topic_ok
                && sel.queue_id.is_none_or(|q| q == queue_id)
                && (sel.tags.is_empty() || tags.iter().any(|t| sel.tags.iter().any(|w| w == t)))
        })
        .collect()
}

fn read(q: &Queue, sel: &TopicSelector) -> Vec<u64> {
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.select(sel.clone());
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        assert_eq!(m.payload, payload(m.seq));
        out.push(m.seq);
    }
    out
}

fn selectors() -> Vec<TopicSelector> {
    let s = |topic: Option<&str>, queue_id: Option<u16>, tags: &[&str]| TopicSelector {
        topic: topic.map(str::to_string),
        queue_id,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    };
    vec![
        s(Some("orders"), None, &[]),
        s(Some("orders"), Some(1), &[]),
        s(Some("orders"), None, &["paid"]),
        s(Some("orders"), None, &["us", "refund"]),
        s(Some("audit"), None, &[]),
        s(Some("nothing"), None, &[]),
        s(None, None, &["paid"]),
    ]
}

fn topic_files(base: &Path) -> Vec<PathBuf> {
    data_files(base)
        .into_iter()
        .map(|p| p.with_extension("topics"))
        .filter(|p| p.exists())
        .collect()
}

fn check_all(q: &Queue, n: u64) {
    for sel in selectors() {
        assert_eq!(read(q, &sel), expected(n, &sel), "{sel:?}");
    }
}

#[test]
fn a_topic_tailer_returns_exactly_its_topic_with_or_without_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    let q = small(dir.path())
        .roll(RollStrategy::Count(400))
        .open()
        .unwrap();
    // A queue of plain messages only: no topic index is ever written.
    let app = q.appender().unwrap();
    for i in 0..400 {
        assert_eq!(app.append(&payload(i + 1_000_000)).unwrap(), i);
    }
    app.flush().unwrap();
    drop(app);
    q.close().unwrap();
    let dir2 = tempfile::tempdir().unwrap();
    let q = small(dir2.path())
        .roll(RollStrategy::Count(400))
        .open()
        .unwrap();
    append(&q, 0..n);
    // The active file has no index yet: it is read frame by frame.
    check_all(&q, n);
    q.close().unwrap();
    // Every sealed file with topic records has its index once close returns.
    let files = data_files(dir2.path());
    assert_eq!(topic_files(dir2.path()).len(), files.len() - 1);
    let q = small(dir2.path()).read_only(true).open().unwrap();
    check_all(&q, n);
    drop(q);

    // A damaged index is read around; a missing one too, and rebuilt by
    // the next writer.
    let indexes = topic_files(dir2.path());
    let mut b = std::fs::read(&indexes[0]).unwrap();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    std::fs::write(&indexes[0], &b).unwrap();
    std::fs::remove_file(&indexes[1]).unwrap();
    let ro = read_only(dir2.path());
    check_all(&ro, n);
    drop(ro);
    let q = small(dir2.path())
        .roll(RollStrategy::Count(400))
        .open()
        .unwrap();
    check_all(&q, n);
    // The writer's builder rebuilds them in the background while it is
    // open (close skips a start-up check still running): wait for it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !(indexes[1].exists() && std::fs::read(&indexes[0]).unwrap() != b)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    q.close().unwrap();
    assert!(indexes[1].exists(), "a missing index is rebuilt");
    assert!(
        std::fs::read(&indexes[0]).unwrap() != b,
        "a damaged one too"
    );

    // A queue without topics gets no index files.
    assert!(topic_files(dir.path()).is_empty());
}

/// A file the writer resumed claims topics in its footer (the writer cannot
/// know what was written before it). Sealed without any topic record, it
/// gets an index of no group, so topic readers skip it and later writer
/// opens do not walk it again.
#[test]
fn a_resumed_file_without_topics_gets_an_empty_index_once() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..10 {
        app.append(&payload(i)).unwrap();
    }
    drop(app);
    q.close().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 10..20 {
        app.append(&payload(i)).unwrap();
    }
    app.roll().unwrap();
    drop(app);
    q.close().unwrap();
    let indexes = topic_files(dir.path());
    assert_eq!(indexes.len(), 1, "the resumed file gets an (empty) index");
    let before = std::fs::metadata(&indexes[0]).unwrap();

    let q = small(dir.path()).open().unwrap();
    let orders = TopicSelector {
        topic: Some("orders".into()),
        queue_id: None,
        tags: Vec::new(),
    };
    assert!(read(&q, &orders).is_empty());
    q.close().unwrap();
    let after = std::fs::metadata(&indexes[0]).unwrap();
    assert_eq!(
        (before.ino(), before.mtime_nsec()),
        (after.ino(), after.mtime_nsec()),
        "a valid empty index is not rebuilt at the next open"
    );
}

#[test]
fn a_topic_tailer_follows_new_messages_across_rolls() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(50))
        .open()
        .unwrap();
    let reader = read_only(dir.path());
    let mut t = reader.tailer(Start::Beginning).unwrap();
    t.select(TopicSelector {
        topic: Some("orders".into()),
        ..TopicSelector::default()
    });
    assert!(t.read_next().unwrap().is_none());
    let mut next = 0;
    for round in 0..4 {
        append(&q, next..next + 137);
        next += 137;
        let want = expected(next, &selectors()[0]);
        let mut got = Vec::new();
        while let Some(m) = t
            .read_next_timeout(std::time::Duration::from_secs(5))
            .unwrap()
        {
            // Offsets stay exact while the active file grows and rolls.
            assert_eq!(m.topic_offset(), model_offset(m.seq), "seq {}", m.seq);
            got.push(m.seq);
            if Some(&m.seq) == want.last() {
                break;
            }
        }
        assert_eq!(got, want[want.len() - got.len()..], "round {round}");
        assert_eq!(got.last(), want.last());
    }
    q.close().unwrap();
}

#[test]
fn seeks_land_on_the_topics_next_message() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    let n = 1000;
    append(&q, 0..n);
    q.close().unwrap();
    let q = read_only(dir.path());
    let sel = selectors()[4].clone(); // audit: i % 10 == 2
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.select(sel);
    t.seek(503).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 512);
    let ts = q.get(700).unwrap().timestamp;
    let want = (0..n)
        .filter(|i| i % 10 == 2)
        .find(|&i| q.get(i).unwrap().timestamp >= ts)
        .unwrap();
    t.seek_time(ts).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, want);
}

/// A topic read of a sealed, indexed file touches only the topic's frames:
/// damage in another message's frame is not met (a full read reports it).
#[test]
fn an_indexed_topic_read_never_touches_other_frames() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    append(&q, 0..300);
    q.close().unwrap();
    let q = read_only(dir.path());
    // Message 5 is plain; flip a byte of its payload.
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.seek(5).unwrap();
    let pos = t.read_next().unwrap().unwrap().position();
    let (number, offset) = (pos >> 40, pos & ((1 << 40) - 1));
    drop(t);
    let path = data_files(dir.path())[number as usize - 1].clone();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let mut b = [0u8; 1];
    std::fs::File::open(&path)
        .unwrap()
        .read_exact_at(&mut b, offset + 4 + 9 + 3)
        .unwrap();
    f.write_all_at(&[b[0] ^ 0x55], offset + 4 + 9 + 3).unwrap();
    drop(q);
    let q = read_only(dir.path());
    let sel = selectors()[0].clone();
    assert_eq!(read(&q, &sel), expected(300, &sel));
    let mut all = q.tailer(Start::Beginning).unwrap();
    let err = loop {
        match all.read_next() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the damage was not met"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, litemq::Error::Corrupted { .. }), "{err:?}");
}

/// The topic offset of message `i` of stream `shape(i)`: how many messages
/// of that stream come before it.
fn model_offset(i: u64) -> Option<u64> {
    let (topic, queue_id, _) = shape(i)?;
    Some(
        (0..i)
            .filter(|&j| shape(j).is_some_and(|(t, q, _)| t == topic && q == queue_id))
            .count() as u64,
    )
}

fn offsets(q: &Queue, sel: &TopicSelector) -> Vec<(u64, Option<u64>)> {
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.select(sel.clone());
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        out.push((m.seq, m.topic_offset()));
    }
    out
}

fn check_offsets(q: &Queue, n: u64) {
    for sel in selectors() {
        let want: Vec<_> = expected(n, &sel)
            .into_iter()
            .map(|s| (s, model_offset(s)))
            .collect();
        assert_eq!(offsets(q, &sel), want, "{sel:?}");
    }
}

#[test]
fn topic_offsets_are_dense_per_stream_with_or_without_indexes() {
    let dir = tempfile::tempdir().unwrap();
    let n = 2500;
    let q = small(dir.path())
        .roll(RollStrategy::Count(400))
        .open()
        .unwrap();
    append(&q, 0..n);
    check_offsets(&q, n); // the active file read frame by frame
    q.close().unwrap();
    let ro = read_only(dir.path());
    check_offsets(&ro, n); // sealed files through their indexes
    drop(ro);
    let indexes = topic_files(dir.path());
    let mut b = std::fs::read(&indexes[0]).unwrap();
    let last = b.len() - 1;
    b[last] ^= 0xff;
    std::fs::write(&indexes[0], &b).unwrap();
    std::fs::remove_file(&indexes[2]).unwrap();
    let ro = read_only(dir.path());
    check_offsets(&ro, n);

    // Seek by offset: every message of a stream, and its count (the end).
    let orders = TopicSelector {
        topic: Some("orders".into()),
        queue_id: Some(0),
        ..TopicSelector::default()
    };
    let want = expected(n, &orders);
    let mut t = ro.tailer(Start::Beginning).unwrap();
    t.select(orders);
    for (k, &seq) in want.iter().enumerate().step_by(37) {
        t.seek_topic_offset(k as u64).unwrap();
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.topic_offset()), (seq, Some(k as u64)));
    }
    t.seek_topic_offset(want.len() as u64).unwrap();
    assert!(t.read_next().unwrap().is_none());
    assert!(matches!(
        t.seek_topic_offset(want.len() as u64 + 1),
        Err(litemq::Error::InvalidArgument(_))
    ));
}

#[test]
fn find_in_topic_returns_only_that_topics_messages_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..300u64 {
        let topic = ["orders", "audit", "billing"][(i % 3) as usize];
        app.append_record(&Record {
            key: Some(format!("k{}", i % 4).as_bytes()),
            topic: Some(topic),
            ..Record::new(&payload(i))
        })
        .unwrap();
    }
    app.flush().unwrap();
    let sel = TopicSelector {
        topic: Some("audit".into()),
        ..TopicSelector::default()
    };
    let got: Vec<u64> = q
        .find_in_topic(b"k1", &sel, None, None, None)
        .unwrap()
        .iter()
        .map(|m| m.seq)
        .collect();
    let want: Vec<u64> = (0..300).filter(|i| i % 4 == 1 && i % 3 == 1).collect();
    assert_eq!(got, want);
    assert_eq!(q.find(b"k1", None, None, None).unwrap().len(), 75);
    let two = q.find_in_topic(b"k1", &sel, None, None, Some(2)).unwrap();
    assert_eq!(two.len(), 2);
}

/// The index builder checks a sealed file's frames (by the footer's CRC of
/// the frame area, or frame by frame when that does not match): a file
/// with a damaged frame gets no topic index, so readers read it whole and
/// report the damage.
#[test]
fn a_damaged_sealed_file_gets_no_topic_index() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    append(&q, 0..300);
    let m = q.get(15).unwrap(); // a plain message in the first file
    q.close().unwrap();
    let indexes = topic_files(dir.path());
    assert_eq!(indexes.len(), 2);
    std::fs::remove_file(&indexes[0]).unwrap();
    let mut b = std::fs::read(&m.file).unwrap();
    let at = m.offset as usize + 4 + 2;
    b[at] ^= 0x01;
    std::fs::write(&m.file, &b).unwrap();
    let q = small(dir.path())
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    q.close().unwrap();
    assert!(!indexes[0].exists(), "no index built over a damaged frame");
    assert!(indexes[1].exists());
}
