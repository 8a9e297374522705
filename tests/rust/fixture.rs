//! Committed fixture queues: what this format version writes, byte for byte.
//!
//! `tests/fixtures/queue-v<N>/queue/` is a small queue written by format
//! version N (several files across a day boundary, keys, headers, a key-index
//! roll, retention, named tailers, several-writer mode), and
//! `tests/fixtures/queue-v<N>/manifest.json` says what it holds and the
//! sha256 of every file. `tests/fixtures/make_fixture.py DIR` writes both
//! (it runs [`write_fixture`] below, then hashes the files).
//!
//! This test regenerates the fixture of the *current* format version with a
//! manual clock and requires the same bytes as the committed files: a change
//! of the bytes the engine writes fails here even when the engine still
//! reads its own output, as redb keeps its files (`tests/rust/backward_compatibility.rs`).
//! A deliberate change bumps the format version and adds a new
//! `queue-v<N+1>` directory; the older fixtures stay, frozen by their
//! hashes, and `tests/python/test_fixture.py` checks that every one of them is still
//! read (read-only and by a writer) message for message.
//!
//! The generator is deterministic: one thread, a `ManualClock` set before each
//! append, a flush after each append so the I/O thread stamps it at that
//! time. Four things depend on the process or on chance and are normalised: `.lock` (it
//! holds the writer's pid and no data; a writer recreates it) and `wake.ctl`
//! (the wake-up word: a count of wake-ups and of waiting followers, no data;
//! a writer recreates it) are not kept, `writer_pid` in `metadata.json`
//! is set to 0, and its `queue_id` (drawn at random when the queue is
//! created) is left out: the fixture reads as a queue written before queue
//! ids, to which a writer's open adds one. So is `key_index_clear` (saved
//! work: where the key index's files leave positions that hold no keyed
//! message), which queues of version 10 written before it lack too; the next
//! writer open reads those positions and writes it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use litemq::{
    Codec, CompactOptions, Compress, Compression, ConsumerOptions, KeyIndexConfig, ManualClock,
    QueueBuilder, Record, RetentionPolicy, RollPeriod, RollStrategy, Start,
};
use serde_json::{json, Value};

use common::copy_tree;

/// 2026-11-21T23:59:59Z: the messages cross midnight, so the queue has two
/// day directories.
const START_US: u64 = 1_795_305_599_000_000;
/// Time between messages.
const STEP_US: u64 = 200_000;
/// Format 8: the fixture's second queue, `encrypted/`, holds the same
/// messages sealed under this key (bytes 0x00..0x1f; `manifest.json`
/// `encrypted.key_hex`), with this queue id and synthetic nonces
/// (`QueueBuilder::synthetic_nonces_for_fixtures`) so its bytes are
/// reproducible.
const FIXTURE_KEY: [u8; 32] = {
    let mut k = [0u8; 32];
    let mut i = 0;
    while i < 32 {
        k[i] = i as u8;
        i += 1;
    }
    k
};
const FIXTURE_QUEUE_ID: [u8; 16] = *b"litemq fixture 8";
/// The first format version whose fixture has an `encrypted/` queue, and a
/// `compacted/` one (the plain queue after key compaction: holes).
const ENCRYPTED_SINCE: u64 = 8;

/// The first format version whose fixture has a `batched/` queue: messages
/// compressed together (format 9 batch frames) between plain ones.
const BATCHED_SINCE: u64 = 9;

/// The first format version whose fixture has a `typed/` queue: events of a
/// schema (format 12), single rows and row batches, across an evolution.
const TYPED_SINCE: u64 = 12;

