//! Typed queues (format 12): a schema per queue, rows as payloads and in
//! row batches, evolution rolling to a new file, the schema in every data
//! file's header (FORMAT.md "Typed records").

mod common;

use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use common::small;
use litemq::format::crc::crc64;
use litemq::format::typed::{encode_row, Field, FieldType, RowLayout, Schema, Value};
use litemq::{Codec, Error, QueueBuilder, Record, Start};

fn field(name: &str, ty: FieldType, nullable: bool) -> Field {
    Field {
        name: name.into(),
        ty,
        nullable,
        aliases: vec![],
    }
}

/// Version 1: `id` (int32, required), `name` (string, nullable), `ok` (bool).
fn schema_v1() -> Schema {
    Schema {
        version: 1,
        fields: vec![
            field("id", FieldType::Int32, false),
            field("name", FieldType::String, true),
            field("ok", FieldType::Bool, false),
        ],
    }
}

/// A valid evolution of [`schema_v1`]: `id` widened, `score` added.
fn schema_v2() -> Schema {
    let mut s = schema_v1();
    s.version = 2;
    s.fields[0].ty = FieldType::Int64;
    s.fields.push(field("score", FieldType::Float64, true));
    s
}

fn row_v1(i: i64) -> Vec<u8> {
    let s = schema_v1();
    let name = if i % 3 == 0 {
        Value::Null
    } else {
        Value::Str(format!("event number {i} of a typed queue"))
    };
    let mut out = Vec::new();
    encode_row(
        &s,
        &RowLayout::of(&s),
        &[Value::Int(i), name, Value::Bool(i % 2 == 0)],
        &mut out,
    )
    .unwrap();
    out
}

fn row_v2(i: i64) -> Vec<u8> {
    let s = schema_v2();
    let mut out = Vec::new();
    encode_row(
        &s,
        &RowLayout::of(&s),
        &[
            Value::Int(i),
            Value::Str(format!("v2 {i}")),
            Value::Bool(true),
            Value::Float(i as f64 / 2.0),
        ],
        &mut out,
    )
    .unwrap();
    out
}

fn block_of(rows: &[Vec<u8>]) -> Vec<u8> {
    rows.concat()
}

/// The data files of the queue at `base` (under `YYYY/MM/DD/`), oldest first.
fn data_files(base: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if p.is_dir() && name.bytes().all(|b| b.is_ascii_digit()) {
                walk(&p, out);
            } else if name.ends_with(".data") {
                out.push(p);
            }
        }
    }
    let mut out = Vec::new();
    walk(base, &mut out);
    out.sort();
    out
}

/// `schema_version` in a data file's header (bytes 52..56).
fn header_schema_version(path: &Path) -> u32 {
    let b = std::fs::read(path).unwrap();
    u32::from_le_bytes(b[52..56].try_into().unwrap())
}

/// Every message from the start: `(seq, payload, schema_version)`.
fn read_all(q: &litemq::Queue) -> Vec<(u64, Vec<u8>, u32)> {
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        out.push((m.seq, m.payload.to_vec(), m.schema_version()));
    }
    out
}

/// A typed queue holding one single row, a stored row batch, a compressed
/// row batch and one more single row: the rows in order, sequences 0..n.
fn fill(q: &litemq::Queue) -> Vec<Vec<u8>> {
    let app = q.appender().unwrap();
    let mut rows = vec![row_v1(0)];
    assert_eq!(app.append(&rows[0]).unwrap(), 0);
    let stored: Vec<Vec<u8>> = (1..11).map(row_v1).collect();
    assert_eq!(
        app.append_rows(&block_of(&stored), stored.len(), None)
            .unwrap(),
        1..11
    );
    rows.extend(stored);
    let packed: Vec<Vec<u8>> = (11..311).map(row_v1).collect();
    assert_eq!(
        app.append_rows(&block_of(&packed), packed.len(), Some((Codec::Zstd, 3)))
            .unwrap(),
        11..311
    );
    rows.extend(packed);
    rows.push(row_v1(311));
    assert_eq!(app.append(&rows[311]).unwrap(), 311);
    app.flush().unwrap();
    rows
}

