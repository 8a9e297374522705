//! The frame walker against the committed test vectors `tests/vectors/frames.json`
//! (shape: `tests/vectors/README.md`; a JVM reader checks itself against the same file).
//!
//! Two tests:
//! - `committed_vectors_are_up_to_date`: the cases built here (each with the walk its
//!   builder expects, written down as the frames are laid out, not asked of the walker)
//!   serialize to exactly the committed file. `LITEMQ_WRITE_VECTORS=1 cargo test --test
//!   frame_vectors` rewrites the file after a deliberate change.
//! - `walker_matches_committed_vectors`: reads the committed file back as data and checks
//!   that `format::walk::Walker` reports each case's walk, event by event.

use litemq::format::compression::{self, Codec};
use litemq::format::crypto::QueueKey;
use litemq::format::frame::{encode_into, frame_size, DATA_HEADER_LEN, END_OF_FILE};
use litemq::format::kind::RecordKind;
use litemq::format::record::{self, HeaderField, Record, FLAG_EXTENSION};
use litemq::format::walk::model::{model_walk, walker_walk};
use litemq::format::walk::{Check, Event, Walker};
use litemq::format::FORMAT_VERSION;
use proptest::prelude::*;
use serde_json::{json, Value};

const PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vectors/frames.json");

/// One case under construction: frames are appended with the event a walker must
/// report for them.
struct Case {
    name: &'static str,
    about: &'static str,
    file_version: u32,
    first_seq: u64,
    start: usize,
    verified_end: Option<usize>,
    bytes: Vec<u8>,
    seq: u64,
    walk: Vec<Value>,
}

impl Case {
    fn new(name: &'static str, about: &'static str) -> Case {
        Case {
            name,
            about,
            file_version: FORMAT_VERSION,
            first_seq: 100,
            start: DATA_HEADER_LEN,
            verified_end: None,
            bytes: Vec::new(),
            seq: 100,
            walk: Vec::new(),
        }
    }

    fn version(mut self, v: u32) -> Case {
        self.file_version = v;
        self
    }

    fn at(&self) -> usize {
        self.start + self.bytes.len()
    }

    /// Appends the frame of `rec` (length, record, CRC, zero padding); returns its offset.
    fn put(&mut self, rec: &[u8]) -> usize {
        let at = self.at();
        encode_into(&mut self.bytes, |o| o.extend_from_slice(rec));
        let padded = self.bytes.len().next_multiple_of(8);
        self.bytes.resize(padded, 0);
        assert_eq!(self.at() - at, frame_size(rec.len()));
        at
    }

    /// A valid frame of `kind` (`"plain"`, `"hole"`, `"batch"`) standing for `count`
    /// sequences.
    fn frame(&mut self, rec: &[u8], kind: &str, count: u64) -> usize {
        let at = self.put(rec);
        let mut e = json!({
            "at": at, "event": "frame", "record_len": rec.len(), "next": self.at(),
            "kind": kind, "seq": self.seq, "count": count,
        });
        if kind == "batch" {
            e["batch_first_seq"] = json!(self.seq);
        }
        self.walk.push(e);
        self.seq += count;
        at
    }

    fn plain(&mut self, rec: &[u8]) -> usize {
        self.frame(rec, "plain", 1)
    }

    fn empty(mut self) -> Case {
        self.bytes.extend_from_slice(&[0; 8]);
        self.stop_at(self.at() - 8, "empty");
        self
    }

    fn end_of_file(mut self) -> Case {
        let at = self.at();
        self.bytes.extend_from_slice(&END_OF_FILE.to_le_bytes());
        self.bytes.extend_from_slice(&[0; 4]);
        self.stop_at(at, "end_of_file");
        self
    }

    fn stop_at(&mut self, at: usize, event: &str) {
        self.walk.push(json!({"at": at, "event": event}));
    }

    fn damage_at(&mut self, at: usize, reason: &str) {
        self.walk
            .push(json!({"at": at, "event": "damage", "reason": reason}));
    }