/// A header as the generator gives it: name, value, whether it is text.
type Header = (&'static str, Vec<u8>, bool);

/// One message: payload, key (bytes, is text), headers, and the record
/// fields of format 6 (topic, queue id, tags, expiry, priority).
#[derive(Default)]
struct Input {
    payload: Vec<u8>,
    key: Option<(Vec<u8>, bool)>,
    headers: Vec<Header>,
    topic: Option<&'static str>,
    queue_id: u16,
    tags: Vec<&'static str>,
    expires_at: Option<u64>,
    priority: u8,
    /// Format 7: how the payload is compressed, and tombstones.
    compress: Compress,
    tombstone: bool,
}

fn inputs() -> Vec<Input> {
    let text = |s: &str| Some((s.as_bytes().to_vec(), true));
    // The first file (seqs 0..4) is deleted by retention; one of its keys
    // is indexed in a key-index file that stays.
    let mut v: Vec<Input> = (0..4u32)
        .map(|i| Input {
            payload: format!("old {i}").into_bytes(),
            key: (i == 3).then(|| ("customer-7".as_bytes().to_vec(), true)),
            headers: vec![],
            ..Input::default()
        })
        .collect();
    v.extend([
        Input {
            payload: b"hello".to_vec(),
            key: None,
            headers: vec![],
            ..Input::default()
        },
        Input {
            payload: vec![],
            key: text("customer-7"),
            headers: vec![("source", b"web".to_vec(), true)],
            ..Input::default()
        },
        Input {
            payload: (0..=255u8).collect(),
            key: Some((b"\xffk\x00".to_vec(), false)),
            headers: vec![],
            ..Input::default()
        },
        Input {
            payload: b"order 3".to_vec(),
            key: text("customer-7"),
            headers: vec![
                ("h1", b"\x00\x01".to_vec(), false),
                ("h2", b"two".to_vec(), true),
                ("\u{e9}t\u{e9}", "\u{fc}ber".as_bytes().to_vec(), true),
            ],
            ..Input::default()
        },
        Input {
            payload: (0..1000u32).map(|i| (i * 7 % 251) as u8).collect(),
            key: text("big"),
            headers: vec![("empty", vec![], false)],
            ..Input::default()
        },
    ]);
    for i in 9..18u32 {
        v.push(Input {
            payload: format!("message {i}").into_bytes(),
            key: match i % 3 {
                0 => text("customer-7"),
                1 => text(&format!("k{i}")),
                _ => None,
            },
            headers: if i % 4 == 0 {
                vec![("n", i.to_le_bytes().to_vec(), false)]
            } else {
                vec![]
            },
            ..Input::default()
        });
    }
    // Format 6: topic, queue id, tags, expiry and priority, alone and together.
    v.extend([
        Input {
            payload: b"order paid".to_vec(),
            key: text("customer-7"),
            headers: vec![("source", b"web".to_vec(), true)],
            topic: Some("orders"),
            tags: vec!["paid", "eu"],
            ..Input::default()
        },
        Input {
            payload: b"shard 3".to_vec(),
            topic: Some("commandes/\u{e9}t\u{e9}"),
            queue_id: 3,
            ..Input::default()
        },
        Input {
            payload: b"tagged only".to_vec(),
            tags: vec!["t\u{e9}"],
            ..Input::default()
        },
        Input {
            payload: b"urgent".to_vec(),
            priority: 9,
            expires_at: Some(START_US + 3_600_000_000),
            ..Input::default()
        },
        Input {
            payload: b"all fields".to_vec(),
            key: Some((b"\x00\x01".to_vec(), false)),
            headers: vec![("h", b"v".to_vec(), true)],
            topic: Some("orders"),
            queue_id: 1,
            tags: vec!["refund"],
            expires_at: Some(START_US),
            priority: 255,
            ..Input::default()
        },
    ]);
    // Format 7: a payload compressed by each codec, one too small to be
    // worth it (stored as is), and a tombstone.
    let json_lines = |n: u32| -> Vec<u8> {
        (0..n)
            .flat_map(|i| {
                format!("{{\"id\":{i},\"event\":\"click\",\"page\":\"/home\"}}\n").into_bytes()
            })
            .collect()
    };
    for (i, codec) in [Codec::Zstd, Codec::Lz4, Codec::Gzip]
        .into_iter()
        .enumerate()
    {
        v.push(Input {
            payload: json_lines(20 + i as u32),
            key: text("compressed"),
            compress: Compress::With(Compression::new(codec)),
            ..Input::default()
        });
    }
    v.extend([
        Input {
            payload: b"tiny".to_vec(),
            compress: Compress::With(Compression::new(Codec::Zstd)),
            ..Input::default()
        },
        Input {
            payload: vec![],
            key: text("customer-7"),
            tombstone: true,
            ..Input::default()
        },
    ]);
    v
}

/// The key as the manifest writes it.
fn key_json(key: &Option<(Vec<u8>, bool)>) -> Value {
    match key {
        None => Value::Null,
        Some((k, true)) => json!({"text": String::from_utf8(k.clone()).unwrap()}),
        Some((k, false)) => json!({"hex": hex(k)}),
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes the fixture queue into `dir` (which must not exist) and returns the
/// manifest of what it holds (everything but the file hashes); with `key`,
/// the queue is encrypted (format 8, see [`FIXTURE_KEY`]).
fn generate(dir: &Path, key: Option<[u8; 32]>) -> Value {
    let clock = Arc::new(ManualClock::new(START_US));
    let mut builder = QueueBuilder::new(dir);
    if key.is_some() {
        builder = builder
            .encryption_key(key)
            .synthetic_nonces_for_fixtures(FIXTURE_QUEUE_ID);
    }
    let q = builder
        .file_size(64 * 1024)
        .index_interval(4)
        .roll(RollStrategy::Any(vec![
            RollStrategy::Period(RollPeriod::Daily),
            RollStrategy::Count(4),
        ]))
        .key_index(KeyIndexConfig { slots: 8, items: 4 })
        .multi_writer(true)
        .clock(clock.clone())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let inputs = inputs();
    let mut messages = Vec::new();
    for (i, m) in inputs.iter().enumerate() {
        let ts = START_US + i as u64 * STEP_US;
        clock.set(ts);
        let headers: Vec<_> = m
            .headers
            .iter()
            .map(|(name, value, is_text)| litemq::HeaderField {
                name,
                value,
                value_is_text: *is_text,
            })
            .collect();
        let record = Record {
            payload: &m.payload,
            key: m.key.as_ref().map(|(k, _)| k.as_slice()),
            key_is_text: m.key.as_ref().is_some_and(|(_, t)| *t),
            headers: &headers,
            topic: m.topic,
            queue_id: m.queue_id,
            tags: &m.tags,
            expires_at: m.expires_at,
            priority: m.priority,
            compress: m.compress,
            tombstone: m.tombstone,
        };
        let seq = app.append_record(&record).unwrap();
        assert_eq!(seq, i as u64);
        app.flush().unwrap();
        messages.push((seq, ts, m));
    }

    // Retention deletes the oldest data file: first_seq > 0.
    let t = START_US + inputs.len() as u64 * STEP_US;
    clock.set(t);
    let report = q
        .apply_retention_with(&RetentionPolicy {
            max_files: Some(7),
            ..RetentionPolicy::default()
        })
        .unwrap();
    assert_eq!(report.deleted_files.len(), 1);
    let first = q.first_seq();

    // "billing" starts at the first message kept and commits after three;
    // "audit" starts at the end and never reads.
    clock.set(t + 1_000);
    let mut billing = q
        .consumer(
            "billing",
            ConsumerOptions {
                start_if_new: Start::Seq(first),
                auto_commit: false,
                ..ConsumerOptions::default()
            },
        )
        .unwrap();
    for _ in 0..3 {
        billing.read_next().unwrap().unwrap();
    }
    clock.set(t + 2_000);
    billing.commit().unwrap();
    billing.close().unwrap();
    clock.set(t + 3_000);
    let audit = q
        .consumer(
            "audit",
            ConsumerOptions {
                start_if_new: Start::End,
                auto_commit: false,
                ..ConsumerOptions::default()
            },
        )
        .unwrap();
    audit.close().unwrap();
    clock.set(t + 4_000);
    drop(app);
    q.close().unwrap();
    drop(q);

    std::fs::remove_file(dir.join(".lock")).unwrap();
    std::fs::remove_file(dir.join("wake.ctl")).unwrap();
    let meta_path = dir.join("metadata.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    let format_version = meta["format_version"].as_u64().unwrap();
    meta["writer_pid"] = json!(0);
    meta.as_object_mut().unwrap().remove("queue_id");
    meta.as_object_mut().unwrap().remove("key_index_clear");
    let mut text = serde_json::to_string_pretty(&meta).unwrap();
    text.push('\n');
    std::fs::write(&meta_path, text).unwrap();

    let kept: Vec<_> = messages
        .iter()
        .filter(|(seq, _, _)| *seq >= first)
        .collect();
    let mut keys: BTreeMap<String, Value> = BTreeMap::new();
    for (seq, _, m) in &kept {
        if let Some((k, is_text)) = &m.key {
            let name = if *is_text {
                String::from_utf8(k.clone()).unwrap()
            } else {
                format!("hex:{}", hex(k))
            };
            let entry = keys
                .entry(name)
                .or_insert_with(|| json!({"key": key_json(&m.key), "seqs": []}));
            entry["seqs"].as_array_mut().unwrap().push(json!(seq));
        }
    }
    json!({
        "format_version": format_version,
        "first_seq": first,
        "next_seq": inputs.len(),
        "messages": kept.iter().map(|(seq, ts, m)| json!({
            "seq": seq,
            "timestamp": ts,
            "payload_hex": hex(&m.payload),
            "key": key_json(&m.key),
            "headers": m.headers.iter().map(|(name, value, is_text)| json!({
                "name": name,
                "value": if *is_text {
                    json!({"text": String::from_utf8(value.clone()).unwrap()})
                } else {
                    json!({"hex": hex(value)})
                },
            })).collect::<Vec<_>>(),
            "topic": m.topic,
            "queue_id": m.queue_id,
            "tags": m.tags,
            "expires_at": m.expires_at,
            "priority": m.priority,
            "compression": match m.compress {
                Compress::With(c) if m.payload.len() >= c.min_size => Some(c.codec.name()),
                _ => None,
            },
            "tombstone": m.tombstone,
        })).collect::<Vec<_>>(),
        "keys": keys.into_values().collect::<Vec<_>>(),
        "named_tailers": [
            {"name": "audit", "next_seq": inputs.len(), "committed_at": t + 3_000, "created_at": t + 3_000},
            {"name": "billing", "next_seq": first + 3, "committed_at": t + 2_000, "created_at": t + 1_000},
        ],
    })
}

/// One message of the `batched/` queue as its manifest records it:
/// sequence, timestamp, payload, headers, priority, codec, key, tombstone.
type Batched<'a> = (
    u64,
    u64,
    &'a [u8],
    &'a [Header],
    u8,
    Option<Codec>,
    &'a Option<(Vec<u8>, bool)>,
    bool,
);

/// Records one message of the `batched/` queue in its manifest.
type PushMessage<'a> = dyn FnMut(Batched<'_>) + 'a;

/// Writes the `batched/` queue (format 9): plain messages and batches
/// compressed together (zstd and lz4, members with headers and
/// priorities, keys as text and as bytes, a tombstone member, one batch
/// cut in two by a file roll), with the generator's manual clock. Returns
/// what the manifest's `batched` says: every message.
fn generate_batched(dir: &Path) -> Value {
    let clock = Arc::new(ManualClock::new(START_US));
    let q = QueueBuilder::new(dir)
        .file_size(64 * 1024)
        .index_interval(4)
        .compression(Some(Compression {
            codec: Codec::Zstd,
            level: 3,
            min_size: 64,
        }))
        .clock(clock.clone())
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let event = |i: u32| -> Vec<u8> {
        format!(
            "{{\"id\":{i},\"event\":\"click\",\"page\":\"/home\",\"user\":\"u{}\"}}",
            i % 7
        )
        .into_bytes()
    };
    let mut messages: Vec<Value> = Vec::new();
    let mut push = |(seq, ts, payload, headers, priority, codec, key, tombstone): Batched<'_>| {
        messages.push(json!({
            "seq": seq,
            "timestamp": ts,
            "payload_hex": hex(payload),
            "headers": headers.iter().map(|(name, value, is_text)| json!({
                "name": name,
                "value": if *is_text {
                    json!({"text": String::from_utf8(value.clone()).unwrap()})
                } else {
                    json!({"hex": hex(value)})
                },
            })).collect::<Vec<_>>(),
            "priority": priority,
            "compression": codec.map(Codec::name),
            "key": key_json(key),
            "tombstone": tombstone,
        }));
    };
    let mut ts = START_US;
    let plain = |app: &litemq::Appender, payload: &[u8], ts: u64, push: &mut PushMessage<'_>| {
        clock.set(ts);
        let seq = app.append_record(&Record::new(payload)).unwrap();
        app.flush().unwrap();
        push((seq, ts, payload, &[], 0, None, &None, false));
    };
    plain(&app, b"before the batches", ts, &mut push);
    for (n, (codec, count)) in [(Codec::Zstd, 40u32), (Codec::Lz4, 25), (Codec::Zstd, 200)]
        .into_iter()
        .enumerate()
    {
        ts += STEP_US;
        clock.set(ts);
        let payloads: Vec<Vec<u8>> = (0..count).map(|i| event(n as u32 * 1000 + i)).collect();
        let headers: Vec<Vec<Header>> = (0..count)
            .map(|i| match i % 4 {
                0 => vec![("n", i.to_le_bytes().to_vec(), false)],
                1 => vec![("source", b"web".to_vec(), true)],
                _ => vec![],
            })
            .collect();
        let fields: Vec<Vec<litemq::HeaderField<'_>>> = headers
            .iter()
            .map(|h| {
                h.iter()
                    .map(|(name, value, is_text)| litemq::HeaderField {
                        name,
                        value,
                        value_is_text: *is_text,
                    })
                    .collect()
            })
            .collect();
        // Keys (format 9 allows them in members): text, bytes; in the lz4
        // batch, member 12 deletes "user-0", keyed in the batch before.
        let tombstone = |i: usize| n == 1 && i == 12;
        let keys: Vec<Option<(Vec<u8>, bool)>> = (0..count as usize)
            .map(|i| match i % 5 {
                _ if tombstone(i) => Some((b"user-0".to_vec(), true)),
                2 => Some((format!("user-{}", i % 3).into_bytes(), true)),
                3 => Some((vec![0xfe, (i % 2) as u8], false)),
                _ => None,
            })
            .collect();
        let payloads: Vec<Vec<u8>> = payloads
            .into_iter()
            .enumerate()
            .map(|(i, p)| if tombstone(i) { Vec::new() } else { p })
            .collect();
        let records: Vec<Record<'_>> = (0..count as usize)
            .map(|i| Record {
                headers: &fields[i],
                priority: (i % 3) as u8,
                key: keys[i].as_ref().map(|k| k.0.as_slice()),
                key_is_text: keys[i].as_ref().is_some_and(|k| k.1),
                tombstone: tombstone(i),
                ..Record::new(&payloads[i])
            })
            .collect();
        let c = Compression::new(codec);
        let r = app.append_batch_together(&records, Some(c)).unwrap();
        app.flush().unwrap();
        for (i, seq) in r.enumerate() {
            push((
                seq,
                ts,
                &payloads[i],
                &headers[i],
                (i % 3) as u8,
                Some(codec),
                &keys[i],
                tombstone(i),
            ));
        }
        ts += STEP_US;
        plain(&app, format!("after batch {n}").as_bytes(), ts, &mut push);
    }
    let next_seq = q.next_seq();
    drop(app);
    q.close().unwrap();
    drop(q);
    let _ = settle(dir);
    json!({ "next_seq": next_seq, "messages": messages })
}

