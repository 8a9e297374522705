//! Typed reads over real queues (format 12): rows appended one at a time
//! and in row batches (stored and compressed), over several data files,
//! read back as Arrow columns of the current schema, across an evolution,
//! by part, filtered by a comparison; and damage reported naming the file.

use std::path::Path;

use litemq::format::typed::{
    encode_row, Field, FieldType, RowLayout, Schema, TypedColumn, TypedColumns, Value,
};

use litemq::{Codec, Compression, Error, Queue, QueueBuilder, Record, TypedOp, TypedPredicate};

fn field(name: &str, ty: FieldType, nullable: bool, aliases: &[&str]) -> Field {
    Field {
        name: name.into(),
        ty,
        nullable,
        aliases: aliases.iter().map(|a| a.to_string()).collect(),
    }
}

/// The market-data schema, with `price` and `venue` nullable.
fn market() -> Schema {
    Schema {
        version: 1,
        fields: vec![
            field("time", FieldType::TimestampUs, false, &[]),
            field("symbol", FieldType::String, false, &[]),
            field("price", FieldType::Float64, true, &[]),
            field("size", FieldType::Int32, false, &[]),
            field("side", FieldType::Int8, false, &[]),
            field("venue", FieldType::Binary, true, &[]),
        ],
    }
}

fn event(i: u64) -> Vec<Value> {
    vec![
        Value::Int(1_700_000_000_000_000 + i as i64),
        Value::Str(["AAPL", "MSFT", "BRK.B", "ü"][i as usize % 4].into()),
        if i % 7 == 3 {
            Value::Null
        } else {
            Value::Float(100.0 + i as f64 / 8.0)
        },
        Value::Int(i as i64 % 1000 - 500),
        Value::Int(i as i64 % 2),
        if i.is_multiple_of(5) {
            Value::Null
        } else {
            Value::Bytes(vec![i as u8; i as usize % 3])
        },
    ]
}

fn rows(s: &Schema, range: std::ops::Range<u64>, f: impl Fn(u64) -> Vec<Value>) -> Vec<u8> {
    let l = RowLayout::of(s);
    let mut out = vec![];
    for i in range {
        encode_row(s, &l, &f(i), &mut out).unwrap();
    }
    out
}

fn open(path: &Path, schema: Schema) -> Queue {
    QueueBuilder::new(path)
        .file_size(64 << 10)
        .schema(schema)
        .open()
        .unwrap()
}

/// Row `r` of `c` as a [`Value`] (what pyarrow would show).
fn cell(c: &TypedColumn, r: usize) -> Value {
    if !c.valid.is_empty() && c.valid[r / 8] & (1 << (r % 8)) == 0 {
        return Value::Null;
    }
    let w = c.ty.width();
    let fixed = || {
        let mut a = [0u8; 16];
        a[..w].copy_from_slice(&c.data[r * w..r * w + w]);
        a
    };
    let var = || &c.data[c.offsets[r] as usize..c.offsets[r + 1] as usize];
    match c.ty {
        FieldType::Float64 => Value::Float(f64::from_le_bytes(fixed()[..8].try_into().unwrap())),
        FieldType::String => Value::Str(std::str::from_utf8(var()).unwrap().into()),
        FieldType::Binary => Value::Bytes(var().to_vec()),
        _ => {
            let x = i128::from_le_bytes(fixed());
            let s = 128 - 8 * w as u32;
            Value::Int(((x << s) >> s) as i64)
        }
    }
}

fn row_of(cols: &TypedColumns, r: usize) -> Vec<Value> {
    cols.columns.iter().map(|c| cell(c, r)).collect()
}

