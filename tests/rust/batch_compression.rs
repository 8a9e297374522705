//! Batches compressed together (format 9, extension bit 0x08): what lands
//! on disk, and every read path delivering members one by one.

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::*;
use litemq::format::frame::{self, FrameAt, DATA_HEADER_LEN};
use litemq::format::record::{self, Record};
use litemq::{Codec, Compression, Error, HeaderField, QueueBuilder, Start};

/// A small JSON event, as the benchmark's data set.
fn event(i: u64) -> Vec<u8> {
    format!(
        "{{\"event_id\":{i},\"user\":\"u{}\",\"kind\":\"page_view\",\"ts\":{}}}",
        i % 17,
        1_700_000_000 + i
    )
    .into_bytes()
}

fn zstd() -> Option<Compression> {
    Some(Compression {
        codec: Codec::Zstd,
        level: 1,
        min_size: 64,
    })
}

/// Every frame of a data file: `(offset, record bytes)`.
fn frames(path: &Path) -> Vec<(usize, Vec<u8>)> {
    let bytes = std::fs::read(path).unwrap();
    let mut at = DATA_HEADER_LEN;
    let mut out = Vec::new();
    loop {
        let Some(len) = frame::plain_len(&bytes, at) else {
            return out;
        };
        match frame::decode(&bytes, at, len) {
            Ok(FrameAt::Frame { record_len, next }) => {
                out.push((at, bytes[at + 4..at + 4 + record_len].to_vec()));
                at = next;
            }
            _ => return out,
        }
    }
}

fn batch_frames(base: &Path) -> usize {
    data_files(base)
        .iter()
        .flat_map(|f| frames(f))
        .filter(|(_, r)| record::is_batch_record(r))
        .count()
}

fn write_at(path: &Path, offset: usize, bytes: &[u8]) {
    let f = OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset as u64).unwrap();
}

/// Rewrites the record of the frame at `at` (same length) with a valid CRC.
fn rewrite_record(path: &Path, at: usize, rec: &[u8]) {
    let mut f = Vec::new();
    frame::encode_into(&mut f, |out| out.extend_from_slice(rec));
    write_at(path, at, &f);
}

fn mark_unclean(base: &Path) {
    let p = base.join("metadata.json");
    let s = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
    std::fs::write(p, s).unwrap();
}

#[test]
fn members_round_trip_every_field_through_every_read_path() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(1 << 20)
        .compression(zstd())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let first = app.append(b"plain before").unwrap();
    let payloads: Vec<Vec<u8>> = (0..3000).map(event).collect();
    let headers = [
        HeaderField {
            name: "source",
            value: b"web",
            value_is_text: true,
        },
        HeaderField {
            name: "raw",
            value: &[0, 255],
            value_is_text: false,
        },
    ];
    let records: Vec<Record<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| Record {
            payload: p,
            headers: if i.is_multiple_of(3) { &headers } else { &[] },
            priority: (i % 5) as u8,
            ..Record::new(p)
        })
        .collect();
    let range = app.append_batch_together(&records, None).unwrap();
    assert_eq!(range, first + 1..first + 3001);
    let after = app.append(b"plain after").unwrap();
    app.flush().unwrap();
    // 3000 events of ~80 bytes: several 64 KiB blocks, far fewer frames.
    let n = batch_frames(dir.path());
    assert!((3..=8).contains(&n), "{n} batch frames");

    let check = |m: &litemq::OwnedMessage, i: usize| {
        assert_eq!(m.seq, range.start + i as u64);
        assert_eq!(m.payload, payloads[i]);
        assert_eq!(m.priority, (i % 5) as u8);
        assert_eq!(m.codec, Some(Codec::Zstd));
        let want: Vec<(String, Vec<u8>, bool)> = if i.is_multiple_of(3) {
            vec![
                ("source".into(), b"web".to_vec(), true),
                ("raw".into(), vec![0, 255], false),
            ]
        } else {
            vec![]
        };
        assert_eq!(m.headers, want);
        assert!(m.key.is_none() && m.topic.is_none() && !m.tombstone);
    };
    // Forward, in order.
    let all: Vec<_> = q
        .tailer(Start::Beginning)
        .unwrap()
        .map(|m| m.unwrap())
        .collect();
    assert_eq!(all.len(), 3002);
    assert_eq!(all[0].payload, b"plain before");
    assert_eq!(all[3001].payload, b"plain after");
    for i in 0..3000 {
        check(&all[i + 1], i);
    }
    // Members of one batch share its timestamp; timestamps never go back.
    assert!(all.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    // get, in a scattered order, into the middle of batches.
    for i in [2999usize, 0, 1500, 1, 2998, 777, 1024, 1023] {
        check(&q.get(range.start + i as u64).unwrap(), i);
    }
    assert_eq!(q.get(after).unwrap().payload, b"plain after");
    // A seek into the middle reads on from there, across batch frames.
    let mut t = q.tailer(Start::Seq(range.start + 1234)).unwrap();
    for i in 1234..3000 {
        let m = t.read_next().unwrap().unwrap();
        assert!(m.in_batch());
        check(&m.to_owned(), i);
    }
    assert_eq!(t.read_next().unwrap().unwrap().payload, b"plain after");
    // Backward.
    let mut back = q.backward_tailer(Start::End).unwrap();
    let mut seen = Vec::new();
    while let Some(m) = back.read_next().unwrap() {
        seen.push(m.to_owned());
    }
    assert_eq!(seen.len(), 3002);
    for (i, m) in seen.iter().rev().skip(1).take(3000).enumerate() {
        check(m, i);
    }
    // Columns (read_arrow's path): every payload, in order.
    let mut t = q.tailer(Start::Beginning).unwrap();
    let cols = litemq::Columns::read(&mut t, after + 1, 10_000).unwrap();
    let want: Vec<u8> = std::iter::once(b"plain before".to_vec())
        .chain(payloads.iter().cloned())
        .chain(std::iter::once(b"plain after".to_vec()))
        .flatten()
        .collect();
    assert_eq!(cols.payload_data, want);
    // A time seek lands on the first message at or after the time: the
    // first member of the batch (they share its timestamp), even when the
    // sparse-index entry it starts from names a later member.
    let ts = all[2000].timestamp;
    let want = all.iter().position(|m| m.timestamp >= ts).unwrap() as u64;
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.seek_time(ts).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, want);
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.seek_time(ts + 1).unwrap();
    let m = t.read_next().unwrap().unwrap();
    assert!(m.timestamp > ts && all[m.seq as usize - 1].timestamp <= ts);
    q.close().unwrap();
    // Reopened (recovery walks the batches), then read-only.
    let q = QueueBuilder::new(dir.path())
        .verify_on_startup(true)
        .open()
        .unwrap();
    assert_eq!(q.next_seq(), after + 1);
    check(&q.get(range.start + 2500).unwrap(), 2500);
}

