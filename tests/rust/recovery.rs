//! Recovery: torn tails, damaged frames, missing index entries and markers.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::*;
use litemq::format::frame::{self, FrameAt, DATA_HEADER_LEN};
use litemq::{Error, Start};

/// Offset just past the last complete frame of a data file.
fn end_of_data(path: &Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let mut at = DATA_HEADER_LEN;
    loop {
        let len = frame::plain_len(&bytes, at).unwrap();
        match frame::decode(&bytes, at, len).unwrap() {
            FrameAt::Frame { next, .. } => at = next,
            _ => return at,
        }
    }
}

fn write_at(path: &Path, offset: usize, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset as u64).unwrap();
}

fn mark_unclean(base: &Path) {
    let p = base.join("metadata.json");
    let s = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
    std::fs::write(p, s).unwrap();
}

fn fill(base: &Path, n: u64) {
    let q = small(base).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
}

#[test]
fn torn_frame_with_bad_crc_is_cut_and_zeroed() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 30);
    let last = data_files(dir.path()).pop().unwrap();
    let end = end_of_data(&last);
    // A frame whose length made it to disk but whose record did not.
    let mut torn = 50u32.to_le_bytes().to_vec();
    torn.extend_from_slice(&[0xEE; 20]);
    write_at(&last, end, &torn);
    mark_unclean(dir.path());

    let q = small(dir.path()).open().unwrap();
    let report = q.stats().recovery;
    assert_eq!(report.cut_at, Some(end as u64));
    assert!(report.cut_reason.unwrap().contains("CRC"));
    assert_eq!(q.next_seq(), 30);
    let bytes = std::fs::read(&last).unwrap();
    assert!(
        bytes[end..].iter().all(|&b| b == 0),
        "torn bytes must be zeroed"
    );
    assert_eq!(q.appender().unwrap().append(b"after").unwrap(), 30);
    q.close().unwrap();
    let q = small(dir.path()).read_only(true).open().unwrap();
    let all = read_all(&q, Start::Beginning);
    assert_eq!(all.len(), 31);
    assert_eq!(all[30].1, b"after");
}

#[test]
fn partial_record_without_length_is_zeroed_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 10);
    let last = data_files(dir.path()).pop().unwrap();
    let end = end_of_data(&last);
    // A writer killed mid-frame: record bytes written, length still zero.
    write_at(&last, end + 4, &[0x55; 300]);
    mark_unclean(dir.path());
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.next_seq(), 10);
    assert!(q.stats().recovery.cut_bytes > 0);
    let bytes = std::fs::read(&last).unwrap();
    assert!(bytes[end..].iter().all(|&b| b == 0));
    // Short messages now land where the garbage was; none may read it back.
    let app = q.appender().unwrap();
    for i in 0..20u64 {
        app.append(&[i as u8; 3]).unwrap();
    }
    app.flush().unwrap();
    let all = read_all(&q, Start::Seq(10));
    assert_eq!(all.len(), 20);
    assert!(all
        .iter()
        .enumerate()
        .all(|(i, (_, p))| *p == vec![i as u8; 3]));
}

#[test]
fn flipped_byte_is_reported_with_its_location() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 40);
    let first = data_files(dir.path()).remove(0);
    // Damage the payload of the third frame of the first file.
    let bytes = std::fs::read(&first).unwrap();
    let mut at = DATA_HEADER_LEN;
    for _ in 0..2 {
        let len = frame::plain_len(&bytes, at).unwrap();
        let FrameAt::Frame { next, .. } = frame::decode(&bytes, at, len).unwrap() else {
            panic!()
        };
        at = next;
    }
    write_at(&first, at + 14, &[bytes[at + 14] ^ 0x01]);

    let q = small(dir.path()).read_only(true).open().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.read_next().unwrap().unwrap();
    t.read_next().unwrap().unwrap();
    match t.read_next() {
        Err(Error::Corrupted {
            path,
            offset,
            seq,
            reason,
        }) => {
            assert_eq!(path, first);
            assert_eq!(offset, at as u64);
            assert_eq!(seq, Some(2));
            assert!(reason.contains("CRC"), "{reason}");
        }
        other => panic!("expected Corrupted, got {other:?}"),
    }
    // The length is intact, so the reader can step over the frame.
    assert!(t.skip_damaged().unwrap());
    assert_eq!(t.read_next().unwrap().unwrap().seq, 3);
    drop(q);

    let err = small(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap_err();
    assert!(
        matches!(err, Error::Corrupted { seq: Some(2), .. }),
        "{err:?}"
    );
}