    fn to_json(&self) -> Value {
        let hex: String = self.bytes.iter().map(|b| format!("{b:02x}")).collect();
        json!({
            "name": self.name,
            "about": self.about,
            "file_version": self.file_version,
            "first_seq": self.first_seq,
            "start": self.start,
            "verified_end": self.verified_end,
            "hex": hex,
            "walk": self.walk,
        })
    }
}

/// A plain record: flags, timestamp, then `body`.
fn rec(flags: u8, ts: u64, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    record::encode_into(&mut r, flags, ts, body);
    r
}

fn message(r: &Record<'_>, ts: u64) -> Vec<u8> {
    r.validate().unwrap();
    let mut body = Vec::new();
    r.encode_body(&mut body);
    rec(r.flags(), ts, &body)
}

const TS: u64 = 1_767_225_600_000_000; // 2026-01-01T00:00:00Z in µs

/// A batch record of `members` (payloads) from `first_seq`, compressed with lz4.
fn batch(first_seq: u64, members: &[&[u8]]) -> Vec<u8> {
    let mut block = Vec::new();
    for m in members {
        let r = Record::new(m);
        record::push_batch_member(&mut block, r.flags(), r.body_len(), |o| r.encode_body(o));
    }
    let packed = compression::compress(Codec::Lz4, 0, &block);
    let mut body = Vec::new();
    record::encode_batch_head(
        members.len() as u16,
        Codec::Lz4,
        block.len() as u32,
        &mut body,
    );
    record::set_batch_first_seq(&mut body, first_seq);
    body.extend_from_slice(&packed);
    rec(FLAG_EXTENSION, TS, &body)
}

/// A row batch record (format 12, ext 0x18) of `rows` rows of the schema
/// `{"id": int32, "name": string (nullable)}` from `first_seq`: stored as
/// is (codec 0) or compressed with `codec`.
fn row_batch(first_seq: u64, rows: &[(i64, Option<&str>)], codec: Option<Codec>) -> Vec<u8> {
    use litemq::format::typed::{encode_row, Field, FieldType, RowLayout, Schema, Value};
    let field = |name: &str, ty, nullable| Field {
        name: name.into(),
        ty,
        nullable,
        aliases: vec![],
    };
    let schema = Schema {
        version: 1,
        fields: vec![
            field("id", FieldType::Int32, false),
            field("name", FieldType::String, true),
        ],
    };
    let layout = RowLayout::of(&schema);
    let mut block = Vec::new();
    for (id, name) in rows {
        let name = name.map_or(Value::Null, |n| Value::Str(n.into()));
        encode_row(&schema, &layout, &[Value::Int(*id), name], &mut block).unwrap();
    }
    let stored = match codec {
        Some(c) => compression::compress(c, 0, &block),
        None => block.clone(),
    };
    let mut body = Vec::new();
    record::encode_row_batch_head(rows.len() as u16, codec, block.len() as u32, &mut body);
    record::set_batch_first_seq(&mut body, first_seq);
    body.extend_from_slice(&stored);
    rec(FLAG_EXTENSION, TS, &body)
}

