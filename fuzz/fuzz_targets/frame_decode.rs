//! Frame and record decoding on arbitrary bytes, checked against a model:
//! decoding never panics or reads past the slice; a frame that decodes has
//! a matching CRC over exactly its bytes; a record that decodes re-encodes
//! to the same bytes (the encoding is canonical), and its header iterator
//! yields exactly the declared count. The frame walker (`format::walk`),
//! in each of its three modes, reports what a plain model of FORMAT.md's
//! frame and record-kind rules (`format::walk::model`) reports, event by
//! event.
#![no_main]

use libfuzzer_sys::fuzz_target;
use litemq::format::fields::{self, FieldKind, FieldsOf};
use litemq::format::frame::{self, FrameAt};
use litemq::format::header::{DataHeader, IndexHeader};
use litemq::format::crypto::{QueueKey, NONCE_LEN};
use litemq::format::record::{self, Compress, HeaderField, Record};
use litemq::format::topics::{self, TopicsOf};
use litemq::format::walk::model::{model_walk, walker_walk};
use litemq::format::walk::Check;

fuzz_target!(|data: &[u8]| {
    // The walker against the model, from the start and from the first
    // aligned offsets, in its three modes (a verified end taken from the
    // input's first byte).
    let seq0 = data.get(16..24).map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()));
    let trusted = Check::Trusted(usize::from(data.first().copied().unwrap_or(0)) * 8);
    for start in [0usize, 8, 16] {
        for check in [Check::Crc, Check::Lengths, trusted] {
            assert_eq!(
                walker_walk(data, start, seq0, check),
                model_walk(data, start, seq0, check),
                "start {start}, {check:?}"
            );
        }
    }

    // Headers: decoding arbitrary bytes never panics; a decoded header
    // re-encodes to the same 64 / 48 bytes.
    if let Ok(h) = DataHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..64]);
    }
    if let Ok(h) = IndexHeader::decode(data) {
        assert_eq!(&h.encode()[..], &data[..48]);
    }

    // Topic index files: decoding arbitrary bytes never panics, and a group
    // whose entries decode gives `count` of them.
    if data.len() >= 48 {
        let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        let of = TopicsOf {
            file_number: word(16),
            first_seq: word(24),
            end_seq: word(32),
            frames_crc: word(40),
        };
        for g in topics::decode_directory(data, &of).unwrap_or_default() {
            let Some((at, len)) = g.entries_range() else {
                continue;
            };
            let bytes = usize::try_from(at)
                .ok()
                .and_then(|at| data.get(at..at.checked_add(len)?));
            if let Some(entries) = bytes.and_then(|b| g.decode_entries(b)) {
                assert_eq!(entries.len() as u64, g.count);
            }
        }
    }

    // Secondary index files: decoding arbitrary bytes never panics; a top
    // level that decodes has `block_count` leaves and a zone map with min
    // <= max, and a leaf that decodes holds keys in increasing order, each
    // at or above the leaf's first key, with sequences in the file.
    if data.len() >= 96 {
        let word = |at: usize| u64::from_le_bytes(data[at..at + 8].try_into().unwrap());
        let name_len = data[13] as usize;
        let name = data
            .get(96..96 + name_len)
            .and_then(|n| std::str::from_utf8(n).ok());
        if let (Some(name), Some(kind)) = (name, FieldKind::from_code(data[12])) {
            let of = FieldsOf {
                file_number: word(16),
                first_seq: word(24),
                end_seq: word(32),
                frames_crc: word(40),
                name: name.to_string(),
                kind,
                // A header's index or a schema field's, as the bytes say.
                schema_field: data[14] == 1,
            };
            if let Some(top) = fields::decode_top(data, &of) {
                assert!(top.value_count == 0 || top.min <= top.max);
                for blk in &top.blocks {
                    let bytes = usize::try_from(blk.at)
                        .ok()
                        .and_then(|at| data.get(at..at.checked_add(blk.len as usize)?));
                    if let Some(entries) = bytes.and_then(|b| blk.decode(b, of.first_seq)) {
                        assert!(entries.first().is_none_or(|e| e.0 >= blk.first));
                        for e in &entries {
                            assert!(e.1.iter().all(|&s| s >= of.first_seq));
                        }
                    }
                }
            }
        }
    }

    // Records: a decoded record re-encodes byte for byte. A hole (format
    // 8) is the 12 bytes the compactor writes, then filler the decoder
    // ignores (zeros in a file; any bytes here).
    if let Some(view) = record::decode(data).ok().filter(|v| v.is_hole()) {
        let count = u16::from_le_bytes([data[10], data[11]]);
        assert!(count >= 1);
        assert_eq!(&data[..12], &record::hole(view.timestamp, count)[..]);
        assert_eq!(record::seqs_of(data), u64::from(count));
        assert!(view.key.is_none() && view.payload.is_empty() && !view.is_tombstone());
    } else if let Some(view) = record::decode(data).ok().filter(|v| v.is_batch()) {
        // A batch (format 9): its head is what the writer encodes; its block
        // decompresses (bounded) to `raw_len` bytes, and members read from
        // it never panic: each either decodes (with only the flags a member
        // may carry: a key, a tombstone, no topic or compression) or is an
        // error, and `batch_members` agrees member by member.
        let count = u16::from_le_bytes([data[10], data[11]]);
        assert!(count >= 1 && record::is_batch_record(data));
        assert_eq!(record::seqs_of(data), u64::from(count));
        let first = record::batch_first_seq(data);
        assert_eq!(record::seq_after(data, first), first.saturating_add(u64::from(count)));
        let mut head = Vec::new();
        if view.is_row_batch() {
            // A row batch (format 12): codec 0 (stored) or a codec; its rows
            // are checked against a schema by the typed readers, not here.
            record::encode_row_batch_head(count, view.codec, view.raw_len, &mut head);
        } else {
            let codec = view.codec.expect("a batch of records names its codec");
            record::encode_batch_head(count, codec, view.raw_len, &mut head);
        }
        record::set_batch_first_seq(&mut head, first);
        assert_eq!(&data[9..record::BATCH_HEAD_LEN], &head[..]);
        assert!(view.key.is_none() && view.headers().count() == 0);
        if view.is_row_batch() {
            if view.codec.is_none() {
                assert_eq!(view.payload.len(), view.raw_len as usize);
            }
        } else if let Ok(block) = view.inflate(1 << 20) {
            assert_eq!(block.len(), view.raw_len as usize);
            if record::check_batch_block(&block, count).is_ok() {
                let mut at = 0;
                let mut members = record::batch_members(&block, count);
                for i in 0..count {
                    let listed = members.next().expect("one item per member until an error");
                    match record::batch_member(&block, count, i, at, i) {
                        Ok((range, member)) => {
                            assert!(range.end <= block.len());
                            assert_eq!(member.flags & !record::MEMBER_FLAGS, 0);
                            assert!(member.ext == 0 || member.ext == record::EXT_TOMBSTONE);
                            assert!(!member.is_tombstone() || member.key.is_some());
                            assert_eq!(listed, Ok(member));
                            at = range.end;
                        }
                        Err(e) => {
                            assert_eq!(listed, Err(e));
                            break;
                        }
                    }
                }
            }
        }
    } else if let Ok(view) = record::decode(data) {
        let headers: Vec<HeaderField<'_>> = view.headers().collect();
        assert!(headers.len() <= 255);
        let tags: Vec<&str> = view.tags().collect();
        // Encrypted (format 8): the extension byte, nonce and sealed payload
        // are re-appended as they are after the other fields.
        let sealed_tail = view
            .is_encrypted()
            .then(|| &data[view.payload_at - NONCE_LEN - 1..]);
        let rec = Record {
            payload: if sealed_tail.is_some() { &[] } else { view.payload },
            key: view.key,
            key_is_text: view.key_is_text(),
            headers: &headers,
            topic: view.topic,
            queue_id: view.queue_id,
            tags: &tags,
            expires_at: view.expires_at,
            priority: view.priority,
            compress: Compress::Queue,
            tombstone: view.is_tombstone(),
        };
        rec.validate().expect("a decoded record is valid");
        // Decompression (format 7) never panics and never allocates past
        // its limit; what it returns has exactly the declared size.
        if view.codec.is_some() {
            if let Ok(p) = view.inflate(1 << 20) {
                assert_eq!(p.len(), view.raw_len as usize);
            }
        }
        // Opening a sealed payload (format 8) never panics; bytes that
        // authenticate (the seed input, sealed under this key for sequence
        // 0) re-seal to the same bytes with the same nonce.
        if view.is_encrypted() {
            assert!(view.open_payload(data, 0, None, 1 << 20).is_err());
            let key = QueueKey::new(&[7; 32], [1; 16]);
            if let Ok(plain) = view.open_payload(data, 0, Some(&key), 1 << 20) {
                if view.codec.is_none() {
                    let nonce_at = view.payload_at - NONCE_LEN;
                    let nonce: [u8; NONCE_LEN] = data[nonce_at..view.payload_at].try_into().unwrap();
                    let mut again = Vec::new();
                    key.seal_with_nonce(0, &data[..nonce_at], &plain, &nonce, &mut again);
                    assert_eq!(again, data[nonce_at..]);
                }
            }
        }
        // The one form the writer never produces but the decoder accepts:
        // the headers flag with a header count of 0.
        let empty_header_block = view.flags & record::FLAG_HEADERS != 0 && headers.is_empty();
        let mut body = Vec::new();
        if empty_header_block {
            // The key, the empty header block, then the later fields.
            Record { key: rec.key, ..Record::default() }.encode_fields(&mut body);
            body.push(0);
            let rest = Record { key: None, ..rec };
            match view.codec {
                Some(codec) => {
                    rest.encode_compressed_body(codec, view.raw_len, rec.payload, &mut body)
                }
                None => rest.encode_body(&mut body),
            }
        } else if let Some(codec) = view.codec {
            // The compressed form, with the stored bytes as they are.
            rec.encode_compressed_body(codec, view.raw_len, rec.payload, &mut body);
        } else {
            rec.encode_body(&mut body);
        }
        if let Some(tail) = sealed_tail {
            body.extend_from_slice(tail);
        }
        let mut out = Vec::new();
        record::encode_into(&mut out, view.flags, view.timestamp, &body);
        assert_eq!(out, data, "record encoding is canonical");
        if !empty_header_block {
            let compressed = if view.codec.is_some() { record::FLAG_COMPRESSED } else { 0 };
            let sealed = if view.is_encrypted() { record::FLAG_EXTENSION } else { 0 };
            assert_eq!(view.flags, rec.flags() | compressed | sealed);
        }
    }

    // Frames at every aligned offset: a frame that decodes is what the
    // encoder writes for its record.
    let mut at = 0;
    while at + 4 <= data.len() {
        let len = frame::plain_len(data, at).unwrap();
        match frame::decode(data, at, len) {
            Ok(FrameAt::Frame { record_len, next }) => {
                assert_eq!(record_len, len as usize);
                let end = at + 4 + record_len;
                let mut again = Vec::new();
                frame::encode_into(&mut again, |o| o.extend_from_slice(&data[at + 4..end]));
                assert_eq!(again, data[at..end + 8], "frame encoding round-trips");
                assert_eq!(next, at + frame::frame_size(record_len));
                let _ = record::decode(&data[at + 4..end]);
            }
            Ok(FrameAt::Empty) => assert_eq!(len, 0),
            Ok(FrameAt::EndOfFile) => assert_eq!(len, frame::END_OF_FILE),
            Err(_) => {}
        }
        at += frame::FRAME_ALIGN;
    }
});
