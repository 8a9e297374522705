//! The active file's topic map: a queue handle reads the topic messages of
//! its active (unsealed, unindexed) data file once, and its later topic
//! tailers read only their topic's frames of it. Every message returned is
//! still checked by its own CRC and compared exactly; a map made stale by
//! recovery rewriting the file is not trusted.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::*;
use litemq::{Queue, Record, Start, TopicSelector};

/// Message `i`: "orders" when `i % 5 == 0`, "audit" when `i % 5 == 1`,
/// plain otherwise.
fn topic_of(i: u64) -> Option<&'static str> {
    match i % 5 {
        0 => Some("orders"),
        1 => Some("audit"),
        _ => None,
    }
}

fn append_with(q: &Queue, range: std::ops::Range<u64>, topic_of: fn(u64) -> Option<&'static str>) {
    let app = q.appender().unwrap();
    for i in range {
        let body = payload(i);
        let seq = match topic_of(i) {
            None => app.append(&body),
            Some(t) => app.append_record(&Record {
                topic: Some(t),
                tags: &["paid"],
                ..Record::new(&body)
            }),
        }
        .unwrap();
        assert_eq!(seq, i);
    }
    app.flush().unwrap();
}

fn orders() -> TopicSelector {
    TopicSelector {
        topic: Some("orders".into()),
        ..TopicSelector::default()
    }
}

/// `(seq, topic offset)` of every message a new "orders" tailer returns.
fn read(q: &Queue) -> litemq::Result<Vec<(u64, Option<u64>)>> {
    let mut t = q.tailer(Start::Beginning)?;
    t.select(orders());
    let mut out = Vec::new();
    while let Some(m) = t.read_next()? {
        assert_eq!(m.payload, payload(m.seq), "seq {}", m.seq);
        assert_eq!(m.topic(), Some("orders"));
        out.push((m.seq, m.topic_offset()));
    }
    Ok(out)
}

fn expected(n: u64, topic_of: fn(u64) -> Option<&'static str>) -> Vec<(u64, Option<u64>)> {
    (0..n)
        .filter(|&i| topic_of(i) == Some("orders"))
        .enumerate()
        .map(|(k, i)| (i, Some(k as u64)))
        .collect()
}

/// Offset of message `seq`'s frame in its data file.
fn frame_offset(q: &Queue, seq: u64) -> u64 {
    let mut t = q.tailer(Start::Seq(seq)).unwrap();
    t.read_next().unwrap().unwrap().position() & ((1 << 40) - 1)
}

fn flip(path: &Path, at: u64) {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x55], at).unwrap();
}

/// Once a handle has read its active file's topics, a later topic tailer
/// reads only the topic's frames: damage that came since in another
/// message's frame is not met (a full read reports it), as in a sealed,
/// indexed file. Before the map, every topic tailer read every frame of
/// the active file and stopped at the damage.
#[test]
fn a_later_topic_tailer_reads_only_its_topics_frames_of_the_active_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    append_with(&q, 0..150, topic_of);
    assert_eq!(data_files(dir.path()).len(), 1, "one active file");
    let r = read_only(dir.path());
    assert_eq!(read(&r).unwrap(), expected(150, topic_of));
    // Message 42 is plain; damage its payload.
    let at = frame_offset(&r, 42);
    flip(&data_files(dir.path())[0], at + 4 + 9 + 3);
    assert_eq!(read(&r).unwrap(), expected(150, topic_of));
    // New messages are read on from where the map stopped.
    append_with(&q, 150..200, topic_of);
    assert_eq!(read(&r).unwrap(), expected(200, topic_of));
    let mut all = r.tailer(Start::Beginning).unwrap();
    let err = loop {
        match all.read_next() {
            Ok(Some(_)) => continue,
            Ok(None) => panic!("the damage was not met"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, litemq::Error::Corrupted { .. }), "{err:?}");
    q.close().unwrap();
}

/// A frame of the topic damaged after the map read it is still checked by
/// its own CRC when a tailer returns it: an error, never wrong data.
#[test]
fn a_damaged_topic_frame_of_the_active_file_is_an_error_after_the_map() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    append_with(&q, 0..150, topic_of);
    let r = read_only(dir.path());
    assert_eq!(read(&r).unwrap(), expected(150, topic_of));
    let at = frame_offset(&r, 40); // an "orders" message
    flip(&data_files(dir.path())[0], at + 4 + 9 + 3);
    let mut t = r.tailer(Start::Beginning).unwrap();
    t.select(orders());
    let err = loop {
        match t.read_next() {
            Ok(Some(m)) => {
                assert!(m.seq < 40, "seq {} returned", m.seq);
                assert_eq!(m.payload, payload(m.seq));
            }
            Ok(None) => panic!("the damaged frame was returned or skipped"),
            Err(e) => break e,
        }
    };
    assert!(matches!(err, litemq::Error::Corrupted { .. }), "{err:?}");
    q.close().unwrap();
}