#[test]
fn tiny_members_fill_small_files_and_every_codec_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    for codec in Codec::ALL {
        let base = dir.path().join(codec.name());
        let q = small(&base)
            .compression(Some(Compression::new(codec)))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        // Two-byte payloads: far more members than a 64 KiB file has
        // frames for; batches are cut to what its indexes hold.
        let payloads: Vec<Vec<u8>> = (0..20_000u32)
            .map(|i| vec![b'a' + (i % 3) as u8; 2])
            .collect();
        let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
        let r = app.append_batch_together(&records, None).unwrap();
        app.append(b"x").unwrap();
        let r2 = app.append_batch_together(&records[..50], None).unwrap();
        app.flush().unwrap();
        assert_eq!(r, 0..20_000);
        assert_eq!(r2, 20_001..20_051);
        assert!(batch_frames(&base) >= 5, "{codec:?}");
        let got: Vec<_> = read_all(&q, Start::Beginning);
        assert_eq!(got.len(), 20_051, "{codec:?}");
        for (i, (seq, p)) in got.iter().enumerate().take(20_000) {
            assert_eq!((*seq, p), (i as u64, &payloads[i]));
        }
        for s in [0u64, 4089, 4090, 9999, 19_999, 20_000, 20_030] {
            let want = if s == 20_000 {
                b"x".to_vec()
            } else if s > 20_000 {
                payloads[(s - 20_001) as usize].clone()
            } else {
                payloads[s as usize].clone()
            };
            assert_eq!(q.get(s).unwrap().payload, want, "{codec:?} {s}");
        }
        q.close().unwrap();
    }
}

#[test]
fn without_the_dense_index_seeks_use_the_sparse_entries_at_batch_frames() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..3000).map(event).collect();
    let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
    app.append_batch_together(&records, None).unwrap();
    q.close().unwrap();
    for f in data_files(dir.path()) {
        std::fs::remove_file(f.with_extension("offsets")).unwrap();
    }
    let q = small(dir.path()).read_only(true).open().unwrap();
    for s in [2999u64, 5, 1001, 1000, 2] {
        assert_eq!(q.get(s).unwrap().payload, payloads[s as usize]);
    }
    let mut t = q.tailer(Start::Seq(1777)).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().payload, payloads[1777]);
    drop(t);
    q.close().unwrap();
    // A writer after an unclean stop rebuilds the dense index: one entry
    // per member, at its batch frame.
    mark_unclean(dir.path());
    let q = small(dir.path()).open().unwrap();
    assert!(q.stats().recovery.dense_entries_rebuilt > 0);
    for s in [2999u64, 1500] {
        assert_eq!(q.get(s).unwrap().payload, payloads[s as usize]);
    }
}

