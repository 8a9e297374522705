//! Tests of the record codecs.

use super::*;
use crate::format::compression::{Codec, Compression};
use crate::format::crypto::QueueKey;

fn encode(r: &Record<'_>, ts: u64) -> Vec<u8> {
    let mut body = Vec::new();
    r.encode_body(&mut body);
    let mut v = Vec::new();
    encode_into(&mut v, r.flags(), ts, &body);
    v
}

#[test]
fn decode_again_gives_the_view_decode_gave() {
    let headers = [
        HeaderField {
            name: "région",
            value: "été".as_bytes(),
            value_is_text: true,
        },
        HeaderField {
            name: "b",
            value: &[0xFF, 0],
            value_is_text: false,
        },
    ];
    let tags = ["paid", "eu"];
    let records = [
        Record::new(b"plain"),
        Record {
            key: Some("clé".as_bytes()),
            key_is_text: true,
            headers: &headers,
            topic: Some("orders"),
            queue_id: 3,
            tags: &tags,
            expires_at: Some(7),
            priority: 2,
            ..Record::new(b"all fields")
        },
        Record {
            tags: &tags,
            ..Record::new(b"tags only")
        },
        Record {
            key: Some(b"k"),
            tombstone: true,
            ..Record::new(b"")
        },
    ];
    for r in &records {
        let v = encode(r, 9);
        let first = decode(&v).unwrap();
        assert_eq!(decode_again(&v), Ok(first));
        assert_eq!(
            decode_again(&v).unwrap().headers().collect::<Vec<_>>(),
            first.headers().collect::<Vec<_>>()
        );
        assert_eq!(
            decode_again(&v).unwrap().tags().collect::<Vec<_>>(),
            first.tags().collect::<Vec<_>>()
        );
        // Every truncation: the same verdict on the layout, no panic.
        for cut in 0..v.len() {
            if decode(&v[..cut]).is_ok() {
                assert!(decode_again(&v[..cut]).is_ok(), "cut {cut}");
            }
            let _ = decode_again(&v[..cut]);
        }
    }
    let hole = hole(5, 3);
    assert_eq!(decode_again(&hole), decode(&hole));
    // What only names fail: decode refuses, decode_again reads the
    // layout (readers call it only on bytes decode accepted).
    let mut bad = encode(&records[1], 9);
    let name_at = bad.windows(6).position(|w| w == b"orders").unwrap();
    bad[name_at] = 0x01; // a control character in the topic
    assert!(decode(&bad).is_err());
    assert!(decode_again(&bad).is_ok());
}

#[test]
fn plain_record_costs_nine_bytes() {
    let v = encode(&Record::new(b"abc"), 5);
    assert_eq!(v.len(), 9 + 3);
    let d = decode(&v).unwrap();
    assert_eq!((d.timestamp, d.key, d.payload), (5, None, &b"abc"[..]));
    assert_eq!(d.headers().count(), 0);
}

#[test]
fn key_and_headers_round_trip() {
    let headers = [
        HeaderField {
            name: "région",
            value: "été".as_bytes(),
            value_is_text: true,
        },
        HeaderField {
            name: "raw",
            value: &[0, 255, 1],
            value_is_text: false,
        },
    ];
    let r = Record {
        payload: b"",
        key: Some("clé".as_bytes()),
        key_is_text: true,
        headers: &headers,
        ..Record::default()
    };
    r.validate().unwrap();
    let v = encode(&r, 9);
    let d = decode(&v).unwrap();
    assert_eq!(d.key, Some("clé".as_bytes()));
    assert!(d.key_is_text());
    assert_eq!(d.headers().collect::<Vec<_>>(), headers.to_vec());
    assert_eq!(d.payload, b"");
}

#[test]
fn topic_tags_expiry_priority_round_trip_in_bit_order() {
    let tags = ["paid", "eu"];
    let r = Record {
        payload: b"body",
        key: Some(b"k"),
        topic: Some("orders"),
        queue_id: 3,
        tags: &tags,
        expires_at: Some(0x0102_0304_0506_0708),
        priority: 7,
        ..Record::default()
    };
    r.validate().unwrap();
    let v = encode(&r, 11);
    assert_eq!(v[0], FLAG_KEY | FLAG_TOPIC | FLAG_EXPIRY | FLAG_PRIORITY);
    // key (2+1), topic (1+6+2+1+5+3), expiry 8, priority 1, payload 4
    assert_eq!(v.len(), 9 + 3 + 18 + 8 + 1 + 4);
    assert_eq!(v.len(), RECORD_FIXED_LEN + r.body_len());
    assert_eq!(&v[12..19], b"\x06orders");
    let d = decode(&v).unwrap();
    assert_eq!(d.topic, Some("orders"));
    assert_eq!(d.queue_id, 3);
    assert_eq!(d.tags().collect::<Vec<_>>(), tags.to_vec());
    assert_eq!(d.expires_at, Some(0x0102_0304_0506_0708));
    assert!(d.expired_at(0x0102_0304_0506_0708) && !d.expired_at(5));
    assert_eq!(d.priority, 7);
    assert_eq!(d.payload, b"body");
}