/// Makes a closed queue under `dir` the same on every run: no lock or
/// wake-up file, and no writer pid, queue id or saved key-index gaps in its
/// metadata (each run draws or finds its own). Returns the metadata.
fn settle(dir: &Path) -> Value {
    for leftover in [".lock", "wake.ctl"] {
        let _ = std::fs::remove_file(dir.join(leftover));
    }
    let meta_path = dir.join("metadata.json");
    let mut meta: Value = serde_json::from_slice(&std::fs::read(&meta_path).unwrap()).unwrap();
    meta["writer_pid"] = json!(0);
    meta.as_object_mut().unwrap().remove("queue_id");
    meta.as_object_mut().unwrap().remove("key_index_clear");
    let mut text = serde_json::to_string_pretty(&meta).unwrap();
    text.push('\n');
    std::fs::write(&meta_path, text).unwrap();
    meta
}

/// The schema of the `typed/` queue: version 1 (`evolved` false) and the
/// version 2 it evolves to (`side` widened to int16, `size` renamed `qty`,
/// `venue` added).
fn typed_schema(evolved: bool) -> litemq::format::typed::Schema {
    use litemq::format::typed::{Field, FieldType, Schema};
    let f = |name: &str, ty, nullable| Field {
        name: name.into(),
        ty,
        nullable,
        aliases: vec![],
    };
    let mut fields = vec![
        f("time", FieldType::TimestampUs, false),
        f("symbol", FieldType::String, false),
        f("price", FieldType::Float64, true),
        f("size", FieldType::Int64, false),
        f("side", FieldType::Int8, false),
        f("id", FieldType::UInt32, false),
        f(
            "notional",
            FieldType::Decimal128 {
                precision: 12,
                scale: 2,
            },
            true,
        ),
        f("day", FieldType::Date32, false),
        f("live", FieldType::Bool, false),
        f("tag", FieldType::Binary, true),
    ];
    if evolved {
        fields[3].name = "qty".into();
        fields[3].aliases = vec!["size".into()];
        fields[4].ty = FieldType::Int16;
        fields.push(f("venue", FieldType::String, true));
    }
    Schema {
        version: if evolved { 2 } else { 1 },
        fields,
    }
}