fn mark_unclean(base: &Path) {
    let p = base.join("metadata.json");
    let s = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
    std::fs::write(p, s).unwrap();
}

/// Recovery after a writer crash cuts the active file at a damaged frame
/// and a new writer appends other messages over the cut, at the same
/// sequences and (partly) the same offsets: a handle that mapped the file
/// before must not trust its map past the new end (it would return
/// messages under the wrong sequences, miss new ones of its topic, or
/// meet half frames).
#[test]
fn a_map_of_an_active_file_recovery_rewrote_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    append_with(&q, 0..150, topic_of);
    q.close().unwrap();
    let r = read_only(dir.path());
    assert_eq!(read(&r).unwrap(), expected(150, topic_of));
    let at = frame_offset(&r, 137);
    flip(&data_files(dir.path())[0], at + 4 + 9 + 3);
    mark_unclean(dir.path());
    // A new writer: recovery cuts at 137; every new message is "orders".
    let every = |_: u64| Some("orders");
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.stats().recovery.cut_at, Some(at));
    append_with(&q, 137..160, every);
    assert_eq!(data_files(dir.path()).len(), 1, "still one active file");
    let want: Vec<(u64, Option<u64>)> = (0..160)
        .filter(|&i| i >= 137 || topic_of(i) == Some("orders"))
        .enumerate()
        .map(|(k, i)| (i, Some(k as u64)))
        .collect();
    assert_eq!(
        read(&read_only(dir.path())).unwrap(),
        want,
        "a fresh handle"
    );
    assert_eq!(read(&r).unwrap(), want, "the handle that mapped the file");
    q.close().unwrap();
}

/// Topic offsets of the active file come from the map too, and stay exact
/// as the file grows between tailers of one handle.
#[test]
fn topic_offsets_stay_exact_as_the_active_file_grows() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let r = read_only(dir.path());
    let mut next = 0;
    for _ in 0..5 {
        append_with(&q, next..next + 31, topic_of);
        next += 31;
        assert_eq!(read(&r).unwrap(), expected(next, topic_of));
        let mut t = r.tailer(Start::Beginning).unwrap();
        t.select(orders());
        t.seek_topic_offset(3).unwrap();
        assert_eq!(t.read_next().unwrap().unwrap().seq, 15);
    }
    q.close().unwrap();
}

/// A handle keeps its topic plans of sealed files (from their footers and
/// topic indexes) for its later tailers only while each file is the one
/// planned (device, inode, change time): a sealed file replaced by another
/// (here the same-numbered file of another queue, with its indexes) is
/// planned afresh, not read at the sequences and offsets of the old one.
#[test]
fn sealed_plans_of_a_handle_follow_a_replaced_file() {
    use litemq::RollStrategy;
    let every_third = |i: u64| i.is_multiple_of(3).then_some("orders");
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (dir, shape) in [(&a, topic_of as fn(u64) -> _), (&b, every_third)] {
        let q = small(dir.path())
            .roll(RollStrategy::Count(40))
            .open()
            .unwrap();
        append_with(&q, 0..120, shape);
        // Every sealed file has its topic index once close returns.
        q.close().unwrap();
    }
    let r = read_only(a.path());
    assert_eq!(read(&r).unwrap(), expected(120, topic_of));
    // Replace file 1 of queue a (seqs 0..40) and its indexes by b's.
    let first = data_files(b.path())[0].clone();
    let into = data_files(a.path())[0].parent().unwrap().to_path_buf();
    let stem = first.file_stem().unwrap().to_str().unwrap().to_string();
    for entry in std::fs::read_dir(first.parent().unwrap()).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        if name.starts_with(&format!("{stem}.")) {
            let tmp = into.join(format!("{name}.replacing"));
            std::fs::copy(&path, &tmp).unwrap();
            std::fs::rename(&tmp, into.join(&name)).unwrap();
        }
    }
    let fresh = read(&read_only(a.path())).unwrap();
    assert_ne!(fresh, expected(120, topic_of), "the file was replaced");
    assert_eq!(
        fresh[0..14].iter().map(|m| m.0).collect::<Vec<_>>(),
        (0..40).step_by(3).collect::<Vec<_>>()
    );
    assert_eq!(
        read(&r).unwrap(),
        fresh,
        "the handle that planned the old file"
    );
}