#[test]
fn incompressible_blocks_are_written_as_plain_frames() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    // Large random payloads: the block saves nothing, nor does the framing.
    let noise: Vec<Vec<u8>> = (0..10)
        .map(|_| {
            (0..4000)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect();
    let records: Vec<Record<'_>> = noise.iter().map(|p| Record::new(p)).collect();
    let r = app.append_batch_together(&records, None).unwrap();
    app.flush().unwrap();
    assert_eq!(r, 0..10);
    assert_eq!(batch_frames(dir.path()), 0);
    let mut t = q.tailer(Start::Seq(7)).unwrap();
    let m = t.read_next().unwrap().unwrap();
    assert!(!m.in_batch());
    assert_eq!(m.payload, noise[7]);
}

#[test]
fn what_does_not_combine_is_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let tags = ["t"];
    for bad in [
        Record {
            topic: Some("orders"),
            ..Record::new(b"p")
        },
        Record {
            tags: &tags,
            ..Record::new(b"p")
        },
        Record {
            expires_at: Some(5),
            ..Record::new(b"p")
        },
        Record {
            compress: litemq::Compress::Never,
            ..Record::new(b"p")
        },
    ] {
        let records = [Record::new(b"fine"), bad];
        match app.append_batch_together(&records, None) {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("message 1"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
    }
    app.flush().unwrap();
    assert_eq!(q.next_seq(), 0);
    q.add_index(
        litemq::FieldIndexDef::new("source", "str").unwrap(),
        &mut |_, _| {},
    )
    .unwrap();
    assert!(matches!(
        app.append_batch_together(&[Record::new(b"x")], None),
        Err(Error::InvalidArgument(m)) if m.contains("field indexes")
    ));
    q.close().unwrap();
    // No codec at all; an encrypted queue.
    let q = small(&dir.path().join("plain")).open().unwrap();
    assert!(matches!(
        q.appender().unwrap().append_batch_together(&[Record::new(b"x")], None),
        Err(Error::InvalidArgument(m)) if m.contains("codec")
    ));
    let q = small(&dir.path().join("sealed"))
        .compression(zstd())
        .encryption_key(Some([7; 32]))
        .open()
        .unwrap();
    assert!(matches!(
        q.appender().unwrap().append_batch_together(&[Record::new(b"x")], None),
        Err(Error::InvalidArgument(m)) if m.contains("encrypted")
    ));
    assert_eq!(q.next_seq(), 0);
}

#[test]
fn a_torn_batch_at_the_tail_is_cut_whole() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..5 {
        app.append(&event(i)).unwrap();
    }
    let payloads: Vec<Vec<u8>> = (5..105).map(event).collect();
    let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
    app.append_batch_together(&records, None).unwrap();
    q.close().unwrap();
    let last = data_files(dir.path()).pop().unwrap();
    let (at, rec) = frames(&last).pop().unwrap();
    assert!(record::is_batch_record(&rec));
    // The crash lost the batch frame's last page: its CRC no longer matches.
    let end = at + 4 + rec.len();
    write_at(&last, end - 10, &[0; 18]);
    mark_unclean(dir.path());
    let q = small(dir.path()).open().unwrap();
    let report = q.stats().recovery;
    assert_eq!(report.cut_at, Some(at as u64));
    assert_eq!(q.next_seq(), 5, "no member of a torn batch survives");
    let app = q.appender().unwrap();
    let r = app.append_batch_together(&records[..10], None).unwrap();
    app.flush().unwrap();
    assert_eq!(r, 5..15);
    let got = read_all(&q, Start::Beginning);
    assert_eq!(got.len(), 15);
    assert_eq!(got[14].1, payloads[9]);
}

/// A closed queue at `dir`: `before` (when asked), a batch of 100 events
/// compressed together, then `after`, with a byte of the batch's compressed
/// block flipped (the frame's CRC covers it). Returns the data file, the
/// batch frame's offset and its record as written.
fn with_a_damaged_batch(dir: &Path, before: bool) -> (std::path::PathBuf, usize, Vec<u8>) {
    let q = small(dir).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
    let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
    if before {
        app.append(b"before").unwrap();
    }
    app.append_batch_together(&records, None).unwrap();
    app.append(b"after").unwrap();
    q.close().unwrap();
    let file = data_files(dir).pop().unwrap();
    let (at, rec) = frames(&file)
        .into_iter()
        .find(|(_, r)| record::is_batch_record(r))
        .unwrap();
    let mid = at + 4 + record::BATCH_HEAD_LEN + (rec.len() - record::BATCH_HEAD_LEN) / 2;
    let byte = std::fs::read(&file).unwrap()[mid];
    write_at(&file, mid, &[byte ^ 0x5A]);
    (file, at, rec)
}

#[test]
fn a_damaged_block_is_corrupted_never_wrong_data() {
    let dir = tempfile::tempdir().unwrap();
    let (file, at, pristine) = with_a_damaged_batch(dir.path(), false);
    {
        let q = small(dir.path()).read_only(true).open().unwrap();
        for s in [0u64, 50, 99] {
            assert!(matches!(q.get(s), Err(Error::Corrupted { .. })), "{s}");
        }
    }
    // Damage the frame's CRC does not see (a writer bug, a forged file:
    // the CRC is recomputed): the declared raw length, the member count
    // lowered or raised.
    let mut cases = Vec::new();
    let mut r = pristine.clone();
    let raw = u32::from_le_bytes(r[20..24].try_into().unwrap());
    r[20..24].copy_from_slice(&(raw - 1).to_le_bytes());
    cases.push(r);
    for count in [99u16, 101] {
        let mut r = pristine.clone();
        r[10..12].copy_from_slice(&count.to_le_bytes());
        cases.push(r);
    }
    for (n, bad) in cases.iter().enumerate() {
        rewrite_record(&file, at, bad);
        let q = small(dir.path()).read_only(true).open().unwrap();
        for s in [0u64, 50, 98] {
            match q.get(s) {
                Err(Error::Corrupted { .. }) => {}
                Ok(m) => panic!(
                    "case {n}: seq {s} read {:?}",
                    String::from_utf8_lossy(&m.payload)
                ),
                Err(e) => panic!("case {n}: seq {s}: {e:?}"),
            }
        }
        let mut t = q.tailer(Start::Beginning).unwrap();
        assert!(
            matches!(t.read_next(), Err(Error::Corrupted { .. })),
            "case {n}"
        );
        // The damaged batch is skipped whole.
        assert!(t.skip_damaged().unwrap());
        let next = t.read_next().unwrap().unwrap();
        assert_eq!(next.payload, b"after", "case {n}");
        drop(t);
        q.close().unwrap();
    }
}

/// A tailer that a seek put on a later member of a damaged batch steps
/// over the batch's remaining members with `skip_damaged`, no further,
/// also without the dense index (which would place the next frame).
#[test]
fn skip_damaged_from_a_member_of_a_damaged_batch_lands_after_the_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (file, at, _) = with_a_damaged_batch(dir.path(), true);
    std::fs::remove_file(file.with_extension("offsets")).unwrap();

    let q = small(dir.path()).read_only(true).open().unwrap();
    for start in [1u64, 40, 100] {
        let mut t = q.tailer(Start::Seq(start)).unwrap();
        match t.read_next() {
            Err(Error::Corrupted { seq, offset, .. }) => {
                assert_eq!((seq, offset), (Some(start), at as u64));
            }
            other => panic!("from {start}: {:?}", other.map(|m| m.map(|m| m.seq))),
        }
        assert!(t.skip_damaged().unwrap());
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.payload), (101, &b"after"[..]), "from {start}");
    }
}