#[test]
fn rows_and_row_batches_are_read_back_every_way() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let rows = fill(&q);
    let check = |q: &litemq::Queue| {
        let all = read_all(q);
        assert_eq!(all.len(), rows.len());
        for (i, (seq, payload, v)) in all.iter().enumerate() {
            assert_eq!((*seq, payload, *v), (i as u64, &rows[i], 1));
        }
        for seq in [0u64, 1, 10, 11, 200, 310, 311] {
            let m = q.get(seq).unwrap();
            assert_eq!(
                (m.payload.as_slice(), m.schema_version),
                (&rows[seq as usize][..], 1)
            );
            assert!(m.key.is_none() && m.headers.is_empty());
        }
        let mut t = q.tailer(Start::Beginning).unwrap();
        t.seek(150).unwrap();
        let m = t.read_next().unwrap().unwrap();
        assert_eq!((m.seq, m.payload), (150, &rows[150][..]));
        let mut b = q.backward_tailer(Start::End).unwrap();
        let mut back = Vec::new();
        while let Some(m) = b.read_next().unwrap() {
            back.push(m.payload.to_vec());
        }
        back.reverse();
        assert_eq!(back, rows);
        let versions = q.schema_versions().expect("a typed queue");
        assert_eq!(versions.versions, vec![schema_v1()]);
    };
    check(&q);
    let ts = q.get(100).unwrap().timestamp;
    let mut t = q.tailer(Start::Beginning).unwrap();
    t.seek_time(ts).unwrap();
    assert!(t.read_next().unwrap().unwrap().seq <= 100);
    q.close().unwrap();
    // Reopened without the schema: the queue's own.
    let q = small(dir.path()).open().unwrap();
    check(&q);
    q.close().unwrap();
    check(&common::read_only(dir.path()));
    // Two frames hold 310 rows: the batches are stored as row batches.
    for f in data_files(dir.path()) {
        assert_eq!(header_schema_version(&f), 1, "{}", f.display());
    }
}

#[test]
fn append_rows_cuts_batches_by_count_and_file_capacity() {
    let dir = tempfile::tempdir().unwrap();
    // 64 KiB files hold (65536 - 4096) / 24 = 2560 sequences at most.
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    let rows: Vec<Vec<u8>> = (0..6000).map(|i| row_v1(i % 7)).collect();
    let range = app
        .append_rows(&block_of(&rows), rows.len(), Some((Codec::Zstd, 1)))
        .unwrap();
    assert_eq!(range, 0..6000);
    app.flush().unwrap();
    let all = read_all(&q);
    assert_eq!(all.len(), 6000);
    assert!(all.iter().zip(&rows).all(|(a, r)| &a.1 == r));
    assert!(data_files(dir.path()).len() >= 3, "rolled for index room");
}

#[test]
fn append_rows_stored_larger_than_a_file_spreads_over_files() {
    let dir = tempfile::tempdir().unwrap();
    // 2,000 rows of about 45 bytes, stored: more than a 64 KiB file holds.
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    let rows: Vec<Vec<u8>> = (1..2001).map(|i| row_v1(i * 3 + 1)).collect();
    assert!(block_of(&rows).len() > 64 * 1024);
    let range = app.append_rows(&block_of(&rows), rows.len(), None).unwrap();
    assert_eq!(range, 0..2000);
    app.flush().unwrap();
    let all = read_all(&q);
    assert!(all.iter().map(|a| &a.1).eq(rows.iter()));
    assert!(data_files(dir.path()).len() >= 2);
}

