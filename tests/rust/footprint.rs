//! Disk footprint: files are sparse and allocated ahead of the writer,
//! sealed files end with a footer and are trimmed, a closed queue holds
//! about what it stores, and version-3 files (full length, no footer) stay
//! readable and writable.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use litemq::format::crc::crc64;
use litemq::format::footer::{trimmed_len, Footer, FOOTER_LEN};
use litemq::format::frame::{self, FrameAt, DATA_HEADER_LEN};
use litemq::{Error, Queue, QueueBuilder, RollStrategy, Start};

fn files_with(base: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, ext, out);
            } else if p.extension().is_some_and(|x| x == ext) {
                out.push(p);
            }
        }
    }
    walk(base, ext, &mut out);
    out.sort();
    out
}

fn allocated(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().blocks() * 512
}

/// Offset of the end-of-file marker (or of the end of the data) of a data file.
fn frames_end(bytes: &[u8]) -> (usize, u64) {
    let mut at = DATA_HEADER_LEN;
    let mut n = 0;
    loop {
        let len = frame::plain_len(bytes, at).unwrap();
        match frame::decode(bytes, at, len).unwrap() {
            FrameAt::Frame { next, .. } => {
                at = next;
                n += 1;
            }
            _ => return (at, n),
        }
    }
}

fn payload(i: u64) -> Vec<u8> {
    let mut v = i.to_le_bytes().to_vec();
    v.resize(100 + (i % 50) as usize, i as u8);
    v
}

#[test]
fn sealed_files_are_trimmed_and_end_with_a_footer() {
    let dir = tempfile::tempdir().unwrap();
    let file_size = 4 << 20;
    let q = QueueBuilder::new(dir.path())
        .file_size(file_size)
        .index_interval(8)
        .roll(RollStrategy::Count(100))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..350 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    let data = files_with(dir.path(), "data");
    assert_eq!(data.len(), 4);
    for (k, p) in data.iter().enumerate() {
        let bytes = std::fs::read(p).unwrap();
        if k == 3 {
            // The active file keeps its length (format 11: one chunk, a
            // sixteenth of a small `file_size`, as its 50 messages fit);
            // what was allocated past its last frame was given back at
            // close.
            assert_eq!(bytes.len() as u64, file_size / 16);
            let (end, n) = frames_end(&bytes);
            assert_eq!(n, 50);
            assert!(
                allocated(p) <= (end as u64).div_ceil(4096) * 4096 + 4096,
                "closed active file holds {} bytes for {end} written",
                allocated(p)
            );
            continue;
        }
        let (end, n) = frames_end(&bytes);
        assert_eq!(n, 100);
        assert_eq!(
            bytes.len() as u64,
            trimmed_len(end as u64, file_size),
            "{}: trimmed to its marker and footer, rounded to a page",
            p.display()
        );
        assert!(bytes.len() < 32 << 10, "{} bytes", bytes.len());
        assert_eq!(frame::plain_len(&bytes, end), Some(frame::END_OF_FILE));
        let f = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        let first = q_first_ts(dir.path(), k as u64 * 100);
        assert_eq!(
            f,
            Footer {
                frames_end: end as u64,
                frames_crc: crc64(&[&bytes[DATA_HEADER_LEN..end]]),
                file_number: k as u64 + 1,
                first_seq: k as u64 * 100,
                end_seq: k as u64 * 100 + 100,
                first_ts: first,
                last_ts: q_first_ts(dir.path(), k as u64 * 100 + 99),
                content_flags: 0,
                hole_seqs: 0,
            }
        );
        // Its sparse index is only as long as its entries and a chunk
        // (format 11: it grows with them, and is not trimmed at seal), and
        // keeps only its used pages.
        let idx = p.with_extension("index");
        let idx_len = std::fs::metadata(&idx).unwrap().len();
        assert!(
            (4096..=4096 + (16 << 10)).contains(&idx_len),
            "{idx_len} bytes"
        );
        assert!(allocated(&idx) <= 8192, "{} bytes", allocated(&idx));
    }
    // Everything reads back, and a verifying open checks every footer.
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..350 {
        assert_eq!(t.read_next().unwrap().unwrap().payload, payload(i));
    }
    assert_eq!(q.get(150).unwrap().payload, payload(150));
}

fn q_first_ts(base: &Path, seq: u64) -> u64 {
    let q = QueueBuilder::new(base).read_only(true).open().unwrap();
    q.get(seq).unwrap().timestamp
}

