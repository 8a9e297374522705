//! Payload compression (format 7) and tombstones, from the outside: what
//! lands on disk, what readers get back, and what a bomb costs.

use litemq::format::record;
use litemq::{Codec, Compress, Compression, Error, QueueBuilder, Record, Start};

/// A realistic, compressible payload: JSON events with repeated field names.
fn events(n: u32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| {
            format!(
                "{{\"event_id\":{i},\"user\":\"u{}\",\"kind\":\"page_view\",\"ts\":{}}}\n",
                i % 17,
                1_700_000_000 + i
            )
            .into_bytes()
        })
        .collect()
}

/// Bytes that do not compress (a xorshift stream).
fn noise(n: usize) -> Vec<u8> {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The decoded record of message `seq` as it lies in its data file.
fn stored(q: &litemq::Queue, seq: u64) -> (Option<Codec>, usize) {
    let mut t = q.tailer(Start::Seq(seq)).unwrap();
    let m = t.read_next().unwrap().unwrap();
    let file = m.mapping().as_slice();
    let range = m.payload_range();
    (m.codec(), range.len().min(file.len()))
}

#[test]
fn every_codec_stores_less_and_reads_back_the_payload() {
    let tmp = tempfile::tempdir().unwrap();
    let body = events(200);
    for codec in Codec::ALL {
        let q = QueueBuilder::new(tmp.path().join(codec.name()))
            .file_size(1 << 20)
            .compression(Some(Compression::new(codec)))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let a = app.append(&body).unwrap();
        let b = app.append_batch([&body[..], &body[..100]]).unwrap();
        app.flush().unwrap();
        let (got, stored_len) = stored(&q, a);
        assert_eq!(got, Some(codec));
        assert!(
            stored_len * 3 < body.len(),
            "{codec:?}: {stored_len} of {}",
            body.len()
        );
        // Every read path returns the decompressed payload.
        assert_eq!(q.get(a).unwrap().payload, body);
        assert_eq!(q.get(b.start).unwrap().payload, body);
        assert_eq!(q.get(b.start + 1).unwrap().payload, &body[..100]);
        let all: Vec<_> = q
            .tailer(Start::Beginning)
            .unwrap()
            .map(|m| m.unwrap().payload)
            .collect();
        assert_eq!(all, [body.clone(), body.clone(), body[..100].to_vec()]);
        let mut t = q.tailer(Start::Beginning).unwrap();
        let cols = litemq::Columns::read(&mut t, 3, 10).unwrap();
        assert_eq!(cols.payload_data.len(), body.len() * 2 + 100);
        assert_eq!(&cols.payload_data[..body.len()], &body[..]);
    }
}

#[test]
fn only_payloads_worth_it_are_compressed() {
    let tmp = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(tmp.path())
        .file_size(1 << 20)
        .compression(Some(Compression {
            min_size: 1000,
            ..Compression::new(Codec::Zstd)
        }))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let random = app.append(&noise(5000)).unwrap();
    let small = app.append(&events(20)[..900]).unwrap();
    let big = app.append(&events(50)).unwrap();
    let never = app
        .append_record(&Record {
            compress: Compress::Never,
            ..Record::new(&events(50))
        })
        .unwrap();
    let asked = app
        .append_record(&Record {
            compress: Compress::With(Compression {
                min_size: 0,
                ..Compression::new(Codec::Lz4)
            }),
            ..Record::new(&events(20)[..900])
        })
        .unwrap();
    app.flush().unwrap();
    assert_eq!(stored(&q, random).0, None, "saves less than 5 %");
    assert_eq!(stored(&q, small).0, None, "below min_size");
    assert_eq!(stored(&q, big).0, Some(Codec::Zstd));
    assert_eq!(stored(&q, never).0, None);
    assert_eq!(stored(&q, asked).0, Some(Codec::Lz4));
    assert_eq!(q.get(random).unwrap().payload, noise(5000));
}

#[test]
fn the_option_is_remembered() {
    let tmp = tempfile::tempdir().unwrap();
    let c = Compression {
        level: 9,
        min_size: 10,
        ..Compression::new(Codec::Gzip)
    };
    QueueBuilder::new(tmp.path())
        .file_size(1 << 20)
        .compression(Some(c))
        .open()
        .unwrap()
        .close()
        .unwrap();
    let q = QueueBuilder::new(tmp.path()).open().unwrap();
    assert_eq!(q.options().compression.unwrap().codec, "gzip");
    let seq = q.appender().unwrap().append(&events(10)).unwrap();
    assert_eq!(stored(&q, seq).0, Some(Codec::Gzip));
    q.close().unwrap();
    // Turned off explicitly: remembered too.
    QueueBuilder::new(tmp.path())
        .compression(None)
        .open()
        .unwrap()
        .close()
        .unwrap();
    let q = QueueBuilder::new(tmp.path()).open().unwrap();
    let seq = q.appender().unwrap().append(&events(10)).unwrap();
    assert_eq!(stored(&q, seq).0, None);
}

#[test]
fn a_payload_above_the_limit_is_corrupted_not_allocated() {
    let tmp = tempfile::tempdir().unwrap();
    let bomb = vec![0u8; 4 << 20];
    {
        let q = QueueBuilder::new(tmp.path())
            .file_size(1 << 20)
            .compression(Some(Compression::new(Codec::Zstd)))
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        app.append(&bomb).unwrap();
        app.append(b"after").unwrap();
        app.flush().unwrap();
        q.close().unwrap();
    }
    let q = QueueBuilder::new(tmp.path())
        .read_only(true)
        .max_decompressed_size(1 << 20)
        .open()
        .unwrap();
    match q.get(0) {
        Err(Error::Corrupted { reason, seq, .. }) => {
            assert_eq!(seq, Some(0));
            assert!(reason.contains("decompression limit"), "{reason}");
        }
        other => panic!("expected Corrupted, got {other:?}"),
    }
    let mut t = q.tailer(Start::Beginning).unwrap();
    assert!(matches!(t.read_next(), Err(Error::Corrupted { .. })));
    // The tailer stays at the message; skipping it reads on.
    assert_eq!(t.next_seq(), 0);
    assert!(t.skip_damaged().unwrap());
    assert_eq!(t.read_next().unwrap().unwrap().payload, b"after");
    // With the default limit the same queue reads.
    drop(t);
    q.close().unwrap();
    let q = QueueBuilder::new(tmp.path())
        .read_only(true)
        .open()
        .unwrap();
    assert_eq!(q.get(0).unwrap().payload.len(), bomb.len());
}

#[test]
fn decoding_checks_the_compression_field() {
    let body = events(20);
    let r = Record::new(&body);
    let mut out = Vec::new();
    let flags = r.encode_body_with(Some(&Compression::new(Codec::Zstd)), &mut out);
    assert_eq!(flags, record::FLAG_COMPRESSED);
    let mut rec = Vec::new();
    record::encode_into(&mut rec, flags, 7, &out);
    let view = record::decode(&rec).unwrap();
    assert_eq!(view.inflate(1 << 20).unwrap(), &body[..]);
    // A raw length that is not the payload's is an error, short or long.
    for delta in [-1i64, 1] {
        let mut bad = rec.clone();
        let raw = (body.len() as i64 + delta) as u32;
        bad[10..14].copy_from_slice(&raw.to_le_bytes());
        let view = record::decode(&bad).unwrap();
        assert!(view.inflate(1 << 20).is_err(), "{delta}");
    }
    // An unknown codec byte does not decode.
    let mut bad = rec.clone();
    bad[9] = 9;
    assert!(record::decode(&bad).is_err());
}

#[test]
fn tombstones_and_the_latest_value_of_a_key() {
    let tmp = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(tmp.path())
        .file_size(1 << 20)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let put = |k: &[u8], v: &[u8]| {
        app.append_record(&Record {
            key: Some(k),
            ..Record::new(v)
        })
        .unwrap()
    };
    let delete = |k: &[u8]| {
        app.append_record(&Record {
            key: Some(k),
            tombstone: true,
            ..Record::new(b"")
        })
        .unwrap()
    };
    put(b"a", b"a1");
    put(b"b", b"b1");
    put(b"a", b"a2");
    let gone = delete(b"b");
    assert_eq!(q.get_latest(b"a").unwrap().unwrap().payload, b"a2");
    assert!(q.get_latest(b"b").unwrap().is_none());
    assert!(q.get_latest(b"never").unwrap().is_none());
    put(b"b", b"b2");
    assert_eq!(q.get_latest(b"b").unwrap().unwrap().payload, b"b2");
    // Tailers return the tombstone as a message.
    let m = q.get(gone).unwrap();
    assert!(m.tombstone && m.payload.is_empty() && m.key.as_deref() == Some(&b"b"[..]));
    // A tombstone needs a key and no payload.
    for bad in [
        Record {
            tombstone: true,
            ..Record::new(b"")
        },
        Record {
            key: Some(b"k"),
            tombstone: true,
            ..Record::new(b"x")
        },
    ] {
        assert!(matches!(
            app.append_record(&bad),
            Err(Error::InvalidArgument(_))
        ));
    }
}

#[test]
fn a_payload_readers_could_not_inflate_is_stored_as_given() {
    let tmp = tempfile::tempdir().unwrap();
    let big = events(20_000); // about 1.3 MB, very compressible
    let q = QueueBuilder::new(tmp.path())
        .file_size(4 << 20)
        .compression(Some(Compression::new(Codec::Zstd)))
        .max_decompressed_size(1 << 20)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let seq = app.append(&big).unwrap();
    let small = app.append(&events(100)).unwrap();
    app.flush().unwrap();
    assert_eq!(stored(&q, seq).0, None);
    assert_eq!(stored(&q, small).0, Some(Codec::Zstd));
    assert_eq!(q.get(seq).unwrap().payload, big);
}