#[test]
fn encoded_rows_are_taken_for_the_writers_schema_version_only() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    let rows = [row_v1(1), row_v1(2)];
    let e = app
        .append_encoded_rows(&block_of(&rows), 2, None, 2)
        .unwrap_err();
    assert!(
        matches!(&e, Error::Schema(m) if m.contains("version 2")),
        "{e}"
    );
    assert_eq!(q.next_seq(), 0, "nothing stored");
    let r = app
        .append_encoded_rows(&block_of(&rows), 2, None, 1)
        .unwrap();
    assert_eq!(r, 0..2);
    app.flush().unwrap();
    assert!(read_all(&q).iter().map(|a| &a.1).eq(rows.iter()));
}

#[test]
fn an_evolution_adds_a_version_and_rolls_to_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(&row_v1(0)).unwrap();
    app.append_rows(&block_of(&[row_v1(1), row_v1(2)]), 2, None)
        .unwrap();
    q.close().unwrap();
    assert_eq!(data_files(dir.path()).len(), 1);

    let q = small(dir.path()).schema(schema_v2()).open().unwrap();
    let versions = q.schema_versions().unwrap();
    assert_eq!(versions.versions.len(), 2);
    assert_eq!(versions.versions[1].version, 2);
    let app = q.appender().unwrap();
    // A row of version 1 is no longer one of the current version.
    assert!(matches!(app.append(&row_v1(9)), Err(Error::Schema(_))));
    app.append(&row_v2(3)).unwrap();
    app.append_rows(&block_of(&[row_v2(4), row_v2(5)]), 2, None)
        .unwrap();
    app.flush().unwrap();
    let files = data_files(dir.path());
    assert_eq!(files.len(), 2, "the new version starts a new file");
    let infos = q.data_files().unwrap();
    assert_eq!(
        infos.iter().map(|f| f.schema_version).collect::<Vec<_>>(),
        [1, 2]
    );
    assert_eq!(header_schema_version(&files[0]), 1);
    assert_eq!(header_schema_version(&files[1]), 2);
    let all = read_all(&q);
    let versions: Vec<u32> = all.iter().map(|m| m.2).collect();
    assert_eq!(versions, [1, 1, 1, 2, 2, 2]);
    assert_eq!(all[4].1, row_v2(4));
    q.close().unwrap();
    let meta = std::fs::read_to_string(dir.path().join("metadata.json")).unwrap();
    assert!(meta.contains("\"versions\""), "{meta}");
    assert!(meta.contains("\"format_version\": 12"), "{meta}");

    // The same fields again: nothing changes.
    let q = small(dir.path()).schema(schema_v2()).open().unwrap();
    assert_eq!(q.schema_versions().unwrap().versions.len(), 2);
    q.appender().unwrap().append(&row_v2(6)).unwrap();
    q.close().unwrap();
    assert_eq!(data_files(dir.path()).len(), 2, "same version: same file");
}

#[test]
fn an_incompatible_schema_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    q.appender().unwrap().append(&row_v1(1)).unwrap();
    q.close().unwrap();
    let mut narrowed = schema_v1();
    narrowed.fields[0].ty = FieldType::Int16;
    match small(dir.path()).schema(narrowed).open() {
        Err(Error::Schema(why)) => assert!(why.contains("\"id\""), "{why}"),
        other => panic!("{other:?}"),
    }
    let mut required = schema_v1();
    required.fields.push(field("extra", FieldType::Int8, false));
    match small(dir.path()).schema(required).open() {
        Err(Error::Schema(why)) => assert!(why.contains("\"extra\""), "{why}"),
        other => panic!("{other:?}"),
    }
    // A read-only handle cannot declare another schema.
    let ro = QueueBuilder::new(dir.path())
        .read_only(true)
        .schema(schema_v2())
        .open();
    assert!(matches!(ro, Err(Error::Schema(_))), "{ro:?}");
    // Nothing was recorded by the refused opens.
    let q = small(dir.path()).open().unwrap();
    assert_eq!(q.schema_versions().unwrap().versions, vec![schema_v1()]);
}