#[test]
fn a_damaged_footer_fails_verification() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(64 << 10)
        .roll(RollStrategy::Count(10))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..25 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    let first = files_with(dir.path(), "data").remove(0);
    let mut bytes = std::fs::read(&first).unwrap();
    let n = bytes.len();
    bytes[n - FOOTER_LEN + 80] ^= 1; // a reserved byte: only the footer's CRC sees it
    std::fs::write(&first, &bytes).unwrap();
    // Readers do not need the footer...
    let q = QueueBuilder::new(dir.path()).open().unwrap();
    assert_eq!(q.get(3).unwrap().payload, payload(3));
    q.close().unwrap();
    // ...a verifying open reports it.
    let err = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap_err();
    assert!(
        matches!(&err, Error::Corrupted { path, reason, .. } if *path == first && reason.contains("footer")),
        "{err:?}"
    );
}

/// A writer process killed between a file's end-of-file marker and its
/// footer (with several writers, the others go on in the next file) leaves
/// a sealed file at full length without a footer. A verifying open checks
/// its frames and finishes the seal instead of refusing the queue.
#[test]
fn a_seal_cut_before_its_footer_is_finished_by_a_verifying_open() {
    let dir = tempfile::tempdir().unwrap();
    let file_size: u64 = 64 << 10;
    let q = QueueBuilder::new(dir.path())
        .file_size(file_size)
        .roll(RollStrategy::Count(10))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..25 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    let first = files_with(dir.path(), "data").remove(0);
    let trimmed = std::fs::read(&first).unwrap();
    // Back to the state before the footer: full length, zeros past the marker.
    let (end, _) = frames_end(&trimmed);
    let mut cut = trimmed[..end + 8].to_vec();
    cut.resize(file_size as usize, 0);
    std::fs::write(&first, &cut).unwrap();
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert!(q.stats().recovery.finished_seals >= 1);
    for i in 0..25 {
        assert_eq!(q.get(i).unwrap().payload, payload(i));
    }
    q.close().unwrap();
    assert_eq!(
        std::fs::read(&first).unwrap(),
        trimmed,
        "the seal is finished as the writer would have"
    );
}

/// `roll = count:1` with the default 1 GiB files: each file costs a few
/// pages of disk, not 1 GiB (it filled a 65 GB disk in a minute before).
#[test]
fn rolling_every_message_with_default_file_size_costs_kilobytes() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .roll(RollStrategy::Count(1))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..40 {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    let total: u64 = files_with(dir.path(), "data")
        .iter()
        .chain(files_with(dir.path(), "index").iter())
        .map(|p| allocated(p))
        .sum();
    // 39 sealed files (data + index page) and the active one (its first chunk).
    assert!(total < 4 << 20, "{total} bytes allocated for 40 messages");
    q.close().unwrap();
    let total: u64 = files_with(dir.path(), "data")
        .iter()
        .chain(files_with(dir.path(), "index").iter())
        .map(|p| allocated(p))
        .sum();
    assert!(
        total <= 40 * 3 * 8192,
        "{total} bytes allocated after close"
    );
    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    assert_eq!(q.get(39).unwrap().payload, payload(39));
}