/// 6,000 events: single appends (bare, and with a key: read one by one),
/// row batches stored as they are and compressed, over many 64 KiB files;
/// read back whole and by parts of 37 rows, every column equal to what was
/// written, `next_seq` chaining the parts.
#[test]
fn rows_appended_singly_and_in_batches_read_back_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let s = market();
    let q = open(&tmp.path().join("q"), s.clone());
    let app = q.appender().unwrap();
    let n = 6000u64;
    let mut i = 0;
    while i < n {
        match (i / 100) % 3 {
            0 => {
                for j in i..i + 100 {
                    let row = rows(&s, j..j + 1, event);
                    if j % 2 == 0 {
                        app.append(&row).unwrap();
                    } else {
                        let key = format!("k{j}");
                        let mut r = Record::new(&row);
                        r.key = Some(key.as_bytes());
                        app.append_record(&r).unwrap();
                    }
                }
            }
            1 => {
                app.append_rows(&rows(&s, i..i + 100, event), 100, None)
                    .unwrap();
            }
            _ => {
                app.append_rows(&rows(&s, i..i + 100, event), 100, Some((Codec::Zstd, 3)))
                    .unwrap();
            }
        }
        i += 100;
    }
    app.flush().unwrap();
    assert!(q.data_files().unwrap().len() > 2, "several data files");
    let whole = q.read_typed(0, n, usize::MAX, None).unwrap();
    assert_eq!((whole.rows, whole.next_seq), (n as usize, n));
    assert_eq!(whole.seq, (0..n as i64).collect::<Vec<_>>());
    for r in 0..n as usize {
        assert_eq!(row_of(&whole.columns, r), event(r as u64), "row {r}");
    }
    let names: Vec<&str> = whole
        .columns
        .columns
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["time", "symbol", "price", "size", "side", "venue"]);
    // By parts, starting inside a batch, ending inside another.
    let mut at = 150;
    while at < n {
        let part = q.read_typed(at, n, 37, None).unwrap();
        assert_eq!(part.rows, 37.min((n - at) as usize));
        assert_eq!(part.seq[0] as u64, at);
        assert_eq!(part.next_seq, at + part.rows as u64);
        for r in 0..part.rows {
            assert_eq!(row_of(&part.columns, r), event(at + r as u64));
        }
        at = part.next_seq;
    }
    // Only some fields, in the order asked for; `end` before the data's.
    let f = ["side".to_string(), "symbol".to_string()];
    let some = q.read_typed(250, 260, usize::MAX, Some(&f)).unwrap();
    assert_eq!((some.rows, some.next_seq), (10, 260));
    for r in 0..10 {
        let e = event(250 + r as u64);
        assert_eq!(row_of(&some.columns, r), [e[4].clone(), e[1].clone()]);
    }
    q.close().unwrap();
}

/// Files of three schema versions read in the current one: a field added
/// later is null in older rows, a renamed field keeps its values under
/// its new name, an int32 widened to int64 keeps its values.
#[test]
fn a_read_across_an_evolution_shows_every_row_in_the_current_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("q");
    let v1 = market();
    let mut v2 = v1.clone();
    v2.fields[1] = field("ticker", FieldType::String, false, &["symbol"]);
    v2.fields[3] = field("size", FieldType::Int64, false, &[]);
    let mut v3 = v2.clone();
    v3.fields.push(field("note", FieldType::String, true, &[]));
    let ev2 = |i: u64| event(i);
    let ev3 = |i: u64| {
        let mut e = event(i);
        e.push(Value::Str(format!("n{i}")));
        e
    };
    for (schema, range, with_note) in [
        (&v1, 0..40, false),
        (&v2, 40..80, false),
        (&v3, 80..120, true),
    ] {
        let q = open(&path, schema.clone());
        let app = q.appender().unwrap();
        let block = if with_note {
            rows(schema, range.clone(), ev3)
        } else {
            rows(schema, range.clone(), ev2)
        };
        app.append_rows(&block, 40, None).unwrap();
        app.flush().unwrap();
        q.close().unwrap();
    }
    let q = QueueBuilder::new(&path).file_size(64 << 10).open().unwrap();
    let b = q.read_typed(0, 120, usize::MAX, None).unwrap();
    assert_eq!(b.rows, 120);
    let names: Vec<&str> = b.columns.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        ["time", "ticker", "price", "size", "side", "venue", "note"]
    );
    assert_eq!(b.columns.columns[3].ty, FieldType::Int64);
    for r in 0..120u64 {
        let mut want = event(r);
        want.push(if r >= 80 {
            Value::Str(format!("n{r}"))
        } else {
            Value::Null
        });
        assert_eq!(row_of(&b.columns, r as usize), want, "row {r}");
    }
    // The old name still finds the field.
    let old = q
        .read_typed(0, 3, usize::MAX, Some(&["symbol".to_string()]))
        .unwrap();
    assert_eq!(old.columns.columns[0].name, "ticker");
    q.close().unwrap();
}

/// An unknown field is InvalidArgument; an untyped queue is Schema.
#[test]
fn unknown_fields_and_untyped_queues_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let q = open(&tmp.path().join("typed"), market());
    match q.read_typed(0, 10, 10, Some(&["nope".to_string()])) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("nope"), "{m}"),
        other => panic!("{other:?}"),
    }
    q.close().unwrap();
    let plain = QueueBuilder::new(tmp.path().join("plain")).open().unwrap();
    plain.appender().unwrap().append(b"x").unwrap();
    assert!(matches!(
        plain.read_typed(0, 1, 10, None),
        Err(Error::Schema(_))
    ));
    let p = TypedPredicate {
        field: "size".into(),
        op: TypedOp::Eq,
        values: vec![Value::Int(1)],
    };
    assert!(matches!(plain.typed_where(&p, 0, 1), Err(Error::Schema(_))));
    plain.close().unwrap();
}

