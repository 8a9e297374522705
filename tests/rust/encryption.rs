//! Encryption at rest (format 8), from the outside: what lands on disk, what
//! readers get back, and what a wrong key, a tampered frame or a swapped
//! frame costs.

use std::path::{Path, PathBuf};

use litemq::format::crc::crc64;
use litemq::format::record;
use litemq::index::key_index::key_hash;
use litemq::{Codec, Compression, Error, Queue, QueueBuilder, Record, Start};

const KEY: [u8; 32] = [0x42; 32];

fn open(dir: &Path, key: Option<[u8; 32]>) -> litemq::Result<Queue> {
    QueueBuilder::new(dir)
        .file_size(1 << 20)
        .encryption_key(key)
        .open()
}

fn data_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "data") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

fn files_under(dir: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd {
            let p = e.unwrap().path();
            if p.is_file() {
                out.push(std::fs::read(p).unwrap());
            }
        }
    }
    out
}

/// `(offset, record_len)` of each frame of a data file.
fn frames(file: &[u8]) -> Vec<(usize, usize)> {
    let mut at = 4096;
    let mut out = Vec::new();
    loop {
        let len = u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
        if len == 0 || len == u32::MAX {
            return out;
        }
        out.push((at, len as usize));
        at += litemq::format::frame::frame_size(len as usize);
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn round_trip_and_nothing_in_clear() {
    let dir = tempfile::tempdir().unwrap();
    let secret = b"the launch code is 0000".repeat(3);
    {
        let q = open(dir.path(), Some(KEY)).unwrap();
        let app = q.appender().unwrap();
        app.append(&secret).unwrap();
        app.append(b"").unwrap();
        app.append_record(&Record {
            key: Some(b"order-7"),
            ..Record::new(b"keyed secret")
        })
        .unwrap();
        app.flush().unwrap();
        assert_eq!(q.get(0).unwrap().payload, secret);
        let got: Vec<_> = q
            .tailer(Start::Beginning)
            .unwrap()
            .map(|m| m.unwrap().payload)
            .collect();
        assert_eq!(got, vec![secret.clone(), vec![], b"keyed secret".to_vec()]);
        q.close().unwrap();
    }
    let raw = std::fs::read(&data_files(dir.path())[0]).unwrap();
    // A new file is written in the current version (8 or later holds seals).
    assert_eq!(
        u32::from_le_bytes(raw[8..12].try_into().unwrap()),
        litemq::FORMAT_VERSION
    );
    assert!(!contains(&raw, b"launch code"));
    assert!(!contains(&raw, b"keyed secret"));
    let (at, len) = frames(&raw)[0];
    let v = record::decode(&raw[at + 4..at + 4 + len]).unwrap();
    assert!(v.is_encrypted());
    // Reopened (recovery, a read-only handle) with the key: the same messages.
    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .encryption_key(Some(KEY))
        .open()
        .unwrap();
    assert_eq!(q.get(2).unwrap().payload, b"keyed secret");
}

#[test]
fn no_key_or_a_wrong_key_is_told_at_open() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path(), Some(KEY)).unwrap().close().unwrap();
    assert!(matches!(
        open(dir.path(), None),
        Err(Error::Encryption { .. })
    ));
    let mut other = KEY;
    other[31] ^= 1;
    assert!(matches!(
        open(dir.path(), Some(other)),
        Err(Error::WrongKey { .. })
    ));
    assert!(matches!(
        QueueBuilder::new(dir.path())
            .read_only(true)
            .encryption_key(Some(other))
            .open(),
        Err(Error::WrongKey { .. })
    ));
    // A key for a queue created without encryption.
    let plain = tempfile::tempdir().unwrap();
    open(plain.path(), None).unwrap().close().unwrap();
    assert!(matches!(
        open(plain.path(), Some(KEY)),
        Err(Error::Encryption { .. })
    ));
}

/// Writes `bodies` in one batch (one timestamp), closes, and returns the
/// data file.
fn batch_of(dir: &Path, bodies: &[&[u8]]) -> PathBuf {
    let q = open(dir, Some(KEY)).unwrap();
    let records: Vec<_> = bodies.iter().map(|b| Record::new(b)).collect();
    q.appender().unwrap().append_records(&records).unwrap();
    q.close().unwrap();
    data_files(dir).pop().unwrap()
}