/// Rewrites a current-version data file that was never sealed (full
/// length, no footer) and its index into an older `version` (3 or 4):
/// the same bytes but the version fields, and no dense index. What a
/// version-3 or 4 writer left at close (an unsealed version-4 file has
/// the same bytes as a version-3 one).
fn make_version(data: &Path, version: u32) {
    std::fs::remove_file(data.with_extension("offsets")).unwrap();
    for (p, crc_at) in [
        (data.to_path_buf(), 56usize),
        (data.with_extension("index"), 40),
    ] {
        let mut b = std::fs::read(&p).unwrap();
        b[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = crc64(&[&b[..crc_at]]);
        b[crc_at..crc_at + 8].copy_from_slice(&crc.to_le_bytes());
        // Before version 11 a data file being written and a sparse index
        // are full length (sparse files), as that version wrote them.
        let full = if crc_at == 56 {
            u64::from_le_bytes(b[40..48].try_into().unwrap())
        } else {
            256 + 32 * u64::from_le_bytes(b[32..40].try_into().unwrap())
        };
        if (b.len() as u64) < full {
            b.resize(full as usize, 0);
        }
        std::fs::write(&p, b).unwrap();
    }
}

/// The queue the version tests use: small files, four messages an index
/// entry, 30 messages a file.
fn open_small(dir: &Path, file_size: u64) -> Queue {
    QueueBuilder::new(dir)
        .file_size(file_size)
        .index_interval(4)
        .roll(RollStrategy::Count(30))
        .open()
        .unwrap()
}

/// Writes messages 0..20 into one file with [`open_small`], then makes the
/// queue an older `version` one ([`make_version`] and its metadata).
/// Returns the metadata path.
fn old_version_queue(dir: &Path, file_size: u64, version: u32) -> PathBuf {
    let q = open_small(dir, file_size);
    let app = q.appender().unwrap();
    for i in 0..20 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    make_version(&files_with(dir, "data").remove(0), version);
    let meta = dir.join("metadata.json");
    let m = std::fs::read_to_string(&meta).unwrap().replace(
        &format!("\"format_version\": {}", litemq::FORMAT_VERSION),
        &format!("\"format_version\": {version}"),
    );
    std::fs::write(&meta, m).unwrap();
    meta
}

#[test]
fn version_3_files_stay_readable_and_writable() {
    let dir = tempfile::tempdir().unwrap();
    let file_size = 64 << 10;
    let open = || open_small(dir.path(), file_size);
    let meta = old_version_queue(dir.path(), file_size, 3);

    // Read-only: a version-3 queue reads as it is.
    let r = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    assert_eq!(r.get(19).unwrap().payload, payload(19));
    drop(r);
    // A writer appends to the version-3 file, seals it the version-3 way
    // (marker only, full length) and writes current-version files after it.
    let q = open();
    let app = q.appender().unwrap();
    for i in 20..70 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    let data = files_with(dir.path(), "data");
    assert_eq!(data.len(), 3);
    let b = std::fs::read(&data[0]).unwrap();
    assert_eq!(
        b.len() as u64,
        file_size,
        "a version-3 file is never trimmed"
    );
    assert_eq!(&b[8..12], &3u32.to_le_bytes());
    let (end, n) = frames_end(&b);
    assert_eq!(n, 30);
    assert_eq!(frame::plain_len(&b, end), Some(frame::END_OF_FILE));
    assert!(b[end + 8..].iter().all(|&x| x == 0), "no footer");
    let b = std::fs::read(&data[1]).unwrap();
    assert_eq!(&b[8..12], &litemq::FORMAT_VERSION.to_le_bytes());
    assert!((b.len() as u64) < file_size, "new files are trimmed");
    // Both kinds verify and read back, after a crash too.
    let m = std::fs::read_to_string(&meta).unwrap();
    let current = format!("\"format_version\": {}", litemq::FORMAT_VERSION);
    assert!(m.contains(&current), "{m}");
    std::fs::write(
        &meta,
        m.replace("\"clean_shutdown\": true", "\"clean_shutdown\": false"),
    )
    .unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(file_size)
        .verify_on_startup(true)
        .open()
        .unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    for i in 0..70 {
        assert_eq!(t.read_next().unwrap().unwrap().payload, payload(i));
    }
    assert!(t.read_next().unwrap().is_none());
}

/// A version-4 queue (no dense index) is read through its sparse index;
/// a version-5 writer continues its last file as version 4 (no dense index
/// appears for it) and creates current-version files, with one, after it. `get`
/// and `seek` of every sequence, across both kinds.
#[test]
fn version_4_files_stay_readable_and_writable_without_a_dense_index() {
    let dir = tempfile::tempdir().unwrap();
    let open = || open_small(dir.path(), 64 << 10);
    old_version_queue(dir.path(), 64 << 10, 4);
    let r = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    for i in (0..20).rev() {
        assert_eq!(r.get(i).unwrap().payload, payload(i));
    }
    drop(r);
    let q = open();
    let app = q.appender().unwrap();
    for i in 20..70 {
        app.append(&payload(i)).unwrap();
    }
    app.flush().unwrap();
    let data = files_with(dir.path(), "data");
    assert_eq!(data.len(), 3);
    assert!(!data[0].with_extension("offsets").exists());
    assert_eq!(
        &std::fs::read(&data[1]).unwrap()[8..12],
        &litemq::FORMAT_VERSION.to_le_bytes()
    );
    assert!(data[1].with_extension("offsets").exists());
    for r in [
        &q,
        &QueueBuilder::new(dir.path())
            .read_only(true)
            .open()
            .unwrap(),
    ] {
        let mut t = r.tailer(Start::Beginning).unwrap();
        for k in 0..70 {
            let i = (k * 37) % 70;
            assert_eq!(r.get(i).unwrap().payload, payload(i), "get {i}");
            t.seek(i).unwrap();
            assert_eq!(
                t.read_next().unwrap().unwrap().payload,
                payload(i),
                "seek {i}"
            );
        }
    }
}

/// 300 keyed messages: a key index of kilobytes (it was a 44 MiB file).
#[test]
fn a_few_keyed_messages_use_a_small_key_index() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(64 << 10)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..300u64 {
        let key = format!("order-{}", i % 40);
        app.append_record(&litemq::Record {
            key: Some(key.as_bytes()),
            ..litemq::Record::new(&payload(i))
        })
        .unwrap();
    }
    let found = q.find(b"order-7", None, None, None).unwrap();
    let seqs: Vec<u64> = found.iter().map(|m| m.seq).collect();
    assert_eq!(seqs, (0..300).filter(|i| i % 40 == 7).collect::<Vec<_>>());
    q.close().unwrap();
    let idx = files_with(&dir.path().join("index"), "idx");
    let (len, alloc): (u64, u64) = idx
        .iter()
        .map(|p| (std::fs::metadata(p).unwrap().len(), allocated(p)))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert!(
        len < 256 << 10 && alloc < 256 << 10,
        "{len} bytes, {alloc} allocated"
    );
}

