//! A zeroed page (what a lost page leaves after a power loss or file-system
//! damage) inside the frames of a data file, and a data file missing from
//! the middle of the queue.
//!
//! A zero length word is the end of the data only where nothing valid can
//! follow (the published tail of the active file). Anywhere else it is
//! damage: reads raise `Error::Corrupted` naming the file and offset, a
//! writer opening after a clean close refuses instead of reusing the lost
//! sequences, `get` of a later message never says "not in the queue", and
//! `skip_damaged` steps over the hole to the next frame that checks out.

mod common;

use std::path::{Path, PathBuf};

use common::{data_files, payload, small};
use litemq::format::frame::DATA_HEADER_LEN;
use litemq::{Error, Queue, QueueBuilder, Record, Start};

const PAGE: usize = 4096;

fn fill(base: &Path, n: u64) {
    let q = small(base).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        assert_eq!(app.append(&payload(i)).unwrap(), i);
    }
    q.close().unwrap();
}

/// Zeroes the `page`-th 4 KiB page after the data header of `file`.
fn zero_page(file: &Path, page: usize) -> usize {
    let mut bytes = std::fs::read(file).unwrap();
    let at = DATA_HEADER_LEN + page * PAGE;
    bytes[at..at + PAGE].fill(0);
    std::fs::write(file, bytes).unwrap();
    at
}

/// True when `offset` is in the zeroed page at `hole`, or at the start of
/// the frame it cut (frames here are under 512 bytes).
fn in_hole(offset: u64, hole: usize) -> bool {
    (hole as u64 - 512..(hole + PAGE) as u64).contains(&offset)
}

fn corrupted_at(e: &Error) -> (PathBuf, u64) {
    match e {
        Error::Corrupted { path, offset, .. } => (path.clone(), *offset),
        other => panic!("expected Error::Corrupted, got {other:?}"),
    }
}

/// Reads from the start, stepping over damage; returns the messages read
/// (each checked against what was appended) and the errors met.
fn read_skipping(q: &Queue) -> (Vec<u64>, Vec<Error>) {
    let mut t = q.tailer(Start::Beginning).unwrap();
    let (mut seqs, mut errors) = (Vec::new(), Vec::new());
    loop {
        match t.read_next() {
            Ok(Some(m)) => {
                assert_eq!(m.payload, payload(m.seq).as_slice(), "payload of {}", m.seq);
                seqs.push(m.seq);
            }
            Ok(None) => break,
            Err(e) => {
                errors.push(e);
                assert!(errors.len() < 10, "too many errors: {errors:?}");
                assert!(t.skip_damaged().unwrap(), "a hole with frames after it");
            }
        }
    }
    (seqs, errors)
}

#[test]
fn zeroed_page_in_a_sealed_file_is_damage_not_the_end_of_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 1500);
    let files = data_files(dir.path());
    assert!(files.len() >= 3, "the test needs sealed files");
    let hole = zero_page(&files[0], 3);

    for read_only in [true, false] {
        let q = small(dir.path()).read_only(read_only).open().unwrap();
        // A tailer raises at the hole instead of returning "nothing more".
        let mut t = q.tailer(Start::Beginning).unwrap();
        let err = loop {
            match t.read_next() {
                Ok(Some(_)) => {}
                Ok(None) => panic!("the hole at {hole} was read as the end of the queue"),
                Err(e) => break e,
            }
        };
        let (path, offset) = corrupted_at(&err);
        assert_eq!(path, files[0]);
        assert!(
            in_hole(offset, hole),
            "offset {offset} is not in the zeroed page at {hole}"
        );

        // Every message after the hole reads back (in the damaged file from
        // the first frame that checks out, and every later file whole).
        let (seqs, errors) = read_skipping(&q);
        // The frame the page cut (bad CRC), then the hole.
        assert!((1..=2).contains(&errors.len()), "{errors:?}");
        for e in &errors {
            assert_eq!(corrupted_at(e).0, files[0]);
        }
        let lost = 1500 - seqs.len() as u64;
        assert!(lost > 0 && lost < 60, "{lost} messages lost to one page");
        assert_eq!(*seqs.last().unwrap(), 1499);
        assert!(seqs.windows(2).all(|w| w[0] < w[1]));

        // `get` of a later message works or says where the damage is, and
        // never says the message is not in the queue.
        let missing: Vec<u64> = (0..1500).filter(|s| !seqs.contains(s)).collect();
        for seq in missing {
            match q.get(seq) {
                Err(Error::Corrupted { .. }) => {}
                other => panic!("get({seq}) in the hole: {other:?}"),
            }
        }
        for &seq in &seqs {
            assert_eq!(q.get(seq).unwrap().payload, payload(seq), "get({seq})");
        }
    }
}

#[test]
fn zeroed_page_in_the_last_file_after_a_clean_close_refuses_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 120); // about 20 KiB: one file
    let files = data_files(dir.path());
    assert_eq!(files.len(), 1);
    let hole = zero_page(&files[0], 1);

    // With verify_on_startup every frame is walked: refused, naming where.
    let err = small(dir.path())
        .verify_on_startup(true)
        .open()
        .expect_err("a clean close with damage after it must refuse");
    let (path, offset) = corrupted_at(&err);
    assert_eq!(path, files[0]);
    assert!(in_hole(offset, hole), "{offset} vs {hole}");

    // Without it the open may succeed (the hole is before the tail it
    // checks) but must never hand the lost sequences to new appends.
    match small(dir.path()).open() {
        Err(e) => {
            corrupted_at(&e);
        }
        Ok(q) => {
            assert_eq!(q.appender().unwrap().append(b"new").unwrap(), 120);
            let (_, errors) = read_skipping(&q);
            assert!((1..=2).contains(&errors.len()), "{errors:?}");
        }
    }
}