/// Event `i` of the `typed/` queue as values of [`typed_schema`]`(evolved)`.
fn typed_values(i: u64, evolved: bool) -> Vec<litemq::format::typed::Value> {
    use litemq::format::typed::Value as V;
    let mut v = vec![
        V::Int((START_US + i * 1_000) as i64),
        V::Str(["AAPL", "MSFT", "GOOG", "Ünï"][(i % 4) as usize].into()),
        if i.is_multiple_of(5) {
            V::Null
        } else {
            V::Float(100.0 + i as f64 / 4.0)
        },
        V::Int(i as i64 * 10 - 500),
        V::Int(if i.is_multiple_of(2) { 1 } else { -1 }),
        V::UInt(4_000_000_000 - i),
        if i.is_multiple_of(7) {
            V::Null
        } else {
            V::Decimal(i as i128 * 12_345 - 99_999)
        },
        V::Int(20_000 + (i % 3) as i64),
        V::Bool(i.is_multiple_of(3)),
        if i.is_multiple_of(2) {
            V::Null
        } else {
            V::Bytes(vec![0, 0xff, i as u8])
        },
    ];
    if evolved {
        v.push(if i.is_multiple_of(2) {
            V::Str("XNAS".into())
        } else {
            V::Null
        });
    }
    v
}