/// A sealed key-index file holds disk for its used items only: closing
/// gives back the pages of the items never written, and writing on after a
/// reopen allocates them again first (a full disk is an error, not SIGBUS).
#[test]
fn a_closed_key_index_file_gives_back_its_unused_items() {
    use litemq::index::key_index::{KeyIndexConfig, KeyIndexReader, KeyIndexWriter};
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_790_000_000_000_000u64;
    let cfg = KeyIndexConfig::default();
    let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    // The first file (4096 items) full, the second (16384 items) with 10.
    for i in 0..4106u64 {
        w.add(format!("k{}", i % 50).as_bytes(), 1 + i * 64, t0 + i)
            .unwrap();
    }
    w.close().unwrap();
    drop(w);
    let files = files_with(dir.path(), "idx");
    assert_eq!(files.len(), 2);
    let len = std::fs::metadata(&files[1]).unwrap().len();
    assert_eq!(len, 40 + 4 * 8192 + 20 * 16384 + 56);
    let slots_and_used = 40 + 4 * 8192 + 20 * 10;
    assert!(
        allocated(&files[1]) <= (slots_and_used as u64).div_ceil(4096) * 4096 + 8192,
        "{} of {len} bytes allocated",
        allocated(&files[1])
    );
    // Reopen and write on: the unused items get their blocks back first.
    let mut w = KeyIndexWriter::open_or_create(dir.path(), cfg).unwrap();
    for i in 4106..4200u64 {
        w.add(format!("k{}", i % 50).as_bytes(), 1 + i * 64, t0 + i)
            .unwrap();
    }
    assert!(allocated(&files[1]) >= len - 4096);
    w.close().unwrap();
    let r = KeyIndexReader::open(dir.path()).unwrap();
    let want: Vec<u64> = (0..4200u64)
        .filter(|i| i % 50 == 7)
        .map(|i| 1 + i * 64)
        .collect();
    assert_eq!(r.lookup(b"k7", None, None).unwrap(), want);
}

/// A sealed file cut short exactly at a frame boundary (its marker and
/// footer gone): shorter files are accepted now, so readers must report it
/// as damage, not index past the mapping.
#[test]
fn a_sealed_file_cut_at_a_frame_boundary_is_reported_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(64 << 10)
        .index_interval(4)
        .roll(RollStrategy::Count(40))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    for i in 0..60 {
        app.append(&payload(i)).unwrap();
    }
    q.close().unwrap();
    let first = files_with(dir.path(), "data").remove(0);
    let bytes = std::fs::read(&first).unwrap();
    // The end of frame 35: past the last sparse-index entry (32).
    let mut at = DATA_HEADER_LEN;
    for _ in 0..35 {
        let len = frame::plain_len(&bytes, at).unwrap();
        at += frame::frame_size(len as usize);
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&first)
        .unwrap();
    f.set_len(at as u64).unwrap();
    drop(f);
    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    assert_eq!(q.get(34).unwrap().payload, payload(34));
    for seq in [35, 36, 39] {
        let err = q.get(seq).unwrap_err();
        assert!(
            matches!(err, Error::Corrupted { .. }),
            "get({seq}): {err:?}"
        );
    }
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut n = 0;
    let err = loop {
        match t.read_next() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("the damage must be reported"),
            Err(e) => break e,
        }
    };
    assert_eq!(n, 35);
    assert!(matches!(err, Error::Corrupted { .. }), "{err:?}");
}