#[test]
fn lost_index_is_rebuilt_and_seeks_still_work() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 200);
    for f in data_files(dir.path()) {
        std::fs::remove_file(f.with_extension("index")).unwrap();
    }
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.next_seq(), 200);
    assert!(q.stats().recovery.index_entries_rebuilt > 0);
    let mut t = q.tailer(Start::Beginning).unwrap();
    for seq in [0u64, 57, 199] {
        t.seek(seq).unwrap();
        assert_eq!(t.read_next().unwrap().unwrap().payload, payload(seq));
    }
}

#[test]
fn index_entries_beyond_the_data_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 10);
    let last = data_files(dir.path()).pop().unwrap();
    let end = end_of_data(&last);
    // Cut the data back to the frame of seq 9 while the index still points past it.
    let index = std::fs::read(last.with_extension("index")).unwrap();
    let entry_of = |i: usize| {
        u64::from_le_bytes(
            index[256 + i * 32 + 24..256 + i * 32 + 32]
                .try_into()
                .unwrap(),
        )
    };
    let cut = entry_of(2) as usize; // seq first_seq + 8
    let f = OpenOptions::new().write(true).open(&last).unwrap();
    f.write_all_at(&vec![0; end - cut], cut as u64).unwrap();
    mark_unclean(dir.path());
    let q = small(dir.path()).open().unwrap();
    let expected = q.next_seq();
    assert!(expected < 10);
    let index = std::fs::read(last.with_extension("index")).unwrap();
    let e2 = u64::from_le_bytes(
        index[256 + 2 * 32 + 24..256 + 2 * 32 + 32]
            .try_into()
            .unwrap(),
    );
    assert_eq!(e2, 0, "entry for data that no longer exists must be zeroed");
    assert_eq!(q.appender().unwrap().append(b"x").unwrap(), expected);
}

#[test]
fn missing_end_marker_of_previous_file_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 400);
    let files = data_files(dir.path());
    assert!(files.len() >= 2);
    let prev = &files[files.len() - 2];
    let end = end_of_data(prev);
    let bytes = std::fs::read(prev).unwrap();
    assert_eq!(frame::plain_len(&bytes, end), Some(frame::END_OF_FILE));
    write_at(prev, end, &[0, 0, 0, 0]);
    let q = small(dir.path()).open().unwrap();
    assert!(q.stats().recovery.repaired_end_marker);
    assert_eq!(read_all(&q, Start::Beginning).len(), 400);
}

#[test]
fn damaged_header_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 5);
    let f = data_files(dir.path()).remove(0);
    write_at(&f, 20, &[0xFF; 4]);
    let err = small(dir.path()).open().unwrap_err();
    assert!(matches!(err, Error::Corrupted { offset: 0, .. }), "{err:?}");
}

#[test]
fn newer_format_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 1);
    let p = dir.path().join("metadata.json");
    let s = std::fs::read_to_string(&p).unwrap().replace(
        &format!("\"format_version\": {}", litemq::format::FORMAT_VERSION),
        "\"format_version\": 99",
    );
    std::fs::write(&p, s).unwrap();
    let err = small(dir.path()).open().unwrap_err();
    assert!(
        matches!(
            err,
            Error::UnsupportedVersion {
                found: 99,
                supported: litemq::format::FORMAT_VERSION,
                ..
            }
        ),
        "{err:?}"
    );
}