/// A value as the `typed/` manifest records it: numbers, bools, text,
/// binary as `{"hex": ...}`, a decimal as its text (`"-999.99"`),
/// timestamps as µs and dates as days; `null` for a null.
fn typed_json(v: &litemq::format::typed::Value, scale: u8) -> Value {
    use litemq::format::typed::Value as V;
    match v {
        V::Null => Value::Null,
        V::Bool(b) => json!(b),
        V::Int(n) => json!(n),
        V::UInt(n) => json!(n),
        V::Float(x) => json!(x),
        V::Str(s) => json!(s),
        V::Bytes(b) => json!({"hex": hex(b)}),
        V::Decimal(d) => {
            let digits = format!("{:0>width$}", d.unsigned_abs(), width = scale as usize + 1);
            let (int, frac) = digits.split_at(digits.len() - scale as usize);
            json!(format!("{}{int}.{frac}", if *d < 0 { "-" } else { "" }))
        }
    }
}

/// Writes the `typed/` queue (format 12): a schema of ten fields (every
/// kind of slot, nullable and not), events appended one by one (one with a
/// key, one compressed) and as row batches (stored, and zstd), a roll
/// between files, then an evolution to version 2 (a rename, a widening, a
/// nullable field added: a new file) and more events. Returns what the
/// manifest's `typed` says: the schema versions and every message with
/// its values as the current (second) version reads them.
fn generate_typed(dir: &Path) -> Value {
    use litemq::format::typed::{encode_row, RowLayout, Value as V};
    let clock = Arc::new(ManualClock::new(START_US));
    let mut messages: Vec<Value> = Vec::new();
    let mut ts = START_US;
    let mut i = 0u64;
    // The current version's view of event `i` written in version `v`.
    let as_current = |i: u64, written_evolved: bool| -> Value {
        let mut vals = typed_values(i, written_evolved);
        if !written_evolved {
            vals.push(V::Null);
        }
        let schema = typed_schema(true);
        let mut o = serde_json::Map::new();
        for (f, v) in schema.fields.iter().zip(&vals) {
            let scale = match f.ty {
                litemq::format::typed::FieldType::Decimal128 { scale, .. } => scale,
                _ => 0,
            };
            o.insert(f.name.clone(), typed_json(v, scale));
        }
        Value::Object(o)
    };
    for evolved in [false, true] {
        let schema = typed_schema(evolved);
        let layout = RowLayout::of(&schema);
        let q = QueueBuilder::new(dir)
            .file_size(64 * 1024)
            .index_interval(4)
            .schema(schema.clone())
            .clock(clock.clone())
            .open()
            .unwrap();
        let app = q.appender().unwrap();
        let row = |i: u64| {
            let mut out = Vec::new();
            encode_row(&schema, &layout, &typed_values(i, evolved), &mut out).unwrap();
            out
        };
        let mut push = |seq: u64, ts: u64, i: u64, key: Option<&str>| {
            messages.push(json!({
                "seq": seq,
                "timestamp": ts,
                "schema_version": if evolved { 2 } else { 1 },
                "key": key,
                "value": as_current(i, evolved),
            }));
        };
        // One at a time: plain records, one keyed, one asking for zstd.
        for n in 0..3 {
            ts += STEP_US;
            clock.set(ts);
            let payload = row(i);
            let key = (n == 1).then_some("order-1");
            let rec = Record {
                key: key.map(str::as_bytes),
                key_is_text: key.is_some(),
                compress: if n == 2 {
                    Compress::With(Compression::new(Codec::Zstd))
                } else {
                    Compress::Queue
                },
                ..Record::new(&payload)
            };
            let seq = app.append_record(&rec).unwrap();
            app.flush().unwrap();
            push(seq, ts, i, key);
            i += 1;
        }
        // Row batches: stored, then zstd; the second version's is larger
        // than what is left of the file, so it rolls.
        for (count, compress) in [
            (50u64, None),
            (if evolved { 900 } else { 300 }, Some((Codec::Zstd, 3))),
        ] {
            ts += STEP_US;
            clock.set(ts);
            let block: Vec<u8> = (i..i + count).flat_map(row).collect();
            let r = app.append_rows(&block, count as usize, compress).unwrap();
            app.flush().unwrap();
            for seq in r {
                push(seq, ts, i, None);
                i += 1;
            }
        }
        drop(app);
        q.close().unwrap();
        drop(q);
    }
    let meta = settle(dir);
    json!({
        "schema": meta["schema"].clone(),
        "messages": messages,
    })
}

