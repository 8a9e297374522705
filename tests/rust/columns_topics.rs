//! Columnar reads and topics, from the outside: `Queue::read_column_selected`
//! returns exactly the rows a full `read_column_set` holds for a topic,
//! across sealed files (topic indexes) and the active file, and stops at
//! its end; the topic columns and `ColumnSet::raw` hold what each record
//! carries.

use litemq::{
    Codec, ColumnSet, Columns, Compress, Compression, QueueBuilder, Record, TopicSelector,
};

/// The topic of message `i` (`None`: none).
fn topic_of(i: u64) -> Option<&'static str> {
    match i % 10 {
        0 | 1 => Some("orders"),
        2 => Some("orders-eu"),
        _ => None,
    }
}

fn tags_of(i: u64) -> &'static [&'static str] {
    if i.is_multiple_of(20) {
        &["paid"]
    } else {
        &[]
    }
}

/// The topics of a batch, one per row.
fn topics(c: &Columns) -> Vec<Option<String>> {
    (0..c.rows)
        .map(|i| {
            let valid = c.topic_valid[i / 8] & (1 << (i % 8)) != 0;
            let (a, b) = (c.topic_offsets[i] as usize, c.topic_offsets[i + 1] as usize);
            valid.then(|| String::from_utf8(c.topic_data[a..b].to_vec()).unwrap())
        })
        .collect()
}

#[test]
fn a_selected_read_returns_the_topics_rows_and_stops_at_its_end() {
    let tmp = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(tmp.path().join("q"))
        .file_size(64 << 10)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let n = 3000u64;
    for i in 0..n {
        let body = format!("m{i}").into_bytes();
        app.append_record(&Record {
            topic: topic_of(i),
            queue_id: (i % 10 == 1) as u16,
            tags: tags_of(i),
            ..Record::new(&body)
        })
        .unwrap();
        if i % 700 == 699 {
            app.roll().unwrap(); // sealed files with topic indexes
        }
    }
    app.flush().unwrap();
    assert!(q.data_files().unwrap().len() >= 4);
    let all = q.read_column_set(0, n, usize::MAX, ColumnSet::ALL).unwrap();
    assert_eq!(all.rows as u64, n);
    let all_topics = topics(&all);
    for (i, t) in all_topics.iter().enumerate() {
        assert_eq!(t.as_deref(), topic_of(i as u64));
        assert_eq!(all.queue_id[i], i32::from(i % 10 == 1));
    }
    let select = |topic: &str, queue_id: Option<u16>, tags: &[&str]| TopicSelector {
        topic: Some(topic.to_string()),
        queue_id,
        tags: tags.iter().map(|t| t.to_string()).collect(),
    };
    let cases = [
        (select("orders", None, &[]), 0u64, n),
        (select("orders", Some(1), &[]), 5, 2100),
        (select("orders", None, &["paid"]), 650, n),
        (select("orders-eu", None, &[]), 1, 699),
        (select("nothing", None, &[]), 0, n),
    ];
    for (sel, start, end) in cases {
        let want: Vec<i64> = (start..end)
            .filter(|&i| {
                topic_of(i) == sel.topic.as_deref()
                    && sel
                        .queue_id
                        .is_none_or(|q| u64::from(q) == u64::from(i % 10 == 1))
                    && (sel.tags.is_empty() || !tags_of(i).is_empty())
            })
            .map(|i| i as i64)
            .collect();
        let (got, next) = q
            .read_column_selected((start, end, usize::MAX), ColumnSet::ALL, sel.clone(), &[])
            .unwrap();
        assert_eq!(got.seq, want, "{sel:?} in [{start}, {end})");
        assert_eq!(next, end);
        assert!(topics(&got).iter().all(|t| t == &sel.topic));
        // A row limit stops after that many rows kept; the next read goes on from there.
        if want.len() > 3 {
            let (first, next) = q
                .read_column_selected((start, end, 3), ColumnSet::NONE, sel.clone(), &[])
                .unwrap();
            assert_eq!(first.seq, want[..3]);
            assert_eq!(next, want[2] as u64 + 1);
            assert!(first.payload_data.is_empty() && first.topic_data.is_empty());
        }
    }
}