#[test]
fn untyped_queues_refuse_rows_and_a_late_schema() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    let app = q.appender().unwrap();
    match app.append_rows(&row_v1(1), 1, None) {
        Err(Error::Schema(why)) => assert!(why.contains("no schema"), "{why}"),
        other => panic!("{other:?}"),
    }
    app.append(b"opaque").unwrap();
    q.close().unwrap();
    match small(dir.path()).schema(schema_v1()).open() {
        Err(Error::Schema(why)) => assert!(why.contains("untyped messages"), "{why}"),
        other => panic!("{other:?}"),
    }
    let q = small(dir.path()).open().unwrap();
    assert!(q.schema_versions().is_none());
    assert_eq!(q.get(0).unwrap().schema_version, 0);
}

#[test]
fn an_empty_untyped_queue_becomes_typed_in_a_new_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).open().unwrap();
    q.appender().unwrap().flush().unwrap();
    q.close().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    q.appender().unwrap().append(&row_v1(4)).unwrap();
    q.appender().unwrap().flush().unwrap();
    let files = data_files(dir.path());
    assert_eq!(header_schema_version(files.last().unwrap()), 1);
    assert_eq!(read_all(&q)[0].2, 1);
}

#[test]
fn a_bad_row_stores_nothing_and_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    let mut rows: Vec<Vec<u8>> = (0..5).map(row_v1).collect();
    // Row 3's bool (the last byte of its fixed part: bitmap 1, id 4,
    // name end 4, ok 1) is 2.
    let ok_at = 1 + 4 + 4;
    rows[3][ok_at] = 2;
    match app.append_rows(&block_of(&rows), 5, None) {
        Err(Error::Schema(why)) => {
            assert!(why.contains("row 3"), "{why}");
            assert!(why.contains("bool"), "{why}");
        }
        other => panic!("{other:?}"),
    }
    // More rows than the block holds, and bytes after the rows.
    let good: Vec<Vec<u8>> = (0..2).map(row_v1).collect();
    assert!(matches!(
        app.append_rows(&block_of(&good), 3, None),
        Err(Error::Schema(_))
    ));
    let mut extra = block_of(&good);
    extra.push(0);
    assert!(matches!(
        app.append_rows(&extra, 2, None),
        Err(Error::Schema(_))
    ));
    assert!(matches!(app.append(&rows[3]), Err(Error::Schema(_))));
    assert!(matches!(
        app.append_record(&Record::new(b"not a row")),
        Err(Error::Schema(_))
    ));
    app.flush().unwrap();
    assert!(read_all(&q).is_empty(), "nothing was stored");
    // The writer is not poisoned: good rows still go in.
    assert_eq!(app.append_rows(&block_of(&good), 2, None).unwrap(), 0..2);
    // A tombstone has no row.
    let t = Record {
        key: Some(b"k"),
        tombstone: true,
        ..Record::new(b"")
    };
    assert_eq!(app.append_record(&t).unwrap(), 2);
}

/// The offset of the first frame of `path` whose record's extension byte
/// (at record offset 9) is a row batch's, and its record.
fn first_row_batch(path: &Path) -> (usize, Vec<u8>) {
    let b = std::fs::read(path).unwrap();
    let mut at = 4096;
    loop {
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        assert!(len != 0 && len != u32::MAX as usize, "no row batch");
        let rec = &b[at + 4..at + 4 + len];
        if rec[0] == 0x80 && rec[9] == 0x18 {
            return (at, rec.to_vec());
        }
        at += (4 + len + 8).div_ceil(8) * 8;
    }
}