fn cases() -> Vec<Case> {
    let mut out = Vec::new();

    let mut c = Case::new(
        "plain_then_empty",
        "one plain record (flags 0, timestamp, payload), then a zero length word: the end of the published data",
    );
    c.plain(&message(&Record::new(b"hello"), TS));
    out.push(c.empty());

    let mut c = Case::new(
        "padding",
        "records of 9 to 17 bytes: each frame is round_up(4 + L + 8, 8) bytes, zero padded (24 for L <= 12, 32 for 13..=20)",
    );
    for n in 0..=8usize {
        c.plain(&message(&Record::new(&b"abcdefgh"[..n]), TS + n as u64));
    }
    out.push(c.empty());

    let mut c = Case::new(
        "keyed",
        "records with a key: bytes (flag 0x01) and text (flags 0x05)",
    );
    c.plain(&message(
        &Record {
            key: Some(b"\x00\x01key"),
            ..Record::new(b"v1")
        },
        TS,
    ));
    c.plain(&message(
        &Record {
            key: Some(b"user-42"),
            key_is_text: true,
            ..Record::new(b"v2")
        },
        TS + 1,
    ));
    out.push(c.empty());

    let headers = [
        HeaderField {
            name: "content-type",
            value: b"application/json",
            value_is_text: true,
        },
        HeaderField {
            name: "raw",
            value: b"\x00\xff",
            value_is_text: false,
        },
    ];
    let tags = ["red", "blue"];
    let mut c = Case::new(
        "headers_and_fields",
        "headers (0x02), then topic with tags (0x08), expiry (0x10) and priority (0x20), all with a key",
    );
    c.plain(&message(
        &Record {
            key: Some(b"k"),
            headers: &headers,
            ..Record::new(b"{}")
        },
        TS,
    ));
    c.plain(&message(
        &Record {
            topic: Some("orders"),
            queue_id: 3,
            tags: &tags,
            expires_at: Some(TS + 60_000_000),
            priority: 7,
            ..Record::new(b"payload")
        },
        TS + 1,
    ));
    out.push(c.empty());

    let mut c = Case::new(
        "compressed",
        "a record with a zstd-compressed payload (flag 0x40: codec u8, raw_len u32, then the compressed bytes); the frame CRC covers the stored bytes",
    );
    let raw = b"compress me ".repeat(20);
    let packed = compression::compress(Codec::Zstd, 3, &raw);
    let mut body = Vec::new();
    Record::new(&raw).encode_compressed_body(Codec::Zstd, raw.len() as u32, &packed, &mut body);
    c.plain(&rec(record::FLAG_COMPRESSED, TS, &body));
    out.push(c.empty());

    let mut c = Case::new(
        "encrypted",
        "an encrypted record (flag 0x80, extension byte 0x02, 24-byte nonce, ciphertext and tag; key [7; 32], queue id [1; 16], seq 100): a plain frame to a walker",
    );
    let key = QueueKey::new(&[7; 32], [1; 16]);
    let mut body = Vec::new();
    Record::new(b"secret").encode_body(&mut body);
    let mut sealed = Vec::new();
    let (flags, _) = record::seal_body(&key, 100, 0, TS, &body, &mut sealed);
    // The nonce is random: make it fixed so the vector is reproducible.
    let r = rec(flags, TS, &sealed);
    let nonce_at = 10;
    let mut fixed = r.clone();
    fixed[nonce_at..nonce_at + 24].copy_from_slice(&[9; 24]);
    let mut again = Vec::new();
    key.seal_with_nonce(100, &fixed[..nonce_at], b"secret", &[9; 24], &mut again);
    fixed.truncate(nonce_at);
    fixed.extend_from_slice(&again);
    assert_eq!(fixed.len(), r.len());
    c.plain(&fixed);
    out.push(c.empty());

    let mut c = Case::new(
        "tombstone",
        "a tombstone: key, flag 0x80, extension byte 0x01, no payload",
    );
    c.plain(&message(
        &Record {
            key: Some(b"gone"),
            tombstone: true,
            ..Record::new(b"")
        },
        TS,
    ));
    out.push(c.empty());

    let mut c = Case::new(
        "hole_of_n",
        "a plain record, a hole standing for 5 sequences (flags 0x80, ext 0x04, count 5, zero filler to the end of the frames it replaced), then the next record at seq + 5",
    );
    c.plain(&message(&Record::new(b"kept"), TS));
    let mut h = record::hole(TS + 1, 5).to_vec();
    h.resize(5 * 24 - 12, 0);
    c.frame(&h, "hole", 5);
    c.plain(&message(&Record::new(b"after"), TS + 6));
    out.push(c.end_of_file());

    let mut c = Case::new(
        "batch",
        "a plain record, a batch of 3 members from first_seq 101 (flags 0x80, ext 0x08, count, first_seq, lz4, raw_len, block), then the next record at 104",
    );
    c.plain(&message(&Record::new(b"before"), TS));
    c.frame(&batch(101, &[b"m1", b"m2", b"m3"]), "batch", 3);
    c.plain(&message(&Record::new(b"after"), TS + 1));
    out.push(c.empty());

    let mut c = Case::new(
        "row_batch_stored",
        "format 12: a row batch (ext 0x18 = BATCH|ROWS) of 3 rows from first_seq 101, stored (codec 0, raw_len = the block's length), rows of {id: int32, name: string nullable} back to back; a walker counts it as any batch",
    );
    c.plain(&message(&Record::new(b"before"), TS));
    c.frame(
        &row_batch(101, &[(1, Some("a")), (2, None), (3, Some("three"))], None),
        "batch",
        3,
    );
    c.plain(&message(&Record::new(b"after"), TS + 1));
    out.push(c.empty());

    let mut c = Case::new(
        "row_batch_compressed",
        "format 12: a row batch (ext 0x18) of 40 rows from first_seq 100, its block compressed with zstd (codec 1, raw_len the rows' length), then the next record at 140",
    );
    let rows: Vec<(i64, Option<&str>)> = (0..40).map(|i| (i, Some("same name"))).collect();
    c.frame(&row_batch(100, &rows, Some(Codec::Zstd)), "batch", 40);
    c.plain(&message(&Record::new(b"after"), TS + 1));
    out.push(c.end_of_file());

    let mut c = Case::new(
        "hole_then_batch",
        "a hole of 2 at seq 100, then a batch whose first_seq is 102: counts add up across kinds",
    );
    let mut h = record::hole(TS, 2).to_vec();
    h.resize(2 * 24 - 12, 0);
    c.frame(&h, "hole", 2);
    c.frame(&batch(102, &[b"a", b"b"]), "batch", 2);
    out.push(c.end_of_file());

    let mut c = Case::new(
        "batch_wrong_first_seq",
        "a batch that says first_seq 500 where the walk counts 101 (CRC valid: a writer bug or an edit): damage, for every member",
    );
    c.plain(&message(&Record::new(b"before"), TS));
    let at = c.put(&batch(500, &[b"x", b"y"]));
    c.damage_at(at, "batch_seq_mismatch");
    out.push(c);

    let mut c = Case::new(
        "crc_damage",
        "a plain record, then a record whose byte was flipped after its CRC was computed",
    );
    c.plain(&message(&Record::new(b"good"), TS));
    let at = c.put(&message(&Record::new(b"flipped"), TS + 1));
    c.bytes[at - c.start + 14] ^= 0x20;
    c.damage_at(at, "crc");
    out.push(c);

    let mut c = Case::new(
        "length_out_of_bounds",
        "a length word whose record and CRC would run past the end of the file (the end of `hex`)",
    );
    c.plain(&message(&Record::new(b"good"), TS));
    let at = c.at();
    c.bytes.extend_from_slice(&1000u32.to_le_bytes());
    c.bytes.extend_from_slice(&[0xAB; 60]);
    c.damage_at(at, "length_out_of_bounds");
    out.push(c);

    let mut c = Case::new(
        "record_malformed",
        "a CRC-valid hole whose count is 0: the kind rule refuses it",
    );
    let at = c.put(&record::hole(TS, 0));
    c.damage_at(at, "record_malformed");
    out.push(c);

    let mut c = Case::new(
        "truncated",
        "a frame that ends exactly at the end of the bytes: no room for the next length word",
    );
    c.plain(&message(&Record::new(b"last"), TS));
    let at = c.at();
    c.damage_at(at, "truncated");
    out.push(c);

    let c = Case::new(
        "zero_length_first",
        "the first length word is 0: an empty file, nothing published",
    );
    out.push(c.empty());

    let c = Case::new(
        "end_of_file_first",
        "the first length word is 0xFFFFFFFF: a sealed empty file",
    );
    out.push(c.end_of_file());

    let mut c = Case::new(
        "version3_sealed_no_footer",
        "a version-3 file: frames, then the end-of-file marker in its last 8 bytes (no footer room); the walk does not depend on the version",
    )
    .version(3);
    c.first_seq = 0;
    c.seq = 0;
    c.plain(&message(&Record::new(b"v3"), TS));
    out.push(c.end_of_file());

    let mut c = Case::new(
        "version4_sealed_with_footer_room",
        "a version-4 file: the end-of-file marker, then 128 bytes where the footer goes (zero here): the walk stops at the marker and never reads the footer",
    )
    .version(4);
    c.plain(&message(&Record::new(b"v4"), TS));
    let mut c = c.end_of_file();
    c.bytes.extend_from_slice(&[0; 128]);
    out.push(c);

    let mut c = Case::new(
        "trusted_skips_crc",
        "verified_end set (the frame area's CRC was checked as a whole): a frame before it is not CRC-checked, so a wrong CRC there is not seen; the marker at verified_end stops the walk",
    );
    c.plain(&message(&Record::new(b"one"), TS));
    let at = c.plain(&message(&Record::new(b"two"), TS + 1));
    c.bytes[at - c.start + 14] ^= 0x20;
    let end = c.at();
    c.verified_end = Some(end);
    out.push(c.end_of_file());

    let mut c = Case::new(
        "trusted_bounded_by_verified_end",
        "verified_end set before a frame's end: a trusted frame may not pass it (length_out_of_bounds), even though the bytes go on",
    );
    c.plain(&message(&Record::new(b"one"), TS));
    let at = c.put(&message(&Record::new(b"two"), TS + 1));
    c.verified_end = Some(at + 16);
    c.damage_at(at, "length_out_of_bounds");
    out.push(c);

    out
}