/// A batch frame whose `first_seq` is not where it stands (CRC-valid: a
/// writer bug, or an edit) is corrupted for every member (FORMAT.md): no
/// read path may number its members from the forged sequence and return
/// another member's bytes, in a sealed file or in the active one.
#[test]
fn a_batch_whose_first_seq_disagrees_with_its_place_is_corrupted_everywhere() {
    for sealed in [true, false] {
        for shift in [-1i64, 1, 40] {
            let dir = tempfile::tempdir().unwrap();
            let q = small(dir.path()).compression(zstd()).open().unwrap();
            let app = q.appender().unwrap();
            let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
            let records: Vec<Record<'_>> = payloads.iter().map(|p| keyed("k", p)).collect();
            app.append(b"before").unwrap();
            app.append_batch_together(&records, None).unwrap();
            app.append(b"after").unwrap();
            if sealed {
                app.roll().unwrap();
                app.append(b"next file").unwrap();
            }
            q.close().unwrap();
            let file = data_files(dir.path()).swap_remove(0);
            let (at, mut rec) = frames(&file)
                .into_iter()
                .find(|(_, r)| record::is_batch_record(r))
                .unwrap();
            assert_eq!(record::batch_first_seq(&rec), 1);
            let forged = (1 + shift) as u64;
            rec[12..20].copy_from_slice(&forged.to_le_bytes());
            rewrite_record(&file, at, &rec);
            let case = format!("sealed {sealed}, first_seq {forged}");

            let q = small(dir.path()).read_only(true).open().unwrap();
            let corrupted = |what: &str, r: litemq::Result<String>| match r {
                Err(Error::Corrupted { path, offset, .. }) => {
                    assert_eq!((path, offset), (file.clone(), at as u64), "{case}: {what}");
                }
                other => panic!("{case}: {what} gave {other:?}"),
            };
            for s in [1u64, 2, 50, 99, 100] {
                corrupted(
                    &format!("get({s})"),
                    q.get(s).map(|m| String::from_utf8_lossy(&m.payload).into()),
                );
                let mut t = q.tailer(Start::Seq(s)).unwrap();
                corrupted(
                    &format!("seek({s})"),
                    t.read_next().map(|m| format!("{:?}", m.map(|m| m.seq))),
                );
            }
            corrupted(
                "find",
                q.find(b"k", None, None, None)
                    .map(|f| format!("{:?}", f.iter().map(|m| m.seq).collect::<Vec<_>>())),
            );
            corrupted(
                "get_latest",
                q.get_latest(b"k")
                    .map(|m| format!("{:?}", m.map(|m| m.seq))),
            );
            corrupted(
                "read_columns",
                q.read_columns(0, 102, 1000)
                    .map(|c| format!("{} rows", c.rows)),
            );
            let mut t = q.tailer(Start::Beginning).unwrap();
            assert_eq!(t.read_next().unwrap().unwrap().payload, b"before");
            corrupted(
                "forward",
                t.read_next().map(|m| format!("{:?}", m.map(|m| m.seq))),
            );
            let mut b = q.backward_tailer(Start::Seq(101)).unwrap();
            assert_eq!(b.read_next().unwrap().unwrap().payload, b"after");
            corrupted(
                "backward",
                b.read_next().map(|m| format!("{:?}", m.map(|m| m.seq))),
            );
            drop((t, b));
            q.close().unwrap();
            // The writer's check of every frame refuses it.
            let opened = small(dir.path())
                .compression(zstd())
                .verify_on_startup(true)
                .open();
            match opened {
                Err(Error::Corrupted { path, .. }) => assert_eq!(path, file, "{case}"),
                other => panic!("{case}: verify_on_startup: {:?}", other.map(|_| "opened")),
            }
        }
    }
}