#[test]
fn a_row_that_does_not_check_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(&row_v1(0)).unwrap();
    let rows: Vec<Vec<u8>> = (1..4).map(row_v1).collect();
    app.append_rows(&block_of(&rows), 3, None).unwrap();
    app.flush().unwrap();
    let file = data_files(dir.path()).pop().unwrap();
    let (at, mut rec) = first_row_batch(&file);
    // The block (stored) starts at record offset 25: its first row's
    // (seq 1) bool := 2, with the frame's CRC made right, so only the row
    // check can tell.
    rec[25 + 9] = 2;
    let mut crc_in = (rec.len() as u32).to_le_bytes().to_vec();
    crc_in.extend_from_slice(&rec);
    let crc = crc64(&[&crc_in]);
    let f = OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(&rec, at as u64 + 4).unwrap();
    f.write_all_at(&crc.to_le_bytes(), (at + 4 + rec.len()) as u64)
        .unwrap();
    let ro = common::read_only(dir.path());
    match ro.get(1) {
        Err(Error::Corrupted {
            seq,
            offset,
            reason,
            ..
        }) => {
            assert_eq!((seq, offset), (Some(1), at as u64));
            assert!(reason.contains("bool"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // The damaged row is reported at its own sequence (as read_arrow and
    // the JVM reader report it); the batch's other rows stay readable.
    assert_eq!(ro.get(2).unwrap().payload, &rows[1][..]);
    let mut t = ro.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 0);
    match t.read_next() {
        Err(Error::Corrupted { seq, .. }) => assert_eq!(seq, Some(1)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_headers_keep_each_files_schema_without_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    q.appender().unwrap().append(&row_v1(0)).unwrap();
    q.close().unwrap();
    let q = small(dir.path()).schema(schema_v2()).open().unwrap();
    q.appender().unwrap().append(&row_v2(1)).unwrap();
    q.close().unwrap();
    std::fs::remove_file(dir.path().join("metadata.json")).unwrap();
    let q = small(dir.path()).open().unwrap();
    let versions = q.schema_versions().expect("rebuilt from the headers");
    assert_eq!(versions.versions, vec![schema_v1(), schema_v2()]);
    let all = read_all(&q);
    assert_eq!(
        all.iter().map(|m| (m.1.clone(), m.2)).collect::<Vec<_>>(),
        vec![(row_v1(0), 1), (row_v2(1), 2)]
    );
    // New rows are of the current version, in its file.
    q.appender().unwrap().append(&row_v2(2)).unwrap();
    q.close().unwrap();
    assert_eq!(data_files(dir.path()).len(), 2);
}

#[test]
fn a_damaged_schema_in_a_header_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    q.appender().unwrap().append(&row_v1(0)).unwrap();
    q.close().unwrap();
    let file = data_files(dir.path()).pop().unwrap();
    let f = OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(b"X", 90).unwrap(); // inside the JSON, outside the header CRC
    let ro = common::read_only(dir.path());
    match ro.get(0) {
        Err(Error::Corrupted { reason, .. }) => assert!(reason.contains("CRC"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn compaction_keeps_row_batches_whole() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    let keyed = |k: &'static [u8], row: &'static [u8]| Record {
        key: Some(k),
        ..Record::new(row)
    };
    let r0: &'static [u8] = Box::leak(row_v1(0).into_boxed_slice());
    let r1: &'static [u8] = Box::leak(row_v1(1).into_boxed_slice());
    app.append_record(&keyed(b"a", r0)).unwrap();
    let rows: Vec<Vec<u8>> = (2..40).map(row_v1).collect();
    app.append_rows(&block_of(&rows), rows.len(), Some((Codec::Lz4, 0)))
        .unwrap();
    app.append_record(&keyed(b"a", r1)).unwrap();
    app.roll().unwrap();
    app.append(&row_v1(99)).unwrap();
    app.flush().unwrap();
    let report = q
        .compact(&litemq::CompactOptions::default(), &mut |_, _| {})
        .unwrap();
    assert_eq!(report.files_rewritten, 1);
    let all = read_all(&q);
    assert_eq!(
        all.first().unwrap().0,
        1,
        "the superseded row became a hole"
    );
    assert_eq!(all.len(), 40);
    assert!(all[..38].iter().zip(&rows).all(|(a, r)| &a.1 == r));
    assert_eq!(all[38].1, r1);
    assert!(all.iter().all(|m| m.2 == 1));
    let first = data_files(dir.path()).remove(0);
    assert_eq!(
        header_schema_version(&first),
        1,
        "compaction keeps the schema"
    );
    q.close().unwrap();
    let q = small(dir.path()).open().unwrap();
    assert_eq!(read_all(&q).len(), 40);
}

#[test]
fn an_archived_typed_file_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let rows = fill(&q);
    q.appender().unwrap().roll().unwrap();
    q.close().unwrap();
    let file = data_files(dir.path()).remove(0);
    let bytes = std::fs::read(&file).unwrap();
    litemq::archived::verify(&bytes, &file).unwrap();
    let cols = litemq::archived::read_sealed(
        &bytes,
        &file,
        0,
        u64::MAX,
        10_000,
        litemq::ColumnSet::ALL,
        None,
    )
    .unwrap();
    assert_eq!(cols.rows, rows.len());
    for (i, r) in rows.iter().enumerate() {
        let (s, e) = (
            cols.payload_offsets[i] as usize,
            cols.payload_offsets[i + 1] as usize,
        );
        assert_eq!(&cols.payload_data[s..e], &r[..], "row {i}");
    }
    // A byte range cut from the file: its schema comes from its header.
    let h = litemq::format::header::DataHeader::decode(&bytes).unwrap();
    let typed = litemq::archived::typed_file(&bytes[..4096], &h, &file)
        .unwrap()
        .expect("a typed file");
    let (cols, _) = litemq::archived::read_frames_typed(
        &bytes[4096..],
        &file,
        4096,
        0,
        rows.len(),
        litemq::ColumnSet::ALL,
        None,
        Some(&typed),
    )
    .unwrap();
    assert_eq!(cols.rows, rows.len());
    // Without the schema, a row batch is damage, not bytes misread.
    let untyped = litemq::archived::read_frames(
        &bytes[4096..],
        &file,
        4096,
        0,
        rows.len(),
        litemq::ColumnSet::ALL,
        None,
    );
    assert!(
        matches!(untyped, Err(Error::Corrupted { .. })),
        "{untyped:?}"
    );
}

#[test]
fn a_version_11_queue_still_opens_and_stays_untyped() {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/queue-v11/queue");
    copy_tree(&src, dir.path());
    let ro = common::read_only(dir.path());
    let n = read_all(&ro).len();
    assert!(n > 0);
    assert!(read_all(&ro).iter().all(|m| m.2 == 0));
    drop(ro);
    assert!(matches!(
        QueueBuilder::new(dir.path()).schema(schema_v1()).open(),
        Err(Error::Schema(_))
    ));
    let q = QueueBuilder::new(dir.path()).open().unwrap();
    assert!(q.schema_versions().is_none());
    assert_eq!(read_all(&q).len(), n);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.path().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

fn mark_unclean(base: &Path) {
    let p = base.join("metadata.json");
    let s = std::fs::read_to_string(&p)
        .unwrap()
        .replace("\"clean_shutdown\": true", "\"clean_shutdown\": false");
    std::fs::write(p, s).unwrap();
}

#[test]
fn recovery_and_verify_walk_row_batches_and_resume_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let rows = fill(&q);
    q.close().unwrap();
    mark_unclean(dir.path());
    let q = small(dir.path()).verify_on_startup(true).open().unwrap();
    assert_eq!(q.next_seq(), rows.len() as u64);
    let app = q.appender().unwrap();
    let more: Vec<Vec<u8>> = (500..520).map(row_v1).collect();
    let range = app.append_rows(&block_of(&more), 20, None).unwrap();
    assert_eq!(range.start, rows.len() as u64);
    app.flush().unwrap();
    assert_eq!(
        data_files(dir.path()).len(),
        1,
        "same version: the file resumed"
    );
    let all = read_all(&q);
    assert_eq!(all.len(), rows.len() + 20);
    assert_eq!(all.last().unwrap().1, more[19]);
}

#[test]
fn a_writer_joining_others_cannot_evolve_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let multi = |s: Schema| small(dir.path()).multi_writer(true).schema(s);
    let a = multi(schema_v1()).open().unwrap();
    a.appender().unwrap().append(&row_v1(0)).unwrap();
    match multi(schema_v2()).open() {
        Err(Error::Schema(why)) => assert!(why.contains("reopen"), "{why}"),
        other => panic!("{other:?}"),
    }
    // The same schema joins, and both write rows of it.
    let b = multi(schema_v1()).open().unwrap();
    b.appender()
        .unwrap()
        .append_rows(&block_of(&[row_v1(1), row_v1(2)]), 2, None)
        .unwrap();
    b.appender().unwrap().flush().unwrap();
    a.appender().unwrap().flush().unwrap();
    assert_eq!(read_all(&a).len(), 3);
    b.close().unwrap();
    a.close().unwrap();
    // With every writer closed, the evolution goes in.
    let c = multi(schema_v2()).open().unwrap();
    assert_eq!(c.schema_versions().unwrap().versions.len(), 2);
}

#[test]
fn an_encrypted_typed_queue_seals_its_rows_and_takes_no_row_batches() {
    let dir = tempfile::tempdir().unwrap();
    let key = [7u8; 32];
    let q = small(dir.path())
        .encryption_key(Some(key))
        .schema(schema_v1())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    assert!(matches!(
        app.append_rows(&row_v1(1), 1, None),
        Err(Error::InvalidArgument(_))
    ));
    let secret = row_v1(4);
    app.append(&secret).unwrap();
    app.flush().unwrap();
    assert_eq!(read_all(&q), vec![(0, secret.clone(), 1)]);
    let file = std::fs::read(data_files(dir.path()).pop().unwrap()).unwrap();
    let name = b"event number 4";
    assert!(
        !file[4096..].windows(name.len()).any(|w| w == name),
        "the row is sealed"
    );
}

#[test]
fn a_writer_opened_on_first_write_declares_its_schema_then() {
    let dir = tempfile::tempdir().unwrap();
    small(dir.path())
        .schema(schema_v1())
        .open()
        .unwrap()
        .close()
        .unwrap();
    let q = small(dir.path())
        .lock_on_first_write(true)
        .schema(schema_v2())
        .open()
        .unwrap();
    assert_eq!(q.schema_versions().unwrap().versions.len(), 1, "not yet");
    q.appender().unwrap().append(&row_v2(1)).unwrap();
    assert_eq!(q.schema_versions().unwrap().versions.len(), 2);
    q.appender().unwrap().flush().unwrap();
    assert_eq!(read_all(&q), vec![(0, row_v2(1), 2)]);
}

#[test]
fn a_row_batch_in_an_untyped_file_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    app.append(&row_v1(0)).unwrap();
    app.append_rows(&block_of(&[row_v1(1), row_v1(2)]), 2, None)
        .unwrap();
    q.close().unwrap();
    // The header edited into an untyped file's (its CRC made right).
    let file = data_files(dir.path()).pop().unwrap();
    let mut head = std::fs::read(&file).unwrap()[..64].to_vec();
    head[52..56].fill(0);
    let crc = crc64(&[&head[..56]]);
    head[56..64].copy_from_slice(&crc.to_le_bytes());
    let f = OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(&head, 0).unwrap();
    let ro = common::read_only(dir.path());
    assert_eq!(ro.get(0).unwrap().schema_version, 0);
    match ro.get(1) {
        Err(Error::Corrupted { seq, reason, .. }) => {
            assert_eq!(seq, Some(1));
            assert!(reason.contains("untyped"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn rows_are_refused_while_field_indexes_are_declared() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .schema(schema_v1())
        .index(litemq::FieldIndexDef::new("region", "str").unwrap())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    match app.append_rows(&row_v1(1), 1, None) {
        Err(Error::InvalidArgument(why)) => assert!(why.contains("field indexes"), "{why}"),
        other => panic!("{other:?}"),
    }
    // Single events still go in (plain records, which the indexes read).
    app.append(&row_v1(1)).unwrap();
}

#[test]
fn a_plain_row_that_does_not_check_is_corrupted_on_every_read_path() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    let app = q.appender().unwrap();
    for i in 0..4 {
        app.append(&row_v1(i)).unwrap();
    }
    app.flush().unwrap();
    let file = data_files(dir.path()).pop().unwrap();
    // Message 2's frame: its row's bool := 2, the frame's CRC made right.
    let bytes = std::fs::read(&file).unwrap();
    let mut at = 4096;
    for _ in 0..2 {
        let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
        at += (4 + len + 8).div_ceil(8) * 8;
    }
    let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let mut rec = bytes[at + 4..at + 4 + len].to_vec();
    rec[9 + 9] = 2; // flags, timestamp, then the row: bitmap, id, name end, ok
    let mut crc_in = (len as u32).to_le_bytes().to_vec();
    crc_in.extend_from_slice(&rec);
    let f = OpenOptions::new().write(true).open(&file).unwrap();
    f.write_all_at(&rec, at as u64 + 4).unwrap();
    f.write_all_at(&crc64(&[&crc_in]).to_le_bytes(), (at + 4 + len) as u64)
        .unwrap();
    let ro = common::read_only(dir.path());
    let mut t = ro.tailer(Start::Beginning).unwrap();
    assert_eq!(t.read_next().unwrap().unwrap().seq, 0);
    let mut seen = Vec::new();
    let n = t
        .read_run(10, litemq::OnMismatch::CheckFrames, &mut |m| {
            seen.push(m.seq);
            true
        })
        .unwrap();
    assert_eq!((n, seen), (1, vec![1]), "the run stops before the bad row");
    match t.read_next() {
        Err(Error::Corrupted {
            seq,
            offset,
            reason,
            ..
        }) => {
            assert_eq!((seq, offset), (Some(2), at as u64));
            assert!(reason.contains("bool"), "{reason}");
        }
        other => panic!("{:?}", other.map(|m| m.map(|m| m.seq))),
    }
    assert!(matches!(ro.get(2), Err(Error::Corrupted { .. })));
    assert_eq!(ro.get(3).unwrap().payload, row_v1(3));
}

#[test]
fn retention_drops_whole_typed_files_and_the_rest_reads_on() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path())
        .schema(schema_v1())
        .retention(litemq::RetentionPolicy {
            max_age: None,
            max_bytes: None,
            max_files: Some(2),
            protect_unconsumed: false,
        })
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let rows: Vec<Vec<u8>> = (0..3000).map(row_v1).collect();
    for chunk in rows.chunks(500) {
        app.append_rows(&block_of(chunk), chunk.len(), None)
            .unwrap();
        app.roll().unwrap();
    }
    app.flush().unwrap();
    assert!(data_files(dir.path()).len() <= 2);
    let first = q.first_seq();
    assert!(first > 0, "old files went");
    let all = read_all(&q);
    assert_eq!(all.first().unwrap().0, first);
    assert!(all
        .iter()
        .all(|(seq, payload, v)| *payload == rows[*seq as usize] && *v == 1));
    assert_eq!(q.schema_versions().unwrap().versions.len(), 1);
}

#[test]
fn a_reader_opened_before_an_evolution_finds_the_new_version() {
    let dir = tempfile::tempdir().unwrap();
    let q = small(dir.path()).schema(schema_v1()).open().unwrap();
    q.appender().unwrap().append(&row_v1(0)).unwrap();
    q.close().unwrap();
    let ro = common::read_only(dir.path());
    assert_eq!(ro.schema_versions().unwrap().versions.len(), 1);
    let q = small(dir.path()).schema(schema_v2()).open().unwrap();
    q.appender().unwrap().append(&row_v2(1)).unwrap();
    q.appender().unwrap().flush().unwrap();
    let all = read_all(&ro);
    assert_eq!(all[1].2, 2, "the file's header says its version");
    assert_eq!(ro.schema_of_version(2).unwrap(), Some(schema_v2()));
    assert_eq!(ro.schema_versions().unwrap().versions.len(), 2);
    assert_eq!(ro.schema_of_version(1).unwrap(), Some(schema_v1()));
    assert_eq!(ro.schema_of_version(3).unwrap(), None);
}