fn generate() -> Value {
    json!({
        "about": "Frame walks over litemq data-file bytes: where each frame starts, what it \
                  holds and how many sequences it stands for. See tests/vectors/README.md and \
                  docs/FORMAT.md sections \"Frames\", \"Records\", \"Batches compressed \
                  together\" and \"Holes and key compaction\".",
        "format_version": FORMAT_VERSION,
        "cases": cases().iter().map(Case::to_json).collect::<Vec<_>>(),
    })
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// What the walker reports for a case, as vector events.
fn walk(case: &Value) -> Vec<Value> {
    let start = case["start"].as_u64().unwrap() as usize;
    let mut file = vec![0u8; start];
    file.extend_from_slice(&unhex(case["hex"].as_str().unwrap()));
    let check = match case["verified_end"].as_u64() {
        Some(end) => Check::Trusted(end as usize),
        None => Check::Crc,
    };
    let mut w = Walker::new(start, case["first_seq"].as_u64().unwrap(), check);
    let mut out = Vec::new();
    loop {
        match w.step(&file[..]) {
            Event::Frame { frame, seq, kind } => {
                let mut e = json!({
                    "at": frame.at, "event": "frame", "record_len": frame.record.len(),
                    "next": frame.next, "kind": kind.name(), "seq": seq, "count": kind.count(),
                });
                if let RecordKind::Batch { first_seq, .. } = kind {
                    e["batch_first_seq"] = json!(first_seq);
                }
                out.push(e);
            }
            Event::Empty { at } => {
                out.push(json!({"at": at, "event": "empty"}));
                break;
            }
            Event::EndOfFile { at } => {
                out.push(json!({"at": at, "event": "end_of_file"}));
                break;
            }
            Event::Damage { at, error, .. } => {
                out.push(json!({"at": at, "event": "damage", "reason": error.reason()}));
                break;
            }
        }
        assert!(out.len() < 10_000, "the walk ends");
    }
    out
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap() + "\n"
}

#[test]
fn committed_vectors_are_up_to_date() {
    let fresh = pretty(&generate());
    if std::env::var_os("LITEMQ_WRITE_VECTORS").is_some() {
        std::fs::write(PATH, &fresh).unwrap();
    }
    let committed = std::fs::read_to_string(PATH).expect("tests/vectors/frames.json");
    assert!(
        committed == fresh,
        "tests/vectors/frames.json is not what the cases build: rerun with LITEMQ_WRITE_VECTORS=1 \
         after a deliberate change"
    );
}

#[test]
fn walker_matches_committed_vectors() {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(PATH).unwrap()).unwrap();
    assert_eq!(v["format_version"], json!(FORMAT_VERSION));
    let cases = v["cases"].as_array().unwrap();
    assert!(cases.len() >= 20);
    let mut names = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        assert!(names.insert(name), "case names are unique: {name}");
        assert_eq!(
            walk(case),
            case["walk"].as_array().unwrap().clone(),
            "case {name}"
        );
    }
    // Every reason of the vocabulary is covered.
    let reasons: std::collections::BTreeSet<&str> = cases
        .iter()
        .flat_map(|c| c["walk"].as_array().unwrap())
        .filter_map(|e| e["reason"].as_str())
        .collect();
    for r in [
        "crc",
        "length_out_of_bounds",
        "record_malformed",
        "batch_seq_mismatch",
        "truncated",
    ] {
        assert!(reasons.contains(r), "no case for {r}");
    }
}