#[test]
fn a_batch_above_the_decompression_limit_is_corrupted_not_allocated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let q = small(dir.path())
            .file_size(1 << 20)
            .compression(zstd())
            .open()
            .unwrap();
        let big = vec![0u8; 40_000];
        let records: Vec<Record<'_>> = (0..3).map(|_| Record::new(&big)).collect();
        let app = q.appender().unwrap();
        app.append_batch_together(&records, None).unwrap();
        app.flush().unwrap();
        assert!(batch_frames(dir.path()) >= 1);
        q.close().unwrap();
    }
    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .max_decompressed_size(32 * 1024)
        .open()
        .unwrap();
    match q.get(1) {
        Err(Error::Corrupted { reason, .. }) => {
            assert!(reason.contains("decompression limit"), "{reason}")
        }
        other => panic!("expected Corrupted, got {other:?}"),
    }
}

#[test]
fn a_multi_writer_queue_and_compaction_keep_batches() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .compression(zstd())
        .multi_writer(true)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..500).map(event).collect();
    let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
    for k in 0..6u64 {
        app.append_record(&Record {
            key: Some(b"k"),
            ..Record::new(format!("v{k}").as_bytes())
        })
        .unwrap();
        let r = app.append_batch_together(&records, None).unwrap();
        assert_eq!(r.start, k * 501 + 1);
    }
    app.flush().unwrap();
    app.roll().ok();
    let all = read_all(&q, Start::Beginning);
    assert_eq!(all.len(), 6 * 501);
    q.close().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    q.compact(&litemq::CompactOptions::default(), &mut |_, _| {})
        .unwrap();
    // The superseded keyed values are holes; every batch member is kept.
    let all = read_all(&q, Start::Beginning);
    let members: Vec<_> = all.iter().filter(|(_, p)| p.starts_with(b"{")).collect();
    assert_eq!(members.len(), 6 * 500);
    assert_eq!(q.get(501 + 1 + 250).unwrap().payload, payloads[250]);
    assert_eq!(q.get_latest(b"k").unwrap().unwrap().payload, b"v5");
}

/// Writes `fuzz/regressions/frame_decode/batch_record` (a seed for the
/// fuzz target: a batch record of three members, zstd: one plain, one
/// keyed, one tombstone) when
/// `LITEMQ_WRITE_FUZZ_SEED` is set; always checks it decodes.
#[test]
fn the_fuzz_seed_is_a_batch_record() {
    let members: Vec<Vec<u8>> = vec![event(0), event(1), Vec::new()];
    let mut block = Vec::new();
    for (i, m) in members.iter().enumerate() {
        let r = Record {
            key: (i > 0).then_some(&b"k"[..]),
            key_is_text: i == 1,
            tombstone: i == 2,
            ..Record::new(m)
        };
        record::push_batch_member(&mut block, r.flags(), r.body_len(), |o| r.encode_body(o));
    }
    let packed = litemq::format::compression::compress(Codec::Zstd, 1, &block);
    let mut body = Vec::new();
    record::encode_batch_head(3, Codec::Zstd, block.len() as u32, &mut body);
    record::set_batch_first_seq(&mut body, 42);
    body.extend_from_slice(&packed);
    let mut rec = Vec::new();
    record::encode_into(&mut rec, record::FLAG_EXTENSION, 7, &body);
    let v = record::decode(&rec).unwrap();
    assert!(v.is_batch() && record::is_batch_record(&rec));
    assert_eq!(
        (record::seqs_of(&rec), record::batch_first_seq(&rec)),
        (3, 42)
    );
    let block = v.inflate(1 << 20).unwrap();
    record::check_batch_block(&block, 3).unwrap();
    let (_, m) = record::batch_member(&block, 3, 0, 0, 2).unwrap();
    assert!(m.is_tombstone() && m.key == Some(&b"k"[..]) && m.payload.is_empty());
    let (_, m) = record::batch_member(&block, 3, 0, 0, 1).unwrap();
    assert_eq!((m.payload, m.key_is_text()), (&members[1][..], true));
    if std::env::var_os("LITEMQ_WRITE_FUZZ_SEED").is_some() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/regressions/frame_decode/batch_record");
        std::fs::write(path, &rec).unwrap();
    }
}

