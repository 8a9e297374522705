//! Sealed data files read from bytes (`litemq::archived`), as archives are: every message
//! comes back as appended, and damage anywhere in a file, or a byte range cut wrongly, is
//! `Corrupted` naming the file, never a wrong message or a panic.

mod common;

use std::path::Path;

use common::{data_files, payload, small};
use litemq::archived::{read_frames, read_sealed, summarize};
use litemq::{ColumnSet, Error};

/// `n` messages of varying length across several 64 KiB files; the sealed files' bytes.
fn sealed_files(dir: &Path, n: u64) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let q = small(dir).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..n {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    q.close().unwrap();
    let files = data_files(dir);
    files[..files.len() - 1]
        .iter()
        .map(|p| (p.clone(), std::fs::read(p).unwrap()))
        .collect()
}

fn payload_of(c: &litemq::Columns, row: usize) -> &[u8] {
    let (a, b) = (
        c.payload_offsets[row] as usize,
        c.payload_offsets[row + 1] as usize,
    );
    &c.payload_data[a..b]
}

#[test]
fn every_message_of_every_sealed_file_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let files = sealed_files(dir.path(), 1500);
    assert!(files.len() >= 3);
    let mut next = 0;
    for (path, bytes) in &files {
        let s = summarize(bytes, path).unwrap();
        assert!(s.footer);
        assert_eq!(s.first_seq, next);
        let c = read_sealed(bytes, path, 0, u64::MAX, usize::MAX, ColumnSet::ALL, None).unwrap();
        assert_eq!(c.rows as u64, s.end_seq - s.first_seq);
        for row in 0..c.rows {
            let seq = c.seq[row] as u64;
            assert_eq!(seq, s.first_seq + row as u64);
            assert_eq!(payload_of(&c, row), payload(seq).as_slice());
        }
        // A sub-range, and a row limit.
        let c = read_sealed(
            bytes,
            path,
            s.first_seq + 3,
            s.first_seq + 9,
            4,
            ColumnSet::ALL,
            None,
        )
        .unwrap();
        assert_eq!(
            c.seq,
            (3..7).map(|i| (s.first_seq + i) as i64).collect::<Vec<_>>()
        );
        next = s.end_seq;
    }
}

#[test]
fn a_byte_range_decodes_exactly_the_messages_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let files = sealed_files(dir.path(), 600);
    let (path, bytes) = &files[0];
    let s = summarize(bytes, path).unwrap();
    // Walk to the offsets of messages 5 and 12 with the full read's frame sizes.
    let mut at = 4096usize;
    let mut offsets = vec![];
    for i in 0..s.end_seq - s.first_seq {
        offsets.push(at);
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += (len + 12).div_ceil(8) * 8;
        assert!(i < 10_000);
    }
    let (lo, hi) = (offsets[5], offsets[12]);
    let (c, end) = read_frames(
        &bytes[lo..hi],
        path,
        lo as u64,
        s.first_seq + 5,
        7,
        ColumnSet::ALL,
        None,
    )
    .unwrap();
    assert_eq!(c.rows, 7);
    assert_eq!(end, hi as u64);
    assert_eq!(payload_of(&c, 0), payload(s.first_seq + 5).as_slice());
    // Asking for more than the range holds is an error, not fewer rows.
    let e = read_frames(
        &bytes[lo..hi],
        path,
        lo as u64,
        s.first_seq + 5,
        8,
        ColumnSet::ALL,
        None,
    );
    assert!(matches!(e, Err(Error::Corrupted { .. })), "{e:?}");
    // A range that starts inside a frame fails its CRC (or its length).
    let e = read_frames(
        &bytes[lo + 8..hi],
        path,
        lo as u64 + 8,
        5,
        2,
        ColumnSet::ALL,
        None,
    );
    assert!(matches!(e, Err(Error::Corrupted { .. })), "{e:?}");
}

#[test]
fn damage_anywhere_in_a_sealed_file_is_corrupted_never_a_wrong_message() {
    let dir = tempfile::tempdir().unwrap();
    let files = sealed_files(dir.path(), 600);
    let (path, bytes) = &files[0];
    let s = summarize(bytes, path).unwrap();
    let frames_end = s.frames_end as usize;
    let len = bytes.len();
    // Header, first frame, a middle frame, the end-of-file marker, the footer, truncation.
    let spots = [
        9,
        60,
        4096 + 2,
        4096 + 30,
        (4096 + frames_end) / 2,
        frames_end + 1,
        len - 100,
        len - 1,
    ];
    for at in spots {
        let mut bad = bytes.clone();
        bad[at] ^= 0x20;
        let e = read_sealed(&bad, path, 0, u64::MAX, usize::MAX, ColumnSet::ALL, None);
        match e {
            Err(Error::Corrupted { path: p, .. }) => assert_eq!(&p, path),
            other => panic!("a flipped bit at {at} gave {other:?}"),
        }
    }
    for cut in [0, 100, 4096, len - 128, len - 1] {
        assert!(summarize(&bytes[..cut], path).is_err(), "cut at {cut}");
    }
}