#[test]
fn zeroed_tail_after_a_clean_close_refuses_even_without_verify() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 120);
    let file = &data_files(dir.path())[0];
    // The page holding the last frames: the tail check meets it.
    let end = {
        let q = small(dir.path()).read_only(true).open().unwrap();
        let mut t = q.tailer(Start::Seq(119)).unwrap();
        let m = t.read_next().unwrap().unwrap();
        (m.position() & ((1 << 40) - 1)) as usize
    };
    let page = (end - DATA_HEADER_LEN) / PAGE;
    zero_page(file, page);

    let err = small(dir.path())
        .open()
        .expect_err("the clean close recorded next_seq 120");
    let (path, _) = corrupted_at(&err);
    assert_eq!(&path, file);
    // Nothing was cut: the damaged file is still there for a repair.
    let q = small(dir.path()).read_only(true).open().unwrap();
    let err = read_skipping_until_error(&q);
    corrupted_at(&err);
}

fn read_skipping_until_error(q: &Queue) -> Error {
    let mut t = q.tailer(Start::Beginning).unwrap();
    loop {
        match t.read_next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("read the damaged tail as the end of the queue"),
            Err(e) => return e,
        }
    }
}

#[test]
fn find_reports_a_data_file_missing_from_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    {
        let q = small(dir.path()).open().unwrap();
        let app = q.appender().unwrap();
        for i in 0..1500u64 {
            let p = payload(i);
            let r = Record {
                key: Some(b"k"),
                ..Record::new(&p)
            };
            app.append_record(&r).unwrap();
        }
        q.close().unwrap();
    }
    let files = data_files(dir.path());
    assert!(files.len() >= 3);
    std::fs::remove_file(&files[1]).unwrap();

    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    match q.find(b"k", None, None, None) {
        Err(Error::Corrupted { reason, .. }) => {
            assert!(reason.contains("missing"), "{reason}");
        }
        Ok(found) => panic!(
            "find returned {} of 1500 messages without saying a file is missing",
            found.len()
        ),
        Err(e) => panic!("unexpected error {e:?}"),
    }
}

#[test]
fn zeroed_page_before_the_last_index_entry_of_the_last_file_refuses_the_writer() {
    // The recovery walk after a clean close starts at the last sparse-index
    // entry, past the hole here (index_interval 4): the open must still see
    // that the data does not reach the entries it has, and refuse.
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 120);
    let files = data_files(dir.path());
    assert_eq!(files.len(), 1);
    let hole = zero_page(&files[0], 1);
    match small(dir.path()).open() {
        Err(e) => {
            let (path, offset) = corrupted_at(&e);
            assert_eq!(path, files[0]);
            assert!(in_hole(offset, hole), "{offset} vs {hole}");
        }
        Ok(q) => panic!(
            "the writer opened over the hole at {hole}, next_seq {}",
            q.next_seq()
        ),
    }
}

#[test]
fn a_tailer_of_the_writer_reports_a_hole_below_the_published_tail() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..120 {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    let file = data_files(dir.path()).pop().unwrap();
    // The page lost under the running writer (what a bad disk leaves).
    let hole = {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&file).unwrap();
        let at = DATA_HEADER_LEN + PAGE;
        f.write_all_at(&[0u8; PAGE], at as u64).unwrap();
        at
    };
    let mut t = q.tailer(Start::Beginning).unwrap();
    let err = loop {
        match t.read_next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("the hole at {hole} was read as the end of the queue"),
            Err(e) => break e,
        }
    };
    let (path, offset) = corrupted_at(&err);
    assert_eq!(path, file);
    assert!(in_hole(offset, hole), "{offset} vs {hole}");
}

#[test]
fn a_last_data_file_deleted_after_a_clean_close_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    fill(dir.path(), 1500);
    let files = data_files(dir.path());
    assert!(files.len() >= 3);
    let last = files.last().unwrap();
    std::fs::remove_file(last).unwrap();

    // A reader stops where the data stops, and says so.
    let q = small(dir.path()).read_only(true).open().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let err = loop {
        match t.read_next() {
            Ok(Some(_)) => {}
            Ok(None) => panic!("read to seq {} as if the queue ended there", t.next_seq()),
            Err(e) => break e,
        }
    };
    match &err {
        Error::Corrupted { path, reason, .. } => {
            assert_eq!(path, &files[files.len() - 2], "{reason}");
            assert!(reason.contains("missing"), "{reason}");
        }
        other => panic!("expected Error::Corrupted, got {other:?}"),
    }
    drop(t);
    q.close().unwrap();

    // The writer refuses instead of reusing the lost sequences.
    let err = small(dir.path())
        .open()
        .expect_err("the clean close recorded next_seq 1500");
    corrupted_at(&err);
}