#[test]
fn a_field_index_is_refused_on_a_queue_that_holds_batches() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
    let records: Vec<Record<'_>> = payloads.iter().map(|p| Record::new(p)).collect();
    app.append_batch_together(&records, None).unwrap();
    let def = litemq::FieldIndexDef::new("source", "str").unwrap();
    match q.add_index(def, &mut |_, _| {}) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("batches"), "{m}"),
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    // Not declared: batches are still taken.
    app.append_batch_together(&records, None).unwrap();
    app.flush().unwrap();
    assert_eq!(q.next_seq(), 200);
}

/// A member with key `k` (text) and payload `p`, or a tombstone of `k`.
fn keyed<'a>(k: &'a str, p: &'a [u8]) -> Record<'a> {
    Record {
        key: Some(k.as_bytes()),
        key_is_text: true,
        tombstone: p.is_empty(),
        ..Record::new(p)
    }
}

fn seqs_of(found: &[litemq::OwnedMessage]) -> Vec<u64> {
    found.iter().map(|m| m.seq).collect()
}

#[test]
fn keyed_members_and_tombstones_are_found_and_the_latest_wins_by_sequence() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    app.append_record(&keyed("a", b"a-plain")).unwrap(); // 0
    app.append_record(&keyed("c", b"c-plain")).unwrap(); // 1
    let payloads: Vec<Vec<u8>> = (0..200).map(event).collect();
    let bytes_key: &[u8] = b"b\xff\x00";
    // Members 2..202: every 10th keyed "a" (text), every 10th + 1 keyed
    // with bytes, member 50 deletes "c", the rest without a key.
    let records: Vec<Record<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| match i % 10 {
            _ if i == 50 => keyed("c", b""),
            0 => keyed("a", p),
            1 => Record {
                key: Some(bytes_key),
                ..Record::new(p)
            },
            _ => Record::new(p),
        })
        .collect();
    let r = app.append_batch_together(&records, None).unwrap();
    assert_eq!(r, 2..202);
    app.flush().unwrap();
    assert!(batch_frames(dir.path()) >= 1);

    let a = q.find(b"a", None, None, None).unwrap();
    let want: Vec<u64> = std::iter::once(0)
        .chain((0..200).step_by(10).filter(|&i| i != 50).map(|i| 2 + i))
        .collect();
    assert_eq!(seqs_of(&a), want);
    assert_eq!(a[1].payload, payloads[0]);
    assert!(a
        .iter()
        .all(|m| m.key.as_deref() == Some(&b"a"[..]) && m.key_is_text));
    assert_eq!(
        seqs_of(&q.find(b"a", None, None, Some(3)).unwrap()),
        want[..3]
    );
    let b = q.find(bytes_key, None, None, None).unwrap();
    assert_eq!(b.len(), 20);
    assert!(b
        .iter()
        .all(|m| !m.key_is_text && m.payload == payloads[(m.seq - 2) as usize]));
    let latest = q.get_latest(b"a").unwrap().unwrap();
    assert_eq!((latest.seq, &latest.payload), (192, &payloads[190]));
    // The tombstone member deletes "c": its plain value came before it.
    assert!(q.get_latest(b"c").unwrap().is_none());
    let c = q.find(b"c", None, None, None).unwrap();
    assert_eq!(seqs_of(&c), [1, 52]);
    assert!(c[1].tombstone && c[1].payload.is_empty());
    assert!(q.get(52).unwrap().tombstone);
    // A plain record after the batch wins; then a batch after it.
    app.append_record(&keyed("a", b"a-later")).unwrap(); // 202
    assert_eq!(q.get_latest(b"a").unwrap().unwrap().payload, b"a-later");
    let again: Vec<Record<'_>> = payloads[..50]
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i == 7 {
                keyed("c", b"c-back")
            } else {
                Record::new(p)
            }
        })
        .collect();
    let r2 = app.append_batch_together(&again, None).unwrap();
    let c = q.get_latest(b"c").unwrap().unwrap();
    assert_eq!(
        (c.seq, c.payload.as_slice()),
        (r2.start + 7, &b"c-back"[..])
    );
    // Two members of one batch with the same key: the later one is latest.
    let twice = [
        keyed("d", b"d1"),
        Record::new(&payloads[0]),
        keyed("d", b"d2"),
    ];
    let mut more: Vec<Record<'_>> = payloads[..40].iter().map(|p| Record::new(p)).collect();
    more.extend(twice);
    let r3 = app.append_batch_together(&more, None).unwrap();
    app.flush().unwrap();
    assert_eq!(batch_frames(dir.path()), 3);
    assert_eq!(
        seqs_of(&q.find(b"d", None, None, None).unwrap()),
        [r3.start + 40, r3.start + 42]
    );
    assert_eq!(q.get_latest(b"d").unwrap().unwrap().payload, b"d2");
    // Time bounds hold for members (the batch's timestamp).
    let ts = q.get(2).unwrap().timestamp;
    assert_eq!(q.find(b"a", Some(ts + 1), None, None).unwrap().len(), 1);
    assert_eq!(q.find(b"a", None, Some(ts + 1), None).unwrap().len(), 20);
}