/// Copies the generated queue `queue` to `out` and runs key compaction on
/// it (tombstones kept: no time matters), from a read-only handle with the
/// generator's clock, so the files are the same on every run. Returns what
/// the manifest's `compacted` says: the sequences compaction dropped.
fn compacted_copy(queue: &Path, out: &Path) -> Value {
    copy_tree(queue, out);
    let clock = Arc::new(ManualClock::new(START_US + 3_600_000_000));
    let before: Vec<u64> = seqs(out);
    let q = QueueBuilder::new(out)
        .read_only(true)
        .clock(clock)
        .open()
        .unwrap();
    let report = q
        .compact(
            &CompactOptions {
                grace_us: u64::MAX,
                ..CompactOptions::default()
            },
            &mut |_, _| {},
        )
        .unwrap();
    assert!(
        report.records_dropped > 0,
        "the fixture has superseded values"
    );
    q.close().unwrap();
    drop(q);
    for leftover in [".lock", "wake.ctl"] {
        let _ = std::fs::remove_file(out.join(leftover));
    }
    let after = seqs(out);
    let dropped: Vec<u64> = before.into_iter().filter(|s| !after.contains(s)).collect();
    json!({ "dropped": dropped })
}

/// The sequences of the messages queue `dir` holds, read from a read-only handle.
fn seqs(dir: &Path) -> Vec<u64> {
    let q = QueueBuilder::new(dir).read_only(true).open().unwrap();
    let mut t = q.tailer(Start::Beginning).unwrap();
    let mut out = Vec::new();
    while let Some(m) = t.read_next().unwrap() {
        out.push(m.seq);
    }
    drop(t);
    q.close().unwrap();
    out
}