// The walker against a plain model of FORMAT.md's frame and kind rules
// (`format::walk::model`, which `fuzz/fuzz_targets/frame_decode.rs` checks it with too),
// on frames built from random records (plain, hole, batch heads with random counts and
// first sequences), then damaged at a random byte, in each of the three modes.

fn frames_of(recs: &[(u8, u16, u64, usize)], seq0: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seq = seq0;
    for &(kind, count, first, len) in recs {
        let mut r = vec![0u8; 9];
        match kind % 4 {
            0 => r.extend(std::iter::repeat_n(0x5a, len % 40)),
            1 => {
                r[0] = FLAG_EXTENSION;
                r.push(record::EXT_HOLE);
                r.extend_from_slice(&count.to_le_bytes());
                r.extend(std::iter::repeat_n(0, len % 24));
            }
            _ => {
                r[0] = FLAG_EXTENSION;
                r.push(record::EXT_BATCH);
                r.extend_from_slice(&count.to_le_bytes());
                // Mostly in place, sometimes not.
                let f = if kind % 4 == 2 { seq } else { first };
                r.extend_from_slice(&f.to_le_bytes());
                r.extend(std::iter::repeat_n(1, 5 + len % 16));
            }
        }
        encode_into(&mut out, |o| o.extend_from_slice(&r));
        out.resize(out.len().next_multiple_of(8), 0);
        seq += u64::from(count.max(1));
    }
    out
}

proptest! {
    #[test]
    fn walker_agrees_with_the_model(
        recs in proptest::collection::vec((0u8..8, 0u16..5, 0u64..300, 0usize..64), 0..12),
        flip in proptest::option::of((0usize..2000, 1u8..=255)),
        cut in 0usize..2000,
        end_word in 0u8..3,
        verified in 0usize..2000,
    ) {
        let seq0 = 100;
        let mut data = frames_of(&recs, seq0);
        match end_word {
            0 => data.extend_from_slice(&[0; 8]),
            1 => data.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]),
            _ => {}
        }
        if let Some((at, x)) = flip {
            if !data.is_empty() {
                let i = at % data.len();
                data[i] ^= x;
            }
        }
        if cut < data.len() && cut % 3 == 0 {
            data.truncate(cut);
        }
        for check in [Check::Crc, Check::Lengths, Check::Trusted(verified)] {
            prop_assert_eq!(walker_walk(&data, 0, seq0, check), model_walk(&data, 0, seq0, check));
        }
    }
}