/// `typed_where` returns the sequences whose field satisfies the
/// comparison, over single rows and row batches; nulls never match.
#[test]
fn typed_where_finds_the_rows_a_comparison_selects() {
    let tmp = tempfile::tempdir().unwrap();
    let s = market();
    let q = open(&tmp.path().join("q"), s.clone());
    let app = q.appender().unwrap();
    for i in 0..300 {
        app.append(&rows(&s, i..i + 1, event)).unwrap();
    }
    app.append_rows(&rows(&s, 300..1000, event), 700, None)
        .unwrap();
    app.flush().unwrap();
    let check = |name: &str, op: &str, values: Vec<Value>, keep: &dyn Fn(&[Value]) -> bool| {
        let i = s.find(name).unwrap();
        let p = TypedPredicate {
            field: name.into(),
            op: TypedOp::parse(op).unwrap(),
            values,
        };
        let got = q.typed_where(&p, 0, 1000).unwrap();
        let want: Vec<u64> = (0..1000).filter(|&r| keep(&event(r)[..=i])).collect();
        assert_eq!(got, want, "{name} {op}");
        assert!(!want.is_empty());
    };
    check(
        "price",
        ">",
        vec![Value::Float(200.0)],
        &|e| matches!(e[2], Value::Float(x) if x > 200.0),
    );
    check(
        "price",
        "!=",
        vec![Value::Float(100.0)],
        &|e| matches!(e[2], Value::Float(x) if x != 100.0),
    );
    check(
        "symbol",
        "in",
        vec![Value::Str("ü".into()), Value::Str("MSFT".into())],
        &|e| matches!(&e[1], Value::Str(t) if t == "ü" || t == "MSFT"),
    );
    check(
        "size",
        "between",
        vec![Value::Int(-10), Value::Int(10)],
        &|e| matches!(e[3], Value::Int(x) if (-10..=10).contains(&x)),
    );
    q.close().unwrap();
}

/// A damaged byte in a sealed file's row batch fails the read naming that
/// file.
#[test]
fn a_damaged_row_batch_is_corrupted_naming_its_file() {
    let tmp = tempfile::tempdir().unwrap();
    let s = market();
    let path = tmp.path().join("q");
    let q = open(&path, s.clone());
    let app = q.appender().unwrap();
    for k in 0..60 {
        app.append_rows(&rows(&s, k * 100..k * 100 + 100, event), 100, None)
            .unwrap();
    }
    app.flush().unwrap();
    let files = q.data_files().unwrap();
    assert!(files.len() > 2);
    q.close().unwrap();
    let victim = files[1].path.clone();
    let mut bytes = std::fs::read(&victim).unwrap();
    // A byte in the middle of the file's first frame (a row batch).
    bytes[4096 + 200] ^= 0x40;
    std::fs::write(&victim, &bytes).unwrap();
    let q = QueueBuilder::new(&path).read_only(true).open().unwrap();
    match q.read_typed(0, 6000, usize::MAX, None) {
        Err(Error::Corrupted { path, .. }) => assert_eq!(path, victim),
        other => panic!("{:?}", other.map(|b| b.rows)),
    }
}

/// Single rows stored compressed (the queue's compression option) and
/// sealed (encryption at rest) are read one at a time after decompression
/// and decryption, as the same columns.
#[test]
fn compressed_and_encrypted_rows_read_back_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let s = market();
    // Long symbols so that rows pass the compression's minimum size.
    let ev = |i: u64| {
        let mut e = event(i);
        e[1] = Value::Str(format!("{}-{}", "SYMBOL".repeat(20), i % 3));
        e
    };
    let builders = [
        QueueBuilder::new(tmp.path().join("zstd")).compression(Some(Compression {
            min_size: 0,
            ..Compression::new(Codec::Zstd)
        })),
        QueueBuilder::new(tmp.path().join("sealed")).encryption_key(Some([7u8; 32])),
    ];
    for b in builders {
        let q = b.file_size(64 << 10).schema(s.clone()).open().unwrap();
        let app = q.appender().unwrap();
        for i in 0..500 {
            app.append(&rows(&s, i..i + 1, ev)).unwrap();
        }
        app.flush().unwrap();
        let got = q.read_typed(0, 500, usize::MAX, None).unwrap();
        assert_eq!(got.rows, 500);
        for r in 0..500 {
            assert_eq!(row_of(&got.columns, r), ev(r as u64), "row {r}");
        }
        q.close().unwrap();
    }
}