fn refresh_crc(raw: &mut [u8], at: usize, len: usize) {
    let crc = crc64(&[&raw[at..at + 4 + len]]);
    raw[at + 4 + len..at + 12 + len].copy_from_slice(&crc.to_le_bytes());
}

#[test]
fn tampered_ciphertext_is_corrupted_even_with_a_good_crc() {
    let dir = tempfile::tempdir().unwrap();
    let path = batch_of(dir.path(), &[b"aaaaaaaa", b"bbbbbbbb"]);
    let mut raw = std::fs::read(&path).unwrap();
    let (at, len) = frames(&raw)[0];
    raw[at + 4 + len - 20] ^= 0x01; // a ciphertext byte
    refresh_crc(&mut raw, at, len);
    std::fs::write(&path, &raw).unwrap();
    let q = open(dir.path(), Some(KEY)).unwrap();
    let e = q.get(0).unwrap_err();
    assert!(
        matches!(&e, Error::Corrupted { seq: Some(0), reason, .. } if reason.contains("authentication")),
        "{e:?}"
    );
    assert_eq!(q.get(1).unwrap().payload, b"bbbbbbbb");
}

#[test]
fn swapped_or_replayed_frames_fail_authentication() {
    let dir = tempfile::tempdir().unwrap();
    let path = batch_of(dir.path(), &[b"pay 100", b"pay 999"]);
    let raw = std::fs::read(&path).unwrap();
    let f = frames(&raw);
    let ((a, la), (b, lb)) = (f[0], f[1]);
    assert_eq!(la, lb);
    let size = litemq::format::frame::frame_size(la);
    // Each frame keeps its own CRC: swapped, both still pass it.
    let mut swapped = raw.clone();
    swapped[a..a + size].copy_from_slice(&raw[b..b + size]);
    swapped[b..b + size].copy_from_slice(&raw[a..a + size]);
    std::fs::write(&path, &swapped).unwrap();
    {
        let q = open(dir.path(), Some(KEY)).unwrap();
        for seq in [0, 1] {
            assert!(
                matches!(q.get(seq), Err(Error::Corrupted { .. })),
                "seq {seq} read despite the swap"
            );
        }
        q.close().unwrap();
    }
    // Frame 0 replayed over frame 1.
    let raw = std::fs::read(&path).unwrap();
    let mut replayed = raw.clone();
    replayed[a..a + size].copy_from_slice(&raw[b..b + size]);
    std::fs::write(&path, &replayed).unwrap();
    let q = open(dir.path(), Some(KEY)).unwrap();
    assert!(matches!(q.get(1), Err(Error::Corrupted { .. })));
}

#[test]
fn the_key_index_holds_keyed_hashes_and_still_finds() {
    for encrypted in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let key = encrypted.then_some(KEY);
        let q = open(dir.path(), key).unwrap();
        let app = q.appender().unwrap();
        for i in 0..20u8 {
            let k = format!("customer-{}", i % 4);
            app.append_record(&Record {
                key: Some(k.as_bytes()),
                ..Record::new(&[i])
            })
            .unwrap();
        }
        app.flush().unwrap();
        let found = q.find(b"customer-1", None, None, None).unwrap();
        assert_eq!(
            found.iter().map(|m| m.payload[0]).collect::<Vec<_>>(),
            vec![1, 5, 9, 13, 17]
        );
        assert_eq!(q.get_latest(b"customer-2").unwrap().unwrap().payload, [18]);
        q.close().unwrap();
        let index = files_under(&dir.path().join("index"));
        assert!(!index.is_empty());
        let plain_hash = key_hash(b"customer-1").to_le_bytes();
        assert_eq!(
            index.iter().any(|f| contains(f, &plain_hash)),
            !encrypted,
            "encrypted={encrypted}"
        );
        // Rebuilt from the data after a lost index: still keyed hashes.
        std::fs::remove_dir_all(dir.path().join("index")).unwrap();
        let q = open(dir.path(), key).unwrap();
        assert_eq!(q.find(b"customer-3", None, None, None).unwrap().len(), 5);
    }
}