/// Two keys with the same key-index hash (XXH32), found by brute force.
fn colliding_keys() -> (String, String) {
    let mut seen = std::collections::HashMap::new();
    for i in 0u64.. {
        let k = format!("key-{i}");
        let h = litemq::index::key_index::key_hash(k.as_bytes());
        if let Some(other) = seen.insert(h, k.clone()) {
            return (other, k);
        }
    }
    unreachable!()
}

#[test]
fn members_whose_key_only_shares_the_hash_are_not_matches() {
    let (k1, k2) = colliding_keys();
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
    let records: Vec<Record<'_>> = payloads
        .iter()
        .enumerate()
        .map(|(i, p)| match i {
            10 | 30 => keyed(&k1, p),
            20 | 40 => keyed(&k2, p),
            _ => Record::new(p),
        })
        .collect();
    app.append_batch_together(&records, None).unwrap();
    app.flush().unwrap();
    assert_eq!(batch_frames(dir.path()), 1);
    assert_eq!(
        seqs_of(&q.find(k1.as_bytes(), None, None, None).unwrap()),
        [10, 30]
    );
    assert_eq!(
        seqs_of(&q.find(k2.as_bytes(), None, None, None).unwrap()),
        [20, 40]
    );
    assert_eq!(q.get_latest(k1.as_bytes()).unwrap().unwrap().seq, 30);
    assert_eq!(q.get_latest(k2.as_bytes()).unwrap().unwrap().seq, 40);
}

/// A queue whose every batch holds keyed members: `batches` batches of 100,
/// member `i` of batch `b` keyed `k{i % 7}`.
fn keyed_batches(q: &litemq::Queue, batches: u64) -> Vec<Vec<u8>> {
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..100 * batches).map(event).collect();
    let keys: Vec<String> = (0..7).map(|k| format!("k{k}")).collect();
    for chunk in payloads.chunks(100) {
        let records: Vec<Record<'_>> = chunk
            .iter()
            .enumerate()
            .map(|(i, p)| keyed(&keys[i % 7], p))
            .collect();
        app.append_batch_together(&records, None).unwrap();
    }
    app.flush().unwrap();
    payloads
}

fn check_keyed_batches(q: &litemq::Queue, n: u64) {
    for k in 0..7u64 {
        let found = q
            .find(format!("k{k}").as_bytes(), None, None, None)
            .unwrap();
        let want: Vec<u64> = (0..n).filter(|s| s % 100 % 7 == k).collect();
        assert_eq!(seqs_of(&found), want, "k{k}");
        assert_eq!(
            q.get_latest(format!("k{k}").as_bytes())
                .unwrap()
                .unwrap()
                .seq,
            *want.last().unwrap()
        );
    }
}

#[test]
fn the_key_index_is_rebuilt_from_the_batches_in_the_data_files() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    keyed_batches(&q, 6);
    check_keyed_batches(&q, 600);
    q.close().unwrap();
    assert!(batch_frames(dir.path()) >= 6);
    // The index files deleted: the next open indexes every keyed member.
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    check_keyed_batches(&q, 600);
    q.close().unwrap();
    // A crash between the members of the last batch: the index holds only
    // some of its items (they share its position). Reopened, the batch is
    // indexed whole again.
    let index_dir = dir.path().join("index");
    {
        use litemq::index::key_index::{KeyIndexConfig, KeyIndexWriter};
        let mut w = KeyIndexWriter::open_or_create(&index_dir, KeyIndexConfig::default()).unwrap();
        let last = w.last_position().unwrap();
        let ts = q_last_ts(dir.path());
        w.truncate_after(last - 1).unwrap();
        w.add(b"k0", last, ts).unwrap();
        w.close().unwrap();
    }
    // As a crash leaves the metadata: not closed, and the key index's end
    // at the last close unknown (the index moved since).
    let p = dir.path().join("metadata.json");
    let mut meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    meta["clean_shutdown"] = false.into();
    meta["key_index_upto"] = 0.into();
    meta["key_index_last"] = serde_json::Value::Null;
    std::fs::write(&p, serde_json::to_string_pretty(&meta).unwrap()).unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    check_keyed_batches(&q, 600);
}

/// The timestamp of the queue's last message.
fn q_last_ts(base: &Path) -> u64 {
    let q = read_only(base);
    let m = q.get(q.next_seq() - 1).unwrap();
    m.timestamp
}