#[test]
fn tags_without_topic_and_fields_alone() {
    let tags = ["t"];
    let d_bytes = encode(
        &Record {
            tags: &tags,
            ..Record::new(b"p")
        },
        1,
    );
    let d = decode(&d_bytes).unwrap();
    assert_eq!((d.topic, d.tags().count(), d.payload), (None, 1, &b"p"[..]));
    let only_priority = encode(
        &Record {
            priority: 200,
            ..Record::new(b"p")
        },
        1,
    );
    assert_eq!(only_priority.len(), 9 + 1 + 1);
    let d = decode(&only_priority).unwrap();
    assert_eq!((d.priority, d.topic, d.expires_at), (200, None, None));
    // priority 0 is not stored: the record is a plain one.
    let zero = encode(&Record::new(b"p"), 1);
    assert_eq!(zero[0], 0);
}

#[test]
fn topic_and_tag_limits() {
    for (topic, tags, queue_id) in [
        (Some(""), &[][..], 0u16),
        (Some("a\nb"), &[], 0),
        (None, &[""][..], 0),
        (None, &[], 1),
    ] {
        let r = Record {
            topic,
            tags,
            queue_id,
            ..Record::new(b"")
        };
        assert!(r.validate().is_err(), "{topic:?} {tags:?} {queue_id}");
    }
    let long = "x".repeat(256);
    assert!(validate_topic(&long).is_err());
    assert!(validate_topic("commandes/été").is_ok());
}