/// Format version 11 (issue 33, "Default files"): files are as long as
/// their data. A queue of 7 messages with the default 1 GiB `file_size`
/// used to show a 1 GiB data file and a 341 MiB `.offsets` file in
/// `ls -l` (sparse files): `cp`, `tar` or `scp` without sparse support
/// copied all of it. Now the data file is one chunk (1 MiB) long, its
/// indexes a page each, and FORMAT.md's bound holds: an active data file is
/// at most `max(2 × (E + 136), 1 MiB)` bytes (`E` the end of its frames),
/// its dense index at most `max(2 × (64 + 8n), 16 KiB)`.
#[test]
fn a_queue_of_seven_messages_has_small_files() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..7 {
        app.append(format!("message {i}").as_bytes()).unwrap();
    }
    app.flush().unwrap();
    let check = |when: &str| {
        let data = files_with(dir.path(), "data");
        assert_eq!(data.len(), 1);
        let len = |p: &Path| std::fs::metadata(p).unwrap().len();
        let d = len(&data[0]);
        assert!(
            (4096 + 8 + 128..=1 << 20).contains(&d),
            "{when}: the data file is {d} bytes"
        );
        let o = len(&data[0].with_extension("offsets"));
        assert!(o <= 16 << 10, "{when}: the dense index is {o} bytes");
        let i = len(&data[0].with_extension("index"));
        assert!(i <= 16 << 10, "{when}: the sparse index is {i} bytes");
        let total: u64 = ["data", "offsets", "index"]
            .iter()
            .flat_map(|e| files_with(dir.path(), e))
            .map(|p| len(&p))
            .sum();
        assert!(total <= 2 << 20, "{when}: {total} bytes in all");
    };
    check("open");
    // A reader in another handle reads them all (it maps the file at its
    // full size and reads up to its length).
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .open()
        .unwrap();
    let mut t = ro.tailer(Start::Beginning).unwrap();
    for i in 0..7u64 {
        let m = t.read_next().unwrap().unwrap();
        assert_eq!(m.payload, format!("message {i}").as_bytes());
    }
    assert!(t.read_next().unwrap().is_none());
    q.close().unwrap();
    check("closed");
    // Reopened, written on, read again.
    let q = QueueBuilder::new(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    assert_eq!(app.append(b"eighth").unwrap(), 7);
    app.flush().unwrap();
    check("reopened");
    assert_eq!(q.get(7).unwrap().payload, b"eighth");
    assert_eq!(t.read_next().unwrap().unwrap().payload, b"eighth");
    q.close().unwrap();
}

/// A file grows in chunks as it is written (a sixteenth of `file_size` at
/// first for a small file, then as long as it is), never past its
/// `file_size`; sealed, it is trimmed as before.
#[test]
fn an_active_file_grows_in_chunks_with_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let file_size = 1 << 20;
    let q = QueueBuilder::new(dir.path())
        .file_size(file_size)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let mut lengths = vec![];
    for i in 0..3000u64 {
        app.append(&payload(i)).unwrap();
        if i % 50 == 0 {
            app.flush().unwrap();
            let data = files_with(dir.path(), "data");
            let last = data.last().unwrap();
            let bytes = std::fs::read(last).unwrap();
            let (end, _) = frames_end(&bytes);
            let len = bytes.len() as u64;
            assert!(len <= file_size);
            assert!(
                len >= end as u64 + 8 + 128,
                "the file holds its frames, the word after them, marker and footer"
            );
            assert!(
                len <= (2 * (end as u64 + 136)).max(64 << 10),
                "{len} bytes for frames up to {end}"
            );
            if lengths.last() != Some(&len) {
                lengths.push(len);
            }
        }
    }
    assert!(lengths.len() >= 4, "several growth steps: {lengths:?}");
    q.close().unwrap();
    // Closed, it holds about what it stores: the blocks allocated ahead of
    // the writer, past its last frame and past its length, are given back.
    let last = files_with(dir.path(), "data").pop().unwrap();
    let (end, _) = frames_end(&std::fs::read(&last).unwrap());
    assert!(
        allocated(&last) <= (end as u64).div_ceil(4096) * 4096 + 4096,
        "closed active file holds {} bytes for {end} written",
        allocated(&last)
    );
}