#[test]
fn several_writers_index_each_others_keyed_batches() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        small(dir.path())
            .compression(zstd())
            .multi_writer(true)
            .open()
            .unwrap()
    };
    let (a, b) = (open(), open());
    let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
    for round in 0..3u64 {
        for (w, q) in [(0u64, &a), (1, &b)] {
            let key = format!("w{w}");
            let records: Vec<Record<'_>> = payloads
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    if i % 10 == 3 {
                        keyed(&key, p)
                    } else {
                        Record::new(p)
                    }
                })
                .collect();
            // One keyed batch after the other, each writer appending to
            // the key index file the other one just added to.
            let r = q
                .appender()
                .unwrap()
                .append_batch_together(&records, None)
                .unwrap();
            assert_eq!(r.start, (round * 2 + w) * 100);
        }
    }
    for q in [&a, &b, &a] {
        q.appender()
            .unwrap()
            .append_record(&keyed("plain", b"p"))
            .unwrap();
    }
    a.appender().unwrap().flush().unwrap();
    b.appender().unwrap().flush().unwrap();
    for q in [&a, &b] {
        for w in 0..2u64 {
            let found = q
                .find(format!("w{w}").as_bytes(), None, None, None)
                .unwrap();
            assert_eq!(found.len(), 30, "w{w}");
        }
        assert_eq!(q.find(b"plain", None, None, None).unwrap().len(), 3);
    }
}

#[test]
fn compaction_keeps_keyed_batches_whole_and_get_latest_exact() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    let app = q.appender().unwrap();
    let payloads: Vec<Vec<u8>> = (0..100).map(event).collect();
    let batch = |key_at: &[(usize, &'static str)], tomb: Option<(usize, &'static str)>| {
        let records: Vec<Record<'_>> = payloads
            .iter()
            .enumerate()
            .map(|(i, p)| {
                if let Some((_, k)) = key_at.iter().find(|(at, _)| *at == i) {
                    keyed(k, p)
                } else if tomb.is_some_and(|(at, _)| at == i) {
                    keyed(tomb.unwrap().1, b"")
                } else {
                    Record::new(p)
                }
            })
            .collect();
        app.append_batch_together(&records, None).unwrap()
    };
    // Sequences: x-old 0, batch 1..101, y-new 101, z-old 102, batch
    // 103..203, batch 203..303, the tombstone of "w" 303.
    // "x": plain, then a batch member (latest): the plain one goes.
    app.append_record(&keyed("x", b"x-old")).unwrap();
    // "y": a batch member, then plain (latest): the member stays in its batch.
    let b1 = batch(&[(5, "x"), (6, "y")], None);
    app.append_record(&keyed("y", b"y-new")).unwrap();
    // "z": plain, then a tombstone member: the plain value goes.
    app.append_record(&keyed("z", b"z-old")).unwrap();
    let b2 = batch(&[], Some((9, "z")));
    // "w": a batch member, then a plain tombstone past its grace: the
    // tombstone stays, or the member would be the latest again.
    let b3 = batch(&[(3, "w")], None);
    app.append_record(&keyed("w", b"")).unwrap();
    app.roll().unwrap();
    app.append(b"active").unwrap();
    app.flush().unwrap();
    let before = read_all(&q, Start::Beginning);
    let report = q
        .compact(&litemq::CompactOptions::default(), &mut |_, _| {})
        .unwrap();
    assert_eq!(report.records_dropped, 2, "{report:?}"); // x-old, z-old
    assert_eq!(report.tombstones_dropped, 0);
    assert!(matches!(q.get(0), Err(Error::Compacted { .. })));
    assert!(matches!(q.get(102), Err(Error::Compacted { .. })));
    // Every batch member is still read, superseded ones included.
    let after = read_all(&q, Start::Beginning);
    let kept: Vec<_> = before
        .iter()
        .filter(|(s, _)| ![0, 102].contains(s))
        .cloned()
        .collect();
    assert_eq!(after, kept);
    assert_eq!(q.get(b1.start + 6).unwrap().payload, payloads[6]);
    let x = q.get_latest(b"x").unwrap().unwrap();
    assert_eq!(x.seq, b1.start + 5);
    assert_eq!(q.get_latest(b"y").unwrap().unwrap().payload, b"y-new");
    assert!(q.get_latest(b"z").unwrap().is_none());
    assert_eq!(
        seqs_of(&q.find(b"z", None, None, None).unwrap()),
        [b2.start + 9]
    );
    assert!(q.get_latest(b"w").unwrap().is_none());
    assert_eq!(q.find(b"w", None, None, None).unwrap().len(), 2);
    assert_eq!(b3.start + 3, 206);
    // Reopened from the data alone: the same answers.
    q.close().unwrap();
    std::fs::remove_dir_all(dir.path().join("index")).unwrap();
    let q = small(dir.path()).compression(zstd()).open().unwrap();
    assert_eq!(q.get_latest(b"x").unwrap().unwrap().seq, b1.start + 5);
    assert!(q.get_latest(b"w").unwrap().is_none());
    assert!(q.get_latest(b"z").unwrap().is_none());
}