/// Every file under `dir`, by path relative to it.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(base, &path, out);
            } else {
                let rel = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

#[test]
fn current_format_fixture_is_reproduced_byte_for_byte() {
    let tmp = tempfile::tempdir().unwrap();
    let fresh = tmp.path().join("queue");
    let mut manifest = generate(&fresh, None);
    let version = manifest["format_version"].as_u64().unwrap();
    let committed_dir = fixtures().join(format!("queue-v{version}"));
    assert!(
        committed_dir.is_dir(),
        "format version {version} has no fixture: run \
         `python tests/fixtures/make_fixture.py tests/fixtures/queue-v{version}` and commit it \
         (keep the older queue-v* directories)"
    );

    let mut committed: Value =
        serde_json::from_slice(&std::fs::read(committed_dir.join("manifest.json")).unwrap())
            .unwrap();
    committed.as_object_mut().unwrap().remove("files");
    let encrypted = committed.as_object_mut().unwrap().remove("encrypted");
    let compacted = committed.as_object_mut().unwrap().remove("compacted");
    let batched = committed.as_object_mut().unwrap().remove("batched");
    let typed = committed.as_object_mut().unwrap().remove("typed");
    manifest.as_object_mut().unwrap().remove("files");
    assert_eq!(
        manifest, committed,
        "the generator's manifest changed: a fixture is frozen once committed"
    );
    same_files(&committed_dir.join("queue"), &fresh);
    if version >= ENCRYPTED_SINCE {
        let encrypted = encrypted.expect("a format-8 fixture has an encrypted queue");
        assert_eq!(encrypted["key_hex"], json!(hex(&FIXTURE_KEY)));
        let fresh = tmp.path().join("encrypted");
        assert_eq!(generate(&fresh, Some(FIXTURE_KEY)), manifest);
        same_files(&committed_dir.join("encrypted"), &fresh);
        let mut compacted = compacted.expect("a format-8 fixture has a compacted queue");
        compacted.as_object_mut().unwrap().remove("files");
        let out = tmp.path().join("compacted");
        assert_eq!(compacted_copy(&tmp.path().join("queue"), &out), compacted);
        same_files(&committed_dir.join("compacted"), &out);
    }
    if version >= BATCHED_SINCE {
        let mut batched = batched.expect("a format-9 fixture has a batched queue");
        batched.as_object_mut().unwrap().remove("files");
        let fresh = tmp.path().join("batched");
        assert_eq!(generate_batched(&fresh), batched);
        same_files(&committed_dir.join("batched"), &fresh);
    }
    if version >= TYPED_SINCE {
        let mut typed = typed.expect("a format-12 fixture has a typed queue");
        typed.as_object_mut().unwrap().remove("files");
        let fresh = tmp.path().join("typed");
        assert_eq!(generate_typed(&fresh), typed);
        same_files(&committed_dir.join("typed"), &fresh);
    }
}

/// The files under `fresh` are those under `committed`, byte for byte.
fn same_files(committed: &Path, fresh: &Path) {
    let want = files(committed);
    let got = files(fresh);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        want.keys().collect::<Vec<_>>(),
        "the engine writes other files than the committed fixture"
    );
    for (name, bytes) in &want {
        let fresh_bytes = &got[name];
        if let Some(at) = bytes
            .iter()
            .zip(fresh_bytes.iter())
            .position(|(a, b)| a != b)
            .or((bytes.len() != fresh_bytes.len()).then(|| bytes.len().min(fresh_bytes.len())))
        {
            panic!(
                "{name}: the engine now writes other bytes (first difference at offset {at}, \
                 {} bytes committed, {} written). A change of the on-disk bytes bumps the \
                 format version (docs/FORMAT.md) and adds a new fixture directory; \
                 an existing fixture is never regenerated.",
                bytes.len(),
                fresh_bytes.len()
            );
        }
    }
}

/// Writes a fixture for `tests/fixtures/make_fixture.py`:
/// `LITEMQ_FIXTURE_OUT=DIR cargo test --test fixture -- --ignored --exact write_fixture`
/// writes `DIR/queue/` and `DIR/manifest.json` (without file hashes).
#[test]
#[ignore = "run by tests/fixtures/make_fixture.py"]
fn write_fixture() {
    let out = PathBuf::from(std::env::var("LITEMQ_FIXTURE_OUT").expect("LITEMQ_FIXTURE_OUT"));
    std::fs::create_dir_all(&out).unwrap();
    let mut manifest = generate(&out.join("queue"), None);
    if litemq::FORMAT_VERSION as u64 >= ENCRYPTED_SINCE {
        // The same messages, encrypted; make_fixture.py adds the hashes.
        assert_eq!(
            generate(&out.join("encrypted"), Some(FIXTURE_KEY)),
            manifest
        );
        manifest["encrypted"] = json!({"key_hex": hex(&FIXTURE_KEY)});
        manifest["compacted"] = compacted_copy(&out.join("queue"), &out.join("compacted"));
    }
    if litemq::FORMAT_VERSION as u64 >= BATCHED_SINCE {
        manifest["batched"] = generate_batched(&out.join("batched"));
    }
    if litemq::FORMAT_VERSION as u64 >= TYPED_SINCE {
        manifest["typed"] = generate_typed(&out.join("typed"));
    }
    let mut text = serde_json::to_string_pretty(&manifest).unwrap();
    text.push('\n');
    std::fs::write(out.join("manifest.json"), text).unwrap();
}