#[test]
fn malformed_records_are_errors_not_panics() {
    assert!(decode(&[]).is_err());
    assert!(decode(&[0x80, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(decode(&[FLAG_KEY, 0, 0, 0, 0, 0, 0, 0, 0, 9, 0]).is_err());
    assert!(decode(&[FLAG_HEADERS, 0, 0, 0, 0, 0, 0, 0, 0, 1, 5, b'a']).is_err());
    assert!(decode(&[FLAG_TOPIC, 0, 0, 0, 0, 0, 0, 0, 0, 2, b'a']).is_err());
    assert!(decode(&[FLAG_TOPIC, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]).is_err());
    assert!(decode(&[FLAG_EXPIRY, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2]).is_err());
    assert!(decode(&[FLAG_PRIORITY, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(decode(&[FLAG_PRIORITY, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    // Forms the encoder never writes: no topic but a queue id, an
    // empty topic field, a control character.
    assert!(decode(&[FLAG_TOPIC, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0]).is_err());
    assert!(decode(&[FLAG_TOPIC, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    assert!(decode(&[FLAG_TOPIC, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'\n', 0, 0, 0]).is_err());
}

#[test]
fn tombstones_and_the_extension_byte() {
    let r = Record {
        key: Some(b"k"),
        tombstone: true,
        ..Record::new(b"")
    };
    r.validate().unwrap();
    let v = encode(&r, 3);
    assert_eq!(v[0], FLAG_KEY | FLAG_EXTENSION);
    assert_eq!(v.len(), RECORD_FIXED_LEN + r.body_len());
    assert_eq!(*v.last().unwrap(), EXT_TOMBSTONE);
    let d = decode(&v).unwrap();
    assert!(d.is_tombstone() && d.payload.is_empty());
    // An empty or unknown extension byte, a tombstone with a payload or
    // without a key: not what the encoder writes.
    let mut head = vec![FLAG_KEY | FLAG_EXTENSION];
    head.extend([0; 8]); // timestamp
    head.extend([1, 0, b'k']); // key
    for tail in [&[0u8][..], &[0x08], &[EXT_TOMBSTONE, b'x']] {
        let bad = [&head[..], tail].concat();
        assert!(decode(&bad).is_err(), "{tail:?}");
    }
    assert!(decode(&[FLAG_EXTENSION, 0, 0, 0, 0, 0, 0, 0, 0, EXT_TOMBSTONE]).is_err());
}

#[test]
fn holes_are_twelve_bytes_and_filler() {
    let h = hole(0x0102_0304_0506_0708, 300);
    assert_eq!(h, [0x80, 8, 7, 6, 5, 4, 3, 2, 1, 0x04, 44, 1]);
    assert!(is_hole_record(&h));
    assert_eq!(seqs_of(&h), 300);
    assert_eq!(seqs_of(&[0u8; 12]), 1);
    let mut zero = h;
    zero[10..12].copy_from_slice(&[0, 0]);
    assert!(decode(&zero).is_err(), "a hole of 0 sequences");
    let d = decode(&h).unwrap();
    assert!(d.is_hole() && !d.is_tombstone() && d.key.is_none() && d.payload.is_empty());
    assert_eq!(d.timestamp, 0x0102_0304_0506_0708);
    // Filler after the hole is ignored (the dropped record's length).
    let filled = [&h[..], &[0u8; 30][..]].concat();
    let long = decode(&filled).unwrap();
    assert!(long.is_hole() && long.payload.is_empty());
    assert!(is_hole_record(&filled));
    // A hole with a key, or another extension bit is malformed.
    let mut keyed = vec![FLAG_KEY | FLAG_EXTENSION];
    keyed.extend([0; 8]);
    keyed.extend([1, 0, b'k', EXT_HOLE, 1, 0]);
    assert!(decode(&keyed).is_err());
    let mut both = h;
    both[9] = EXT_HOLE | EXT_TOMBSTONE;
    assert!(decode(&both).is_err());
}

#[test]
fn sealed_records_round_trip_and_bind_their_fields() {
    let key = QueueKey::new(&[3; 32], [4; 16]);
    for r in [
        Record::new(b"secret payload"),
        Record {
            key: Some(b"k"),
            priority: 2,
            ..Record::new(b"")
        },
    ] {
        let mut body = Vec::new();
        r.encode_body(&mut body);
        let mut sealed = Vec::new();
        let (flags, ext) = seal_body(&key, 42, r.flags(), 7, &body, &mut sealed);
        assert_eq!(ext, EXT_ENCRYPTED);
        assert_eq!(flags, r.flags() | FLAG_EXTENSION);
        assert_eq!(sealed.len(), body.len() + sealed_growth(r.flags()));
        let mut rec = Vec::new();
        encode_into(&mut rec, flags, 7, &sealed);
        let v = decode(&rec).unwrap();
        assert!(v.is_encrypted() && !v.is_tombstone());
        assert_eq!(v.key, r.key);
        assert_eq!(record_version(v.flags, v.ext), 8);
        assert_eq!(
            v.open_payload(&rec, 42, Some(&key), 1 << 20).unwrap(),
            r.payload
        );
        assert!(v.open_payload(&rec, 43, Some(&key), 1 << 20).is_err());
        assert!(v.open_payload(&rec, 42, None, 1 << 20).is_err());
        // The timestamp is bound in too.
        let mut moved = rec.clone();
        moved[1] ^= 1;
        let v = decode(&moved).unwrap();
        assert!(v.open_payload(&moved, 42, Some(&key), 1 << 20).is_err());
    }
    // Too short for nonce and tag; an encrypted tombstone.
    let mut head = vec![FLAG_EXTENSION];
    head.extend([0; 8]);
    head.push(EXT_ENCRYPTED);
    assert!(decode(&[&head[..], &[0; 39]].concat()).is_err());
    assert!(decode(&[&head[..], &[0; 40]].concat()).is_ok());
    head[9] |= EXT_TOMBSTONE;
    assert!(decode(&[&head[..], &[0; 40]].concat()).is_err());
}

#[test]
fn limits() {
    let big = vec![0u8; MAX_KEY_LEN + 1];
    assert!(Record {
        key: Some(&big),
        ..Record::new(b"")
    }
    .validate()
    .is_err());
    let h = [HeaderField {
        name: "",
        value: b"",
        value_is_text: false,
    }];
    assert!(Record {
        headers: &h,
        ..Record::new(b"")
    }
    .validate()
    .is_err());
}

/// A block of one member: `flags`, a zero timestamp and `body`.
fn one_member(flags: u8, body: &[u8]) -> Vec<u8> {
    let mut block = Vec::new();
    push_batch_member(&mut block, flags, body.len(), |o| o.extend_from_slice(body));
    block
}

#[test]
fn batch_members_take_keys_and_tombstones_and_nothing_else() {
    let ok = [
        Record {
            key: Some(b"k"),
            ..Record::new(b"v")
        },
        Record {
            key: Some("clé".as_bytes()),
            key_is_text: true,
            priority: 3,
            ..Record::new(b"v")
        },
        Record {
            key: Some(b"k"),
            tombstone: true,
            ..Record::new(b"")
        },
    ];
    for r in ok {
        let mut body = Vec::new();
        r.encode_body(&mut body);
        let block = one_member(r.flags(), &body);
        let v = batch_members(&block, 1).next().unwrap().unwrap();
        assert_eq!((v.key, v.is_tombstone()), (r.key, r.tombstone));
        assert_eq!(v.key_is_text(), r.key_is_text);
    }
    let topic = Record {
        topic: Some("t"),
        ..Record::new(b"v")
    };
    let mut body = Vec::new();
    topic.encode_body(&mut body);
    let mut refused = vec![one_member(topic.flags(), &body)];
    let c = Compression {
        min_size: 0,
        ..Compression::new(Codec::Zstd)
    };
    let big = Record::new(&[7u8; 4096]);
    let mut body = Vec::new();
    let flags = big.encode_body_with(Some(&c), &mut body);
    assert_ne!(flags & FLAG_COMPRESSED, 0);
    refused.push(one_member(flags, &body));
    // A hole, and a tombstone with another extension bit.
    refused.push(one_member(FLAG_EXTENSION, &hole(0, 1)[RECORD_FIXED_LEN..]));
    refused.push(one_member(
        FLAG_EXTENSION | FLAG_KEY,
        &[1, 0, b'k', EXT_TOMBSTONE | EXT_HOLE],
    ));
    for block in refused {
        assert!(batch_members(&block, 1).next().unwrap().is_err());
    }
}