#[test]
fn raw_columns_hold_the_stored_payload_and_its_codec() {
    let tmp = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(tmp.path().join("q"))
        .file_size(1 << 20)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    let body = b"{\"event\":\"page_view\",\"user\":\"u1\"}".repeat(20);
    app.append(b"plain").unwrap();
    app.append_record(&Record {
        compress: Compress::With(Compression::new(Codec::Zstd)),
        ..Record::new(&body)
    })
    .unwrap();
    app.flush().unwrap();
    let raw = ColumnSet {
        raw: true,
        ..ColumnSet::ALL
    };
    let stored = q.read_column_set(0, 2, 10, raw).unwrap();
    let plain = q.read_column_set(0, 2, 10, ColumnSet::ALL).unwrap();
    assert_eq!(plain.payload_data, [&b"plain"[..], &body[..]].concat());
    assert_eq!(&stored.payload_data[..5], b"plain");
    let zstd = &stored.payload_data[stored.payload_offsets[1] as usize..];
    assert!(zstd.len() < body.len() / 3);
    assert_eq!(zstd[..4], [0x28, 0xB5, 0x2F, 0xFD]); // a zstd frame's magic
    assert_eq!(stored.codec_valid, [0b10]);
    assert_eq!(stored.codec_data, b"zstd");
    assert_eq!(stored.raw_len, [5, body.len() as i64]);
    assert_eq!(plain.raw_len, stored.raw_len);
}

/// Rows without record fields get their nulls and zeros in bulk: a batch
/// that starts and ends with such rows, around rows with fields, has every
/// column exactly `rows` long and each row's value in place.
#[test]
fn plain_rows_around_rows_with_fields_fill_every_column() {
    let tmp = tempfile::tempdir().unwrap();
    let q = QueueBuilder::new(tmp.path().join("q"))
        .file_size(64 << 10)
        .open()
        .unwrap();
    let app = q.appender().unwrap();
    // 0..9 plain, 10 with a topic and tags, 11..19 plain, 20 with a
    // priority and an expiry only, 21..29 plain.
    for i in 0..30u64 {
        let body = format!("m{i}").into_bytes();
        let record = match i {
            10 => Record {
                topic: Some("orders"),
                queue_id: 3,
                tags: &["paid", "eu"],
                ..Record::new(&body)
            },
            20 => Record {
                priority: 7,
                expires_at: Some(1_234),
                ..Record::new(&body)
            },
            _ => Record::new(&body),
        };
        app.append_record(&record).unwrap();
    }
    app.flush().unwrap();
    for max_rows in [30, 7] {
        let mut start = 0;
        while start < 30 {
            let c = q
                .read_column_set(start, 30, max_rows, ColumnSet::ALL)
                .unwrap();
            assert!(c.rows > 0);
            let rows = c.rows;
            assert_eq!(c.topic_offsets.len(), rows + 1);
            assert_eq!(c.topic_valid.len(), rows.div_ceil(8));
            assert_eq!(c.queue_id.len(), rows);
            assert_eq!(c.tags_offsets.len(), rows + 1);
            assert_eq!(c.priority.len(), rows);
            assert_eq!(c.expires_at.len(), rows);
            assert_eq!(c.expires_valid.len(), rows.div_ceil(8));
            for (r, topic) in topics(&c).iter().enumerate() {
                let seq = c.seq[r] as u64;
                assert_eq!(topic.as_deref(), (seq == 10).then_some("orders"));
                assert_eq!(c.queue_id[r], if seq == 10 { 3 } else { 0 });
                let tags = (c.tags_offsets[r + 1] - c.tags_offsets[r]) as usize;
                assert_eq!(tags, if seq == 10 { 2 } else { 0 }, "row {seq}");
                assert_eq!(c.priority[r], if seq == 20 { 7 } else { 0 });
                let expires = c.expires_valid[r / 8] & (1 << (r % 8)) != 0;
                assert_eq!(expires, seq == 20);
                assert_eq!(c.expires_at[r], if seq == 20 { 1_234 } else { 0 });
            }
            assert_eq!(
                c.topic_nulls,
                rows - usize::from((start..start + rows as u64).contains(&10))
            );
            start += rows as u64;
        }
    }
    q.close().unwrap();
}