#[test]
fn compressed_then_encrypted() {
    let dir = tempfile::tempdir().unwrap();
    let body = b"{\"event\":\"page_view\",\"user\":\"u1\"}\n".repeat(50);
    let q = QueueBuilder::new(dir.path())
        .file_size(1 << 20)
        .compression(Some(Compression::new(Codec::Zstd)))
        .encryption_key(Some(KEY))
        .open()
        .unwrap();
    q.appender().unwrap().append(&body).unwrap();
    q.appender().unwrap().flush().unwrap();
    let m = q.get(0).unwrap();
    assert_eq!(m.payload, body);
    assert_eq!(m.codec, Some(Codec::Zstd));
    q.close().unwrap();
    let raw = std::fs::read(&data_files(dir.path())[0]).unwrap();
    let (at, len) = frames(&raw)[0];
    let v = record::decode(&raw[at + 4..at + 4 + len]).unwrap();
    assert!(v.is_encrypted() && v.codec == Some(Codec::Zstd));
    // Compressed before sealing: far smaller than the payload.
    assert!(len < body.len() / 4, "{len}");
}

#[test]
fn a_sealed_record_needs_a_version_8_file() {
    // The writer rolls out of an older active file by this rule (a plain
    // queue cannot become encrypted, so no queue here has such a file).
    assert_eq!(
        record::record_version(record::FLAG_EXTENSION, record::EXT_ENCRYPTED),
        8
    );
    assert_eq!(
        record::record_version(record::FLAG_EXTENSION, record::EXT_TOMBSTONE),
        7
    );
    // Formats 9 (batches), 10 (removal marks), 11 (holes counted in the
    // footer) and 12 (typed records) kept the bit: a sealed record still
    // needs only 8.
    assert_eq!(litemq::FORMAT_VERSION, 12);
}

/// Several writer processes (two handles here) get their sequences under
/// the append lock, after the appender handed the message over: sealing on
/// the I/O thread binds the sequence each message really got.
#[test]
fn several_writers_seal_with_the_sequence_they_get() {
    let dir = tempfile::tempdir().unwrap();
    let builder = || {
        QueueBuilder::new(dir.path())
            .file_size(256 << 10)
            .multi_writer(true)
            .encryption_key(Some(KEY))
    };
    let a = builder().open().unwrap();
    let b = builder().open().unwrap();
    let n = 2_000u32;
    std::thread::scope(|s| {
        for (w, q) in [(0u32, &a), (1, &b)] {
            s.spawn(move || {
                let app = q.appender().unwrap();
                for i in 0..n {
                    let body = format!("w{w} m{i}");
                    let key = format!("w{w}");
                    if i % 10 == 0 {
                        app.append_record(&Record {
                            key: Some(key.as_bytes()),
                            ..Record::new(body.as_bytes())
                        })
                        .unwrap();
                    } else {
                        app.append(body.as_bytes()).unwrap();
                    }
                }
                app.flush().unwrap();
            });
        }
    });
    a.close().unwrap();
    b.close().unwrap();
    let q = QueueBuilder::new(dir.path())
        .read_only(true)
        .encryption_key(Some(KEY))
        .open()
        .unwrap();
    let mut next = [0u32; 2];
    for m in q.tailer(Start::Beginning).unwrap() {
        let m = m.unwrap();
        let text = String::from_utf8(m.payload).unwrap();
        let (w, i) = text[1..].split_once(" m").unwrap();
        let w: usize = w.parse().unwrap();
        assert_eq!(i.parse::<u32>().unwrap(), next[w], "in order, once each");
        next[w] += 1;
    }
    assert_eq!(next, [n, n]);
    assert_eq!(
        q.find(b"w1", None, None, None).unwrap().len(),
        (n / 10) as usize
    );
}

/// Sealing adds a nonce, a tag and the extension byte: the largest message
/// of an encrypted queue is that much smaller, refused at the append (not a
/// failed write that poisons the writer).
#[test]
fn the_largest_message_leaves_room_for_the_seal() {
    let dir = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(dir.path())
        .file_size(64 * 1024)
        .encryption_key(Some(KEY))
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let limit = app.max_message_len();
    let plain_limit = litemq::format::data_file::max_record_len(64 * 1024) - 9;
    assert_eq!(limit, plain_limit - 41);
    assert!(matches!(
        app.append(&vec![7; limit + 1]),
        Err(Error::InvalidArgument(_))
    ));
    let seq = app.append(&vec![7; limit]).unwrap();
    let again = app.append(&vec![8; limit]).unwrap();
    app.flush().unwrap();
    assert_eq!(q.get(seq).unwrap().payload, vec![7; limit]);
    assert_eq!(q.get(again).unwrap().payload, vec![8; limit]);
}