/// Opens a copy of fixture `queue-v{old}` just after its last message (same
/// day, no time roll), appends a plain message, which stays in the resumed
/// version-`old` file, then what `newer` appends (records with fields of a
/// later version, the first of them at the sequence it returns), and checks
/// that those start a new file of the current version. A reader of version
/// `old` never meets a record it cannot decode in a file it claims to read.
fn newer_fields_roll(
    old: u32,
    newer: impl FnOnce(&litemq::Appender) -> u64,
) -> (tempfile::TempDir, litemq::Queue) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("queue");
    copy_tree(&fixtures().join(format!("queue-v{old}/queue")), &dir);
    let clock = Arc::new(ManualClock::new(START_US + 60_000_000));
    let q = QueueBuilder::new(&dir)
        .file_size(64 * 1024)
        .roll(RollStrategy::Count(1000))
        .clock(clock)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let before = q.data_files().unwrap().len();
    let plain = app.append(b"plain").unwrap();
    app.flush().unwrap();
    assert_eq!(
        q.data_files().unwrap().len(),
        before,
        "a plain message stays"
    );
    let first = newer(&app);
    app.flush().unwrap();
    let files = q.data_files().unwrap();
    assert_eq!(files.len(), before + 1);
    let last = files.last().unwrap();
    assert_eq!(last.first_seq, first);
    let version =
        |p: &Path| u32::from_le_bytes(std::fs::read(p).unwrap()[8..12].try_into().unwrap());
    assert_eq!(version(&files[before - 1].path), old);
    assert_eq!(version(&last.path), litemq::FORMAT_VERSION);
    assert_eq!(q.get(plain).unwrap().payload, b"plain");
    (tmp, q)
}

/// Topic, expiry and priority (format 6) roll out of a version-5 file.
#[test]
fn a_format_6_field_never_lands_in_an_older_file() {
    let tags = ["x"];
    let mut seqs = (0, 0);
    let (_tmp, q) = newer_fields_roll(5, |app| {
        seqs.0 = app
            .append_record(&Record {
                topic: Some("orders"),
                tags: &tags,
                ..Record::new(b"topical")
            })
            .unwrap();
        seqs.1 = app
            .append_record(&Record {
                priority: 1,
                ..Record::new(b"urgent")
            })
            .unwrap();
        seqs.0
    });
    let m = q.get(seqs.0).unwrap();
    assert_eq!(
        (m.topic.as_deref(), m.tags),
        (Some("orders"), vec!["x".to_string()])
    );
    assert_eq!(q.get(seqs.1).unwrap().priority, 1);
}

/// A compressed payload or a tombstone (format 7) rolls out of a version-6
/// file, and both read back (the payload decompressed).
#[test]
fn a_format_7_field_never_lands_in_an_older_file() {
    let body = b"compress me ".repeat(100);
    let mut seqs = (0, 0);
    let (_tmp, q) = newer_fields_roll(6, |app| {
        seqs.0 = app
            .append_record(&Record {
                compress: Compress::With(Compression::new(Codec::Zstd)),
                ..Record::new(&body)
            })
            .unwrap();
        seqs.1 = app
            .append_record(&Record {
                key: Some(b"k"),
                tombstone: true,
                ..Record::new(b"")
            })
            .unwrap();
        seqs.0
    });
    let m = q.get(seqs.0).unwrap();
    assert_eq!((m.payload, m.codec), (body.clone(), Some(Codec::Zstd)));
    assert!(q.get(seqs.1).unwrap().tombstone);
}

/// A batch compressed together (format 9) rolls out of a version-8 file:
/// a build that reads version 8 never meets a batch frame.
#[test]
fn a_format_9_batch_never_lands_in_an_older_file() {
    let body = b"{\"event\":\"click\"} ".repeat(4);
    let records: Vec<Record<'_>> = (0..50).map(|_| Record::new(&body)).collect();
    let mut first = 0;
    let (_tmp, q) = newer_fields_roll(8, |app| {
        first = app
            .append_batch_together(&records, Some(Compression::new(Codec::Zstd)))
            .unwrap()
            .start;
        first
    });
    assert_eq!(q.get(first + 49).unwrap().payload, body);
}

/// A queue written before version 4 remembers its file size and sparse-index
/// interval only in metadata.json's top-level fields (no `options`): a
/// writer that continues it without giving them keeps those, in its new
/// files and in the metadata it rewrites, not the defaults (1 GiB, 1024).
#[test]
fn a_version_3_queue_continued_keeps_its_file_size_and_index_interval() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("queue");
    copy_tree(&fixtures().join("queue-v3/queue"), &dir);
    let clock = Arc::new(ManualClock::new(START_US + 86_400_000_000));
    let q = QueueBuilder::new(&dir).clock(clock).open().unwrap();
    let options = q.options();
    assert_eq!((options.file_size, options.index_interval), (65536, 4));
    let app = q.appender().unwrap();
    let before = q.data_files().unwrap().len();
    for _ in 0..40 {
        app.append(&[5u8; 4000]).unwrap();
    }
    app.flush().unwrap();
    let files = q.data_files().unwrap();
    assert!(files.len() >= before + 2, "160 KB roll 64 KiB files");
    for f in &files[before..] {
        assert_eq!(f.size, 65536, "{}", f.path.display());
    }
    q.close().unwrap();
    let meta: Value =
        serde_json::from_slice(&std::fs::read(dir.join("metadata.json")).unwrap()).unwrap();
    assert_eq!(meta["file_size"], 65536);
    assert_eq!(meta["index_interval"], 4);
    assert_eq!(meta["options"]["file_size"], 65536);
    assert_eq!(meta["options"]["index_interval"], 4);
}
